//! A real PostgreSQL server for a test: Debian's packaged binaries
//! (`/usr/lib/postgresql/<version>/bin`, the newest there; `scripts/test`
//! installs the `postgresql` package where it is missing), a fresh cluster
//! (`initdb`) in a temporary directory, listening on a free loopback port
//! only, with trust authentication for its superuser `postgres`. As root
//! (CI runs so, and PostgreSQL refuses to) the server runs as `nobody`,
//! through `setpriv`, which execs rather than forks, so the server is the
//! child this kit kills. Stopped and removed when dropped. A machine
//! without the binaries fails the test loudly.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::redis::free_port;
use crate::KillOnDrop;

/// A running `postgres` on 127.0.0.1.
pub struct PostgresServer {
    child: Option<KillOnDrop>,
    port: u16,
    bin: PathBuf,
    /// The cluster's directory (`data/`) and its log, removed when dropped.
    dir: tempfile::TempDir,
}

/// The directory of the packaged PostgreSQL programs: the newest version
/// under `/usr/lib/postgresql`, else `pg_config --bindir`.
pub fn postgres_bin() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return bin;
    }
    let from_config = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    match from_config.filter(|b| b.join("initdb").exists()) {
        Some(bin) => bin,
        None => panic!(
            "no PostgreSQL server programs (initdb, postgres) under /usr/lib/postgresql/*/bin: install the `postgresql` package (scripts/test does)"
        ),
    }
}

/// Whether this process runs as root (PostgreSQL refuses to).
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `program` from `bin`, run as `nobody` when this process is root.
fn as_server_user(bin: &Path, program: &str) -> Command {
    if is_root() {
        let mut cmd = Command::new("setpriv");
        cmd.args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "--reset-env",
            "--",
        ])
        .arg(bin.join(program));
        cmd
    } else {
        Command::new(bin.join(program))
    }
}

impl PostgresServer {
    /// A fresh cluster, started.
    pub fn start() -> PostgresServer {
        let bin = postgres_bin();
        let dir = crate::temp_dir("postgres");
        if is_root() {
            let owned = Command::new("chown")
                .args(["-R", "nobody:nogroup"])
                .arg(dir.path())
                .status();
            assert!(
                owned.is_ok_and(|s| s.success()),
                "cannot chown {} to nobody",
                dir.path().display()
            );
        }
        let data = dir.path().join("data");
        let out = as_server_user(&bin, "initdb")
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ])
            .output()
            .unwrap_or_else(|e| panic!("cannot run initdb from {}: {e}", bin.display()));
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut server = PostgresServer {
            child: None,
            port: 0,
            bin,
            dir,
        };
        // A port found free can be taken before the server binds it.
        for _ in 0..5 {
            server.port = free_port();
            if server.spawn() {
                return server;
            }
        }
        panic!("postgres did not start; see {}", server.log().display());
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    /// Starts the server on its port and data; true once it answers.
    fn spawn(&mut self) -> bool {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log())
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", self.log().display()));
        let mut cmd = as_server_user(&self.bin, "postgres");
        cmd.arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-p", &self.port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!(
                "unix_socket_directories={}",
                self.dir.path().display()
            ))
            .args([
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
            ])
            .stdout(Stdio::null())
            .stderr(log);
        let child =
            KillOnDrop::spawn(&mut cmd).unwrap_or_else(|e| panic!("cannot start postgres: {e}"));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(|c| c.try_wait()) {
                return false;
            }
            if self.ready() {
                return true;
            }
            // How often readiness is polled, not a wait for an effect.
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Whether the server accepts connections now.
    pub fn ready(&self) -> bool {
        Command::new(self.bin.join("pg_isready"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
            .status()
            .is_ok_and(|s| s.success())
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server as an operator would (a fast shutdown: sessions
    /// are ended, transactions in progress rolled back), and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .arg("-INT")
                .arg(child.id().to_string())
                .status();
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            child.kill_now();
        }
    }

    /// Starts it again, on the same port and data, after [`Self::stop`].
    pub fn start_again(&mut self) {
        assert!(
            self.spawn(),
            "postgres did not come back on port {}; see {}",
            self.port,
            self.log().display()
        );
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        self.stop();
    }
}
