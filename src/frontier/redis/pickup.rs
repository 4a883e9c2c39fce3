//! Pickup of start entries pushed by producers other than crawlworker:
//! plain `RPUSH`/`LPUSH`/`SADD`/`ZADD` from a scrapy-redis scheduler or
//! `redis-cli`. `push-urls` publishes on the spider's wake channel
//! ([`super::wake`]), and a hand-off from another spider wakes its
//! waiting workers on their own channels; these producers do neither, so
//! an idle spider watches its start key itself ([`StartWatch`]):
//!
//! - **A list** (the default start type): `BLMOVE key key LEFT LEFT`, a
//!   blocking wait that returns as soon as the list holds an entry and
//!   takes nothing out of it: it moves the head to the head, one atomic
//!   step, so the list keeps the same entries in the same order, whatever
//!   happens to the worker (a worker killed while blocked has changed
//!   nothing; one killed after being served has changed nothing either).
//!   Redis serves every client blocked on the key in turn (the list stays
//!   non-empty), so every idle worker wakes. Being a write, each served
//!   wait is replicated and appended to the AOF as `LMOVE` (one per idle
//!   worker per push that finds the cluster idle), and aborts a producer's
//!   `WATCH`/`MULTI` on the key, as any write would. A blocking command stalls its
//!   connection, so each wait has one of its own, from a pool of at most
//!   [`MAX_BLOCKING`] per worker and Redis, reused from one wait to the
//!   next; a spider that finds the pool taken notices such pushes within
//!   `idle_recheck`, and gets a connection when one is free. On a Redis
//!   Cluster the wait goes through its own cluster connection, which sends
//!   it to the node holding the key. Needs Redis 6.2 (`BLMOVE`); refused
//!   (older server, ACL), the spider falls back to `idle_recheck` and says
//!   so.
//! - **A set or zset**, and a list when the server publishes list events:
//!   keyspace notifications (`__keyspace@<db>__:<key>`) on the worker's
//!   wake-up subscription, no extra connection or command. They exist only
//!   when the server's `notify-keyspace-events` has `K` plus `s` (sets), `z`
//!   (zsets) or `l` (lists), or `A`. The setting is read once per Redis
//!   (`CONFIG GET`, which an ACL may refuse); when it lacks them the spider
//!   says at start that such pushes are noticed within `idle_recheck`, and
//!   how to turn them on. It subscribes either way, so turning them on
//!   later takes effect without a restart. On a Redis Cluster each node
//!   publishes the events of its own keys only, and the subscription is on
//!   one node: pickup is immediate only when that node holds the spider's
//!   slot (lists always use `BLMOVE` there).
//!
//! A watch wakes the spider; the spider then leases and claims as usual
//! (`claim_start`), so every promise of the start key holds unchanged.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use tokio::sync::{Notify, OnceCell};
use tokio::task::JoinHandle;

use super::link::{Conn, Place, CONNECT_TIMEOUT, RESPONSE_TIMEOUT};
use super::wake::{wake_up, Wake};
use super::FrontierError;
use crate::frontier::keys::StartKind;
use crate::retry_schedule::RetrySchedule;

/// Blocking connections one worker holds on one Redis at most: one per idle
/// spider with a list start key, up to this many.
pub const MAX_BLOCKING: usize = 16;

/// How long one `BLMOVE` blocks before it is sent again (well within the
/// connection's response timeout, so a dead connection is noticed).
const BLOCK: Duration = Duration::from_secs(20);

/// What one worker's spiders on one Redis share for pickup: the blocking
/// connections and the server's keyspace-notification setting.
pub struct Pickups {
    /// Where to open blocking connections.
    place: Place,
    /// The database keyspace channels name.
    db: i64,
    pool: Mutex<Pool>,
    /// `notify-keyspace-events`, read on first need.
    notifications: OnceCell<Notifications>,
}

/// Blocking connections not in use, and how many exist in all (idle or
/// held by a watch, or being opened).
#[derive(Default)]
struct Pool {
    idle: Vec<Blocking>,
    open: usize,
}

/// The server's `notify-keyspace-events`, or why it could not be read.
#[derive(Debug, Clone)]
enum Notifications {
    Read(String),
    Unreadable(String),
}

/// Whether `flags` (a `notify-keyspace-events` value) make the server
/// publish keyspace events for pushes to a start key of `kind`.
pub fn notifies(flags: &str, kind: StartKind) -> bool {
    let class = match kind {
        StartKind::List => 'l',
        StartKind::Set => 's',
        StartKind::Zset => 'z',
    };
    flags.contains('K') && (flags.contains('A') || flags.contains(class))
}

