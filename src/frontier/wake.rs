//! Wake-ups for idle workers: a pub/sub subscription to the spider's wake
//! channel, which every step that enqueues work publishes to. An idle worker
//! waits on it instead of polling, so new work is picked up in milliseconds.
//! The subscription reconnects by itself when Redis goes away.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::Notify;

use super::connection::RedisTarget;
use super::redis_url::redact;
use crate::backoff::Backoff;

/// Wakes the waiters whenever work is announced.
pub struct Wake {
    notify: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Wake {
    /// Subscribes to `channel`; keeps the subscription alive in the
    /// background. On a cluster, any node will do (pub/sub messages reach
    /// every node); when one goes away the next is tried.
    pub fn subscribe(target: RedisTarget, channel: String) -> Wake {
        let notify = Arc::new(Notify::new());
        let n = notify.clone();
        let nodes = target.pubsub_nodes();
        let task = tokio::spawn(async move {
            let mut backoff = Backoff::REDIS.attempts();
            for client in nodes.iter().cycle() {
                match client.get_async_pubsub().await {
                    Ok(mut pubsub) => match pubsub.subscribe(&channel).await {
                        Ok(()) => {
                            backoff.reset();
                            // Something may have been announced while we
                            // were not listening.
                            n.notify_waiters();
                            n.notify_one();
                            let mut messages = pubsub.on_message();
                            while messages.next().await.is_some() {
                                n.notify_waiters();
                                n.notify_one();
                            }
                            tracing::warn!(channel = %channel, "wake-up subscription lost; resubscribing");
                        }
                        Err(e) => {
                            tracing::warn!(channel = %channel, error = %e, "cannot subscribe to wake-ups; retrying")
                        }
                    },
                    Err(e) => tracing::debug!(
                        redis = %redact(&client.get_connection_info().addr.to_string()),
                        error = %e,
                        "wake-up subscription cannot connect; retrying"
                    ),
                }
                tokio::time::sleep(backoff.next_delay()).await;
            }
        });
        Wake { notify, task }
    }

    /// Waits until work is announced or `timeout` passes.
    pub async fn wait(&self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.notify.notified()).await;
    }
}

impl Drop for Wake {
    fn drop(&mut self) {
        self.task.abort();
    }
}
