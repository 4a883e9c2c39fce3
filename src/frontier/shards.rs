//! One spider over several shards (see `docs/scaling.md`, "one spider over
//! N nodes"): which shard a request belongs to, and each shard's key
//! names. Both are the data layout of a sharded crawl, so they are defined
//! here once and never change: a request's shard is a function of its host
//! alone, and shard 0 is the spider's keys as an unsharded spider has them.
//!
//! The hand-off of requests between shards (outboxes, movers) is
//! [`crate::frontier::redis`]'s `outbox` module.

use sha1::{Digest, Sha1};

use super::keys::{KeyMode, Keys};
use crate::request::{host_key, Request};

/// The most shards a spider may have: one per master of a large Redis
/// Cluster, with room.
pub const MAX_SHARDS: usize = 64;

/// The shard, of `shards`, that the requests of `url` belong to: the
/// first eight bytes of the SHA-1 of the URL's politeness key (`host:port`
/// in lower case, [`host_key`]) as a big-endian number, modulo `shards`.
/// A host's requests, fingerprints and politeness state so all live on one
/// shard. One shard (or none) is shard 0.
pub fn shard_of(url: &str, shards: usize) -> usize {
    shard_of_host(&host_key(url), shards)
}

/// The shard of a politeness key (`host:port`, see [`shard_of`]).
pub fn shard_of_host(host: &str, shards: usize) -> usize {
    if shards <= 1 {
        return 0;
    }
    let digest = Sha1::digest(host.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(first) % shards as u64) as usize
}

/// A Redis Cluster's hash slots.
const SLOTS: usize = 16384;

/// The Redis Cluster slot of hash tag `tag` (CRC16-XMODEM, as Redis).
pub fn slot_of(tag: &str) -> usize {
    crc16::State::<crc16::XMODEM>::calculate(tag.as_bytes()) as usize % SLOTS
}

/// The name shard `shard` of the `shards` of spider `name` builds its
/// keys from: the spider's own for shard 0; for the others
/// `<name>.<shard>`, or `<name>.<shard>.<n>` with the first `n` that puts
/// its hash tag in the shard's part of the cluster's slots. The slots are
/// cut into `shards` equal ranges; shard 0 has the range its name falls
/// in, and the others the rest in order. A cluster whose masters split
/// the slots evenly (as `redis-cli --cluster create` does) with as many
/// masters as shards so has one shard on each master.
pub fn shard_name(name: &str, shard: usize, shards: usize) -> String {
    if shard == 0 || shards <= 1 {
        return name.to_string();
    }
    let range = |slot: usize| slot * shards / SLOTS;
    let own = range(slot_of(name));
    let Some(target) = (0..shards).filter(|&r| r != own).nth(shard - 1) else {
        return format!("{name}.{shard}");
    };
    let first = format!("{name}.{shard}");
    if range(slot_of(&first)) == target {
        return first;
    }
    (1..)
        .map(|n| format!("{name}.{shard}.{n}"))
        .find(|candidate| range(slot_of(candidate)) == target)
        .unwrap_or(first)
}

/// The keys of shard `shard` (of `shards`) of a spider whose own keys
/// `Keys::resolve` builds from these arguments: those very keys for shard
/// 0; for the others, the same templates under the shard's name
/// ([`shard_name`]), every key in the
/// shard's slot. A shard's start key other than shard 0's stays empty:
/// producers push to shard 0's, where start entries are claimed (a lease
/// reads its shard's start key, so it must be in the shard's slot). The
/// wake-up channels are shard 0's in every shard (a channel is no key: a
/// script on any slot publishes to it), so a worker listens to one.
pub fn shard_keys(
    name: &str,
    mode: KeyMode,
    templates: &[(super::KeyKind, String)],
    start: Option<&str>,
    shard: usize,
    shards: usize,
) -> Keys {
    let own = Keys::resolve(name, mode, None, templates, start);
    if shard == 0 {
        return own;
    }
    Keys {
        wake: own.wake,
        ..Keys::resolve(
            &shard_name(name, shard, shards),
            mode,
            None,
            templates,
            None,
        )
    }
}

/// Where one shard's frontier sits among its spider's shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardPlace {
    /// This shard.
    pub index: usize,
    /// The spider's number of shards.
    pub count: usize,
}

