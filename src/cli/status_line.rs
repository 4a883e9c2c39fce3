//! The live status line of `crawlworker run` on a terminal: pages and their
//! rate, items, the queue, pages in flight and errors, redrawn in place at
//! the bottom while log lines scroll above it (the log writer prints around
//! it). Off a terminal, with `--quiet` or JSON logs, there is none, and the
//! periodic progress line is logged instead.

use std::io::{IsTerminal, Write};
use std::sync::OnceLock;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The bar, once shown; log lines are written around it.
static BAR: OnceLock<ProgressBar> = OnceLock::new();

/// Shows the status line, if standard error is a terminal; `None` if not.
pub fn show() -> Option<&'static ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = BAR.get_or_init(|| {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(250));
        bar
    });
    Some(bar)
}

/// Removes the status line (the worker stops).
pub fn hide() {
    if let Some(bar) = BAR.get() {
        bar.finish_and_clear();
    }
}

/// The log writer: standard error, around the status line if one shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // One call per log line: its secrets and session ids masked
        // whatever wrote it.
        let line = crate::redact::log_line(buf);
        match BAR.get() {
            Some(bar) if !bar.is_finished() => {
                bar.suspend(|| std::io::stderr().write_all(&line))?;
            }
            _ => std::io::stderr().write_all(&line)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> LogWriter {
        LogWriter
    }
}
