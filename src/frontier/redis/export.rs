//! `crawlworker export`'s side of Redis: taking a spider's items for a
//! store, acknowledging them once the store has committed them, and taking
//! back those of an exporter that is gone. Each state change is one atomic
//! step, so an item is always either waiting, held by one live exporter,
//! or acknowledged:
//!
//! - list sink: `export_take` moves items from the items list to the
//!   exporter's own list ([`Keys::exporting`]) and renews its lease in
//!   `<name>:items:exporters`; `export_ack` deletes that list once the
//!   store committed; `export_reclaim` moves a gone exporter's list back
//!   to the head of the items list;
//! - stream sink: a consumer group (`XREADGROUP`), entries left
//!   unacknowledged by a gone consumer claimed after an idle time
//!   (`XAUTOCLAIM`), `export_ack` acknowledging (`XACK`) only the entries
//!   this exporter still owns.
//!
//! What an exporter does with the items (the stores, the tables) is
//! `crate::export`'s; this module only knows the keys and the scripts.

use std::time::Duration;

use redis::Value;

use super::protocol::{
    ExportAckArgs, ExportAckRecord, ExportBeatArgs, ExportReclaimArgs, ExportTakeArgs,
};
use super::scripts::SCRIPTS;
use super::RedisFrontier;
use crate::frontier::error::{err, Result};
use crate::frontier::{ExporterLease, ItemSink};

/// An item handed to an exporter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    /// Its stream entry's id (stream sink).
    pub id: Option<String>,
    /// The item's JSON; `None` for a stream entry without an `item` field
    /// (not written by crawlworker, or deleted since).
    pub item: Option<String>,
}

/// What taking items gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// Items, perhaps none.
    Items(Vec<Delivered>),
    /// This exporter was found gone: what it held went back to the others.
    Lost,
}

/// How one delivered item ends, for [`RedisFrontier::export_ack`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    /// Its stream entry id ('' for the list sink).
    pub id: String,
    /// Its dead letter (JSON), when the store refused it.
    pub dead: Option<String>,
}

/// What acknowledging did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acked {
    Done {
        exported: u64,
        refused: u64,
    },
    /// Some or all of the items went to another exporter meanwhile (see
    /// `export_ack.lua`).
    Lost,
}

/// What is left to export, for `stats` and `--until-drained`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExportBacklog {
    /// Items no exporter has taken yet.
    pub waiting: u64,
    /// Items taken and not acknowledged.
    pub unacked: u64,
    /// How long ago the oldest unacknowledged item was taken (list sink)
    /// or added (stream sink), in milliseconds.
    pub oldest_unacked_ms: Option<u64>,
    /// Exporters whose lease runs.
    pub exporters: u64,
}

/// Milliseconds, as a script argument.
fn ms(d: Duration) -> String {
    d.as_millis().max(1).to_string()
}

fn now_ms() -> f64 {
    crate::frontier::now_secs() * 1000.0
}

