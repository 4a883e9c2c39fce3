//! The fair share of leases: how many requests one worker may hold when
//! several crawl together. Every worker that leased or committed within a
//! lease (`lease_timeout`) is in the crawl's crew; the requests the crawl
//! has out (queued or leased) are divided equally among it, and a worker
//! leases no more than its share less what it holds already.
//!
//! Without it the first worker of a crawl of one host (whose politeness
//! slots are the cluster's, not any worker's) leased everything it had
//! room for, waiting for those slots, while its peers sat idle, and a
//! SIGKILL of that worker stranded all of it for a lease. This module is
//! the rule's reference; the local backend runs it, and the Redis scripts
//! run the same arithmetic (`fair_share` and `beyond_share` in
//! `scripts/lib/leasing.lua`, with the constants generated from here).
//!
//! A paced host's politeness slots are shared the same way
//! ([`beyond_share`]): with others in the crew, a worker reserves only a
//! few of the host's next slots, so a one-host crawl's slots go round.
//! It owns no state: who is in the crew is each backend's.

/// A paced host's politeness slots a worker reserves ahead at most, per
/// worker of the crew and per lease (see [`beyond_share`]).
pub const SLOTS_AHEAD: u64 = 2;

/// A worker holding more than this many times its fair share is asked to
/// hand back what it cannot start (see [`over_share`]).
pub const HAND_BACK_OVER: usize = 2;

/// The status of a commit's reply that asks its worker to hand back what
/// it cannot start (a plain commit's is 1; see `scripts/commit.lua`).
pub const HAND_BACK_REPLY: i64 = 2;

/// What a lease that finds its worker joining the crew publishes on the
/// spider's wake channel (see [`CrewGrew`]).
pub const CREW_GREW_MARK: &str = "crew:";

/// The rule's constants as Lua locals, for the scripts (generated, so the
/// two never disagree).
pub fn lua_constants() -> String {
    format!(
        "local SLOTS_AHEAD = {SLOTS_AHEAD}\nlocal HAND_BACK_OVER = {HAND_BACK_OVER}\n\
         local HAND_BACK_REPLY = {HAND_BACK_REPLY}\nlocal CREW_GREW_MARK = '{CREW_GREW_MARK}'\n"
    )
}

/// A worker joined the crew and its lease came back short: the shares
/// are smaller now. Published by that lease (`announce_joined` in
/// `scripts/lib/leasing.lua`) as [`CREW_GREW_MARK`], then `out:crew:`
/// and the queue key (a sharded spider's shards share one wake channel),
/// so that a worker holding over [`HAND_BACK_OVER`] times the new share
/// hands back what it cannot start at once ([`over_share`]), rather than
/// at its next commit, a response later: the first worker of a crawl
/// leases the start pages before its peers have joined, and a worker
/// added to a running crawl would otherwise wait that long for work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrewGrew {
    /// The requests queued and leased at that moment.
    pub out: usize,
    /// The crew, the new worker included.
    pub crew: usize,
    /// The queue key of the shard whose crew it is.
    pub queue: String,
}

impl CrewGrew {
    /// Reads a wake channel's message; `None` when it is not one.
    pub fn parse(payload: &[u8]) -> Option<CrewGrew> {
        let rest = std::str::from_utf8(payload.strip_prefix(CREW_GREW_MARK.as_bytes())?).ok()?;
        let mut parts = rest.splitn(3, ':');
        let out = parts.next()?.parse().ok()?;
        let crew = parts.next()?.parse().ok()?;
        let queue = parts.next()?.to_string();
        Some(CrewGrew { out, crew, queue })
    }

    /// Whether a worker holding `held` leases of this shard holds over
    /// its share now.
    pub fn over_share(&self, held: usize) -> bool {
        over_share(self.out, self.crew, held)
    }
}

/// What a lease does with a request of a paced host, given the crew's
/// share of the host's slots (see [`beyond_share`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotShare {
    /// Lease it.
    Lease,
    /// This lease took its share of the host's slots: leave it queued for
    /// another.
    Left,
    /// The crew's slots ahead of now are all taken: park it until this
    /// time (ms), when they come within reach again (see
    /// [`super::parking`]).
    ParkUntil(u64),
}

