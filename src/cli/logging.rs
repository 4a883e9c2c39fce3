//! Where log lines go and which are shown: standard error, colours only on
//! a terminal, and `CRAWLWORKER_LOG` read so that a bare level (`debug`)
//! means crawlworker's own lines at that level, not the HTML parser's: the
//! libraries stay at `warn` unless a directive names them
//! (`crawlworker=debug,html5ever=trace`). `-q` and `-v`/`-vv` set the
//! level from the command line; `--log-format json` writes one JSON object
//! per line for log shippers. Lines are written around the live status
//! line when one is shown ([`status_line`]).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use super::status_line;

/// The variable that sets what is logged.
pub const VAR: &str = "CRAWLWORKER_LOG";

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
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(status_line::LogWriter);
    match options.format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .init(),
    }
    // Said once logging is set up, so that it is JSON with the rest.
    if let Some(problem) = problem {
        tracing::warn!("{problem}; logging at info");
    }
}

#[cfg(test)]
mod tests {
    use super::filter;

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
