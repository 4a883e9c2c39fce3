//! The dupefilter's modes: how a spider remembers the requests it has seen.
//! Every mode is checked and set inside the step that enqueues a request
//! (`scripts/dupefilter.lua`), with no extra round trip.
//!
//! - [`Dupefilter::Exact`] (the default): scrapy-redis's SET of hex
//!   fingerprints, which a scrapy-redis cluster can share. About 85 bytes
//!   per entry.
//! - [`Dupefilter::Compact`]: still exact, in one HASH whose 65,536 fields
//!   are the fingerprints' first two bytes and whose values pack the other
//!   18 bytes of each fingerprint. About 20 bytes per entry once the
//!   buckets fill (a few MB of buckets before that).
//! - [`Dupefilter::Bloom`]: Bloom filters on Redis bitmaps, sized for
//!   `capacity` entries at `error_rate`; about 1.8 bytes per entry at 0.001
//!   (a large filter is cut into pieces that fill the allocator's blocks
//!   exactly: [`bloom_plan`]).
//!   A false positive skips a URL that was never crawled, silently; it
//!   happens at about the error rate. When a filter holds `capacity`
//!   entries the next of a chain follows it ([`bloom_chain`]), so no
//!   filter is ever overfilled and the chain stays under twice the error
//!   rate.
//! - [`Dupefilter::Expiring`]: for incremental crawls, a fingerprint is
//!   forgotten about `ttl` after it was last seen (time buckets of `ttl/4`,
//!   each a SET that Redis expires on its own: no scan). With `refresh`, a
//!   link seen again is remembered for another `ttl`.
//!
//! The dupefilter's meta hash records the mode it was made in, so a spider
//! whose mode changed is refused instead of silently mixing two layouts.

use std::time::Duration;

/// A spider's dupefilter.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Dupefilter {
    #[default]
    Exact,
    Compact,
    Bloom {
        capacity: u64,
        error_rate: f64,
    },
    Expiring {
        ttl: Duration,
        refresh: bool,
    },
}

/// The bits and hash functions of a Bloom filter for `capacity` entries at
/// `error_rate` (the textbook optimum).
pub fn bloom_size(capacity: u64, error_rate: f64) -> (u64, u32) {
    let n = capacity.max(1) as f64;
    let p = error_rate.clamp(1e-12, 0.5);
    let ln2 = std::f64::consts::LN_2;
    let m = (-n * p.ln() / (ln2 * ln2)).ceil().max(64.0);
    let k = ((m / n) * ln2).round().clamp(1.0, 30.0);
    (m as u64, k as u32)
}

/// How a Bloom filter is laid out in Redis: `pieces` strings of
/// `piece_bits` bits each, `hashes` bits per entry, all in the piece the
/// entry's fingerprint picks; full at `capacity` entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BloomPlan {
    pub piece_bits: u64,
    pub pieces: u64,
    pub hashes: u32,
    pub capacity: u64,
}

/// Bytes Redis adds to a string of 64 KiB or more (its `sdshdr32` header
/// and the closing NUL): a piece this much under a power of two fills its
/// allocation exactly.
const STRING_OVERHEAD: u64 = 10;
/// A filter up to this size is one string (what the allocator rounds it up
/// to is at most a quarter of this); larger pieces are at least 4 KiB.
const ONE_PIECE_BYTES: u64 = 1 << 16;
/// A larger filter is cut into at least this many pieces, so the last
/// piece's rounding costs at most 1/16 of the filter.
const MIN_PIECES: u64 = 16;
/// The largest piece allocation: Redis strings hold at most 512 MiB.
const MAX_PIECE_BYTES: u64 = 1 << 29;

/// The Bloom filter for `capacity` entries at `error_rate`, and how it is
/// cut into Redis strings. Redis's allocator (jemalloc) hands out memory in
/// size classes a quarter of a power of two apart, so one 17.1 MiB bitmap
/// costs 20 MiB; pieces of exactly a power of two (less Redis's string
/// header) cost what they hold, and the last piece's spare bits are kept
/// (the filter is rounded up to whole pieces, a little under its error
/// rate). Each entry's bits lie in one piece, picked from its fingerprint,
/// so a check or set is one `BITFIELD` whatever the number of pieces; with
/// every piece holding thousands of entries, that costs nothing measurable
/// in false positives. There is no size limit: a filter larger than a
/// Redis string is just more pieces.
pub fn bloom_plan(capacity: u64, error_rate: f64) -> BloomPlan {
    let (m, hashes) = bloom_size(capacity, error_rate);
    let capacity = capacity.max(1);
    let bytes = m.div_ceil(8);
    if bytes <= ONE_PIECE_BYTES {
        return BloomPlan {
            piece_bits: m,
            pieces: 1,
            hashes,
            capacity,
        };
    }
    let mut alloc = 1u64 << (bytes / MIN_PIECES).ilog2();
    alloc = alloc.min(MAX_PIECE_BYTES);
    let payload = alloc - STRING_OVERHEAD;
    BloomPlan {
        piece_bits: payload * 8,
        pieces: bytes.div_ceil(payload),
        hashes,
        capacity,
    }
}

/// How many filters of a Bloom chain the spec plans: 2^24 - 1 times the
/// first filter's capacity (a chain that reached its end would keep its
/// last filter; long before, Redis's memory refuses the next filter, see
/// `bloom_grow.lua`). Growing, not repeating, keeps lookups to a filter per
/// doubling of the entries.
const CHAIN_PLANNED: u32 = 24;

