//! `jsonl:DIR` and `csv:DIR`: a file per table at a time, each written
//! whole under a hidden temporary name (`.<name>.tmp`) and renamed when it
//! is closed, so a reader of `DIR/*.jsonl` never sees half a file. A file
//! is closed when it reaches its size or its age (`--rotate-size`,
//! `--rotate-every`), when the exporter stops, or when the crawl is
//! drained; `.gz` with `--gzip`.
//!
//! A file cannot be upserted, so its items are acknowledged with the file:
//! the exporter holds them (unacknowledged) while the file is open, seals
//! it (flushed and synced to disk), acknowledges the items and records the
//! rename in the same Redis step, and only then renames it (see
//! `super::super::consumer`). A file whose items were not acknowledged is
//! never renamed; one whose were is renamed, if the exporter dies first,
//! by the next exporter started on the directory.
//!
//! Every file name carries a tag of the exporter that writes it
//! ([`exporter_tag`]), so the temporary files a killed exporter leaves can
//! be told apart and removed once its items were taken back (see
//! `super::super::stale`).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use flate2::write::GzEncoder;
use serde_json::Value;

use super::{Refusal, Sealed, Sink, SinkError};
use crate::export::schema::{Row, Schema, Table};

/// What a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Csv,
}

/// When a file is closed, and how it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// Closed once it holds this many bytes (before compression).
    pub max_bytes: u64,
    /// Closed once it is this old.
    pub max_age: Duration,
    /// Gzip-compressed (`.gz`).
    pub gzip: bool,
}

impl Default for Rotation {
    fn default() -> Rotation {
        Rotation {
            max_bytes: 64 << 20,
            max_age: Duration::from_secs(60),
            gzip: false,
        }
    }
}

/// The files of one directory.
pub struct Files {
    dir: PathBuf,
    format: Format,
    rotation: Rotation,
    /// The open file of each table.
    open: HashMap<String, Open>,
    /// In every file name ([`exporter_tag`]), so exporters sharing the
    /// directory never choose the same one, and a file's exporter is known.
    tag: String,
    /// Files made by this exporter so far.
    made: u64,
}

enum Writer {
    Plain(BufWriter<File>),
    Gzip(GzEncoder<BufWriter<File>>),
}

impl Writer {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Writer::Plain(w) => w.write_all(bytes),
            Writer::Gzip(w) => w.write_all(bytes),
        }
    }

    /// Flushes everything and syncs the file to disk.
    fn finish(self) -> std::io::Result<()> {
        let inner = match self {
            Writer::Plain(w) => w,
            Writer::Gzip(w) => w.finish()?,
        };
        let file = inner.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()
    }
}

/// A file being written.
struct Open {
    temp: PathBuf,
    done: PathBuf,
    writer: Writer,
    bytes: u64,
    opened: Instant,
}

impl Files {
    /// The files of `dir` written by exporter `exporter` (its id).
    pub fn new(dir: PathBuf, format: Format, rotation: Rotation, exporter: &str) -> Files {
        Files {
            dir,
            format,
            rotation,
            open: HashMap::new(),
            tag: exporter_tag(exporter),
            made: 0,
        }
    }

    fn shown(&self) -> String {
        format!("directory {}", self.dir.display())
    }

