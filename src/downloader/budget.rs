//! The worker's memory budget (`download_memory_budget`): the bytes of
//! every body being downloaded, or downloaded and not yet extracted, and of
//! every page's output (its items and links) from its extraction until its
//! commit, by all the spiders of one worker process, together.
//!
//! A download opens a [`Reservation`] with its *claim*, the most it may
//! come to hold (its Content-Length, else `download_maxsize`, never more
//! than the whole budget), and grows it as its bytes arrive, before it
//! holds them. A growth the budget cannot give now waits (it never fails)
//! until other reservations are dropped: the reservation travels with the
//! body ([`Held`]) and goes when the page's extraction has dropped it. The
//! wait is part of the download, within its `download_timeout`.
//!
//! Waiting could deadlock if every download held part of the budget and
//! waited for more. So a growth is granted only when, afterwards, the
//! downloads could still all finish one after another, each taking what
//! the ones before it gave back (the banker's algorithm over the claims):
//! some download's remaining claim always fits. A single page larger than
//! the whole budget cannot be held; it fails as too large, naming the
//! budget ([`OverBudget`]).
//!
//! What extraction builds from a body (the decoded text, the parsed
//! document) is not in the budget but beside it: a [`ParseGate`] of the
//! same size lets pages be parsed at once only while their estimated
//! parsed size ([`PARSE_FACTOR`] times the body) fits in it, so a few large
//! pages are parsed one after another; a page whose estimate is larger
//! than all of it is parsed alone. docs/memory.md gives the factors
//! measured.
//!
//! What the extraction gives (items, links) is made during the parse, in
//! its allowance; once the parse is done it is [charged](Budget::charge)
//! to the budget until the page is committed or dropped. That charge never
//! waits: the output exists already, and a page that had to wait for room
//! while holding its parse's allowance could wait on pages that wait for
//! that allowance. So it may take the budget past its total, a page whose
//! output is larger than the whole budget too. Then the budget gives no
//! bytes to downloads, and no parse starts ([`Budget::within`]), until
//! commits have brought it back within its total: what passes the total is
//! at most the outputs of the parses that were running when it filled.
//!
//! Why nothing deadlocks: a download waits for bytes held by bodies,
//! outputs or other downloads. An output is given back by its commit,
//! which waits for Redis only. A body is given back after its extraction,
//! which waits for the parse allowance (held by extractions, which wait
//! for nothing), for the budget to be within its total (which only
//! commits bring about) and for a CPU turn (held by extractions). None of
//! them waits for a download; and downloads among themselves keep the
//! banker's order above, in which a body whose download is done, or an
//! output, counts as able to finish.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// What parsing a page costs, in bytes per byte of its body, estimated on
/// the worst page measured (markup with an element every 64 bytes: about
/// 12×, docs/memory.md; plain text costs about 3.5×).
pub const PARSE_FACTOR: u64 = 12;

/// One worker's budget; shared by its spiders' downloaders.
pub struct Budget {
    /// The whole budget, in bytes.
    total: u64,
    state: Mutex<State>,
    /// Woken when bytes are given back.
    freed: Notify,
}

#[derive(Default)]
struct State {
    /// Bytes held by all reservations: past the total while outputs
    /// charged at once need more than was left.
    held: u64,
    /// Open reservations by id.
    claims: HashMap<u64, Claim>,
    next: u64,
}

#[derive(Debug, Clone, Copy)]
struct Claim {
    held: u64,
    /// The most it may hold.
    max: u64,
}

/// A body would need more than the whole budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverBudget {
    pub budget: u64,
    pub size: u64,
}

impl fmt::Debug for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("Budget")
            .field("total", &self.total)
            .field("held", &state.held)
            .field("reservations", &state.claims.len())
            .finish()
    }
}

impl Budget {
    /// A budget of `total` bytes.
    pub fn new(total: u64) -> Arc<Budget> {
        Arc::new(Budget {
            total,
            state: Mutex::new(State::default()),
            freed: Notify::new(),
        })
    }

