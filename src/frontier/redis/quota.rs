//! `max_pages` over a sharded spider's shards (see `docs/scaling.md`,
//! "max_pages over shards"). Each shard leases under a cap of its own
//! (`page_cap` in `scripts/lib/leasing.lua`), its share of the limit to
//! begin with, and the caps and the moves under way add up to the limit:
//! so the shards together never lease more than it, each in its own one
//! step. What a shard cannot use (its cap less its pages and what it has
//! queued) moves to a shard that has more queued than its cap leaves it,
//! in three steps:
//!
//! 1. **Give** (`quota_give.lua`, on the source): the cap is cut and the
//!    move noted in the source's control hash, with a token of its own.
//! 2. **Take** (`quota_take.lua`, on the target): the cap is raised,
//!    unless the target's inbox has the token (it took this move before).
//! 3. **Done** (`HDEL` of the note on the source).
//!
//! A mover that dies after giving leaves the note; any worker finishes
//! the move from it after [`UNFINISHED_AFTER`]. Meanwhile that part of
//! the limit is in no cap, so the crawl may lease fewer pages for that
//! while, never more. Every worker of a sharded spider with `max_pages`
//! looks at the caps every [`KEEPER_EVERY`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::protocol::{QuotaGiveArgs, QuotaTakeArgs};
use super::{err, RedisFrontier, Result, SCRIPTS};
use crate::stats;

/// How often every worker looks at the shards' caps.
pub const KEEPER_EVERY: Duration = Duration::from_secs(1);

/// How old a move's note is before another worker finishes it: its own
/// mover finishes it within a few round trips.
pub const UNFINISHED_AFTER: Duration = Duration::from_secs(10);

/// Numbers this process's moves of the limit, for their tokens.
static MOVES: AtomicU64 = AtomicU64::new(0);

/// What one shard's cap allows, read at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapReading {
    /// Its cap (its share of the limit, before its first lease made it).
    pub cap: i64,
    /// Pages it counts: responses received and requests in flight.
    pub used: i64,
    /// Requests queued on it.
    pub queued: i64,
    /// Moves it gave and nobody finished: (target shard, token, amount,
    /// when, ms).
    pub unfinished: Vec<(usize, String, i64, u64)>,
}

/// One move of the limit: from a shard, to another, how much.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapMove {
    pub from: usize,
    pub to: usize,
    pub amount: i64,
}

/// The moves that let the shards with more queued than their caps leave
/// them lease it, from the shards whose caps exceed their pages and queue
/// (the neediest first, each from the shards with most to spare).
pub fn plan_moves(readings: &[CapReading]) -> Vec<CapMove> {
    let mut spare: Vec<(usize, i64)> = readings
        .iter()
        .enumerate()
        .map(|(i, r)| (i, r.cap - r.used - r.queued))
        .filter(|(_, s)| *s > 0)
        .collect();
    spare.sort_by_key(|(_, s)| -s);
    let mut needs: Vec<(usize, i64)> = readings
        .iter()
        .enumerate()
        .map(|(i, r)| (i, r.queued - (r.cap - r.used).max(0)))
        .filter(|(_, n)| *n > 0)
        .collect();
    needs.sort_by_key(|(_, n)| -n);
    let mut moves = Vec::new();
    for (to, mut need) in needs {
        for (from, left) in spare.iter_mut() {
            let amount = need.min(*left);
            if amount > 0 {
                moves.push(CapMove {
                    from: *from,
                    to,
                    amount,
                });
                need -= amount;
                *left -= amount;
            }
        }
    }
    moves
}

impl RedisFrontier {
    /// This shard's cap, pages, queue and unfinished moves, in one atomic
    /// step (`MULTI`).
    pub async fn cap_reading(&self) -> Result<CapReading> {
        let k = &self.keys;
        let (control, responses, inflight, queued): (
            HashMap<String, String>,
            Option<i64>,
            i64,
            i64,
        ) = redis::pipe()
            .atomic()
            .hgetall(&k.control)
            .hget(&k.stats, stats::RESPONSE_RECEIVED_COUNT.name)
            .zcard(&k.inflight)
            .zcard(&k.requests)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read the page cap in", &k.control))?;
        let cap = match control.get("quota_cap").and_then(|c| c.parse().ok()) {
            Some(cap) => cap,
            None => self.first_share(),
        };
        let unfinished = control
            .iter()
            .filter_map(|(field, value)| unfinished_move(field, value))
            .collect();
        Ok(CapReading {
            cap,
            used: responses.unwrap_or(0) + inflight,
            queued,
            unfinished,
        })
    }

