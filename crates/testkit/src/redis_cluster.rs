//! A real Redis Cluster for a test: six `redis-server --cluster-enabled
//! yes` processes on loopback ports (3 masters, 3 replicas) joined by
//! `redis-cli --cluster create`, each in its own temporary directory,
//! stopped when dropped. It can fail a master over the way operators do
//! (`CLUSTER FAILOVER` on its replica) or the way machines do (SIGKILL,
//! after which the replica is elected). A machine without `redis-server`
//! or `redis-cli` fails the test loudly (`.ci/run` installs them).

use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::redis::free_port;
use crate::KillOnDrop;

/// How long `redis-cli --cluster create` may take: it waits for the nodes
/// to meet with no end of its own (a node that never came up, say).
const CREATE_TIMEOUT: Duration = Duration::from_secs(60);

/// Joins the nodes at `addrs` into one cluster (`redis-cli --cluster
/// create`), or fails the test loudly, with the nodes' logs in `dir`.
fn create(addrs: &[String], dir: &Path) {
    let mut cmd = Command::new("redis-cli");
    cmd.args(["--cluster", "create"])
        .args(addrs)
        .args(["--cluster-replicas", "1", "--cluster-yes"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = KillOnDrop::spawn(&mut cmd).unwrap_or_else(|e| {
        panic!("cannot run redis-cli ({e}); install redis-tools (it comes with redis-server): the cluster tests need it")
    });
    let started = Instant::now();
    while child.try_wait().ok().flatten().is_none() {
        if started.elapsed() > CREATE_TIMEOUT {
            child.kill_now();
            panic!(
                "redis-cli --cluster create did not finish in {CREATE_TIMEOUT:?}: the nodes did not all meet (logs in {})",
                dir.display()
            );
        }
        // How often it is polled, not a wait for an effect.
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("cannot read what redis-cli --cluster create said: {e}"));
    assert!(
        out.status.success(),
        "redis-cli --cluster create failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One node of the cluster.
struct Node {
    port: u16,
    /// Killed when dropped, also while the cluster is still starting;
    /// `None` once killed on purpose ([`RedisCluster::kill_master_of`]).
    child: Option<KillOnDrop>,
}

/// A running 3-master, 3-replica Redis Cluster on 127.0.0.1.
pub struct RedisCluster {
    nodes: Vec<Node>,
    dir: tempfile::TempDir,
}

/// How long a node may be unreachable before the cluster fails it over
/// (`cluster-node-timeout`): short, so a failover takes a few seconds.
const NODE_TIMEOUT_MS: u64 = 2000;

impl RedisCluster {
    /// Starts six nodes and makes them one cluster; returns once every slot
    /// is served and every replica is in sync.
    pub fn start() -> RedisCluster {
        let dir = crate::temp_dir("redis-cluster");
        let mut taken = HashSet::new();
        let mut port = || loop {
            let p = free_port();
            if taken.insert(p) {
                return p;
            }
        };
        let mut nodes = Vec::new();
        for _ in 0..6 {
            let (p, bus) = (port(), port());
            let node_dir = dir.path().join(p.to_string());
            std::fs::create_dir_all(&node_dir).expect("node directory");
            let child = spawn_node(p, bus, &node_dir);
            nodes.push(Node {
                port: p,
                child: Some(child),
            });
        }
        let cluster = RedisCluster { nodes, dir };
        for n in &cluster.nodes {
            cluster.wait(&format!("node {} answers", n.port), || {
                connect(n.port).is_some()
            });
        }
        let addrs: Vec<String> = cluster
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        create(&addrs, cluster.dir.path());
        cluster.wait_healthy();
        cluster
    }

    /// `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,…`: every node.
    pub fn url(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+cluster://{}", nodes.join(","))
    }

    fn live_ports(&self) -> impl Iterator<Item = u16> + '_ {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| n.port)
    }

    /// A connection to a live node.
    fn any(&self) -> redis::Connection {
        self.live_ports().find_map(connect).unwrap_or_else(|| {
            panic!(
                "no node of the cluster answers ({})",
                self.dir.path().display()
            )
        })
    }

    /// Polls `ok` until it holds, for at most 60 s.
    fn wait(&self, what: &str, mut ok: impl FnMut() -> bool) {
        let started = Instant::now();
        while !ok() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the Redis Cluster did not get there in 60 s: {what} (logs in {})",
                self.dir.path().display()
            );
            // How often it is polled, not a wait for an effect.
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every live node says the cluster is ok and sees three masters, each
    /// with a replica whose copy is complete and whose link is up.
    fn wait_healthy(&self) {
        self.wait("every slot served, every master replicated", || {
            self.live_ports().all(|p| {
                let Some(mut c) = connect(p) else {
                    return false;
                };
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut c)
                    .unwrap_or_default();
                let shards = shards(&mut c);
                info.contains("cluster_state:ok")
                    && shards.len() == 3
                    && shards.iter().all(|s| {
                        !s.replicas.is_empty()
                            && s.replicas.iter().all(|&r| {
                                connect(r).is_some_and(|mut rc| {
                                    redis::cmd("INFO")
                                        .arg("replication")
                                        .query::<String>(&mut rc)
                                        .is_ok_and(|i| {
                                            i.contains("master_link_status:up")
                                                && i.contains("master_sync_in_progress:0")
                                        })
                                })
                            })
                    })
            })
        });
    }

    /// The masters serving slots, by port.
    fn masters(&self) -> Vec<u16> {
        let mut ports: Vec<u16> = shards(&mut self.any())
            .into_iter()
            .map(|s| s.master)
            .collect();
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// The port of the master serving `key`'s slot.
    pub fn master_of(&self, key: &str) -> u16 {
        self.shard_of(key).master
    }

    fn shard_of(&self, key: &str) -> Shard {
        self.shard_serving(self.slot_of(key))
    }

    /// The shard serving `slot`. Right after a failover a node's view may
    /// not name the new master yet: waits until it does.
    fn shard_serving(&self, slot: u16) -> Shard {
        let mut found = None;
        self.wait(&format!("a master serves slot {slot}"), || {
            found = shards(&mut self.any()).into_iter().find(|s| s.serves(slot));
            found.is_some()
        });
        found.unwrap_or_else(|| panic!("no node serves slot {slot}"))
    }

    fn slot_of(&self, key: &str) -> u16 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.any())
            .expect("CLUSTER KEYSLOT")
    }

    /// A connection to the master serving `key`, for assertions.
    pub fn conn_for(&self, key: &str) -> redis::Connection {
        let port = self.master_of(key);
        connect(port).unwrap_or_else(|| panic!("cannot connect to the master on {port}"))
    }

    /// Fails `key`'s master over the way an operator does: `CLUSTER
    /// FAILOVER` on its replica, which waits until it has every write.
    /// Returns once the replica serves the slot.
    pub fn failover(&self, key: &str) {
        let shard = self.shard_of(key);
        let replica = *shard
            .replicas
            .first()
            .unwrap_or_else(|| panic!("the master on {} has no replica", shard.master));
        let mut c = connect(replica).expect("replica answers");
        redis::cmd("CLUSTER")
            .arg("FAILOVER")
            .query::<()>(&mut c)
            .expect("CLUSTER FAILOVER");
        self.wait(&format!("replica {replica} serves {key}"), || {
            self.master_of(key) == replica
        });
        self.wait_healthy();
    }

    /// Fails `key`'s master the way a machine does: SIGKILL. Returns the
    /// killed port once its replica has been elected and serves the slot
    /// (writes the replica had not received are lost, as in production).
    ///
    /// It first waits until the replica has what the master had when the
    /// kill was decided (a replica still loading its first copy would lose
    /// the whole data set, which no failover survives); writes after that
    /// may still be lost.
    pub fn kill_master_of(&mut self, key: &str) -> u16 {
        let slot = self.slot_of(key);
        let shard = self.shard_serving(slot);
        let old = shard.master;
        let offset = |port: u16, field: &str| -> Option<u64> {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut connect(port)?)
                .ok()?;
            info.lines()
                .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse().ok())
        };
        let target = offset(old, "master_repl_offset").expect("the master reports its offset");
        self.wait(&format!("a replica of {old} has offset {target}"), || {
            shard
                .replicas
                .iter()
                .any(|&r| offset(r, "slave_repl_offset").is_some_and(|o| o >= target))
        });
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port == old)
            .expect("the master is one of ours");
        if let Some(mut child) = node.child.take() {
            child.kill_now();
        }
        self.wait(&format!("a replica of {old} is elected for {key}"), || {
            self.live_ports().all(|p| {
                connect(p).is_some_and(|mut c| {
                    redis::cmd("CLUSTER")
                        .arg("INFO")
                        .query::<String>(&mut c)
                        .is_ok_and(|i| i.contains("cluster_state:ok"))
                        // Every node names a new master for the slot (the
                        // old one is left out of a view once it is marked
                        // failed, before the new one is in).
                        && shards(&mut c)
                            .iter()
                            .any(|s| s.serves(slot) && s.master != old)
                })
            })
        });
        old
    }

    /// Every key on every live master, sorted.
    pub fn keys(&self) -> Vec<String> {
        let mut keys = Vec::new();
        for port in self.masters() {
            if let Some(mut c) = connect(port) {
                let mut some: Vec<String> = redis::cmd("KEYS")
                    .arg("*")
                    .query(&mut c)
                    .unwrap_or_default();
                keys.append(&mut some);
            }
        }
        keys.sort();
        keys
    }
}

