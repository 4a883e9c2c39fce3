//! A paced host's backlog waits out of the other hosts' way. A lease takes
//! requests in queue order, but one whose host's next politeness slot is out
//! of its reach (further than `max_wait`, or past the slots the crew may
//! reserve ahead, see [`super::fairness`]) cannot go yet. Left at its place,
//! such requests would stand at the queue's head: a lease scans only a few
//! times what it asks for, so a slow or backed-off host's thousands of
//! requests would hide every other host's work behind them, new start pages
//! included, for as long as that host's pace takes to work through them
//! (as a single FIFO queue does in scrapy-redis; Heritrix, StormCrawler and
//! Frontera keep a queue per host for the same reason).
//!
//! Such a request is *parked*: it stays queued, behind every request that
//! is not (so `status` and `--until-drained` count it as queued), and its
//! host keeps it in a queue of its own, in queue order. When the host's
//! turn comes ([`next_look`]), the host's next requests go back to their
//! places, as many as its slots within reach then ([`returning`]), and the
//! rest wait for the next turn: a host that recovers from a back-off gets
//! its requests back at its new pace, and a backlog of any depth costs a
//! few moves per request, not one per lease that meets it.
//!
//! This module is the rule's reference: the local backend runs it, the
//! Redis scripts the same arithmetic (`PARKING` in
//! `redis/scripts/lib/leasing.lua`, with the constants generated from here).

/// How many queue entries one lease may park beyond those it scans anyway
/// (four times what it asks for): a host's backlog at the head of the queue
/// is moved out of the way in a few calls, each of bounded cost, however
/// deep it is.
pub const PARK_SCAN: usize = 512;

/// The most requests of one host that go back to the queue at its turn.
pub const RETURN_MAX: u64 = 16;

/// The queue score of a parked request in Redis: behind every request that
/// is not (queue scores stay within ±2^52), and exact in a double.
pub const PARKED_SCORE: u64 = 8_000_000_000_000_000;

// A parked request's score is behind every queue score, and exact in a
// double (checked when the crate compiles).
const _: () = {
    let last_queue_score = (super::MAX_PRIORITY as u64 + 1) * (1 << 40);
    assert!(PARKED_SCORE > last_queue_score && PARKED_SCORE < 1 << 53);
};

/// How many of a host's parked requests go back to the queue at its turn:
/// its slots within `max_wait` (ms), the next being `ahead` ms away and
/// `spacing` ms apart; at least one, at most [`RETURN_MAX`].
pub fn returning(max_wait: u64, ahead: u64, spacing: u64) -> u64 {
    let within = max_wait.saturating_sub(ahead) / spacing.max(1) + 1;
    within.clamp(1, RETURN_MAX)
}

/// When a host whose `returned` requests went back to the queue at `now`
/// has its next turn (ms): once their slots, `spacing` ms apart, have
/// passed.
pub fn next_look(now: u64, returned: u64, spacing: u64) -> u64 {
    now + returned * spacing.max(1)
}

/// The rule's constants for the scripts (generated, so the two never
/// disagree), in the table that also holds the scripts' parking helpers:
/// a script sent with `EVALSHA` has room for 200 locals in all.
pub fn lua_constants() -> String {
    format!(
        "local PARKING = {{SCAN = {PARK_SCAN}, RETURN_MAX = {RETURN_MAX}, SCORE = {PARKED_SCORE}, back = 0}}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_gets_back_the_requests_its_slots_within_reach_can_take() {
        // 15 s of reach, 200 ms apart, the next slot now: 76 slots, 16 go.
        assert_eq!(returning(15_000, 0, 200), RETURN_MAX);
        // A host backed off to 10 s whose next slot is 8 s away: one.
        assert_eq!(returning(15_000, 8_000, 10_000), 1);
        assert_eq!(returning(15_000, 4_000, 10_000), 2);
        // A host held beyond reach (a Retry-After) still gets one: the
        // lease parks it again if it must.
        assert_eq!(returning(15_000, 60_000, 1_000), 1);
        // Unpaced: as many as may go.
        assert_eq!(returning(15_000, 0, 0), RETURN_MAX);
        // Its next turn comes once those slots have passed.
        assert_eq!(next_look(1_000, 16, 200), 4_200);
        assert_eq!(next_look(1_000, 16, 0), 1_016);
    }
}
