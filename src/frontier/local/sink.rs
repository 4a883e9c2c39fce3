//! Where a local crawl's items go: a JSON Lines writer (a file or standard
//! output), one line per item, written in the page's commit and flushed
//! with it. The first write that fails stops the crawl's leasing; the
//! error is kept for the command to report.

use std::io::Write;

use serde_json::{Map, Value};

/// Where a local crawl's items go.
pub type ItemWriter = Box<dyn Write + Send>;

/// The item writer, what it wrote, and its first failure.
#[derive(Default)]
pub(super) struct Sink {
    writer: Option<ItemWriter>,
    /// Items written.
    pub written: u64,
    /// The first write that failed.
    pub error: Option<String>,
}

impl Sink {
    pub fn new(writer: ItemWriter) -> Sink {
        Sink {
            writer: Some(writer),
            ..Sink::default()
        }
    }

    /// Whether a write failed (then nothing more is leased).
    pub fn failed(&self) -> bool {
        self.error.is_some()
    }

    /// Writes `items`, one JSON line each, and flushes them.
    pub fn write(&mut self, items: &[Map<String, Value>]) {
        if items.is_empty() || self.failed() {
            return;
        }
        let Some(writer) = self.writer.as_mut() else {
            return;
        };
        let mut failed = None;
        for item in items {
            let line = serde_json::to_string(item).unwrap_or_default();
            if let Err(e) = writeln!(writer, "{line}") {
                failed = Some(e.to_string());
                break;
            }
            self.written += 1;
        }
        if failed.is_none() {
            failed = writer.flush().err().map(|e| e.to_string());
        }
        self.error = failed;
    }

    pub fn flush(&mut self) {
        if let Some(writer) = self.writer.as_mut() {
            let _ = writer.flush();
        }
    }
}