    /// Whether a sharded crawl that counts `pages` in all (responses
    /// received and requests in flight, summed over the shards) has
    /// reached `max_pages`, when a shard's lease was refused (`flagged`):
    /// each shard's flag says only that its own cap ran out, which a move
    /// may raise.
    pub fn limit_reached(&self, pages: u64, flagged: bool) -> bool {
        flagged && self.quota.max_pages > 0 && pages >= self.quota.max_pages
    }

    /// The share of the limit this shard starts with (`shard_share` in
    /// `lib/leasing.lua`).
    fn first_share(&self) -> i64 {
        let max = self.quota.max_pages as i64;
        match self.shard {
            Some(p) => max / p.count as i64 + i64::from((p.index as i64) < max % p.count as i64),
            None => max,
        }
    }

    /// Gives shard `to` up to `want` of this shard's cap (step 1); returns
    /// the move's token and how much it gave (0: nothing to spare).
    pub async fn give_cap(&self, to: usize, want: i64) -> Result<(String, i64)> {
        let token = format!(
            "quota:{}#{}",
            self.worker,
            MOVES.fetch_add(1, Ordering::Relaxed)
        );
        let args = QuotaGiveArgs {
            max_pages: self.quota.max_pages.to_string(),
            quota_shard: self.quota_shard(),
            to: to.to_string(),
            want: want.to_string(),
            token: token.clone(),
        };
        let given: i64 = SCRIPTS
            .quota_give
            .call(&self.keys, self.sink.sink, args)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("give part of the page cap in", &self.keys.control))?;
        Ok((token, given))
    }

    /// Takes a move of `amount` with `token` into this shard's cap (step
    /// 2), once; returns whether it took it now.
    pub async fn take_cap(&self, token: &str, amount: i64) -> Result<bool> {
        let args = QuotaTakeArgs {
            max_pages: self.quota.max_pages.to_string(),
            quota_shard: self.quota_shard(),
            token: token.to_string(),
            amount: amount.to_string(),
            wake: self.keys.wake.clone(),
        };
        let took: i64 = SCRIPTS
            .quota_take
            .call(&self.keys, self.sink.sink, args)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("take part of the page cap in", &self.keys.control))?;
        Ok(took == 1)
    }

    /// Forgets the note of a move to shard `to` its target took (step 3).
    pub async fn finish_cap_move(&self, to: usize, token: &str) -> Result<()> {
        redis::cmd("HDEL")
            .arg(&self.keys.control)
            .arg(format!("quota_out:{to}:{token}"))
            .query_async::<i64>(&mut self.conn.clone())
            .await
            .map(drop)
            .map_err(err("finish a move of the page cap in", &self.keys.control))
    }
}

/// A control hash field of a move not finished: (target, token, amount,
/// when).
fn unfinished_move(field: &str, value: &str) -> Option<(usize, String, i64, u64)> {
    let rest = field.strip_prefix("quota_out:")?;
    let (to, token) = rest.split_once(':')?;
    let (amount, when) = value.split_once('|')?;
    Some((
        to.parse().ok()?,
        token.to_string(),
        amount.parse().ok()?,
        when.parse().ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(cap: i64, used: i64, queued: i64) -> CapReading {
        CapReading {
            cap,
            used,
            queued,
            unfinished: Vec::new(),
        }
    }

    #[test]
    fn a_shard_with_more_queued_than_its_cap_gets_what_the_others_cannot_use() {
        // Shard 0 has its whole crawl queued; 1 and 2 have nothing.
        let moves = plan_moves(&[reading(9, 0, 40), reading(8, 0, 0), reading(8, 2, 1)]);
        assert_eq!(
            moves,
            vec![
                CapMove {
                    from: 1,
                    to: 0,
                    amount: 8
                },
                CapMove {
                    from: 2,
                    to: 0,
                    amount: 5
                },
            ]
        );
    }

    #[test]
    fn caps_that_their_shards_can_use_stay() {
        assert!(plan_moves(&[reading(5, 5, 3), reading(5, 0, 5)]).is_empty());
        assert!(plan_moves(&[reading(5, 5, 0), reading(5, 5, 0)]).is_empty());
        // A need is met only as far as others can spare.
        assert_eq!(
            plan_moves(&[reading(5, 5, 10), reading(5, 0, 3)]),
            vec![CapMove {
                from: 1,
                to: 0,
                amount: 2
            }]
        );
    }

    #[test]
    fn an_unfinished_moves_note_is_read_back() {
        assert_eq!(
            unfinished_move("quota_out:2:quota:w#7", "5|1700000000000"),
            Some((2, "quota:w#7".to_string(), 5, 1_700_000_000_000))
        );
        assert_eq!(unfinished_move("quota_cap", "5"), None);
        assert_eq!(unfinished_move("quota_out:x:t", "5|1"), None);
    }
}