impl RedisFrontier {
    /// List sink: moves up to `max` items to `exporter`'s own list and
    /// renews its lease (`fresh`: its first take, or its first since it
    /// was found gone).
    pub async fn export_take(
        &self,
        exporter: &str,
        lease: Duration,
        max: usize,
        fresh: bool,
    ) -> Result<Taken> {
        let args = ExportTakeArgs {
            exporter: exporter.to_string(),
            lease_ms: ms(lease),
            max: max.max(1).to_string(),
            fresh: if fresh { "1" } else { "0" }.to_string(),
        };
        let exporting = self.keys.exporting(exporter);
        let out: Vec<String> = SCRIPTS
            .export_take
            .call_choosing(
                &self.keys,
                self.sink.sink,
                &[("exporting", exporting.as_str())],
                args,
            )
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("take items for export from", &self.keys.items))?;
        Ok(match out.split_first() {
            Some((tag, items)) if tag == "taken" => Taken::Items(
                items
                    .iter()
                    .map(|item| Delivered {
                        id: None,
                        item: Some(item.clone()),
                    })
                    .collect(),
            ),
            _ => Taken::Lost,
        })
    }

    /// Stream sink: makes consumer group `group` (reading from the first
    /// entry) unless it exists.
    pub async fn export_group(&self, group: &str) -> Result<()> {
        let key = &self.keys.item_stream;
        let made: redis::RedisResult<()> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(key)
            .arg(group)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(&mut self.conn.clone())
            .await;
        match made {
            Err(e) if e.code() == Some("BUSYGROUP") => Ok(()),
            other => other.map_err(err("create the export consumer group on", key)),
        }
    }

    /// Stream sink: up to `max` entries no consumer of `group` has read,
    /// waiting up to `block` for some.
    pub async fn export_read(
        &self,
        exporter: &str,
        group: &str,
        max: usize,
        block: Duration,
    ) -> Result<Vec<Delivered>> {
        let key = &self.keys.item_stream;
        let reply: Value = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(group)
            .arg(exporter)
            .arg("COUNT")
            .arg(max.max(1))
            .arg("BLOCK")
            .arg(block.as_millis().max(1) as u64)
            .arg("STREAMS")
            .arg(key)
            .arg(">")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read items for export from", key))?;
        // [[key, [entry, …]]], or nil when nothing came.
        let entries = match reply {
            Value::Array(streams) => streams
                .into_iter()
                .filter_map(|s| match s {
                    Value::Array(mut pair) if pair.len() == 2 => pair.pop(),
                    _ => None,
                })
                .flat_map(entries)
                .collect(),
            _ => Vec::new(),
        };
        Ok(entries)
    }

    /// Stream sink: up to `max` entries of `group` left unacknowledged for
    /// longer than `idle` (their consumer is gone, or stuck), now this
    /// exporter's.
    pub async fn export_claim(
        &self,
        exporter: &str,
        group: &str,
        idle: Duration,
        max: usize,
    ) -> Result<Vec<Delivered>> {
        let key = &self.keys.item_stream;
        let reply: Value = redis::cmd("XAUTOCLAIM")
            .arg(key)
            .arg(group)
            .arg(exporter)
            .arg(idle.as_millis() as u64)
            .arg("0-0")
            .arg("COUNT")
            .arg(max.max(1))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("claim unacknowledged items of a gone exporter in", key))?;
        // [next cursor, [entry, …], [deleted id, …]] (Redis 7).
        Ok(match reply {
            Value::Array(mut parts) if parts.len() >= 2 => entries(parts.swap_remove(1)),
            _ => Vec::new(),
        })
    }

    /// Stream sink: restarts the idle time of entries this exporter holds
    /// (a file it has not closed yet, a store slow to commit), so nobody
    /// claims them while it is alive.
    pub async fn export_touch(&self, exporter: &str, group: &str, ids: &[String]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let key = &self.keys.item_stream;
        for chunk in ids.chunks(1000) {
            redis::cmd("XCLAIM")
                .arg(key)
                .arg(group)
                .arg(exporter)
                .arg(0)
                .arg(chunk)
                .arg("JUSTID")
                .query_async::<Value>(&mut self.conn.clone())
                .await
                .map_err(err("keep held export items in", key))?;
        }
        Ok(())
    }

    /// Acknowledges what the store committed (and refused: `acks` with a
    /// dead letter), recording `files` to rename, in one step (see
    /// `export_ack.lua`; `whole`: all or nothing).
    pub async fn export_ack(
        &self,
        exporter: &str,
        group: &str,
        lease: Duration,
        acks: &[Ack],
        files: &[String],
        whole: bool,
    ) -> Result<Acked> {
        let args = ExportAckArgs {
            exporter: exporter.to_string(),
            sink: self.sink.sink.as_str().to_string(),
            group: group.to_string(),
            lease_ms: ms(lease),
            whole: if whole { "1" } else { "0" }.to_string(),
        };
        let exporting = self.keys.exporting(exporter);
        let renames = self.keys.export_renames();
        let mut call = SCRIPTS.export_ack.call_choosing(
            &self.keys,
            self.sink.sink,
            &[("exporting", exporting.as_str()), ("renames", &renames)],
            args,
        );
        for ack in acks {
            call.record(ExportAckRecord {
                what: if ack.dead.is_some() { "dead" } else { "ok" }.to_string(),
                id: ack.id.clone(),
                value: ack.dead.clone().unwrap_or_default(),
            });
        }
        for file in files {
            call.record(ExportAckRecord {
                what: "file".to_string(),
                id: String::new(),
                value: file.clone(),
            });
        }
        let out: Vec<Value> = call
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("acknowledge exported items in", self.items_key()))?;
        let number = |v: Option<&Value>| match v {
            Some(Value::Int(n)) => *n as u64,
            _ => 0,
        };
        Ok(match out.first() {
            Some(Value::BulkString(tag)) if tag == b"acked" => Acked::Done {
                exported: number(out.get(1)),
                refused: number(out.get(2)),
            },
            _ => Acked::Lost,
        })
    }

    /// Renews `exporter`'s lease; false when it was found gone (unless
    /// `fresh`, which registers it anew).
    pub async fn export_beat(&self, exporter: &str, lease: Duration, fresh: bool) -> Result<bool> {
        let args = ExportBeatArgs {
            exporter: exporter.to_string(),
            lease_ms: ms(lease),
            fresh: if fresh { "1" } else { "0" }.to_string(),
        };
        let renewed: i64 = SCRIPTS
            .export_beat
            .call(&self.keys, self.sink.sink, args)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("renew the exporter's lease in", &self.keys.exporters))?;
        Ok(renewed == 1)
    }

    /// The exporters' leases, by exporter id.
    pub async fn exporters(&self) -> Result<Vec<(String, ExporterLease)>> {
        let raw: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(&self.keys.exporters)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read the exporters of", &self.keys.exporters))?;
        Ok(raw
            .into_iter()
            .map(|(id, json)| (id, serde_json::from_str(&json).unwrap_or_default()))
            .collect())
    }

    /// Takes back the items of every exporter but `me` found gone (list
    /// sink), and forgets those gone for longer than `forget`: how many
    /// items went back.
    pub async fn export_reclaim(&self, me: &str, forget: Duration) -> Result<u64> {
        let mut back = 0;
        for (exporter, lease) in self.exporters().await? {
            let may_be_gone = lease.lost_ms.is_some()
                || lease.until_ms.is_none_or(|until| until < now_ms() + 1000.0);
            if exporter == me || !may_be_gone {
                continue;
            }
            let args = ExportReclaimArgs {
                exporter: exporter.clone(),
                forget_ms: ms(forget),
            };
            let exporting = self.keys.exporting(&exporter);
            let n: u64 = SCRIPTS
                .export_reclaim
                .call_choosing(
                    &self.keys,
                    self.sink.sink,
                    &[("exporting", exporting.as_str())],
                    args,
                )
                .invoke_async(&mut self.conn.clone())
                .await
                .map_err(err("take back a gone exporter's items in", &exporting))?;
            back += n;
        }
        Ok(back)
    }

    /// What is left to export (consumer group `group` for the stream).
    pub async fn export_backlog(&self, group: &str) -> Result<ExportBacklog> {
        let leases = self.exporters().await?;
        let now = now_ms();
        let alive: Vec<&(String, ExporterLease)> = leases
            .iter()
            .filter(|(_, l)| l.until_ms.is_some_and(|u| u > now))
            .collect();
        let mut backlog = ExportBacklog {
            exporters: alive.len() as u64,
            ..ExportBacklog::default()
        };
        if self.sink.sink == ItemSink::Stream {
            self.stream_backlog(group, &mut backlog).await?;
            return Ok(backlog);
        }
        let mut pipe = redis::pipe();
        pipe.cmd("LLEN").arg(&self.keys.items);
        for (exporter, _) in &leases {
            pipe.cmd("LLEN").arg(self.keys.exporting(exporter));
        }
        let lengths: Vec<u64> = pipe
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("count the items to export in", &self.keys.items))?;
        backlog.waiting = lengths.first().copied().unwrap_or(0);
        backlog.unacked = lengths.iter().skip(1).sum();
        backlog.oldest_unacked_ms = leases
            .iter()
            .filter_map(|(_, l)| l.since_ms.filter(|s| *s > 0.0))
            .map(|since| (now - since).max(0.0) as u64)
            .max();
        Ok(backlog)
    }

    /// The stream's part of [`RedisFrontier::export_backlog`]: the
    /// group's lag and pending entries (the whole stream without a group).
    async fn stream_backlog(&self, group: &str, backlog: &mut ExportBacklog) -> Result<()> {
        let key = &self.keys.item_stream;
        let mut conn = self.conn.clone();
        let length: u64 = redis::cmd("XLEN")
            .arg(key)
            .query_async(&mut conn)
            .await
            .map_err(err("count the items to export in", key))?;
        let groups: redis::RedisResult<Vec<Vec<Value>>> = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(key)
            .query_async(&mut conn)
            .await;
        let ours = groups.unwrap_or_default().into_iter().find_map(|fields| {
            let map = pairs(fields);
            (text(map.get("name")) == Some(group.to_string())).then_some(map)
        });
        let Some(info) = ours else {
            backlog.waiting = length;
            return Ok(());
        };
        backlog.unacked = int(info.get("pending"));
        backlog.waiting = match info.get("lag") {
            Some(Value::Int(n)) => *n as u64,
            _ => length.saturating_sub(backlog.unacked),
        };
        if backlog.unacked > 0 {
            let summary: Vec<Value> = redis::cmd("XPENDING")
                .arg(key)
                .arg(group)
                .query_async(&mut conn)
                .await
                .map_err(err("read the unacknowledged items of", key))?;
            let oldest = text(summary.get(1)).and_then(|id| entry_ms(&id));
            backlog.oldest_unacked_ms = oldest.map(|t| (now_ms() - t as f64).max(0.0) as u64);
        }
        Ok(())
    }

    /// Stream sink: the entries of `group` each consumer holds
    /// unacknowledged, by consumer (none without the group).
    pub async fn export_pending_by_consumer(&self, group: &str) -> Result<Vec<(String, u64)>> {
        let key = &self.keys.item_stream;
        let summary: redis::RedisResult<Vec<Value>> = redis::cmd("XPENDING")
            .arg(key)
            .arg(group)
            .query_async(&mut self.conn.clone())
            .await;
        let summary = match summary {
            Err(e) if e.code() == Some("NOGROUP") => return Ok(Vec::new()),
            other => other.map_err(err("read the unacknowledged items of", key))?,
        };
        // [count, first id, last id, [[consumer, count], …]].
        let Some(Value::Array(consumers)) = summary.into_iter().nth(3) else {
            return Ok(Vec::new());
        };
        Ok(consumers
            .into_iter()
            .filter_map(|c| match c {
                Value::Array(pair) => {
                    let name = text(pair.first())?;
                    let count = text(pair.get(1)).and_then(|n| n.parse().ok())?;
                    Some((name, count))
                }
                _ => None,
            })
            .collect())
    }

    /// Drops `exporter`'s lease when it holds nothing (a stopping
    /// exporter); one that still holds items keeps it, to run out and have
    /// them taken back.
    pub async fn export_leave(&self, exporter: &str) -> Result<()> {
        let exporting = self.keys.exporting(exporter);
        let mut conn = self.conn.clone();
        let held: u64 = redis::cmd("LLEN")
            .arg(&exporting)
            .query_async(&mut conn)
            .await
            .map_err(err("count the items held in", &exporting))?;
        if held == 0 {
            redis::cmd("HDEL")
                .arg(&self.keys.exporters)
                .arg(exporter)
                .query_async::<()>(&mut conn)
                .await
                .map_err(err("drop the exporter's lease in", &self.keys.exporters))?;
        }
        Ok(())
    }

    /// Files whose items are acknowledged and that still have their
    /// temporary name: path → exporter.
    pub async fn export_renames(&self) -> Result<Vec<(String, String)>> {
        let key = self.keys.export_renames();
        redis::cmd("HGETALL")
            .arg(&key)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read the files to rename of", &key))
    }

    /// Forgets a file of [`RedisFrontier::export_renames`], renamed now.
    pub async fn export_renamed(&self, path: &str) -> Result<()> {
        let key = self.keys.export_renames();
        redis::cmd("HDEL")
            .arg(&key)
            .arg(path)
            .query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(err("forget a renamed file in", &key))
    }
}

