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
//!   `capacity` entries at `error_rate`; about 1.8 bytes per entry at 0.001.
//!   A false positive skips a URL that was never crawled, silently; it
//!   happens at about the error rate. When a filter holds `capacity`
//!   entries a new one of the same size follows it, so no filter is ever
//!   overfilled; lookups ask every filter, so with `n` filters the
//!   combined false-positive rate is up to about `n` x `error_rate`.
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

/// The most bits one filter may have: a Redis string holds at most 512 MiB.
pub const BLOOM_MAX_BITS: u64 = 1 << 32;

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

/// The filters a Bloom dupefilter is made of: `(bits, hashes, entries)` of
/// each filter in its chain. A capacity whose filter would pass Redis's
/// 512 MiB string limit is split: each filter takes what fits, and the
/// chain holds the rest at the same error rate.
pub fn bloom_plan(capacity: u64, error_rate: f64) -> (u64, u32, u64) {
    let (m, k) = bloom_size(capacity, error_rate);
    if m <= BLOOM_MAX_BITS {
        return (m, k, capacity.max(1));
    }
    let per_filter = (capacity as f64 * (BLOOM_MAX_BITS as f64 / m as f64)).floor() as u64;
    let (m, k) = bloom_size(per_filter, error_rate);
    (m.min(BLOOM_MAX_BITS), k, per_filter.max(1))
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
                let (m, k, capacity) = bloom_plan(capacity, error_rate);
                format!("bloom:{m}:{k}:{capacity}")
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
        // 10 billion entries at 0.001 need 18 GB: 512 MiB filters, chained.
        let (m, k, per_filter) = bloom_plan(10_000_000_000, 0.001);
        assert!(m <= BLOOM_MAX_BITS && k == 10, "{m} {k}");
        assert!(
            (290_000_000..BLOOM_MAX_BITS / 14).contains(&per_filter),
            "{per_filter}"
        );
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
