//! Where log lines go and which are shown: standard error, colours only on
//! a terminal, and `CRAWLWORKER_LOG` read so that a bare level (`debug`)
//! means crawlworker's own lines at that level, not the HTML parser's: the
//! libraries stay at `warn` unless a directive names them
//! (`crawlworker=debug,html5ever=trace`). `-q` and `-v`/`-vv` set the
//! level from the command line; `--log-format json` writes one JSON object
//! per line for log shippers. Lines are written around the live status
//! line when one is shown ([`status_line`]).
//!
//! Whatever the filter says, the library targets that print secrets at
//! their debug or trace levels ([`CAPPED`]: cookies being stored, the raw
//! bytes of a connection, a login page's tokens as the HTML parser reads
//! them) are held at `info` by a second filter, which a directive of the
//! user's cannot loosen, however specific. And every line is written with
//! the session ids in its URLs masked (`sid=[secret]`, see
//! [`crate::redact`]), whichever crate wrote it.

use std::io::IsTerminal;

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

use super::status_line;

/// The variable that sets what is logged.
pub const VAR: &str = "CRAWLWORKER_LOG";

/// Library targets (and the modules below them) held at `info` whatever
/// `CRAWLWORKER_LOG` says, and what they would print below it.
pub const CAPPED: &[(&str, &str)] = &[
    (
        "cookie_store",
        "every cookie a response sets, the session's included (debug)",
    ),
    (
        "reqwest::connect::verbose",
        "every byte sent and received: passwords, cookies (trace)",
    ),
    (
        "html5ever",
        "every tag, attribute and character of a page: a login form's tokens (debug, trace)",
    ),
    (
        "selectors",
        "the elements a selector tries, with their attributes (debug)",
    ),
];

/// The filter that holds [`CAPPED`] at `info` and lets through everything
/// else up to `most`, the most verbose level the user's filter enables
/// anywhere (that filter decides below it). Its default is that level and
/// not `trace`, because the subscriber's level hint is the most verbose of
/// its filters', and the hint sets how far the `log` records of libraries
/// get: the HTML parser writes a `log` record per token, and at a `trace`
/// hint each went through the filter at run time, 12 % of a worker's CPU
/// at `info` (scripts/bench/worker_profile.sh).
pub fn caps(most: LevelFilter) -> Targets {
    CAPPED
        .iter()
        .fold(Targets::new().with_default(most), |t, (target, _)| {
            t.with_target(*target, LevelFilter::INFO.min(most))
        })
}

/// The filter for `spec`, or why it is not one.
pub fn filter(spec: Option<&str>) -> Result<EnvFilter, String> {
    let spec = spec
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or("info");
    // A bare level applies to our own crates; anything with a target or a
    // list is taken as written.
    let directives = if spec.contains(['=', ',']) {
        spec.to_string()
    } else {
        format!("warn,crawlworker={spec}")
    };
    EnvFilter::try_new(&directives).map_err(|e| {
        format!(
            "{VAR}={spec:?} is not a log filter ({e}); use a level (error, warn, info, debug, trace) or directives such as \"crawlworker=debug,warn\""
        )
    })
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// For people: a line of text per event.
    #[default]
    Text,
    /// For log shippers: one JSON object per line, with the spider, the
    /// worker and the URL as fields.
    Json,
}

/// What the command line says about logging.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogOptions {
    /// Only warnings and errors.
    pub quiet: bool,
    /// 1: crawlworker's debug lines (a line per page); 2: trace.
    pub verbose: u8,
    pub format: LogFormat,
}

/// Sets up logging for the process: `-q`/`-v` when given, else
/// `CRAWLWORKER_LOG` (a bad one is reported and `info` used instead).
pub fn init(options: LogOptions) {
    let spec = match (options.quiet, options.verbose) {
        (true, _) => Some("warn".to_string()),
        (false, 0) => std::env::var(VAR).ok(),
        (false, 1) => Some("debug".to_string()),
        (false, _) => Some("trace".to_string()),
    };
    let (filter, problem) = match filter(spec.as_deref()) {
        Ok(f) => (f, None),
        Err(problem) => (EnvFilter::new("warn,crawlworker=info"), Some(problem)),
    };
    let most = filter.max_level_hint().unwrap_or(LevelFilter::TRACE);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(status_line::LogWriter);
    match options.format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .finish()
            .with(caps(most))
            .init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .finish()
            .with(caps(most))
            .init(),
    }
    // Said once logging is set up, so that it is JSON with the rest.
    if let Some(problem) = problem {
        tracing::warn!("{problem}; logging at info");
    }
}

#[cfg(test)]
mod tests {
    use super::{caps, filter};
    use tracing::Level;
    use tracing_subscriber::filter::{LevelFilter, Targets};

    #[test]
    fn secret_printing_targets_are_capped_at_info_and_others_are_not() {
        let caps: Targets = caps(LevelFilter::TRACE);
        for target in [
            "cookie_store",
            "cookie_store::cookie_store",
            "reqwest::connect::verbose",
            "html5ever::tree_builder",
            "selectors::matching",
        ] {
            assert!(!caps.would_enable(target, &Level::DEBUG), "{target}");
            assert!(caps.would_enable(target, &Level::INFO), "{target}");
        }
        for target in [
            "crawlworker::downloader",
            "reqwest::connect",
            "hyper_util",
            "h2",
        ] {
            assert!(caps.would_enable(target, &Level::TRACE), "{target}");
        }
    }

    #[test]
    fn the_caps_enable_nothing_the_users_filter_does_not() {
        // At the default filter, the most verbose level is crawlworker's
        // `info`: `log` records of the HTML parser's debug lines stop at
        // the `log` crate's level check rather than reaching the filter.
        let most = filter(None).unwrap().max_level_hint();
        assert_eq!(most, Some(LevelFilter::INFO));
        let info = caps(LevelFilter::INFO);
        assert!(!info.would_enable("html5ever::tokenizer", &Level::DEBUG));
        assert!(info.would_enable("crawlworker::worker", &Level::INFO));
        assert!(!info.would_enable("crawlworker::worker", &Level::DEBUG));
        // Below `info`, the caps follow the user's level.
        let warn = caps(LevelFilter::WARN);
        assert!(!warn.would_enable("html5ever", &Level::INFO));
        assert!(warn.would_enable("html5ever", &Level::WARN));
    }

    #[test]
    fn a_bare_level_is_crawlworkers_and_directives_are_kept() {
        assert_eq!(
            filter(Some("debug")).unwrap().to_string(),
            "crawlworker=debug,warn"
        );
        assert_eq!(filter(None).unwrap().to_string(), "crawlworker=info,warn");
        assert_eq!(
            filter(Some("html5ever=trace")).unwrap().to_string(),
            "html5ever=trace"
        );
        assert!(filter(Some("verbose"))
            .unwrap_err()
            .contains("CRAWLWORKER_LOG=\"verbose\""));
    }
}
