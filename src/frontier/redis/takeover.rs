//! Taking over the request queue a scrapy-redis crawl left (`crawlworker
//! import-queue`). Its requests sit in the requests key as pickles — a
//! zset scored by -priority (`PriorityQueue`), or a list (`FifoQueue`,
//! `LifoQueue`). The import moves them aside in one step
//! (`scripts/import_stage.lua`), so the requests key is crawlworker's
//! queue from then on and workers may run, then converts them a window at
//! a time: each entry leaves the key it was set aside in only in the step
//! that queues its request or sets it aside as a dead letter
//! (`scripts/import_queue.lua`). Stopped at any point and started again,
//! it loses and doubles nothing: what is left to do is what is left in
//! that key.
//!
//! Reading a pickle and deciding what it becomes is not done here
//! (`crate::scrapy_redis`); this module only moves entries.

use super::protocol::{ImportArgs, ImportRecord, ImportRetryArgs, ImportStageArgs};
use super::{clamped, encode, err, to_json, DeadLetter, RedisFrontier, Result, SCRIPTS};
use crate::request::Request;

/// How a scrapy-redis queue is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForeignQueue {
    /// `PriorityQueue` (scrapy-redis's default): a zset scored by
    /// -priority.
    Zset,
    /// `FifoQueue` or `LifoQueue`: a list, pushed at the head.
    List,
}

impl ForeignQueue {
    fn parse(redis_type: &str) -> Option<ForeignQueue> {
        match redis_type {
            "zset" => Some(ForeignQueue::Zset),
            "list" => Some(ForeignQueue::List),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            ForeignQueue::Zset => "zset",
            ForeignQueue::List => "list",
        }
    }
}

/// Where a dry run reads entries: set aside already, or still in the
/// requests key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Where {
    SetAside,
    InQueue,
}

/// One entry and what it becomes.
#[derive(Debug, Clone)]
pub struct Import {
    /// The entry as stored (to remove exactly it).
    pub entry: Vec<u8>,
    pub outcome: std::result::Result<Request, DeadLetter>,
}

/// What one import step did with its entries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Imported {
    /// Queued on this shard.
    pub queued: u64,
    /// Set aside as dead letters.
    pub dead: u64,
    /// Handed to this shard's outboxes, for the shards of their hosts.
    pub handed: u64,
}

/// How many entries one import step moves or converts.
const STAGE_BATCH: usize = 1000;

impl RedisFrontier {
    /// Moves a scrapy-redis queue out of the requests key, into the key
    /// entries are converted from (whole, in one step, when crawlworker
    /// has queued nothing yet). Returns how that key keeps them (`None`:
    /// there is nothing to import) and how many entries moved now.
    pub async fn stage_scrapy_queue(&self) -> Result<(Option<ForeignQueue>, u64)> {
        let (mut from, mut moved) = (0i64, 0u64);
        loop {
            let args = ImportStageArgs {
                batch: STAGE_BATCH.to_string(),
                from: from.to_string(),
            };
            let (kind, n, done, next): (String, u64, i64, i64) = SCRIPTS
                .import_stage
                .call(&self.keys, self.sink.sink, args)
                .invoke_async(&mut self.conn.clone())
                .await
                .map_err(err(
                    "set aside the scrapy-redis queue in",
                    &self.keys.requests,
                ))?;
            moved += n;
            from = next;
            if done == 1 {
                return Ok((ForeignQueue::parse(&kind), moved));
            }
        }
    }

    /// Up to `n` entries set aside, in the order to convert them: a zset's
    /// highest priority first, a list's oldest first (the tail, where
    /// scrapy-redis's FIFO queue pops).
    pub async fn scrapy_entries(&self, kind: ForeignQueue, n: usize) -> Result<Vec<Vec<u8>>> {
        let key = &self.keys.scrapy_queue;
        let n = n.max(1) as i64;
        let mut cmd = match kind {
            ForeignQueue::Zset => redis::cmd("ZRANGE"),
            ForeignQueue::List => redis::cmd("LRANGE"),
        };
        match kind {
            ForeignQueue::Zset => cmd.arg(key).arg(0).arg(n - 1),
            ForeignQueue::List => cmd.arg(key).arg(-n).arg(-1),
        };
        let mut entries: Vec<Vec<u8>> = cmd
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read", key))?;
        if kind == ForeignQueue::List {
            entries.reverse();
        }
        Ok(entries)
    }