/// The least capacity a filter at `error_rate` keeps its rate with. The
/// scripts derive every bit of an entry from two hashes modulo the
/// filter's `m` bits (double hashing), so there are only `m²` sets of bits,
/// and a filter of `n` entries also takes about `n / m²` of never-seen
/// entries for seen. That stays under a sixteenth of the error rate from
/// this capacity on (for 0.001: 78; for a millionth: 19,351); a chain whose
/// first filter is at least this holds it in every later filter too (their
/// capacity doubles as their error rate halves).
pub fn least_capacity(error_rate: f64) -> u64 {
    let p = error_rate.clamp(1e-12, 0.5);
    let ln2 = std::f64::consts::LN_2;
    let bits_per_entry = -p.ln() / (ln2 * ln2);
    (16.0 / (p * bits_per_entry * bits_per_entry)).ceil() as u64
}

/// A Bloom dupefilter's chain: the first filter holds `capacity` entries at
/// `error_rate`; when it is full the next takes twice as many at half the
/// error rate, and so on (a scalable Bloom filter, Almeida et al. 2007,
/// growth 2 and tightening ½). Lookups ask every filter, so the chain's
/// false-positive rate stays under `2 × error_rate` however long it grows,
/// and it grows in a few steps.
/// A capacity below [`least_capacity`] is raised to it.
pub fn bloom_chain(capacity: u64, error_rate: f64) -> Vec<BloomPlan> {
    let capacity = capacity.max(least_capacity(error_rate));
    (0..CHAIN_PLANNED)
        .map(|i| {
            bloom_plan(
                capacity.saturating_mul(1 << i),
                error_rate / f64::from(1u32 << i),
            )
        })
        .collect()
}

impl Dupefilter {
    /// The mode's name, as the `dupefilter` setting writes it.
    pub fn mode(&self) -> &'static str {
        match self {
            Dupefilter::Exact => "exact",
            Dupefilter::Compact => "compact",
            Dupefilter::Bloom { .. } => "bloom",
            Dupefilter::Expiring { .. } => "expiring",
        }
    }

    /// What the scripts receive (see `scripts/dupefilter.lua`).
    pub fn spec(&self) -> String {
        match *self {
            Dupefilter::Exact => "exact".into(),
            Dupefilter::Compact => "compact".into(),
            Dupefilter::Bloom {
                capacity,
                error_rate,
            } => {
                let chain: Vec<String> = bloom_chain(capacity, error_rate)
                    .iter()
                    .map(|p| format!("{}:{}:{}:{}", p.piece_bits, p.hashes, p.capacity, p.pieces))
                    .collect();
                format!("bloom:{}", chain.join(";"))
            }
            Dupefilter::Expiring { ttl, refresh } => {
                let ttl = ttl.as_millis().max(4) as u64;
                format!("expiring:{ttl}:{}:{}", ttl / 4, u8::from(refresh))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bloom_filters_are_sized_for_their_capacity_and_error_rate() {
        let (m, k) = bloom_size(100_000_000, 0.001);
        assert_eq!(k, 10);
        let bytes_per_entry = m as f64 / 8.0 / 1e8;
        assert!((1.7..1.9).contains(&bytes_per_entry), "{bytes_per_entry}");
        // A small filter is one string.
        let small = bloom_plan(30_000, 0.001);
        assert_eq!((small.pieces, small.hashes), (1, 10));
        // 10 million entries: 18 pieces of 1 MiB (each exactly one
        // allocation), under 1.9 bytes per entry.
        let plan = bloom_plan(10_000_000, 0.001);
        assert_eq!(plan.piece_bits, ((1 << 20) - STRING_OVERHEAD) * 8);
        assert_eq!(plan.pieces, 18);
        assert!(plan.pieces * plan.piece_bits >= bloom_size(10_000_000, 0.001).0);
        // 10 billion entries need 18 GB: one filter of 512 MiB pieces.
        let huge = bloom_plan(10_000_000_000, 0.001);
        assert_eq!(huge.piece_bits, (MAX_PIECE_BYTES - STRING_OVERHEAD) * 8);
        assert_eq!((huge.pieces, huge.capacity), (34, 10_000_000_000));
        let spec = Dupefilter::Bloom {
            capacity: 10_000_000,
            error_rate: 0.001,
        }
        .spec();
        assert!(
            spec.starts_with(&format!("bloom:{}:10:10000000:18;", plan.piece_bits)),
            "{spec}"
        );
        // The chain: twice the entries at half the error rate, each step.
        let chain = bloom_chain(10_000_000, 0.001);
        assert_eq!(chain.len(), CHAIN_PLANNED as usize);
        assert_eq!(spec.matches(';').count(), CHAIN_PLANNED as usize - 1);
        assert_eq!(chain[0], plan);
        assert_eq!((chain[1].capacity, chain[1].hashes), (20_000_000, 11));
        assert_eq!(chain[7].capacity, 1_280_000_000);
        assert_eq!(chain[1], bloom_plan(20_000_000, 0.0005));
        // A capacity too small for its error rate is raised to the least
        // that keeps it (double hashing's own false positives).
        assert_eq!(least_capacity(0.001), 78);
        assert_eq!(least_capacity(0.000001), 19_351);
        assert_eq!(bloom_chain(50, 0.000001)[0].capacity, 19_351);
        assert_eq!(bloom_chain(1, 0.001)[1].capacity, 156);
        assert_eq!(
            Dupefilter::Expiring {
                ttl: Duration::from_secs(8),
                refresh: true
            }
            .spec(),
            "expiring:8000:2000:1"
        );
    }
}