/// The smallest `notify-keyspace-events` addition that covers `kind`.
pub fn flags_for(kind: StartKind) -> &'static str {
    match kind {
        StartKind::List => "Kl",
        StartKind::Set => "Ks",
        StartKind::Zset => "Kz",
    }
}

/// A connection of a watch's own, for `BLMOVE`.
enum Blocking {
    Server(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl Blocking {
    /// `BLMOVE key key LEFT LEFT`: true when the list has an entry (left
    /// where it was), false when the wait timed out.
    async fn wait_for_entry(&mut self, key: &str) -> redis::RedisResult<bool> {
        let mut cmd = redis::cmd("BLMOVE");
        cmd.arg(key)
            .arg(key)
            .arg("LEFT")
            .arg("LEFT")
            .arg(BLOCK.as_secs());
        // The entry may be any bytes: only nil (timed out) matters.
        let reply: redis::Value = match self {
            Blocking::Server(c) => cmd.query_async(c).await?,
            Blocking::Cluster(c) => cmd.query_async(c).await?,
        };
        Ok(!matches!(reply, redis::Value::Nil))
    }
}

impl Pickups {
    pub(super) fn new(place: Place) -> Pickups {
        let db = match &place {
            Place::Server(client) => client.get_connection_info().redis.db,
            Place::Cluster { .. } => 0,
        };
        Pickups {
            place,
            db,
            pool: Mutex::default(),
            notifications: OnceCell::new(),
        }
    }

    async fn open(&self) -> redis::RedisResult<Blocking> {
        match &self.place {
            Place::Server(client) => {
                let config = redis::AsyncConnectionConfig::new()
                    .set_connection_timeout(CONNECT_TIMEOUT)
                    .set_response_timeout(RESPONSE_TIMEOUT);
                Ok(Blocking::Server(
                    client
                        .get_multiplexed_async_connection_with_config(&config)
                        .await?,
                ))
            }
            Place::Cluster { client, .. } => {
                Ok(Blocking::Cluster(client.get_async_connection().await?))
            }
        }
    }

    /// A slot for one blocking wait, or none when [`MAX_BLOCKING`] are
    /// taken.
    fn checkout(self: &Arc<Self>) -> Option<Slot> {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        let conn = match pool.idle.pop() {
            Some(c) => Some(c),
            None if pool.open < MAX_BLOCKING => {
                pool.open += 1;
                None
            }
            None => return None,
        };
        Some(Slot {
            pickups: self.clone(),
            conn,
        })
    }

    /// The server's `notify-keyspace-events`, read once (the spiders
    /// starting together wait for one read); an outage is not remembered,
    /// so the next spider to start reads it again.
    async fn notifications(&self, target: &impl Watched) -> Notifications {
        let read = self
            .notifications
            .get_or_try_init(|| async {
                let read = async {
                    let mut conn = target.connect().await?;
                    redis::cmd("CONFIG")
                        .arg("GET")
                        .arg("notify-keyspace-events")
                        .query_async::<Vec<String>>(&mut conn)
                        .await
                };
                match read.await {
                    Ok(pair) => Ok(match pair.get(1) {
                        Some(flags) => Notifications::Read(flags.clone()),
                        None => Notifications::Unreadable("CONFIG GET answered nothing".into()),
                    }),
                    Err(cause) => {
                        let e = FrontierError {
                            op: "CONFIG GET",
                            key: "notify-keyspace-events".into(),
                            cause,
                        };
                        if e.is_outage() {
                            Err(e)
                        } else {
                            // An ACL or a managed Redis refusing CONFIG: for good.
                            Ok(Notifications::Unreadable(e.cause.to_string()))
                        }
                    }
                }
            })
            .await;
        match read {
            Ok(n) => n.clone(),
            Err(e) => Notifications::Unreadable(e.to_string()),
        }
    }
}

/// The right to one blocking connection: its connection goes back to the
/// pool when dropped, or, when it holds none (never opened, lost, or
/// dropped mid-wait with the task), its place does.
struct Slot {
    pickups: Arc<Pickups>,
    conn: Option<Blocking>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut pool = self.pickups.pool.lock().unwrap_or_else(|e| e.into_inner());
        match self.conn.take() {
            Some(c) => pool.idle.push(c),
            None => pool.open = pool.open.saturating_sub(1),
        }
    }
}

/// One spider's watch on its start key (see the module docs). Dropping it
/// ends the wait at once: its blocking connection is closed, which ends the
/// `BLMOVE` on the server.
pub struct StartWatch {
    way: Way,
}

enum Way {
    /// `BLMOVE` on a list.
    Blocking(ListWatch),
    /// Keyspace notifications; whether the server is known to publish
    /// them for this key to the node the worker listens on.
    Keyspace(Wake, bool),
    /// Nothing to watch: a local crawl's start entries are all known when
    /// it starts.
    Nothing,
}

/// A list's blocking wait, armed while the spider is idle.
struct ListWatch {
    key: String,
    pickups: Arc<Pickups>,
    hit: Arc<Notify>,
    state: Arc<Mutex<ListState>>,
}

#[derive(Default)]
struct ListState {
    /// The spider is idle and saw the list empty: keep waiting.
    armed: bool,
    /// A task is waiting (or about to): arming again needs no other.
    running: bool,
    /// That task, aborted when the watch is dropped.
    task: Option<JoinHandle<()>>,
    /// `BLMOVE` was refused: the spider relies on `idle_recheck`.
    refused: bool,
    /// The pool was full when last armed (said once until it is not).
    said_full: bool,
}

/// What a start-key watch needs of the Redis it watches (a
/// [`super::RedisTarget`]): its shared blocking connections, a command
/// connection, whether it is a cluster, and wake-ups by channel.
pub(super) trait Watched {
    fn pickups(&self) -> &Arc<Pickups>;
    async fn connect(&self) -> redis::RedisResult<Conn>;
    fn is_cluster(&self) -> bool;
    fn wake(&self, channel: &str) -> Wake;
}

impl StartWatch {
    /// Watches `key`, a start key of `kind`, for the spider's idle waits;
    /// says at start how fast pushes that do not wake workers are noticed
    /// (`recheck` is the spider's `idle_recheck`).
    pub(super) async fn start(
        target: &impl Watched,
        key: &str,
        kind: StartKind,
        recheck: Duration,
    ) -> StartWatch {
        let pickups = target.pickups();
        let notifications = &pickups.notifications(target).await;
        let recheck = crate::wording::duration(recheck);
        let published = match notifications {
            Notifications::Read(flags) => Some(notifies(flags, kind)),
            Notifications::Unreadable(_) => None,
        };
        let channel = format!("__keyspace@{}__:{key}", pickups.db);
        // On a cluster the events come from one node only, while BLMOVE
        // reaches the key's node wherever it is.
        if kind == StartKind::List && (published != Some(true) || target.is_cluster()) {
            tracing::debug!(%key, "list start key watched with a blocking BLMOVE that leaves it unchanged: entries pushed by any producer are picked up at once");
            return StartWatch {
                way: Way::Blocking(ListWatch {
                    key: key.to_string(),
                    pickups: pickups.clone(),
                    hit: Arc::default(),
                    state: Arc::default(),
                }),
            };
        }
        let on_cluster = if target.is_cluster() {
            " On a Redis Cluster only the node holding the key publishes its events, and the worker listens on one node: pickup is immediate only when that node holds the spider's slot."
        } else {
            ""
        };
        let (kind_name, add) = (kind.as_str(), flags_for(kind));
        match (notifications, published) {
            (_, Some(true)) => {
                tracing::debug!(%key, "{kind_name} start key watched with keyspace notifications: entries added by any producer are picked up at once.{on_cluster}")
            }
            (Notifications::Read(flags), _) => tracing::info!(
                %key,
                "this Redis does not publish keyspace notifications for a {kind_name} (notify-keyspace-events is \"{flags}\"): entries added to the {kind_name} start key by producers other than crawlworker are picked up within idle_recheck ({recheck}); `crawlworker push-urls` wakes workers at once either way. For immediate pickup add {add} to it (`redis-cli CONFIG SET notify-keyspace-events {flags}{add}`, and the same in redis.conf to keep it after a restart); the worker listens already.{on_cluster}"
            ),
            (Notifications::Unreadable(why), _) => tracing::info!(
                %key,
                "cannot read this Redis's notify-keyspace-events ({why}); listening for keyspace notifications anyway: if the server publishes them for a {kind_name} ({add} in notify-keyspace-events), entries added by producers other than crawlworker are picked up at once, otherwise within idle_recheck ({recheck}).{on_cluster}"
            ),
        }
        StartWatch {
            way: Way::Keyspace(
                target.wake(&channel),
                published == Some(true) && !target.is_cluster(),
            ),
        }
    }