    /// The whole budget, in bytes.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes held by reservations now (more than the total while outputs
    /// charged past it wait for their commits).
    pub fn held(&self) -> u64 {
        self.lock().held
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is consistent between statements: a panic elsewhere
        // cannot leave it half-changed.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens a reservation holding nothing yet, which may come to hold
    /// `claim` bytes (at most the whole budget).
    pub fn open(self: &Arc<Budget>, claim: u64) -> Reservation {
        let mut state = self.lock();
        let id = state.next;
        state.next += 1;
        state.claims.insert(
            id,
            Claim {
                held: 0,
                max: claim.min(self.total),
            },
        );
        Reservation {
            budget: self.clone(),
            id,
            held: 0,
        }
    }

    /// Charges a page's output of `bytes` (its items and links) at once,
    /// whatever is left, until the returned reservation is dropped: it
    /// never waits (see the module doc).
    pub fn charge(self: &Arc<Budget>, bytes: u64) -> Reservation {
        let mut reservation = self.open(0);
        let mut state = self.lock();
        state.held += bytes;
        if let Some(c) = state.claims.get_mut(&reservation.id) {
            *c = Claim {
                held: bytes,
                max: bytes,
            };
        }
        reservation.held = bytes;
        reservation
    }

    /// Waits until the bytes held are within the whole budget (outputs
    /// charged past it have been committed).
    pub async fn within(&self) {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            // Registered before looking, so a release in between wakes it.
            freed.as_mut().enable();
            if self.lock().held <= self.total {
                return;
            }
            freed.await;
        }
    }
}

impl State {
    /// Whether giving `extra` bytes to reservation `id` leaves an order in
    /// which every reservation can reach its claim (and then be dropped).
    fn safe_after(&self, id: u64, extra: u64, total: u64) -> bool {
        let available = total.saturating_sub(self.held);
        if extra > available {
            return false;
        }
        let mut work = available - extra;
        let mut left: Vec<Claim> = self
            .claims
            .iter()
            .map(|(&k, &c)| {
                if k == id {
                    Claim {
                        held: c.held + extra,
                        max: c.max.max(c.held + extra),
                    }
                } else {
                    c
                }
            })
            .collect();
        // Smallest remaining need first: if it does not fit, nothing does.
        left.sort_by_key(|c| c.max.saturating_sub(c.held));
        for c in left {
            if c.max.saturating_sub(c.held) > work {
                return false;
            }
            work += c.held;
        }
        true
    }
}

/// Bytes of the budget held for one body; given back when dropped.
pub struct Reservation {
    budget: Arc<Budget>,
    id: u64,
    held: u64,
}

impl fmt::Debug for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("held", &self.held)
            .finish()
    }
}

impl Reservation {
    /// Bytes held.
    pub fn held(&self) -> u64 {
        self.held
    }

    /// The whole budget it is part of, in bytes.
    pub fn budget_total(&self) -> u64 {
        self.budget.total
    }

    /// Grows the reservation to hold `bytes` in all, waiting while the
    /// budget cannot give them safely; fails only if `bytes` is more than
    /// the whole budget.
    pub async fn grow_to(&mut self, bytes: u64) -> Result<(), OverBudget> {
        let budget = self.budget.clone();
        if bytes > budget.total {
            return Err(OverBudget {
                budget: budget.total,
                size: bytes,
            });
        }
        if bytes <= self.held {
            return Ok(());
        }
        let extra = bytes - self.held;
        loop {
            let freed = budget.freed.notified();
            tokio::pin!(freed);
            // Registered before looking, so a release in between wakes it.
            freed.as_mut().enable();
            {
                let mut state = budget.lock();
                if state.safe_after(self.id, extra, budget.total) {
                    state.held += extra;
                    if let Some(c) = state.claims.get_mut(&self.id) {
                        c.held = bytes;
                        c.max = c.max.max(bytes);
                    }
                    self.held = bytes;
                    return Ok(());
                }
            }
            freed.await;
        }
    }

    /// The body is complete at `bytes`: the claim is what it holds, so
    /// other downloads no longer wait for it to grow.
    pub fn settle(&mut self) {
        let mut state = self.budget.lock();
        if let Some(c) = state.claims.get_mut(&self.id) {
            c.max = c.held;
        }
        drop(state);
        self.budget.freed.notify_waiters();
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut state = self.budget.lock();
        state.held -= self.held;
        state.claims.remove(&self.id);
        drop(state);
        self.budget.freed.notify_waiters();
    }
}

/// The reservation of a downloaded body, kept with it until the page is
/// done with (shared by the response's clones); nothing when the
/// downloader has no budget.
#[derive(Debug, Clone, Default)]
pub struct Held(Option<Arc<Reservation>>);

impl Held {
    pub fn new(reservation: Reservation) -> Held {
        Held(Some(Arc::new(reservation)))
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.0.as_ref().map_or(0, |r| r.held())
    }
}

/// The parses a worker runs at once, bounded by their estimated memory.
#[derive(Debug)]
pub struct ParseGate {
    /// One permit per KiB of the budget.
    permits: Arc<Semaphore>,
    kib: u32,
}

