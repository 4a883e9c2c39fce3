//! Wake-ups for idle workers: a pub/sub subscription to each spider's wake
//! channel, which every step that enqueues work publishes to. An idle
//! spider waits on it instead of polling, so new work is picked up in
//! milliseconds. The same subscription carries the keyspace notifications
//! a spider watches its set or zset start key with ([`super::pickup`]).
//!
//! One subscription ([`Wakes`]) serves every spider of a worker that uses
//! the same Redis: it subscribes to their channels as spiders start and
//! unsubscribes as they stop, and wakes the spider a message names. It
//! reconnects by itself when Redis goes away, and then wakes every spider
//! (something may have been announced while nobody listened).
//!
//! The operator's controls (`crawlworker pause`, `resume`) publish
//! [`CONTROL`] on the same channel: every worker of the spider, busy or
//! idle, learns within milliseconds that it should read the pause again
//! ([`Wake::control`]).
//!
//! A lease that finds its worker joining the crew publishes a
//! [`CrewGrew`] there too: a frontier that registered its share
//! ([`CrewWatch`]) and holds over twice the new share raises its
//! hand-back signal, in the subscription's task, with no Redis call.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use tokio::sync::{mpsc, Notify};

use super::url::redact;
use crate::frontier::fairness::CrewGrew;
use crate::frontier::HandBack;
use crate::retry_schedule::RetrySchedule;

/// What `crawlworker pause` and `resume` publish on a spider's wake
/// channel (work steps publish a count): the spider's control changed.
pub const CONTROL: &str = "control";

/// The channels subscribed to, each with its listeners.
type Channels = Arc<Mutex<HashMap<String, Listeners>>>;

/// Handed-leases messages (see [`super::handed`]) per worker channel,
/// until its frontier takes them.
type HandedBox = Arc<Mutex<HashMap<String, Vec<Vec<u8>>>>>;

/// The channels whose subscription Redis has confirmed, on the connection
/// now up.
type Confirmed = Arc<Mutex<HashSet<String>>>;

fn confirm(confirmed: &Confirmed, channels: &[String], up: bool) {
    if let Ok(mut c) = confirmed.lock() {
        for channel in channels {
            if up {
                c.insert(channel.clone());
            } else {
                c.remove(channel);
            }
        }
    }
}

/// Who listens on one channel.
struct Listeners {
    /// Woken when work is announced.
    work: Arc<Notify>,
    /// Woken when the spider's control (its pause) changed.
    control: Arc<Notify>,
    /// How many spiders listen on it.
    spiders: usize,
    /// The frontiers that hand back when the crew grows.
    crew: Vec<Arc<CrewWatch>>,
}

/// One frontier's leases, for the crew-grew messages of its spider's wake
/// channel (see [`CrewGrew`]): when its shard's crew grows and it holds
/// over twice the new share, its hand-back signal is raised.
pub struct CrewWatch {
    /// The queue key of its shard, which the message names.
    pub queue: String,
    /// The leases it holds, by its own count.
    pub held: Arc<AtomicUsize>,
    pub hand_back: HandBack,
}

impl Listeners {
    /// Wakes both: a control message (a resume) also means work may be
    /// leased again, and after a new subscription everything is looked at.
    fn wake_all(&self) {
        wake_up(&self.work);
        wake_up(&self.control);
    }

    /// A worker joined the crew: each watching frontier of its shard over
    /// its new share hands back what it cannot start.
    fn crew_grew(&self, grown: &CrewGrew) {
        for watch in self.crew.iter().filter(|w| w.queue == grown.queue) {
            let held = watch.held.load(Ordering::Relaxed);
            if grown.over_share(held) {
                tracing::debug!(held, out = grown.out, crew = grown.crew, queue = %grown.queue, "a worker joined the crew and this one holds over twice its share now: handing back what it cannot start");
                watch.hand_back.ask();
            }
        }
    }
}

/// A change to the subscription.
enum Change {
    Subscribe(String),
    Unsubscribe(String),
}

/// One worker's subscription to the wake channels of its spiders.
pub struct Wakes {
    channels: Channels,
    handed: HandedBox,
    confirmed: Confirmed,
    changes: mpsc::UnboundedSender<Change>,
    task: tokio::task::JoinHandle<()>,
    /// The subscription is up (see [`Wake::live`]).
    live: Arc<AtomicBool>,
}

/// One spider's wake-ups; unsubscribes when dropped (the last of a
/// channel's). A spider listens on its spider's channel (work for every
/// worker, and the controls) and on its worker's own (work a commit
/// queued for the workers waiting for it).
pub struct Wake {
    channel: String,
    notify: Arc<Notify>,
    control: Arc<Notify>,
    /// The worker's own channel and its waiters, if it has one.
    own: Option<(String, Arc<Notify>)>,
    /// Its frontier's share, watched for crew-grew messages, if any.
    crew: Option<Arc<CrewWatch>>,
    channels: Channels,
    changes: mpsc::UnboundedSender<Change>,
    live: Arc<AtomicBool>,
}

