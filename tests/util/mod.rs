//! Test support: the crawlworker binary, and the demo forum served on a
//! free loopback port.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root (tests run from it, but say so explicitly).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the crawlworker binary with `args` from the repository root.
pub fn crawlworker(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_crawlworker"))
        .args(args)
        .current_dir(root())
        .env_remove("RUST_LOG")
        .output()
        .unwrap_or_else(|e| panic!("cannot run the crawlworker binary: {e}"))
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every file with extension `ext` in `dir`, sorted.
pub fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    out.sort();
    out
}

/// A real `redis-server` on a free loopback port, with its own directory;
/// stopped when dropped. A machine without redis-server fails the test
/// loudly (CI installs it: see .ci/run).
pub struct RedisServer {
    child: std::process::Child,
    port: u16,
    dir: PathBuf,
    args: Vec<String>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("cannot find a free loopback port: {e}"))
}

impl RedisServer {
    /// Starts a server without persistence.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&["--save", "", "--appendonly", "no"])
    }

    /// Starts a server with extra `redis-server` arguments (e.g. AOF on).
    pub fn start_with(args: &[&str]) -> RedisServer {
        let dir = std::env::temp_dir().join(format!(
            "crawlworker-redis-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        for _ in 0..5 {
            let port = free_port();
            let child = spawn_redis(port, &dir, &args);
            let mut server = RedisServer {
                child,
                port,
                dir: dir.clone(),
                args: args.clone(),
            };
            if server.wait_ready() {
                return server;
            }
            let _ = server.child.kill();
            let _ = server.child.wait();
        }
        panic!(
            "redis-server did not start; see {}/redis.log",
            dir.display()
        );
    }

    fn wait_ready(&mut self) -> bool {
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if self.connection().is_some() {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        false
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn connection(&self) -> Option<redis::Connection> {
        let client = redis::Client::open(self.url()).ok()?;
        let mut conn = client.get_connection().ok()?;
        redis::cmd("PING").query::<String>(&mut conn).ok()?;
        Some(conn)
    }

    /// A synchronous connection for assertions.
    pub fn conn(&self) -> redis::Connection {
        self.connection()
            .unwrap_or_else(|| panic!("cannot connect to {}", self.url()))
    }

    /// Stops the server as an operator would (SHUTDOWN, which writes the
    /// AOF), waits `down`, and starts it again on the same port and data.
    pub fn restart(&mut self, down: std::time::Duration) {
        let _ = redis::cmd("SHUTDOWN").query::<()>(&mut self.conn());
        let _ = self.child.wait();
        std::thread::sleep(down);
        self.child = spawn_redis(self.port, &self.dir, &self.args);
        assert!(
            self.wait_ready(),
            "redis-server did not come back on port {}",
            self.port
        );
    }
}

fn spawn_redis(port: u16, dir: &Path, args: &[String]) -> std::process::Child {
    Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
        .arg(dir)
        .args(["--logfile", "redis.log", "--protected-mode", "yes"])
        .args(args)
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start redis-server ({e}); install it (apt-get install redis-server): the tests need a real Redis")
        })
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A copy of a shipped spider whose URLs point at `base` instead of the
/// demo's default 127.0.0.1:8700, with `extra` appended (e.g. settings).
pub fn spider_for(name: &str, base: &str, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(root().join("spiders").join(format!("{name}.toml")))
        .unwrap_or_else(|e| panic!("cannot read spider {name}: {e}"));
    let text = text.replace("http://127.0.0.1:8700", base);
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// A `crawlworker run` process; its log goes to a file (a pipe nobody
/// reads could fill up and block it).
pub struct Worker {
    pub child: std::process::Child,
    log: PathBuf,
}

static WORKER_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Worker {
    /// Starts `crawlworker run SPIDER --redis URL ARGS…` with `env`.
    pub fn spawn(spider: &Path, redis: &str, args: &[&str], env: &[(&str, &str)]) -> Worker {
        let n = WORKER_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log =
            std::env::temp_dir().join(format!("crawlworker-worker-{}-{n}.log", std::process::id()));
        let file = std::fs::File::create(&log)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", log.display()));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_crawlworker"));
        cmd.arg("run")
            .arg(spider)
            .args(["--redis", redis])
            .args(args)
            .current_dir(root())
            .env("CRAWLWORKER_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(file);
        for (k, v) in env {
            cmd.env(k, v);
        }
        Worker {
            child: cmd
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start a worker: {e}")),
            log,
        }
    }

    /// SIGKILL: the worker dies at once, wherever it is.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM (a graceful stop).
    pub fn terminate(&self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
    }

    /// Waits up to `limit` for the worker to exit; its exit status and stderr.
    pub fn wait(mut self, limit: std::time::Duration) -> (std::process::ExitStatus, String) {
        let start = std::time::Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return (status, self.log());
            }
            if start.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "worker did not exit within {limit:?}; its log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Worker {
    /// What the worker logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Runs the crawlworker binary with `args` and a Redis URL in the
/// environment.
pub fn crawlworker_with_redis(redis: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_crawlworker"))
        .args(args)
        .current_dir(root())
        .env("REDIS_URL", redis)
        .env("CRAWLWORKER_LOG", "warn")
        .output()
        .unwrap_or_else(|e| panic!("cannot run the crawlworker binary: {e}"))
}