impl ShardPlace {
    /// The shard `request` belongs to, if it is not this one.
    pub fn elsewhere(&self, request: &Request) -> Option<usize> {
        let to = shard_of(&request.url, self.count);
        (to != self.index).then_some(to)
    }

    /// The other shards, in the order a commit's outboxes for them come
    /// (see `commit.lua`).
    pub fn others(&self) -> impl Iterator<Item = usize> {
        let index = self.index;
        (0..self.count).filter(move |&s| s != index)
    }

    /// The place of shard `to` (not this one) among [`ShardPlace::others`].
    pub fn position_of(&self, to: usize) -> usize {
        if to < self.index {
            to
        } else {
            to - 1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosts_requests_share_a_shard_whatever_their_path_scheme_or_case() {
        for shards in [2, 3, 16] {
            let home = shard_of("http://Forum.Example:8080/list/1", shards);
            for url in [
                "https://forum.example:8080/post/7?x=1",
                "http://user@FORUM.example:8080",
                "http://forum.example:8080#top",
            ] {
                assert_eq!(shard_of(url, shards), home, "{url}");
            }
        }
        assert_eq!(shard_of("http://a.example/", 1), 0);
        assert_eq!(shard_of("http://a.example/", 0), 0);
    }

    #[test]
    fn the_shard_function_is_the_data_layout_and_never_changes() {
        // SHA-1("127.0.0.1:8700") begins bc71ff90f65abe9f; these values,
        // computed apart (Python's hashlib), pin the function.
        let shards: Vec<usize> = (1..=8)
            .map(|i| shard_of(&format!("http://127.0.0.{i}:8700/"), 3))
            .collect();
        assert_eq!(shards, [2, 2, 2, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn a_shards_outboxes_follow_the_other_shards_in_order() {
        let place = ShardPlace { index: 1, count: 4 };
        let others: Vec<usize> = place.others().collect();
        assert_eq!(others, [0, 2, 3]);
        for (i, to) in others.into_iter().enumerate() {
            assert_eq!(place.position_of(to), i);
        }
    }

    #[test]
    fn hosts_spread_over_the_shards() {
        let mut counts = [0usize; 3];
        for i in 0..300 {
            counts[shard_of(&format!("http://site{i}.example/"), 3)] += 1;
        }
        assert!(
            counts.iter().all(|&c| (70..=130).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn shard_zero_has_the_spiders_own_keys_and_the_others_a_tag_each() {
        let zero = shard_keys("bbs", KeyMode::Cluster, &[], None, 0, 3);
        assert_eq!(
            zero,
            Keys::resolve("bbs", KeyMode::Cluster, None, &[], None)
        );
        // Slots, as `redis-cli CLUSTER KEYSLOT` gives them: bbs 5815 (the
        // middle third), so shard 1 takes the first third and shard 2 the
        // last: bbs.1 is 11046, bbs.1.1 4335, bbs.2 6981, bbs.2.1 10950,
        // bbs.2.2 14812.
        assert_eq!(slot_of("bbs"), 5815);
        assert_eq!(slot_of("bbs.1"), 11046);
        assert_eq!(shard_name("bbs", 1, 3), "bbs.1.1");
        assert_eq!(shard_name("bbs", 2, 3), "bbs.2.2");
        let two = shard_keys("bbs", KeyMode::Cluster, &[], None, 2, 3);
        assert_eq!(two.requests, "{bbs.2.2}:requests");
        assert_eq!(two.start_urls, "{bbs.2.2}:start_urls");
        assert_eq!(two.wake, "{bbs}:wake");
        let plain = shard_keys("bbs", KeyMode::Plain, &[], None, 1, 3);
        assert_eq!(plain.items, "bbs.1.1:items");
    }

    #[test]
    fn shards_take_a_range_of_slots_each() {
        for name in ["bbs", "q", "forum", "news"] {
            for shards in [2, 3, 5, 16] {
                let mut ranges: Vec<usize> = (0..shards)
                    .map(|s| slot_of(&shard_name(name, s, shards)) * shards / SLOTS)
                    .collect();
                ranges.sort_unstable();
                assert_eq!(
                    ranges,
                    (0..shards).collect::<Vec<_>>(),
                    "{name} over {shards}"
                );
            }
        }
        assert_eq!(shard_name("bbs", 0, 3), "bbs");
        assert_eq!(shard_name("q", 2, 3), "q.2");
    }
}