pub(super) fn wake_up(notify: &Notify) {
    // Wakes a spider waiting now, or the next wait if none is.
    notify.notify_waiters();
    notify.notify_one();
}

impl Wakes {
    /// Keeps a subscription alive in the background. On a cluster, any
    /// node will do (pub/sub messages reach every node); when one goes away
    /// the next is tried.
    pub fn start(nodes: Vec<redis::Client>) -> Wakes {
        let channels: Channels = Arc::default();
        let handed: HandedBox = Arc::default();
        let (changes, mut pending) = mpsc::unbounded_channel();
        let listening = channels.clone();
        let inbox = handed.clone();
        let confirmed: Confirmed = Arc::default();
        let subscribed = confirmed.clone();
        let live = Arc::new(AtomicBool::new(false));
        let up = live.clone();
        let task = tokio::spawn(async move {
            let mut backoff = RetrySchedule::REDIS.attempts();
            for client in nodes.iter().cycle() {
                let address = redact(&client.get_connection_info().addr.to_string());
                match client.get_async_pubsub().await {
                    Ok(pubsub) => {
                        let (mut sink, mut messages) = pubsub.split();
                        let now: Vec<String> = listening
                            .lock()
                            .map(|c| c.keys().cloned().collect())
                            .unwrap_or_default();
                        if !now.is_empty() {
                            if let Err(e) = sink.subscribe(&now).await {
                                tracing::warn!(redis = %address, error = %e, "cannot subscribe to wake-ups; retrying");
                                tokio::time::sleep(backoff.next_delay()).await;
                                continue;
                            }
                        }
                        backoff.reset();
                        confirm(&subscribed, &now, true);
                        up.store(true, Ordering::Relaxed);
                        if let Ok(c) = listening.lock() {
                            c.values().for_each(Listeners::wake_all);
                        }
                        loop {
                            tokio::select! {
                                message = messages.next() => {
                                    let Some(message) = message else { break };
                                    dispatch(&listening, &inbox, &message);
                                }
                                change = pending.recv() => {
                                    let done = match change {
                                        None => return,
                                        Some(Change::Subscribe(c)) => {
                                            let done = sink.subscribe(&c).await;
                                            confirm(&subscribed, std::slice::from_ref(&c), done.is_ok());
                                            // Whatever was announced before
                                            // the subscription took is looked for.
                                            if let (Ok(()), Ok(l)) = (&done, listening.lock()) {
                                                l.get(&c).into_iter().for_each(Listeners::wake_all);
                                            }
                                            done
                                        }
                                        Some(Change::Unsubscribe(c)) => {
                                            confirm(&subscribed, std::slice::from_ref(&c), false);
                                            sink.unsubscribe(&c).await
                                        }
                                    };
                                    if done.is_err() {
                                        break;
                                    }
                                }
                            }
                        }
                        up.store(false, Ordering::Relaxed);
                        if let Ok(mut c) = subscribed.lock() {
                            c.clear();
                        }
                        tracing::warn!(redis = %address, "wake-up subscription lost; resubscribing");
                    }
                    Err(e) => tracing::debug!(
                        redis = %address,
                        error = %e,
                        "wake-up subscription cannot connect; retrying"
                    ),
                }
                tokio::time::sleep(backoff.next_delay()).await;
            }
        });
        Wakes {
            channels,
            handed,
            confirmed,
            changes,
            task,
            live,
        }
    }

    /// Whether Redis has confirmed the subscription to `channel` on the
    /// connection now up: a message published now reaches this worker.
    pub fn confirmed(&self, channel: &str) -> bool {
        self.confirmed.lock().is_ok_and(|c| c.contains(channel))
    }

    /// The handed-leases messages that came on `channel` (a worker's own)
    /// since the last call.
    pub fn take_handed(&self, channel: &str) -> Vec<Vec<u8>> {
        self.handed
            .lock()
            .ok()
            .and_then(|mut h| h.remove(channel))
            .unwrap_or_default()
    }

    /// Wake-ups for `channel`, and for `own` (a worker's own channel) if
    /// given.
    pub fn subscribe(&self, channel: &str, own: Option<&str>) -> Wake {
        let (notify, control) = self.listen(channel);
        Wake {
            channel: channel.to_string(),
            notify,
            control,
            own: own.map(|c| (c.to_string(), self.listen(c).0)),
            crew: None,
            channels: self.channels.clone(),
            changes: self.changes.clone(),
            live: self.live.clone(),
        }
    }

