//! Politeness inside one worker. The cluster-wide part, each host's next
//! free slot, is reserved by the frontier's lease scripts, which hand every
//! leased request its wait; here the request waits for that slot holding no
//! download slot, then takes one of its host's slots
//! (`concurrent_requests_per_domain`), one of the spider's
//! (`concurrent_requests`) and one of the worker process's, which its
//! spiders share (`worker::pool`).
//!
//! A host's slots exist only while a request for it waits for them or
//! holds one ([`InUse`]): a crawl over a million hosts keeps as many
//! entries as it has requests in progress, not one per host ever seen. No
//! pacing state lives here (the next slot is in Redis), so nothing about a
//! host is lost when its entry goes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::in_use::{Held, InUse};
use crate::settings::Settings;
use crate::worker::pool::Share;

/// The worker's download slots, per host and in all.
#[derive(Debug)]
pub struct Politeness {
    downloads: Arc<Semaphore>,
    /// The spider's share of the worker's slots.
    share: Arc<Share>,
    per_host: usize,
    /// Host → its download slots in this worker, while a request uses them.
    hosts: InUse<Semaphore>,
    /// Requests waiting for their host's slot: they hold no download slot,
    /// so the worker does not count them as busy.
    waiting: AtomicUsize,
}

/// The slots a download holds while it runs.
#[derive(Debug)]
pub struct Slots {
    // Fields drop in order: the host's permit is given back before the
    // handle that may remove the host's entry.
    _host: Option<OwnedSemaphorePermit>,
    _host_entry: Held<Semaphore>,
    _download: Option<OwnedSemaphorePermit>,
    _worker: Option<OwnedSemaphorePermit>,
}

impl Politeness {
    pub fn new(settings: &Settings, share: Arc<Share>) -> Politeness {
        Politeness {
            downloads: Arc::new(Semaphore::new(settings.concurrent_requests.max(1) as usize)),
            share,
            per_host: settings.concurrent_requests_per_domain.max(1) as usize,
            hosts: InUse::default(),
            waiting: AtomicUsize::new(0),
        }
    }

    /// Counts a request that will wait for its host's slot, as soon as it
    /// is leased (so the worker's room is right before it starts).
    pub fn will_wait(&self) {
        self.waiting.fetch_add(1, Ordering::Relaxed);
    }

    /// Hosts whose slots a request waits for or holds right now.
    pub fn hosts_in_use(&self) -> usize {
        self.hosts.len()
    }

    /// Requests waiting for their host's slot.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Waits for the host's turn (a request counted by [`Self::will_wait`]);
    /// it stops counting as waiting when the wait ends or is abandoned.
    pub async fn wait_turn(&self, wait: Duration) {
        struct Counted<'a>(&'a AtomicUsize);
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        let _counted = Counted(&self.waiting);
        tokio::time::sleep(wait).await;
    }

    /// Takes a slot of `host`, a download slot of the spider and one of the
    /// worker, waiting for them. Dropping the future while it waits lets go
    /// of the host's entry too.
    pub async fn slots(&self, host: &str) -> Slots {
        let entry = self.hosts.hold(host, || Semaphore::new(self.per_host));
        // The semaphores are never closed, so acquiring cannot fail.
        let host = Arc::clone(entry.shared()).acquire_owned().await.ok();
        let download = self.downloads.clone().acquire_owned().await.ok();
        let worker = self.share.slot().await;
        Slots {
            _host: host,
            _host_entry: entry,
            _download: download,
            _worker: worker,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::pool::Pool;

    fn politeness(per_host: u32) -> Politeness {
        let settings = Settings {
            concurrent_requests: 64,
            concurrent_requests_per_domain: per_host,
            ..Settings::default()
        };
        Politeness::new(&settings, Arc::new(Pool::new(64).share(64)))
    }

    #[tokio::test]
    async fn a_host_entry_lives_while_its_slots_are_held_or_awaited() {
        let p = politeness(2);
        let a1 = p.slots("a.test").await;
        let a2 = p.slots("a.test").await;
        let b = p.slots("b.test").await;
        assert_eq!(p.hosts_in_use(), 2);
        // A third request for a.test waits: the host's limit still holds.
        let mut third = Box::pin(p.slots("a.test"));
        assert!(futures_util::poll!(third.as_mut()).is_pending());
        drop(a1);
        let a3 = third.await;
        drop((a2, b));
        assert_eq!(p.hosts_in_use(), 1, "a.test is still held");
        drop(a3);
        assert_eq!(p.hosts_in_use(), 0);
    }

    #[tokio::test]
    async fn a_request_that_gives_up_waiting_lets_go_of_its_host() {
        let p = politeness(1);
        let held = p.slots("a.test").await;
        let waiting = tokio::time::timeout(Duration::from_millis(10), p.slots("a.test")).await;
        assert!(waiting.is_err(), "the host's only slot is taken");
        drop(held);
        assert_eq!(p.hosts_in_use(), 0);
    }

    #[tokio::test]
    async fn many_hosts_one_after_another_leave_no_entries() {
        let p = politeness(8);
        for i in 0..10_000 {
            let _slots = p.slots(&format!("h{i}.test")).await;
        }
        assert_eq!(p.hosts_in_use(), 0);
    }
}