    /// A new file for `table`, its CSV header written.
    fn start(&mut self, table: &Table) -> Result<Open, SinkError> {
        self.made += 1;
        let ms = crate::frontier::now_secs() * 1000.0;
        let ext = match (self.format, self.rotation.gzip) {
            (Format::Jsonl, false) => "jsonl",
            (Format::Jsonl, true) => "jsonl.gz",
            (Format::Csv, false) => "csv",
            (Format::Csv, true) => "csv.gz",
        };
        let name = format!(
            "{}-{:013}-{}-{}.{ext}",
            table.name, ms as u64, self.tag, self.made
        );
        let temp = self.dir.join(format!(".{name}.tmp"));
        let file = File::create(&temp).map_err(|e| {
            SinkError::Unavailable(format!(
                "{}: cannot create {}: {e}",
                self.shown(),
                temp.display()
            ))
        })?;
        let buffered = BufWriter::new(file);
        let writer = if self.rotation.gzip {
            Writer::Gzip(GzEncoder::new(buffered, flate2::Compression::default()))
        } else {
            Writer::Plain(buffered)
        };
        let mut open = Open {
            temp,
            done: self.dir.join(name),
            writer,
            bytes: 0,
            opened: Instant::now(),
        };
        if self.format == Format::Csv {
            let names: Vec<&str> = table.columns.iter().map(|c| c.name.as_str()).collect();
            let header = csv_line(names.iter().map(|n| n.to_string()))?;
            open.writer
                .write_all(&header)
                .map_err(|e| self.io("write", &open.temp, e))?;
        }
        Ok(open)
    }

    fn io(&self, what: &str, path: &Path, e: std::io::Error) -> SinkError {
        SinkError::Unavailable(format!(
            "{}: cannot {what} {}: {e}",
            self.shown(),
            path.display()
        ))
    }

    /// `row` as one line of the format.
    fn line(&self, row: &Row<'_>) -> Result<Vec<u8>, SinkError> {
        match self.format {
            Format::Jsonl => {
                let mut line = serde_json::to_vec(&row.values).unwrap_or_default();
                line.push(b'\n');
                Ok(line)
            }
            Format::Csv => csv_line(
                row.table
                    .columns
                    .iter()
                    .map(|c| cell(row.values.get(&c.name))),
            ),
        }
    }
}

#[async_trait]
impl Sink for Files {
    async fn open(&mut self, _schema: &Schema, create: bool) -> Result<(), SinkError> {
        if create {
            std::fs::create_dir_all(&self.dir).map_err(|e| {
                SinkError::Fatal(format!(
                    "cannot create directory {}: {e}",
                    self.dir.display()
                ))
            })?;
        }
        if !self.dir.is_dir() {
            return Err(SinkError::Fatal(format!(
                "{} is not a directory; make it, or run with --create",
                self.dir.display()
            )));
        }
        // Files to rename are recorded in Redis by path: whole, so an
        // exporter started elsewhere in the directory finds them.
        if let Ok(whole) = std::fs::canonicalize(&self.dir) {
            self.dir = whole;
        }
        Ok(())
    }

    async fn write(&mut self, rows: &[Row<'_>]) -> Result<Vec<Refusal>, SinkError> {
        for row in rows {
            let line = self.line(row)?;
            if !self.open.contains_key(&row.table.name) {
                let open = self.start(row.table)?;
                self.open.insert(row.table.name.clone(), open);
            }
            let shown = self.shown();
            if let Some(open) = self.open.get_mut(&row.table.name) {
                open.writer.write_all(&line).map_err(|e| {
                    SinkError::Unavailable(format!(
                        "{shown}: cannot write {}: {e}",
                        open.temp.display()
                    ))
                })?;
                open.bytes += line.len() as u64;
            }
        }
        Ok(Vec::new())
    }

    fn holds(&self) -> bool {
        true
    }

    fn seal_due(&self) -> bool {
        self.open.values().any(|o| {
            o.bytes >= self.rotation.max_bytes || o.opened.elapsed() >= self.rotation.max_age
        })
    }

    async fn seal(&mut self) -> Result<Vec<Sealed>, SinkError> {
        let mut sealed = Vec::new();
        for (_, open) in self.open.drain() {
            let temp = open.temp.clone();
            open.writer.finish().map_err(|e| {
                SinkError::Unavailable(format!("cannot write {}: {e}", temp.display()))
            })?;
            sealed.push(Sealed {
                temp,
                done: open.done,
            });
        }
        Ok(sealed)
    }

    async fn discard(&mut self) {
        for (_, open) in self.open.drain() {
            drop(open.writer);
            let _ = std::fs::remove_file(&open.temp);
        }
    }

    async fn check(&mut self) -> Result<(), SinkError> {
        if self.dir.is_dir() {
            return Ok(());
        }
        Err(SinkError::Unavailable(format!(
            "{} is not a directory any more",
            self.dir.display()
        )))
    }

    fn directory(&self) -> Option<&Path> {
        Some(&self.dir)
    }
}

/// The tag of exporter `id` in its files' names: 12 hex digits of its
/// SHA-1 (an id holds the host's name, which may hold any character).
pub fn exporter_tag(id: &str) -> String {
    use sha1::Digest;
    hex::encode(&sha1::Sha1::digest(id.as_bytes())[..6])
}

/// What a temporary file's name says: `.<table>-<ms>-<tag>-<n>.<ext>.tmp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TempName {
    pub table: String,
    /// Its exporter's [`exporter_tag`].
    pub tag: String,
}

