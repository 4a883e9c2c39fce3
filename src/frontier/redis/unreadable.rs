//! Entries a worker cannot read: start entries and leased requests that are
//! not UTF-8 text (Latin-1 `caf\xe9` pushed by another tool). Script
//! replies that carry outside data are read as bytes and checked here, in
//! Rust; each such entry leaves its key and becomes a dead letter (its bytes
//! shown escaped) in one step of `scripts/set_aside.lua`, is counted in
//! `deadletter/count` and logged once, and the crawl goes on.
//!
//! A request record that is not UTF-8 but has a readable id needs none of
//! this: it is leased like any other and committed as a dead letter (see
//! `decode_leases`), as a record that is not JSON is.

use super::protocol::{AsideArgs, AsideRecord};
use super::{err, to_json, DeadLetter, RedisFrontier, Result, SCRIPTS};
use crate::frontier::keys::StartKind;
use crate::frontier::records::not_utf8_reason;

/// How many more looks at the start key one lease takes when everything
/// it saw was set aside, so a run of bad entries does not look like an
/// empty start key to the worker.
const MORE_LOOKS: usize = 8;

/// `entries` split into UTF-8 text and the rest (as stored).
pub(super) fn split_text(entries: Vec<Vec<u8>>) -> (Vec<String>, Vec<Vec<u8>>) {
    let mut text = Vec::with_capacity(entries.len());
    let mut other = Vec::new();
    for entry in entries {
        match String::from_utf8(entry) {
            Ok(s) => text.push(s),
            Err(e) => other.push(e.into_bytes()),
        }
    }
    (text, other)
}

impl RedisFrontier {
    /// The start entries among `peeked` that can be read, after setting
    /// the others aside; when all were set aside, looks again (a few
    /// times), so a run of bad entries at the head is passed in one lease.
    pub(super) async fn readable_start(&self, peeked: Vec<Vec<u8>>) -> Vec<String> {
        let (mut text, mut other) = split_text(peeked);
        for _ in 0..MORE_LOOKS {
            if other.is_empty() {
                break;
            }
            let n = other.len();
            if let Err(e) = self.set_aside_start(&other).await {
                tracing::warn!(error = %e, "cannot set aside start entries that are not UTF-8 text; trying again at the next lease");
                break;
            }
            if !text.is_empty() {
                break;
            }
            match self.peek_start(n).await {
                Ok(more) => (text, other) = split_text(more),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read more start entries; reading them at the next lease");
                    break;
                }
            }
        }
        text
    }

    /// Up to `n` start entries, as the lease script peeks at them.
    async fn peek_start(&self, n: usize) -> Result<Vec<Vec<u8>>> {
        let key = &self.keys.start_urls;
        let mut cmd = match self.kind {
            StartKind::List => redis::cmd("LRANGE"),
            StartKind::Set => redis::cmd("SRANDMEMBER"),
            StartKind::Zset => redis::cmd("ZRANGE"),
        };
        cmd.arg(key);
        match self.kind {
            StartKind::List => cmd.arg(0).arg(n.saturating_sub(1)),
            StartKind::Set => cmd.arg(n),
            StartKind::Zset => cmd.arg(0).arg(n.saturating_sub(1)).arg("REV"),
        };
        cmd.query_async(&mut self.conn.clone())
            .await
            .map_err(err("read start entries from", key))
    }

    /// Sets aside start entries that are not UTF-8 text.
    async fn set_aside_start(&self, entries: &[Vec<u8>]) -> Result<()> {
        let key = &self.keys.start_urls;
        let args = AsideArgs {
            kind: self.kind.as_str().to_string(),
            worker: String::new(),
        };
        self.invoke_set_aside(args, key, key, entries, "start entry")
            .await
    }

    /// Sets aside requests this worker leased whose id is not UTF-8 text
    /// (queue members another tool wrote): they cannot be committed by id.
    pub(super) async fn set_aside_leases(&self, ids: &[Vec<u8>]) -> Result<()> {
        let k = &self.keys;
        let args = AsideArgs {
            kind: "lease".to_string(),
            worker: self.worker.clone(),
        };
        self.invoke_set_aside(args, &k.inflight, &k.requests, ids, "request id")
            .await
    }

    /// Runs `set_aside.lua` on `entries` of the key `source` (named `key`
    /// in their dead letters) and logs each entry it set aside.
    async fn invoke_set_aside(
        &self,
        args: AsideArgs,
        source: &str,
        key: &str,
        entries: &[Vec<u8>],
        what: &str,
    ) -> Result<()> {
        let mut inv = SCRIPTS.set_aside.call_choosing(
            &self.keys,
            self.sink.sink,
            &[("source", source)],
            args,
        );
        let letters: Vec<DeadLetter> = entries
            .iter()
            .map(|e| DeadLetter::not_utf8(key, e, what))
            .collect();
        for (entry, letter) in entries.iter().zip(&letters) {
            inv.record(AsideRecord {
                entry: entry.clone(),
                letter: to_json(letter).into_bytes(),
            });
        }
        let done: Vec<i64> = inv
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("set aside entries that are not UTF-8 text in", key))?;
        for (letter, done) in letters.iter().zip(done) {
            if done == 1 {
                tracing::warn!(
                    key,
                    entry = %crate::wording::cut(&letter.entry, 200),
                    bytes = letter.bytes,
                    reason = %not_utf8_reason(what),
                    "{what} set aside in the dead-letter key {}",
                    self.keys.dead
                );
            }
        }
        Ok(())
    }
}
