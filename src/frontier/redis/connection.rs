//! The Redis a crawl runs on, one server or a Redis Cluster, and the
//! connections its users share: clones of a [`RedisTarget`] share one
//! command connection (a [`Conn`], see [`super::link`]; multiplexed:
//! commands from many tasks and spiders are pipelined on it), one wake-up
//! subscription ([`super::wake`]) and the blocking connections of
//! start-key watches ([`super::pickup`]), so a worker running hundreds of
//! spiders holds two connections, not two per spider.
//!
//! A cluster is named `redis+cluster://host:port,host:port`. A spider's
//! keys share one hash tag (`[keys] mode = "cluster"`), so every script
//! runs on the one node holding the spider's slot; [`check_one_slot`]
//! refuses keys that would not.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use redis::cluster::ClusterClient;

use super::link::{Conn, Place, CONNECT_TIMEOUT, RESPONSE_TIMEOUT};
use super::pickup::{Pickups, StartWatch, Watched};
use super::url::RedisUrl;
use super::wake::{CrewWatch, Wake, Wakes};
use super::Handoff;
use crate::frontier::keys::{Keys, StartKind};

/// Where a crawl's Redis is, and the connections its users share.
#[derive(Clone)]
pub struct RedisTarget {
    place: Place,
    shared: Arc<Shared>,
}

/// What the clones of one target share, made when first needed.
#[derive(Default)]
struct Shared {
    conn: tokio::sync::Mutex<Option<Conn>>,
    wakes: OnceLock<Wakes>,
    /// Blocking connections for start-key watches (see [`super::pickup`]).
    pickups: OnceLock<Arc<Pickups>>,
}

impl From<Place> for RedisTarget {
    fn from(place: Place) -> Self {
        RedisTarget {
            place,
            shared: Arc::default(),
        }
    }
}

impl From<redis::Client> for RedisTarget {
    fn from(client: redis::Client) -> Self {
        Place::Server(client).into()
    }
}

impl RedisTarget {
    /// The server or cluster `url` names, to connect to.
    pub fn open(url: &RedisUrl) -> redis::RedisResult<RedisTarget> {
        match url.cluster_nodes() {
            Some(Ok(nodes)) => RedisTarget::cluster(&nodes),
            Some(Err(e)) => Err(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "not a Redis Cluster address",
                e,
            ))),
            None => redis::Client::open(url.as_str()).map(RedisTarget::from),
        }
    }

    /// A cluster reached through `nodes` (`redis://` or `rediss://` URLs of
    /// some of its nodes; the others are learnt from them).
    pub fn cluster(nodes: &[String]) -> redis::RedisResult<RedisTarget> {
        let client = ClusterClient::builder(nodes.to_vec())
            .connection_timeout(CONNECT_TIMEOUT)
            .response_timeout(RESPONSE_TIMEOUT)
            // Redirects and a failover in progress are retried here, a few
            // times over about two seconds; a longer outage is the
            // caller's to ride out (workers pause and retry).
            .retries(6)
            .min_retry_wait(50)
            .max_retry_wait(1000)
            .build()?;
        let nodes = nodes
            .iter()
            .map(|n| redis::Client::open(n.as_str()))
            .collect::<redis::RedisResult<Vec<_>>>()?;
        Ok(Place::Cluster { client, nodes }.into())
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self.place, Place::Cluster { .. })
    }

    /// The connection every clone of this target shares, made on first use;
    /// fails within about a second when Redis does not answer (and the next
    /// call tries again).
    pub async fn connect(&self) -> redis::RedisResult<Conn> {
        let mut conn = self.shared.conn.lock().await;
        if let Some(conn) = conn.as_ref() {
            return Ok(conn.clone());
        }
        let made = self.place.open().await?;
        *conn = Some(made.clone());
        Ok(made)
    }

    /// A wake-up for `channel`, on the subscription every clone of this
    /// target shares.
    pub fn wake(&self, channel: &str) -> Wake {
        self.wake_for(channel, None)
    }

    /// A wake-up for `channel` and for a worker's `own` channel.
    pub fn wake_for(&self, channel: &str, own: Option<&str>) -> Wake {
        self.wakes().subscribe(channel, own)
    }

    /// Crew-grew messages of `channel` for a frontier's `watch` (see
    /// [`Wakes::watch_crew`]), on the subscription every clone shares.
    pub fn watch_crew(&self, channel: &str, watch: CrewWatch) -> Wake {
        self.wakes().watch_crew(channel, watch)
    }

    /// The subscription every clone of this target shares, started by
    /// the first that listens.
    fn wakes(&self) -> &Wakes {
        self.shared
            .wakes
            .get_or_init(|| Wakes::start(self.pubsub_nodes()))
    }

    /// Whether this worker's subscription to `channel` is confirmed now
    /// (see [`Wakes::confirmed`]).
    pub fn listens(&self, channel: &str) -> bool {
        self.shared
            .wakes
            .get()
            .is_some_and(|w| w.confirmed(channel))
    }

    /// The handed-leases messages that came on a worker's own `channel`
    /// (see [`super::handed`]); none before anything subscribed.
    pub fn take_handed(&self, channel: &str) -> Vec<Vec<u8>> {
        self.shared
            .wakes
            .get()
            .map(|w| w.take_handed(channel))
            .unwrap_or_default()
    }

    /// A watch on a spider's start key, for pushes that publish no wake-up
    /// (see [`super::pickup`]); the watches of every clone of this target
    /// share its blocking connections.
    pub async fn watch_start(&self, key: &str, kind: StartKind, recheck: Duration) -> StartWatch {
        StartWatch::start(self, key, kind, recheck).await
    }

    /// The servers a pub/sub subscription may use, in the order to try them.
    fn pubsub_nodes(&self) -> Vec<redis::Client> {
        match &self.place {
            Place::Server(client) => vec![client.clone()],
            Place::Cluster { nodes, .. } => nodes.clone(),
        }
    }
}