/// The slots a master serves, and its replicas.
struct Shard {
    master: u16,
    ranges: Vec<(u16, u16)>,
    replicas: Vec<u16>,
}

impl Shard {
    fn serves(&self, slot: u16) -> bool {
        self.ranges.iter().any(|&(a, b)| a <= slot && slot <= b)
    }
}

/// The cluster as `c`'s node sees it (`CLUSTER NODES`): every master that
/// serves slots and is not marked failed, with its live replicas.
fn shards(c: &mut redis::Connection) -> Vec<Shard> {
    let text: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query(c)
        .unwrap_or_default();
    // id, port, flags, master id, slot ranges
    let nodes: Vec<(&str, u16, &str, &str, Vec<&str>)> = text
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let addr = f.get(1)?.split('@').next()?;
            let port = addr.rsplit(':').next()?.parse().ok()?;
            Some((
                *f.first()?,
                port,
                *f.get(2)?,
                *f.get(3)?,
                f.get(8..).unwrap_or_default().to_vec(),
            ))
        })
        .filter(|(_, _, flags, _, _)| !flags.contains("fail") && !flags.contains("handshake"))
        .collect();
    nodes
        .iter()
        .filter(|(_, _, flags, _, slots)| flags.contains("master") && !slots.is_empty())
        .map(|(id, port, _, _, slots)| Shard {
            master: *port,
            ranges: slots
                .iter()
                .filter(|r| !r.starts_with('['))
                .filter_map(|r| match r.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => r.parse().ok().map(|n| (n, n)),
                })
                .collect(),
            replicas: nodes
                .iter()
                .filter(|(_, _, flags, master, _)| flags.contains("slave") && master == id)
                .map(|(_, p, _, _, _)| *p)
                .collect(),
        })
        .collect()
}