    /// Converts entries set aside, in one step: each becomes its request
    /// in the queue (not filtered again) or its dead letter, only if it is
    /// still there; in a sharded spider a request of another shard goes to
    /// this shard's outbox for it instead (see `import_queue.lua`).
    pub async fn import_scrapy_entries(
        &self,
        kind: ForeignQueue,
        entries: Vec<Import>,
    ) -> Result<Imported> {
        if entries.is_empty() {
            return Ok(Imported::default());
        }
        let k = &self.keys;
        let args = ImportArgs {
            kind: kind.as_str().to_string(),
            wake: k.wake.clone(),
        };
        let mut inv = SCRIPTS.import_queue.call(k, self.sink.sink, args);
        for to in self.shard.iter().flat_map(|place| place.others()) {
            inv.more_key(&k.outbox(to));
        }
        for import in entries {
            inv.record(self.import_record(import));
        }
        let (queued, dead, handed) = inv
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("import scrapy-redis requests from", &k.scrapy_queue))?;
        Ok(Imported {
            queued,
            dead,
            handed,
        })
    }

    fn import_record(&self, import: Import) -> ImportRecord {
        let key = &self.keys.requests;
        let request = import.outcome.and_then(|r| match encode(&r) {
            Some(json) => Ok((r, json)),
            None => Err(DeadLetter::new(
                key,
                &r.url,
                &format!(
                    "scrapy-redis request not queued: over the {}-byte limit as JSON",
                    super::MAX_REQUEST_BYTES
                ),
            )),
        });
        let (outcome, priority, json, token) = match request {
            Ok((r, json)) => {
                let priority = clamped(r.priority).to_string();
                match self.shard.and_then(|p| Some((p, p.elsewhere(&r)?))) {
                    Some((place, to)) => (
                        (place.position_of(to) + 1).to_string(),
                        priority,
                        json,
                        super::outbox::hand_token(&self.worker),
                    ),
                    None => ("req".to_string(), priority, json, String::new()),
                }
            }
            Err(letter) => (
                "dead".to_string(),
                String::new(),
                to_json(&letter),
                String::new(),
            ),
        };
        ImportRecord {
            entry: import.entry,
            outcome: outcome.into_bytes(),
            priority: priority.into_bytes(),
            json: json.into_bytes(),
            token: token.into_bytes(),
        }
    }

    /// The dead letters of refused imports that kept their entry whole:
    /// each as stored, read, and its entry.
    pub async fn refused_imports(&self) -> Result<Vec<(String, DeadLetter, Vec<u8>)>> {
        let stored: Vec<String> = redis::cmd("LRANGE")
            .arg(&self.keys.dead)
            .arg(0)
            .arg(-1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read the dead letters in", &self.keys.dead))?;
        Ok(stored
            .into_iter()
            .filter_map(|json| {
                let letter: DeadLetter = serde_json::from_str(&json).ok()?;
                if letter.key != self.keys.requests {
                    return None;
                }
                let entry = letter.original_entry()?;
                Some((json, letter, entry))
            })
            .collect())
    }

    /// Moves a refused import back among the entries set aside, in one
    /// step (see `import_retry.lua`): true when moved, false when another
    /// retry took it first; an error while an import of a list queue is
    /// under way.
    pub async fn retry_refused_import(&self, letter: &str, entry: &[u8]) -> Result<bool> {
        let args = ImportRetryArgs {
            letter: letter.as_bytes().to_vec(),
            entry: entry.to_vec(),
        };
        let moved: i64 = SCRIPTS
            .import_retry
            .call(&self.keys, self.sink.sink, args)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err(
                "bring a refused import back to",
                &self.keys.scrapy_queue,
            ))?;
        if moved < 0 {
            return Err(super::FrontierError {
                op: "bring a refused import back to",
                key: self.keys.scrapy_queue.clone(),
                cause: redis::RedisError::from((
                    redis::ErrorKind::ClientError,
                    "an import of a list queue is under way",
                    "run crawlworker import-queue to finish it first, then --retry-dead"
                        .to_string(),
                )),
            });
        }
        Ok(moved == 1)
    }

    /// For a dry run, changing nothing: up to `n` entries of a scrapy-redis
    /// queue from position `from` of where they are, with how many
    /// positions the window covered (0: the end). In a zset that holds
    /// crawlworker's own requests too, those are skipped.
    pub async fn peek_scrapy_entries(
        &self,
        at: Where,
        from: usize,
        n: usize,
    ) -> Result<(Vec<Vec<u8>>, usize)> {
        let key = match at {
            Where::SetAside => &self.keys.scrapy_queue,
            Where::InQueue => &self.keys.requests,
        };
        let kind: String = redis::cmd("TYPE")
            .arg(key)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read the type of", key))?;
        let Some(kind) = ForeignQueue::parse(&kind) else {
            return Ok((Vec::new(), 0));
        };
        let command = match kind {
            ForeignQueue::Zset => "ZRANGE",
            ForeignQueue::List => "LRANGE",
        };
        let window: Vec<Vec<u8>> = redis::cmd(command)
            .arg(key)
            .arg(from)
            .arg(from + n.max(1) - 1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read", key))?;
        let covered = window.len();
        if at == Where::SetAside || kind == ForeignQueue::List || window.is_empty() {
            return Ok((window, covered));
        }
        let data: Vec<Option<Vec<u8>>> = redis::cmd("HMGET")
            .arg(&self.keys.request_data)
            .arg(&window)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read", &self.keys.request_data))?;
        let foreign = window
            .into_iter()
            .zip(data)
            .filter_map(|(id, data)| data.is_none().then_some(id))
            .collect();
        Ok((foreign, covered))
    }

    /// Whether the requests key holds a scrapy-redis queue a worker cannot
    /// lease from: a list, or a zset whose first member is a pickle with
    /// no request data.
    pub async fn holds_scrapy_queue(&self) -> Result<bool> {
        let (first, _) = self.peek_scrapy_entries(Where::InQueue, 0, 1).await?;
        let kind: String = redis::cmd("TYPE")
            .arg(&self.keys.requests)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read the type of", &self.keys.requests))?;
        Ok(kind == "list" || first.first().is_some_and(|e| e.first() == Some(&0x80)))
    }
}
