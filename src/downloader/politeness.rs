//! Politeness inside one worker. The cluster-wide part, each host's next
//! free slot, is reserved by the frontier's lease scripts, which hand every
//! leased request its wait; here the request waits for that slot holding no
//! download slot, then takes one of its host's slots
//! (`concurrent_requests_per_domain`), one of the spider's
//! (`concurrent_requests`) and one of the worker process's, which its
//! spiders share (`worker::pool`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::settings::Settings;
use crate::worker::pool::Share;

/// The worker's download slots, per host and in all.
#[derive(Debug)]
pub struct Politeness {
    downloads: Arc<Semaphore>,
    /// The spider's share of the worker's slots.
    share: Arc<Share>,
    per_host: usize,
    /// Host → its download slots in this worker.
    hosts: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// Requests waiting for their host's slot: they hold no download slot,
    /// so the worker does not count them as busy.
    waiting: AtomicUsize,
}

/// The slots a download holds while it runs.
#[derive(Debug)]
pub struct Slots {
    _host: Option<OwnedSemaphorePermit>,
    _download: Option<OwnedSemaphorePermit>,
    _worker: Option<OwnedSemaphorePermit>,
}

impl Politeness {
    pub fn new(settings: &Settings, share: Arc<Share>) -> Politeness {
        Politeness {
            downloads: Arc::new(Semaphore::new(settings.concurrent_requests.max(1) as usize)),
            share,
            per_host: settings.concurrent_requests_per_domain.max(1) as usize,
            hosts: Mutex::new(HashMap::new()),
            waiting: AtomicUsize::new(0),
        }
    }

    /// Counts a request that will wait for its host's slot, as soon as it
    /// is leased (so the worker's room is right before it starts).
    pub fn will_wait(&self) {
        self.waiting.fetch_add(1, Ordering::Relaxed);
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
    /// worker, waiting for them.
    pub async fn slots(&self, host: &str) -> Slots {
        let host_slots = self
            .hosts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(host.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.per_host)))
            .clone();
        // The semaphores are never closed, so acquiring cannot fail.
        let host = host_slots.acquire_owned().await.ok();
        let download = self.downloads.clone().acquire_owned().await.ok();
        let worker = self.share.slot().await;
        Slots {
            _host: host,
            _download: download,
            _worker: worker,
        }
    }
}