fn connect(port: u16) -> Option<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).ok()?;
    let mut conn = client
        .get_connection_with_timeout(Duration::from_secs(1))
        .ok()?;
    redis::cmd("PING").query::<String>(&mut conn).ok()?;
    Some(conn)
}

fn spawn_node(port: u16, bus: u16, dir: &Path) -> KillOnDrop {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
        .arg(dir)
        .args(["--logfile", "redis.log", "--protected-mode", "yes"])
        .args([
            "--save",
            "",
            "--appendonly",
            "no",
            "--repl-diskless-sync-delay",
            "0",
        ])
        .args([
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
        ])
        .args(["--cluster-port", &bus.to_string()])
        .args(["--cluster-node-timeout", &NODE_TIMEOUT_MS.to_string()]);
    KillOnDrop::spawn(&mut cmd).unwrap_or_else(|e| {
            panic!("cannot start redis-server ({e}); install it (apt-get install redis-server): the cluster tests need a real Redis Cluster")
        })
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        // Stopped before their logs are copied, so the copies are whole.
        for n in &mut self.nodes {
            if let Some(mut child) = n.child.take() {
                child.kill_now();
            }
        }
        // A failing test keeps the nodes' logs for whoever reads it.
        if std::thread::panicking() {
            let keep = std::env::temp_dir().join(format!(
                "crawlworker-redis-cluster-{}",
                self.nodes.first().map_or(0, |n| n.port)
            ));
            for n in &self.nodes {
                let to = keep.join(n.port.to_string());
                if std::fs::create_dir_all(&to).is_ok() {
                    let from = self.dir.path().join(n.port.to_string());
                    let _ = std::fs::copy(from.join("redis.log"), to.join("redis.log"));
                    let _ = std::fs::copy(from.join("nodes.conf"), to.join("nodes.conf"));
                }
            }
            eprintln!("the Redis Cluster's logs are kept in {}", keep.display());
        }
    }
}