impl ParseGate {
    /// A gate for parses estimated at `budget` bytes in all.
    pub fn new(budget: u64) -> ParseGate {
        let kib = u32::try_from((budget >> 10).max(1)).unwrap_or(u32::MAX);
        ParseGate {
            permits: Arc::new(Semaphore::new(kib as usize)),
            kib,
        }
    }

    /// Waits until a body of `bytes` may be parsed; it may while the
    /// permit lives.
    pub async fn enter(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let estimate = (bytes as u64).saturating_mul(PARSE_FACTOR) >> 10;
        let kib = u32::try_from(estimate)
            .unwrap_or(u32::MAX)
            .clamp(1, self.kib);
        // The semaphore is never closed, so acquiring cannot fail.
        self.permits.clone().acquire_many_owned(kib).await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_growth_waits_for_bytes_given_back() {
        let budget = Budget::new(100);
        let mut a = budget.open(60);
        a.grow_to(60).await.unwrap();
        a.settle();
        let mut b = budget.open(60);
        let waiting = tokio::spawn(async move {
            b.grow_to(60).await.unwrap();
            b
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "60 + 60 bytes fit in 100");
        assert_eq!(budget.held(), 60);
        drop(a);
        let b = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the wait ends when a is dropped")
            .unwrap();
        assert_eq!((b.held(), budget.held()), (60, 60));
        drop(b);
        assert_eq!(budget.held(), 0);
    }

    #[tokio::test]
    async fn growing_downloads_never_deadlock() {
        // Two downloads of unknown length, each may reach 80 of 100: the
        // second may not take bytes the first needs to finish.
        let budget = Budget::new(100);
        let mut a = budget.open(80);
        let mut b = budget.open(80);
        a.grow_to(30).await.unwrap();
        b.grow_to(20).await.unwrap();
        // b to 40 would leave 30: a needs 50 more, b 40 more: stuck.
        let blocked = tokio::spawn(async move {
            b.grow_to(40).await.unwrap();
            b
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!blocked.is_finished());
        // a can still finish, and then b goes on.
        a.grow_to(80).await.unwrap();
        drop(a);
        let b = tokio::time::timeout(Duration::from_secs(5), blocked)
            .await
            .expect("b goes on once a is done")
            .unwrap();
        assert_eq!(b.held(), 40);
    }

    #[tokio::test]
    async fn large_pages_are_parsed_one_at_a_time() {
        let gate = ParseGate::new(120 << 20);
        let small = gate.enter(100 << 10).await;
        let large = gate.enter(8 << 20).await;
        let another = tokio::time::timeout(Duration::from_millis(50), gate.enter(8 << 20)).await;
        assert!(another.is_err(), "two 8 MiB parses fit in 120 MiB");
        // Larger than all of it: alone.
        drop((small, large));
        let huge = gate.enter(1 << 30).await;
        let tiny = tokio::time::timeout(Duration::from_millis(50), gate.enter(1)).await;
        assert!(tiny.is_err());
        drop(huge);
        assert!(gate.enter(1).await.is_some());
    }

    #[tokio::test]
    async fn an_output_is_charged_at_once_and_holds_back_downloads_and_parses() {
        let budget = Budget::new(100);
        let mut body = budget.open(60);
        body.grow_to(60).await.unwrap();
        body.settle();
        // Past the total, at once: the output exists already.
        let output = budget.charge(80);
        assert_eq!(budget.held(), 140);
        let mut next = budget.open(30);
        let waiting = tokio::spawn(async move {
            next.grow_to(30).await.unwrap();
            next
        });
        let parse = {
            let budget = budget.clone();
            tokio::spawn(async move { budget.within().await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "a download grew past the total");
        assert!(!parse.is_finished(), "a parse started past the total");
        // Its commit gives it back: both go on.
        drop(output);
        let next = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the download goes on once the output is committed")
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), parse)
            .await
            .expect("the parse starts once the budget is within its total")
            .unwrap();
        assert_eq!(budget.held(), 90);
        // An output larger than the whole budget is charged too.
        let huge = budget.charge(1000);
        assert_eq!(budget.held(), 1090);
        drop((huge, next, body));
        assert_eq!(budget.held(), 0);
    }

    #[tokio::test]
    async fn a_body_larger_than_the_budget_is_refused() {
        let budget = Budget::new(100);
        let mut a = budget.open(1000);
        assert_eq!(
            a.grow_to(101).await,
            Err(OverBudget {
                budget: 100,
                size: 101
            })
        );
        a.grow_to(100).await.unwrap();
    }
}
