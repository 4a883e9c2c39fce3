//! What a worker says about requests that gave no page to extract: a
//! response with a status the rules do not handle (404, 410, …: ignored,
//! as Scrapy's HttpErrorMiddleware ignores them, logged at INFO with its
//! URL and rule) and a request that failed for good (retries used up,
//! refused, a redirect not followed: a warning). Both are kept with the
//! page's commit: in the failed key, which `crawlworker failed` lists, or,
//! in a local crawl, in the list printed when it ends.
//!
//! A site that answers thousands of them would flood the log: each kind
//! is logged [`PER_WINDOW`] times per [`WINDOW`] and spider at most; the
//! rest are counted, and the next line logged says how many were not.
//! This module only speaks; what is recorded is decided by the downloader
//! and the extractor.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::frontier::FailedRecord;
use crate::request::Request;
use crate::spider::Spider;

/// Lines of each kind logged per window at most…
const PER_WINDOW: u32 = 10;
/// …and the window.
const WINDOW: Duration = Duration::from_secs(60);

/// One spider's failure lines, for this worker.
#[derive(Debug)]
pub struct FailureLog {
    /// Where failures are kept, for people ("in the failed key …").
    kept: String,
    /// The command that lists them, if there is one.
    lists: Option<String>,
    /// Ignored responses, then failures.
    windows: Mutex<[Window; 2]>,
}

/// The lines of one kind in the current window.
#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    logged: u32,
    /// Not logged since the last line that was.
    quiet: u64,
}

/// Whether to log a line, and what to add to it.
enum Admit {
    /// Log it, saying how many were not logged before it and whether the
    /// next ones will not be.
    Log {
        quiet: u64,
        last: bool,
    },
    Quiet,
}

impl Window {
    fn new(now: Instant) -> Window {
        Window {
            started: now,
            logged: 0,
            quiet: 0,
        }
    }

    fn admit(&mut self, now: Instant) -> Admit {
        if now.duration_since(self.started) >= WINDOW {
            *self = Window {
                quiet: self.quiet,
                ..Window::new(now)
            };
        }
        if self.logged >= PER_WINDOW {
            self.quiet += 1;
            return Admit::Quiet;
        }
        self.logged += 1;
        let quiet = std::mem::take(&mut self.quiet);
        Admit::Log {
            quiet,
            last: self.logged == PER_WINDOW,
        }
    }
}

impl Admit {
    /// What the logged line adds: the lines left out before it, and that
    /// the next ones will be.
    fn suffix(&self) -> String {
        let Admit::Log { quiet, last } = self else {
            return String::new();
        };
        let mut out = String::new();
        if *quiet > 0 {
            out += &format!(" ({quiet} more not logged before this one)");
        }
        if *last {
            out += &format!(
                "; further ones are counted, not logged, for the next {}",
                crate::wording::duration(WINDOW)
            );
        }
        out
    }
}

impl FailureLog {
    /// The log of `spider`'s failures; `shared`: kept in its failed key
    /// (`failed_key`), not in a local crawl's memory.
    pub fn new(spider: &Spider, shared: bool, failed_key: &str) -> FailureLog {
        let (kept, lists) = if shared {
            (
                format!("kept in the failed key {failed_key}"),
                Some(format!("crawlworker failed {}", spider.source.display())),
            )
        } else {
            ("listed when the local crawl ends".to_string(), None)
        };
        let now = Instant::now();
        FailureLog {
            kept,
            lists,
            windows: Mutex::new([Window::new(now), Window::new(now)]),
        }
    }

    fn admit(&self, which: usize) -> Admit {
        match self.windows.lock() {
            Ok(mut w) => w[which].admit(Instant::now()),
            Err(_) => Admit::Log {
                quiet: 0,
                last: false,
            },
        }
    }

    /// Says a response was ignored for its status (not 2xx nor in
    /// `httperror_allowed_codes`).
    pub fn ignored(&self, request: &Request, status: u16, rule: Option<&str>) {
        let admit = self.admit(0);
        if matches!(admit, Admit::Quiet) {
            return;
        }
        let lists = self
            .lists
            .as_ref()
            .map(|c| format!("; `{c} --kind {status}` lists them"))
            .unwrap_or_default();
        tracing::info!(
            url = %request.url,
            status,
            rule = rule.unwrap_or(""),
            "ignored response {status} {} ({}): HTTP status not handled (only 2xx and httperror_allowed_codes reach the rules); {}{lists}{}",
            request.url,
            rule.map_or("no rule matches".to_string(), |r| format!("rule {r}")),
            self.kept,
            admit.suffix(),
        );
    }

    /// Says a request failed for good.
    pub fn failed(&self, failed: &FailedRecord) {
        let admit = self.admit(1);
        if matches!(admit, Admit::Quiet) {
            return;
        }
        let lists = self
            .lists
            .as_ref()
            .map(|c| format!(" (`{c}` lists them; `push-urls --from-failed` queues them again)"))
            .unwrap_or_default();
        tracing::warn!(
            url = %failed.url,
            reason = %failed.reason,
            rule = failed.rule.as_deref().unwrap_or(""),
            "request failed for good: {}; {}{lists}{}",
            failed.reason,
            self.kept,
            admit.suffix(),
        );
    }
}

/// The rule `request` was for, as the failure's record names it.
pub fn rule_of(spider: &Spider, request: &Request) -> Option<String> {
    spider
        .rule_for(request.rule.as_deref(), &request.url)
        .map(|r| r.name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_logs_its_share_then_counts_and_says_how_many_were_not_logged() {
        let t0 = Instant::now();
        let mut w = Window::new(t0);
        let logged = (0..25)
            .filter(|_| matches!(w.admit(t0), Admit::Log { .. }))
            .count();
        assert_eq!(logged, PER_WINDOW as usize);
        assert!(matches!(w.admit(t0 + WINDOW / 2), Admit::Quiet));
        // The next window's first line says how many were left out.
        let next = w.admit(t0 + WINDOW);
        assert!(matches!(
            next,
            Admit::Log {
                quiet: 16,
                last: false
            }
        ));
        assert_eq!(next.suffix(), " (16 more not logged before this one)");
        assert!(matches!(w.admit(t0 + WINDOW), Admit::Log { quiet: 0, .. }));
    }
}
