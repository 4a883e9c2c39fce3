//! A real `redis-server` for a test: a free loopback port, its own
//! temporary directory, stopped (SIGKILL, by its [`KillOnDrop`]) and
//! removed when dropped. A machine without `redis-server` fails the test
//! loudly (`.ci/run` installs it).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::KillOnDrop;

/// A running `redis-server` on 127.0.0.1.
pub struct RedisServer {
    child: KillOnDrop,
    port: u16,
    /// Its working directory (AOF, RDB, log), removed when dropped.
    dir: tempfile::TempDir,
    /// Extra arguments, kept to restart it the same way.
    args: Vec<String>,
}

/// A loopback port nobody listens on right now, outside the kernel's
/// ephemeral range where it can: a port from `bind(0)` can be handed to the
/// next `bind(0)` or outgoing connection of any test running beside this
/// one, and a server that stops for a while (a Redis restarted after an
/// outage) then cannot bind its port again. Below that range the ports are
/// handed out in turn from a random place, so a test process gets the same
/// port twice only after going round them all.
pub fn free_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let below = ephemeral_low().filter(|&low| low > FIXED_PORTS_FROM + 1024);
    if let Some(low) = below {
        let span = u64::from(low - FIXED_PORTS_FROM);
        let start = *START.get_or_init(random);
        for _ in 0..64 {
            let turn = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let port = FIXED_PORTS_FROM + (start.wrapping_add(turn) % span) as u16;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("cannot find a free loopback port: {e}"))
}

/// The lowest port [`free_port`] picks outside the ephemeral range (well
/// above the ports services are registered on).
const FIXED_PORTS_FROM: u16 = 15000;

/// The first port of the kernel's ephemeral range, where Linux says.
fn ephemeral_low() -> Option<u16> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

/// A number that differs between processes (the standard hasher's keys
/// are random).
fn random() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(std::process::id())
}

impl RedisServer {
    /// Starts a server without persistence.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&["--save", "", "--appendonly", "no"])
    }

    /// Starts a server with extra `redis-server` arguments (e.g. AOF on).
    pub fn start_with(args: &[&str]) -> RedisServer {
        let dir = crate::temp_dir("redis");
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        // A port found free can be taken before the server binds it: try a
        // few.
        for _ in 0..5 {
            let port = free_port();
            let mut child = spawn_redis(port, dir.path(), &args);
            if wait_ready(&mut child, port) {
                return RedisServer {
                    child,
                    port,
                    dir,
                    args,
                };
            }
        }
        panic!(
            "redis-server did not start; see {}/redis.log",
            dir.path().display()
        );
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn connection(&self) -> Option<redis::Connection> {
        connect(self.port)
    }

    /// A synchronous connection for assertions.
    pub fn conn(&self) -> redis::Connection {
        self.connection()
            .unwrap_or_else(|| panic!("cannot connect to {}", self.url()))
    }

    /// Every key in the server, sorted.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query(&mut self.conn())
            .unwrap_or_else(|e| panic!("KEYS failed on {}: {e}", self.url()));
        keys.sort();
        keys
    }

    /// How many times the server ran `command` since it started, as `INFO
    /// commandstats` names it (`fcall`, `function|load`); commands that
    /// scripts run count too. A marker that a step ran, for tests that
    /// then assert what did not happen.
    pub fn command_calls(&self, command: &str) -> u64 {
        self.command_stat(command, "calls")
    }

    /// One figure of `command`'s line in `INFO commandstats` (`calls`,
    /// `failed_calls`: those that answered an error, …); 0 when it never
    /// ran.
    pub fn command_stat(&self, command: &str, field: &str) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.conn())
            .unwrap_or_else(|e| panic!("INFO commandstats failed on {}: {e}", self.url()));
        let prefix = format!("cmdstat_{command}:");
        let Some(line) = info.lines().find_map(|line| line.strip_prefix(&prefix)) else {
            return 0;
        };
        let value = line
            .split(',')
            .find_map(|pair| pair.strip_prefix(field)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("INFO commandstats: no {field} in {line}"));
        value
            .parse()
            .unwrap_or_else(|e| panic!("INFO commandstats: {field}={value}: {e}"))
    }

    /// An outage of `down`: [`RedisServer::stop`], then
    /// [`RedisServer::start_again`] on the same port and data.
    pub fn restart(&mut self, down: Duration) {
        self.stop();
        // The outage the caller asked for: Redis stays down this long.
        std::thread::sleep(down);
        self.start_again();
    }

    /// Stops the server as an operator would (SHUTDOWN, which writes the
    /// AOF) and returns once it has exited; [`RedisServer::start_again`]
    /// ends the outage. For a test that must see something happen while
    /// Redis is down, however long that takes on a loaded machine.
    pub fn stop(&mut self) {
        let _ = redis::cmd("SHUTDOWN").query::<()>(&mut self.conn());
        let _ = self.child.wait();
    }

    /// Starts the stopped server again on the same port and data.
    pub fn start_again(&mut self) {
        self.child = spawn_redis(self.port, self.dir.path(), &self.args);
        assert!(
            wait_ready(&mut self.child, self.port),
            "redis-server did not come back on port {}; its log:\n{}",
            self.port,
            std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
        );
    }
}

fn connect(port: u16) -> Option<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).ok()?;
    let mut conn = client.get_connection().ok()?;
    redis::cmd("PING").query::<String>(&mut conn).ok()?;
    Some(conn)
}

/// Waits for the server to answer PING; false if it exits or never does.
fn wait_ready(child: &mut KillOnDrop, port: u16) -> bool {
    for _ in 0..100 {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if connect(port).is_some() {
            return true;
        }
        // How often it is polled, not a wait for an effect.
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn spawn_redis(port: u16, dir: &Path, args: &[String]) -> KillOnDrop {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
        .arg(dir)
        .args(["--logfile", "redis.log", "--protected-mode", "yes"])
        .args(args);
    KillOnDrop::spawn(&mut cmd).unwrap_or_else(|e| {
            panic!("cannot start redis-server ({e}); install it (apt-get install redis-server): the tests need a real Redis")
        })
}
