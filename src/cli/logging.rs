//! Where log lines go and which are shown: standard error, colours only on
//! a terminal, and `CRAWLWORKER_LOG` read so that a bare level (`debug`)
//! means crawlworker's own lines at that level, not the HTML parser's: the
//! libraries stay at `warn` unless a directive names them
//! (`crawlworker=debug,html5ever=trace`).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

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

/// Sets up logging for the process; a bad `CRAWLWORKER_LOG` is reported and
/// `info` used instead.
pub fn init() {
    let spec = std::env::var(VAR).ok();
    let filter = filter(spec.as_deref()).unwrap_or_else(|problem| {
        eprintln!("crawlworker: {problem}; logging at info");
        EnvFilter::new("warn,crawlworker=info")
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
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