/// What a lease does with a request for a host whose slots are `spacing`
/// ms apart, and whose next slot is free at `next_free` (ms, at `now`):
/// with others in the crew (`crew` > 1), one lease reserves at most
/// [`SLOTS_AHEAD`] of a paced host's slots (`taken` so far), and none
/// beyond `SLOTS_AHEAD` slots per worker of the crew ahead of now. A host's
/// slots are the cluster's: without this, the first worker to lease took a
/// one-host crawl's next slots for half a lease ahead while its peers had
/// nothing to fetch. An unpaced host has no slots to share.
pub fn beyond_share(spacing: u64, next_free: u64, now: u64, crew: usize, taken: u64) -> SlotShare {
    if crew <= 1 || spacing == 0 {
        return SlotShare::Lease;
    }
    let ahead = SLOTS_AHEAD * crew as u64 * spacing;
    if next_free.saturating_sub(now) > ahead {
        SlotShare::ParkUntil(next_free - ahead)
    } else if taken >= SLOTS_AHEAD {
        SlotShare::Left
    } else {
        SlotShare::Lease
    }
}

/// How many more requests a worker holding `held` leases may lease, when
/// `out` requests are queued or leased and `crew` workers share them.
pub fn fair_room(out: usize, crew: usize, held: usize) -> usize {
    out.div_ceil(crew.max(1)).saturating_sub(held)
}

/// Whether a worker holding `held` leases holds over [`HAND_BACK_OVER`]
/// times its share of the `out` requests a crew of `crew` shares: it
/// leased them when the crew was smaller (the first worker of a crawl,
/// before its peers joined) or the crawl had more out. It then hands back
/// the requests it cannot start now (those waiting for one of its own
/// download slots), so that a peer with room starts them: a commit says
/// so ([`HAND_BACK_REPLY`]), and the worker's requests waiting for a slot
/// go back to the queue ([`super::HandBack`]). Those downloading stay.
/// Alone, a worker's share is everything.
pub fn over_share(out: usize, crew: usize, held: usize) -> bool {
    crew > 1 && held > HAND_BACK_OVER * out.div_ceil(crew)
}

#[cfg(test)]
mod tests {
    use super::{fair_room, over_share};

    #[test]
    fn a_worker_over_twice_its_share_hands_back() {
        // The first worker took 16 of 18 start pages; 16 workers now.
        assert!(over_share(18, 16, 16));
        // Twice its share is still its own; alone, everything is.
        assert!(!over_share(18, 16, 4));
        assert!(over_share(18, 16, 5));
        assert!(!over_share(18, 1, 18));
        // A busy crawl's lease-ahead: 13 of 200 among 16.
        assert!(!over_share(200, 16, 13));
    }

    #[test]
    fn a_grown_crew_is_read_from_its_message() {
        use super::CrewGrew;
        let grown = CrewGrew::parse(b"crew:18:3:bbs:requests{x}:a").expect("a crew message");
        assert_eq!(
            grown,
            CrewGrew {
                out: 18,
                crew: 3,
                queue: "bbs:requests{x}:a".into()
            }
        );
        assert!(grown.over_share(13) && !grown.over_share(12));
        for other in [
            &b"3"[..],
            b"control",
            b"handed:1:q",
            b"crew:x:3:q",
            b"crew:18:3",
        ] {
            assert_eq!(CrewGrew::parse(other), None, "{other:?}");
        }
    }

    #[test]
    fn a_paced_hosts_next_slots_are_left_to_the_crew() {
        use super::{beyond_share, SlotShare};
        // Alone, or on an unpaced host: nothing is left.
        assert_eq!(beyond_share(100, 10_000, 0, 1, 5), SlotShare::Lease);
        assert_eq!(beyond_share(0, 10_000, 0, 3, 5), SlotShare::Lease);
        // Three workers, 100 ms apart: six slots (600 ms) ahead at most,
        // two per lease; past them, parked until they are in reach.
        assert_eq!(beyond_share(100, 600, 0, 3, 0), SlotShare::Lease);
        assert_eq!(beyond_share(100, 601, 0, 3, 0), SlotShare::ParkUntil(1));
        assert_eq!(beyond_share(100, 0, 0, 3, 1), SlotShare::Lease);
        assert_eq!(beyond_share(100, 0, 0, 3, 2), SlotShare::Left);
    }

    #[test]
    fn a_worker_leases_up_to_its_share_of_what_is_out() {
        // Alone, everything; three workers on 75 requests, 25 each.
        assert_eq!(fair_room(75, 1, 0), 75);
        assert_eq!(fair_room(75, 3, 0), 25);
        // What it holds counts against its share, leased or not.
        assert_eq!(fair_room(75, 3, 20), 5);
        assert_eq!(fair_room(75, 3, 30), 0);
        // A share is rounded up: every worker may take the last one.
        assert_eq!(fair_room(1, 16, 0), 1);
        assert_eq!(fair_room(0, 4, 0), 0);
        // No crew recorded yet counts as this worker alone.
        assert_eq!(fair_room(10, 0, 0), 10);
    }
}
