//! The hidden temporary files (`.NAME.tmp`) a killed exporter leaves in a
//! `jsonl:` or `csv:` directory. One whose items were acknowledged is
//! renamed (it is recorded in Redis with the acknowledgement: see
//! `super::consumer`). One whose items went back to the other exporters
//! will never be acknowledged: it is removed here, once Redis says so.
//!
//! When that is known, for a file whose name carries exporter E's tag
//! (`super::sinks::files::exporter_tag`) and is not recorded to rename:
//!
//! - **list sink**: E has no lease, or its lease says it is `lost`. The
//!   step that marks a lease lost moves E's items back to the items list,
//!   and an exporter whose lease is lost acknowledges nothing until it
//!   starts afresh, dropping its open files first. An exporter has a lease
//!   from its first take (before it writes a file) until it stops holding
//!   nothing, or an hour after it was found lost.
//! - **stream sink**: E holds no entry of the consumer group (`XPENDING`)
//!   and its lease does not run. A file is acknowledged whole or not at
//!   all, and only with entries E still holds: a file whose entries went to
//!   others can never be.
//!
//! Redis is read in that order (leases and holdings, then the files to
//! rename) and only then a file removed, so a file acknowledged meanwhile
//! is seen as one to rename. Age alone proves nothing: an exporter frozen
//! (SIGSTOP, a stalled VM) whose items nobody has taken back yet may wake
//! and acknowledge its file at any later time.
//!
//! Files of other tables, or whose name is not one an exporter writes, are
//! never touched: the directory may hold other spiders' files.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::sinks::files::{exporter_tag, TempName};
use crate::frontier::{FrontierError, ItemSink, RedisFrontier};

/// Whose files are kept, and which directory and tables are looked at.
pub struct Sweep<'a> {
    /// The store's directory.
    pub dir: &'a Path,
    /// The spider's tables: only their files are looked at.
    pub tables: Vec<&'a str>,
    /// This exporter's id (its own files are kept).
    pub me: &'a str,
    /// The stream's consumer group.
    pub group: &'a str,
}

impl Sweep<'_> {
    /// Removes the temporary files of exporters that are gone and whose
    /// items were taken back: the files removed.
    pub async fn run(&self, shards: &[RedisFrontier]) -> Result<Vec<PathBuf>, FrontierError> {
        let candidates = self.candidates();
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let mut keep: HashSet<String> = HashSet::from([exporter_tag(self.me)]);
        for shard in shards {
            keep.extend(self.holders(shard).await?);
        }
        // Read last: a file acknowledged while the holders were read is
        // one to rename, not to remove.
        let mut renames: HashSet<String> = HashSet::new();
        for shard in shards {
            renames.extend(shard.export_renames().await?.into_iter().map(|(p, _)| p));
        }
        let mut removed = Vec::new();
        for (path, name) in candidates {
            if keep.contains(&name.tag) || renames.contains(&path.display().to_string()) {
                continue;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    tracing::info!(
                        "removed {}: a temporary file of an exporter that is gone, whose items went back to the others",
                        path.display()
                    );
                    removed.push(path);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => tracing::warn!("cannot remove {}: {e}", path.display()),
            }
        }
        Ok(removed)
    }

    /// The temporary files of the spider's tables in the directory.
    fn candidates(&self) -> Vec<(PathBuf, TempName)> {
        let Ok(entries) = std::fs::read_dir(self.dir) else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter_map(|path| TempName::of(&path).map(|name| (path, name)))
            .filter(|(_, name)| self.tables.contains(&name.table.as_str()))
            .collect()
    }

    /// The tags of the exporters of `shard` whose files may still be
    /// acknowledged.
    async fn holders(&self, shard: &RedisFrontier) -> Result<Vec<String>, FrontierError> {
        let leases = shard.exporters().await?;
        if shard.sink() != ItemSink::Stream {
            return Ok(leases
                .iter()
                .filter(|(_, lease)| lease.lost_ms.is_none())
                .map(|(id, _)| exporter_tag(id))
                .collect());
        }
        let now_ms = crate::frontier::now_secs() * 1000.0;
        let alive = leases
            .iter()
            .filter(|(_, lease)| lease.until_ms.is_some_and(|u| u > now_ms))
            .map(|(id, _)| exporter_tag(id));
        let holding = shard
            .export_pending_by_consumer(self.group)
            .await?
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(consumer, _)| exporter_tag(&consumer));
        Ok(alive.chain(holding).collect())
    }
}