/// What a start-key watch needs of the Redis it watches.
impl Watched for RedisTarget {
    fn pickups(&self) -> &Arc<Pickups> {
        self.shared
            .pickups
            .get_or_init(|| Arc::new(Pickups::new(self.place.clone())))
    }

    async fn connect(&self) -> redis::RedisResult<Conn> {
        RedisTarget::connect(self).await
    }

    fn is_cluster(&self) -> bool {
        RedisTarget::is_cluster(self)
    }

    fn wake(&self, channel: &str) -> Wake {
        RedisTarget::wake(self, channel)
    }
}

/// The hash tag of `key` as Redis Cluster reads it: what is between the
/// first `{` and the next `}`, if that is not empty; otherwise the whole key.
pub fn hash_tag(key: &str) -> &str {
    if let Some(open) = key.find('{') {
        if let Some(len) = key[open + 1..].find('}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// [`check_one_slot`] for each of a spider's shards (`shards`, one for a
/// spider that is not sharded). A sharded spider hands its tasks to other
/// spiders through outboxes (see `docs/scaling.md`), so their keys need
/// not be in its shards' slots; its file's check sees that each other
/// spider's keys share one slot of their own.
pub fn check_spider_slots(shards: &[Keys], handoffs: &[Handoff]) -> Result<(), String> {
    let handed = if shards.len() > 1 { &[][..] } else { handoffs };
    shards.iter().try_for_each(|k| check_one_slot(k, handed))
}

/// On a cluster every key of a spider must share one hash tag, so its
/// scripts (which touch many keys at once) run on one node. The error
/// names the keys whose tag differs from the queue's.
pub fn check_one_slot(keys: &Keys, handoffs: &[Handoff]) -> Result<(), String> {
    let first = keys.requests.as_str();
    let tag = hash_tag(first);
    let handed = handoffs.iter().flat_map(|h| {
        [
            ("start key of the spider handed to", h.start_key.as_str()),
            (
                "upstreams key of the spider handed to",
                h.upstreams.as_str(),
            ),
        ]
    });
    let odd: Vec<String> = keys
        .all()
        .map(|(k, key)| (k.name(), key))
        .chain(handed)
        .filter(|(_, key)| hash_tag(key) != tag)
        .map(|(kind, key)| format!("{kind} = {key}"))
        .collect();
    if odd.is_empty() {
        return Ok(());
    }
    Err(format!(
        "on a Redis Cluster all of a spider's keys must share one hash tag (the queue {first} has {{{tag}}}), but {} do not; add `[keys] mode = \"cluster\"` to the spider (keys become {{<name>}}:requests, …) or put the same {{tag}} in every key template",
        odd.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontier::keys::KeyMode;

    #[test]
    fn hash_tags_follow_redis_cluster_rules() {
        assert_eq!(hash_tag("{bbs}:requests"), "bbs");
        assert_eq!(hash_tag("bbs:requests"), "bbs:requests");
        assert_eq!(hash_tag("{}:x"), "{}:x");
        assert_eq!(hash_tag("a{b}{c}"), "b");
        let tagged = Keys::resolve("bbs", KeyMode::Cluster, None, &[], None);
        assert!(check_one_slot(&tagged, &[]).is_ok());
        let plain = Keys::resolve("bbs", KeyMode::Plain, None, &[], None);
        let e = check_one_slot(&plain, &[]).unwrap_err();
        assert!(e.contains("[keys] mode = \"cluster\""), "{e}");
        let custom_start = Keys::resolve("bbs", KeyMode::Cluster, None, &[], Some("tasks"));
        assert!(check_one_slot(&custom_start, &[]).is_err());
    }
}