    /// A watch for a start list nobody else can add to (a local crawl's).
    pub fn none() -> StartWatch {
        StartWatch { way: Way::Nothing }
    }

    /// The spider is idle and its last look found the start key empty:
    /// watch it (a list's blocking wait starts, unless one runs).
    pub fn arm(&self) {
        if let Way::Blocking(list) = &self.way {
            list.arm();
        }
    }

    /// The spider has work: a list's blocking wait is not renewed when it
    /// ends (it may still wake the spider once).
    pub fn disarm(&self) {
        if let Way::Blocking(list) = &self.way {
            if let Ok(mut s) = list.state.lock() {
                s.armed = false;
            }
        }
    }

    /// Waits until the start key may have something new (forever when
    /// nothing watches it: the spider's `idle_recheck` covers that).
    pub async fn changed(&self) {
        match &self.way {
            Way::Blocking(list) => list.hit.notified().await,
            Way::Keyspace(wake, _) => wake.notified().await,
            Way::Nothing => std::future::pending().await,
        }
    }

    /// Whether the watch sees every entry any producer adds, as of now: a
    /// list's blocking wait is running (armed, with a connection of the
    /// pool, not refused), or the server publishes the key's events to the
    /// subscription, which is up. Then an idle spider need not poll the
    /// start key every `idle_recheck`.
    pub fn covers(&self) -> bool {
        match &self.way {
            Way::Blocking(list) => list
                .state
                .lock()
                .map(|s| s.running && !s.refused)
                .unwrap_or(false),
            Way::Keyspace(wake, published) => *published && wake.live(),
            Way::Nothing => true,
        }
    }
}

impl ListWatch {
    fn arm(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.refused {
            return;
        }
        s.armed = true;
        if s.running {
            return;
        }
        let Some(slot) = self.pickups.checkout() else {
            if !s.said_full {
                tracing::info!(key = %self.key, "this worker already holds {MAX_BLOCKING} blocking waits on this Redis (one per idle spider with a list start key): entries pushed to this one by producers other than crawlworker are picked up within idle_recheck until a wait is free");
                s.said_full = true;
            }
            return;
        };
        s.said_full = false;
        s.running = true;
        s.task = Some(tokio::spawn(wait_for_entries(
            slot,
            self.key.clone(),
            self.state.clone(),
            self.hit.clone(),
        )));
    }
}

impl Drop for ListWatch {
    fn drop(&mut self) {
        if let Ok(mut s) = self.state.lock() {
            if let Some(task) = s.task.take() {
                // Drops the connection mid-wait: Redis forgets the BLMOVE.
                task.abort();
            }
        }
    }
}

/// Sends `BLMOVE` while the spider stays armed; on an entry, wakes it and
/// ends (the spider arms again when it is idle and finds the list empty).
async fn wait_for_entries(
    mut slot: Slot,
    key: String,
    state: Arc<Mutex<ListState>>,
    hit: Arc<Notify>,
) {
    let mut backoff = RetrySchedule::REDIS.attempts();
    loop {
        {
            // Decided under the lock, so an `arm` either sees this task
            // running and relies on it, or sees it gone and starts another.
            let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
            if !s.armed {
                s.running = false;
                drop(slot);
                return;
            }
        }
        let mut conn = match slot.conn.take() {
            Some(c) => c,
            None => match slot.pickups.open().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::debug!(%key, error = %e, "cannot open a connection to wait on the start key; retrying");
                    tokio::time::sleep(backoff.next_delay()).await;
                    continue;
                }
            },
        };
        match conn.wait_for_entry(&key).await {
            Ok(false) => {
                slot.conn = Some(conn);
                backoff.reset();
            }
            Ok(true) => {
                slot.conn = Some(conn);
                {
                    let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
                    (s.armed, s.running) = (false, false);
                    // Back in the pool before the spider may arm again.
                    drop(slot);
                }
                wake_up(&hit);
                return;
            }
            Err(cause) => {
                let e = FrontierError {
                    op: "wait (BLMOVE) on",
                    key: key.clone(),
                    cause,
                };
                if e.is_outage() {
                    // The connection is dropped; a new one is made.
                    tracing::debug!(error = %e, "retrying");
                    tokio::time::sleep(backoff.next_delay()).await;
                    continue;
                }
                tracing::warn!(error = %e, "entries pushed to this start key by producers other than crawlworker are picked up within idle_recheck (BLMOVE needs Redis 6.2 and, with ACLs, the +blmove permission)");
                slot.conn = Some(conn);
                let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
                (s.refused, s.running) = (true, false);
                drop(slot);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyspace_flags_cover_the_start_types_they_name() {
        assert!(notifies("Ks", StartKind::Set));
        assert!(!notifies("Ks", StartKind::Zset));
        assert!(notifies("zK", StartKind::Zset));
        assert!(notifies("AK", StartKind::List));
        assert!(notifies("AKE", StartKind::Set));
        // Keyevent channels only, or classes without K: no keyspace channel.
        assert!(!notifies("Es", StartKind::Set));
        assert!(!notifies("A", StartKind::Set));
        assert!(!notifies("", StartKind::List));
        for kind in [StartKind::List, StartKind::Set, StartKind::Zset] {
            assert!(notifies(flags_for(kind), kind));
        }
    }
}