/// Stream entries `[[id, [field, value, …]], …]` as delivered items.
fn entries(v: Value) -> Vec<Delivered> {
    let Value::Array(list) = v else {
        return Vec::new();
    };
    list.into_iter()
        .filter_map(|entry| {
            let Value::Array(mut parts) = entry else {
                return None;
            };
            if parts.is_empty() {
                return None;
            }
            let fields = if parts.len() > 1 {
                parts.swap_remove(1)
            } else {
                Value::Nil
            };
            let id = text(parts.first())?;
            let item = match fields {
                Value::Array(kv) => kv
                    .chunks_exact(2)
                    .find(|kv| text(kv.first()).as_deref() == Some("item"))
                    .and_then(|kv| text(kv.get(1))),
                _ => None,
            };
            Some(Delivered { id: Some(id), item })
        })
        .collect()
}

/// A reply's text, if it is one.
fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

fn int(v: Option<&Value>) -> u64 {
    match v {
        Some(Value::Int(n)) => (*n).max(0) as u64,
        _ => 0,
    }
}

/// `[name, value, …]` (or a RESP3 map) as a map.
fn pairs(fields: Vec<Value>) -> std::collections::HashMap<String, Value> {
    let mut out = std::collections::HashMap::new();
    let mut it = fields.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        if let Some(k) = text(Some(&k)) {
            out.insert(k, v);
        }
    }
    out
}

/// The time (ms) in a stream entry id (`<ms>-<seq>`).
fn entry_ms(id: &str) -> Option<u64> {
    id.split('-').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_entries_give_their_item_field_and_none_without_one() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let reply = Value::Array(vec![
            Value::Array(vec![
                bulk("1-0"),
                Value::Array(vec![bulk("item"), bulk("{\"a\":1}")]),
            ]),
            Value::Array(vec![bulk("2-0"), Value::Nil]),
            Value::Array(vec![bulk("3-0"), Value::Array(vec![bulk("x"), bulk("y")])]),
        ]);
        let got = entries(reply);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].item.as_deref(), Some("{\"a\":1}"));
        assert_eq!(got[0].id.as_deref(), Some("1-0"));
        assert_eq!(got[1].item, None);
        assert_eq!(got[2].item, None);
        assert_eq!(entry_ms("1718000000000-3"), Some(1718000000000));
    }
}
