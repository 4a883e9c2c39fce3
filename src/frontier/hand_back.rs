//! Handing back what a worker cannot start. When one of its commits finds
//! it holding over twice its fair share of the crawl's leases
//! ([`super::fairness::over_share`]), each request of its spider waiting
//! for one of the worker's own download slots goes back to the queue, and
//! the release wakes the peers waiting for work to lease it
//! (`scripts/release.lua`); its downloads in progress finish. The first
//! worker of a crawl leases the start pages before its peers have joined
//! the crew: without this, the pages it could not start waited for its
//! slots while they had nothing to do, and a SIGKILL of it stranded them
//! all for a lease.

use std::sync::Arc;

use tokio::sync::watch;

/// The signal a spider's frontier raises and its requests waiting for a
/// download slot give up on; clones share it.
#[derive(Debug, Clone)]
pub struct HandBack(Arc<watch::Sender<u64>>);

impl Default for HandBack {
    fn default() -> HandBack {
        HandBack(Arc::new(watch::channel(0).0))
    }
}

impl HandBack {
    /// Asks every request waiting for a slot now to go back.
    pub fn ask(&self) {
        self.0.send_modify(|asks| *asks = asks.wrapping_add(1));
    }

    /// Resolves at the first ask after this call.
    pub fn asked(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut asks = self.0.subscribe();
        async move {
            // The sender lives as long as `self`'s clones; without it,
            // nothing can ask any more.
            if asks.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::HandBack;

    #[tokio::test]
    async fn only_an_ask_after_the_wait_began_ends_it() {
        let hand_back = HandBack::default();
        hand_back.ask();
        let waiting = hand_back.asked();
        let early = tokio::time::timeout(Duration::from_millis(50), hand_back.asked()).await;
        assert!(early.is_err(), "an ask before the wait ended it");
        hand_back.clone().ask();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("an ask after the wait began did not end it");
    }
}
