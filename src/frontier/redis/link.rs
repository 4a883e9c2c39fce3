//! A link to the Redis a crawl runs on, one server or a Redis Cluster:
//! where it is ([`Place`]), how long connecting and answering may take,
//! and the connection itself ([`Conn`]), a `redis::aio::ConnectionLike`
//! for either, so every script and command is written once.
//!
//! - A server: a `ConnectionManager` that re-makes a lost connection when
//!   next used.
//! - A cluster: the redis crate's cluster connection, which learns the
//!   slot map from the nodes it is given, follows MOVED and ASK
//!   redirects, and finds the promoted replica after a failover.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// Where a crawl's Redis is.
#[derive(Clone)]
pub(super) enum Place {
    Server(redis::Client),
    Cluster {
        client: ClusterClient,
        /// One client per node given, for the wake-up subscription (pub/sub
        /// messages reach every node of a cluster).
        nodes: Vec<redis::Client>,
    },
}

impl Place {
    /// A new connection to it; fails within about a second when Redis does
    /// not answer.
    pub(super) async fn open(&self) -> redis::RedisResult<Conn> {
        match self {
            Place::Server(client) => {
                let config = redis::aio::ConnectionManagerConfig::new()
                    .set_connection_timeout(CONNECT_TIMEOUT)
                    .set_response_timeout(RESPONSE_TIMEOUT)
                    .set_number_of_retries(0);
                Ok(Conn::new(Link::Server(
                    ConnectionManager::new_with_config(client.clone(), config).await?,
                )))
            }
            Place::Cluster { client, .. } => Ok(Conn::new(Link::Cluster(
                client.get_async_connection().await?,
            ))),
        }
    }
}

/// How long connecting may take before Redis counts as unreachable.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long one command may take.
pub(super) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// A connection to a server or a cluster; cheap to clone (clones share it,
/// and what it learnt about the server's scripting: see
/// [`Conn::functions`]).
#[derive(Clone)]
pub struct Conn {
    link: Link,
    /// Cleared for good when the server turns out to have no Redis
    /// Functions (before 7.0, or `FUNCTION`/`FCALL` disabled or denied).
    functions: Arc<AtomicBool>,
}

#[derive(Clone)]
enum Link {
    Server(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Conn {
    fn new(link: Link) -> Conn {
        Conn {
            link,
            functions: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Whether scripts are called as Redis Functions (`FCALL`) rather than
    /// with `EVALSHA` (see `scripts.rs`): until the server shows it has none.
    pub(super) fn functions(&self) -> bool {
        self.functions.load(Ordering::Relaxed)
    }

    pub(super) fn without_functions(&self) {
        self.functions.store(false, Ordering::Relaxed);
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.link {
            Link::Server(c) => c.req_packed_command(cmd),
            Link::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.link {
            Link::Server(c) => c.req_packed_commands(cmd, offset, count),
            Link::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.link {
            Link::Server(c) => c.get_db(),
            Link::Cluster(c) => c.get_db(),
        }
    }
}