impl TempName {
    /// The parts of temporary file `path`'s name; `None` for any other
    /// name (a file this exporter did not write).
    pub fn of(path: &Path) -> Option<TempName> {
        let name = path.file_name()?.to_str()?;
        let name = name.strip_prefix('.')?.strip_suffix(".tmp")?;
        let mut parts = name.rsplitn(4, '-');
        let (n, tag, ms, table) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let (number, ext) = n.split_once('.')?;
        let known = ["jsonl", "jsonl.gz", "csv", "csv.gz"].contains(&ext);
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let hex = tag.len() == 12 && tag.bytes().all(|b| b.is_ascii_hexdigit());
        (known && digits(number) && ms.len() == 13 && digits(ms) && hex && !table.is_empty()).then(
            || TempName {
                table: table.to_string(),
                tag: tag.to_string(),
            },
        )
    }
}

/// The final name of temporary file `temp` (`.<name>.tmp` → `<name>`).
pub fn done_name(temp: &Path) -> Option<PathBuf> {
    let name = temp.file_name()?.to_str()?;
    let done = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    Some(temp.with_file_name(done))
}

/// A JSON value as a CSV cell: text as it is, nothing for null, JSON for
/// the rest.
fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn csv_line(cells: impl Iterator<Item = String>) -> Result<Vec<u8>, SinkError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(cells)
        .map_err(|e| SinkError::Fatal(format!("cannot write a CSV row: {e}")))?;
    w.into_inner()
        .map_err(|e| SinkError::Fatal(format!("cannot write a CSV row: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_tell_their_table_and_exporter() {
        let tag = exporter_tag("host-1:42:0badf00d");
        assert_eq!(tag.len(), 12);
        assert_ne!(tag, exporter_tag("host-1:42:0badf00e"));
        let path = format!("/d/.forum-posts-1718000000000-{tag}-3.jsonl.gz.tmp");
        assert_eq!(
            TempName::of(Path::new(&path)),
            Some(TempName {
                table: "forum-posts".into(),
                tag: tag.clone(),
            })
        );
        for other in [
            format!("/d/forum-1718000000000-{tag}-3.jsonl"),
            format!("/d/.forum-1718000000000-{tag}-3.txt.tmp"),
            "/d/.forum-1718000000000-pid42-3.jsonl.tmp".to_string(),
            "/d/.notes.tmp".to_string(),
        ] {
            assert_eq!(TempName::of(Path::new(&other)), None, "{other}");
        }
    }

    #[test]
    fn temporary_names_are_hidden_and_map_to_their_final_name() {
        let done = done_name(Path::new("/d/.bbs_post-1-a-1.jsonl.tmp")).unwrap();
        assert_eq!(done, Path::new("/d/bbs_post-1-a-1.jsonl"));
        assert_eq!(done_name(Path::new("/d/x.jsonl")), None);
        assert_eq!(
            String::from_utf8(
                csv_line(["a,b".to_string(), "c\"d".to_string()].into_iter()).unwrap()
            )
            .unwrap(),
            "\"a,b\",\"c\"\"d\"\n"
        );
    }
}
