//! Where a local crawl's items go: a JSON Lines writer (a file or standard
//! output), one line per item, a page's items written in one write in the
//! page's commit and flushed with it. A file takes them whole or not at
//! all ([`WholeLines`]: a full disk or a file-size limit leaves no cut
//! line). The first write that fails stops the crawl's leasing; the error
//! is kept for the command to report.

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
        // A page's items in one write: a file writer (see `WholeLines`)
        // takes them whole or not at all.
        let mut lines = Vec::new();
        for item in items {
            let _ = serde_json::to_writer(&mut lines, item);
            lines.push(b'\n');
        }
        match writer.write_all(&lines).and_then(|()| writer.flush()) {
            Ok(()) => self.written += items.len() as u64,
            Err(e) => self.error = Some(e.to_string()),
        }
    }

    pub fn flush(&mut self) {
        if let Some(writer) = self.writer.as_mut() {
            let _ = writer.flush();
        }
    }
}

/// A file of JSON lines that takes each write whole or not at all: a
/// write that fails part-way (a full disk, `ulimit -f`) is cut back to
/// where it began, so the file ends with a whole line.
pub struct WholeLines {
    file: std::fs::File,
    /// The length of what was written whole.
    len: u64,
}

impl WholeLines {
    pub fn new(file: std::fs::File) -> WholeLines {
        WholeLines { file, len: 0 }
    }
}

impl Write for WholeLines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        use std::io::{Seek, SeekFrom};
        if let Err(e) = self.file.write_all(buf) {
            // Undone as far as the file system lets us; the error is what
            // the crawl reports either way.
            let _ = self.file.set_len(self.len);
            let _ = self.file.seek(SeekFrom::Start(self.len));
            return Err(e);
        }
        self.len += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}