    /// Crew-grew messages of `channel` (a spider's) for `watch`'s
    /// frontier, for as long as the returned wake-up lives.
    pub fn watch_crew(&self, channel: &str, watch: CrewWatch) -> Wake {
        let mut wake = self.subscribe(channel, None);
        let watch = Arc::new(watch);
        if let Ok(mut c) = self.channels.lock() {
            if let Some(l) = c.get_mut(channel) {
                l.crew.push(watch.clone());
            }
        }
        wake.crew = Some(watch);
        wake
    }

    /// The work and control waiters of `channel`, subscribed to by the
    /// first.
    fn listen(&self, channel: &str) -> (Arc<Notify>, Arc<Notify>) {
        match self.channels.lock() {
            Ok(mut c) => {
                let entry = c.entry(channel.to_string()).or_insert_with(|| Listeners {
                    work: Arc::default(),
                    control: Arc::default(),
                    spiders: 0,
                    crew: Vec::new(),
                });
                entry.spiders += 1;
                if entry.spiders == 1 {
                    let _ = self.changes.send(Change::Subscribe(channel.to_string()));
                }
                (entry.work.clone(), entry.control.clone())
            }
            // A poisoned map: the spider still polls (`idle_recheck`).
            Err(_) => (Arc::default(), Arc::default()),
        }
    }
}

/// Wakes the listeners of the channel `message` came on: its control
/// too when it is [`CONTROL`]. Leases handed in it are kept in `handed`
/// for the worker's frontier to take.
fn dispatch(listening: &Channels, handed: &HandedBox, message: &redis::Msg) {
    let Ok(channels) = listening.lock() else {
        return;
    };
    let channel = message.get_channel_name();
    if let Some(l) = channels.get(channel) {
        let payload = message.get_payload_bytes();
        if payload == CONTROL.as_bytes() {
            l.wake_all();
        } else if let Some(grown) = CrewGrew::parse(payload) {
            // Nobody need look for work: the crew only grew.
            l.crew_grew(&grown);
        } else {
            if super::handed::is_handed(payload) {
                if let Ok(mut h) = handed.lock() {
                    h.entry(channel.to_string())
                        .or_default()
                        .push(payload.to_vec());
                }
            }
            wake_up(&l.work);
        }
    }
}

impl Drop for Wakes {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Wake {
    /// Wake-ups from `notify` (work) and `control` (the pause) alone, with
    /// no Redis behind them: a local crawl's frontier announces there.
    pub fn local(notify: Arc<Notify>, control: Arc<Notify>) -> Wake {
        let (changes, _) = mpsc::unbounded_channel();
        Wake {
            channel: String::new(),
            notify,
            control,
            own: None,
            crew: None,
            channels: Arc::default(),
            changes,
            live: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Waits until work is announced or `timeout` passes; whether it was
    /// announced.
    pub async fn wait(&self, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, self.notified()).await.is_ok()
    }

    /// Whether the subscription is up: then a wake-up reaches this spider
    /// for everything announced, since what is announced while it is down
    /// is looked for when it is back (every spider is woken then).
    pub fn live(&self) -> bool {
        self.live.load(Ordering::Relaxed)
    }

    /// Waits until a message arrives on the channel (or the subscription
    /// was re-made: something may have been missed). A wake-up that found
    /// this spider waiting also left a permit for the next wait (see
    /// [`wake_up`]); it is dropped here, since the spider looks now: kept,
    /// it woke the spider again at once, for a lease that found nothing
    /// (half the leases of a 16-worker crawl). What arrives from now on
    /// leaves a permit again.
    pub async fn notified(&self) {
        match &self.own {
            Some((_, own)) => tokio::select! {
                _ = self.notify.notified() => {}
                _ = own.notified() => {}
            },
            None => self.notify.notified().await,
        }
        let _ = self.notify.notified().now_or_never();
        if let Some((_, own)) = &self.own {
            let _ = own.notified().now_or_never();
        }
    }

    /// Waits until the spider's control may have changed (`pause`,
    /// `resume`, or a subscription re-made: a message may have been
    /// missed), or `timeout` passes.
    pub async fn control(&self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.control.notified()).await;
    }
}

impl Drop for Wake {
    fn drop(&mut self) {
        let Ok(mut c) = self.channels.lock() else {
            return;
        };
        let own = self.own.as_ref().map(|(channel, _)| channel);
        if let (Some(watch), Some(entry)) = (&self.crew, c.get_mut(&self.channel)) {
            entry.crew.retain(|w| !Arc::ptr_eq(w, watch));
        }
        for channel in std::iter::once(&self.channel).chain(own) {
            if let Some(entry) = c.get_mut(channel) {
                entry.spiders -= 1;
                if entry.spiders == 0 {
                    c.remove(channel);
                    let _ = self.changes.send(Change::Unsubscribe(channel.clone()));
                }
            }
        }
    }
}
