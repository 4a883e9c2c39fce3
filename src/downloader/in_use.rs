//! A map of per-host values that exist only while some request uses them:
//! a host's download slots in this worker, or the lock that lets one task
//! at a time fetch its robots.txt. An entry is made by the first
//! [`InUse::hold`] of its key and removed when the last [`Held`] handle for
//! it is dropped, so the map never holds more entries than there are
//! requests waiting or in progress, however many hosts a crawl has seen.
//!
//! Hand-written rather than taken from a cache crate on purpose: a cache
//! evicts by size or age, and evicting an entry that is still held would
//! break what it guards (a second semaphore for the same host lets twice
//! its concurrency through). Here removal follows use exactly; an entry
//! that comes back is made fresh, which is correct because nothing was
//! holding the old one (all its permits were free, its lock unlocked).

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex, PoisonError};

/// Host → value, with a count of the handles that hold it.
#[derive(Debug)]
pub struct InUse<V> {
    entries: Arc<Mutex<HashMap<String, Entry<V>>>>,
}

#[derive(Debug)]
struct Entry<V> {
    value: Arc<V>,
    /// Live [`Held`] handles for this key; the entry goes at zero.
    users: usize,
}

/// A handle on one entry; dropping the last one removes the entry.
#[derive(Debug)]
pub struct Held<V> {
    key: String,
    value: Arc<V>,
    entries: Arc<Mutex<HashMap<String, Entry<V>>>>,
}

impl<V> Default for InUse<V> {
    fn default() -> Self {
        InUse {
            entries: Arc::default(),
        }
    }
}

impl<V> InUse<V> {
    /// The entry of `key`, made with `make` if nobody holds it.
    pub fn hold(&self, key: &str, make: impl FnOnce() -> V) -> Held<V> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = entries.entry(key.to_string()).or_insert_with(|| Entry {
            value: Arc::new(make()),
            users: 0,
        });
        entry.users += 1;
        Held {
            key: key.to_string(),
            value: Arc::clone(&entry.value),
            entries: Arc::clone(&self.entries),
        }
    }

    /// Entries held right now.
    pub fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl<V> Held<V> {
    /// The key it holds.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl<V> Deref for Held<V> {
    type Target = V;

    fn deref(&self) -> &V {
        &self.value
    }
}

impl<V> Drop for Held<V> {
    fn drop(&mut self) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = entries.get_mut(&self.key) {
            entry.users = entry.users.saturating_sub(1);
            if entry.users == 0 {
                entries.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_lives_while_held_and_goes_with_its_last_handle() {
        let map: InUse<u32> = InUse::default();
        let a = map.hold("a.test", || 1);
        let a2 = map.hold("a.test", || 2);
        assert!(std::ptr::eq(&*a, &*a2), "one value per key");
        assert_eq!(*a2, 1);
        let b = map.hold("b.test", || 3);
        assert_eq!(map.len(), 2);
        drop(a);
        assert_eq!(map.len(), 2, "a.test is still held");
        drop(a2);
        assert_eq!(map.len(), 1);
        drop(b);
        assert_eq!(map.len(), 0);
        // Made fresh when used again.
        assert_eq!(*map.hold("a.test", || 4), 4);
        assert_eq!(map.len(), 0);
    }

    #[test]
    fn many_keys_used_one_after_another_leave_nothing() {
        let map: InUse<()> = InUse::default();
        for i in 0..10_000 {
            let _held = map.hold(&format!("h{i}.test"), || ());
            assert_eq!(map.len(), 1);
        }
        assert_eq!(map.len(), 0);
    }
}
