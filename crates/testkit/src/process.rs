//! The `crawlworker` binary, run as a user would: one-shot commands with
//! their output, and [`Worker`] processes for the tests where a signal
//! (SIGKILL, SIGTERM) is the point. Each worker logs to a temporary file (a
//! pipe nobody reads could fill up and block it), and is killed when
//! dropped ([`KillOnDrop`]), so a failing test leaves none running.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use crate::{root, KillOnDrop};

/// The `crawlworker` binary cargo built for the running tests or
/// benchmarks: `CRAWLWORKER_BIN` if set, else beside the running test
/// executable's directory (`target/<profile>/crawlworker`, as tests run
/// from `target/<profile>/deps/`).
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("CRAWLWORKER_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe()
        .unwrap_or_else(|e| panic!("cannot tell where the running test is: {e}"));
    let profile_dir = exe
        .parent()
        .filter(|d| d.ends_with("deps"))
        .and_then(Path::parent)
        .or_else(|| exe.parent())
        .unwrap_or_else(|| panic!("{} has no directory", exe.display()));
    let bin = profile_dir.join(format!("crawlworker{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "no crawlworker binary at {} (cargo builds it for the root package's tests and benches; or set CRAWLWORKER_BIN)",
        bin.display()
    );
    bin
}

fn command() -> Command {
    let mut cmd = Command::new(binary());
    cmd.current_dir(root())
        .env_remove("RUST_LOG")
        .env_remove("REDIS_URL")
        .env_remove("CRAWLWORKER_REDIS_URL");
    cmd
}

/// Runs `crawlworker ARGS…` from the repository root.
pub fn crawlworker(args: &[&str]) -> Output {
    command()
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the crawlworker binary: {e}"))
}

/// Runs `crawlworker ARGS…` with `REDIS_URL` set to `redis`.
pub fn crawlworker_with_redis(redis: &str, args: &[&str]) -> Output {
    command()
        .args(args)
        .env("REDIS_URL", redis)
        .env("CRAWLWORKER_LOG", "warn")
        .output()
        .unwrap_or_else(|e| panic!("cannot run the crawlworker binary: {e}"))
}

/// `crawlworker push-urls SPIDER ENTRY…` against `redis`, which must
/// succeed.
pub fn push_urls(redis: &str, spider: &Path, entries: &[String]) {
    let mut args = vec!["push-urls".to_string(), spider.display().to_string()];
    args.extend(entries.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = crawlworker_with_redis(redis, &args);
    assert!(out.status.success(), "push-urls: {}", stderr(&out));
}

/// A command's standard output, as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A command's standard error, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A `crawlworker run` process.
pub struct Worker {
    /// The process; it derefs to its `std::process::Child` (pid, status).
    pub child: KillOnDrop,
    /// Its standard error, removed when the worker is dropped.
    log: tempfile::NamedTempFile,
}

impl Worker {
    /// Starts `crawlworker run SPIDER --redis URL ARGS…` with `env`.
    pub fn spawn(spider: &Path, redis: &str, args: &[&str], env: &[(&str, &str)]) -> Worker {
        let spider = spider.display().to_string();
        let mut all = vec!["run", spider.as_str(), "--redis", redis];
        all.extend_from_slice(args);
        Worker::command(&all, env)
    }

    /// Starts `crawlworker ARGS…` (any long-running command, such as
    /// `export`) with `env`, logging to a file as a worker does.
    pub fn command(args: &[&str], env: &[(&str, &str)]) -> Worker {
        let log = tempfile::Builder::new()
            .prefix("crawlworker-worker-")
            .suffix(".log")
            .tempfile()
            .unwrap_or_else(|e| panic!("cannot create a worker log: {e}"));
        let file = log
            .reopen()
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", log.path().display()));
        let mut cmd = command();
        cmd.args(args)
            .env("CRAWLWORKER_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(file);
        for (k, v) in env {
            cmd.env(k, v);
        }
        Worker {
            child: KillOnDrop::spawn(&mut cmd)
                .unwrap_or_else(|e| panic!("cannot start a worker: {e}")),
            log,
        }
    }

    /// SIGKILL: the worker dies at once, wherever it is.
    pub fn kill(mut self) {
        self.child.kill_now();
    }

    /// Sends SIGTERM (a graceful stop); nothing if the worker has exited.
    pub fn terminate(&self) {
        let _ = self.send("TERM");
    }

    /// Sends the signal `name` (`"STOP"` freezes the worker where it is,
    /// `"CONT"` resumes it); panics if it cannot be sent.
    pub fn signal(&self, name: &str) {
        assert!(self.send(name), "kill -{name} {} failed", self.child.id());
    }

    /// Whether `kill -<name>` reached the worker.
    fn send(&self, name: &str) -> bool {
        Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Waits up to `limit` for the worker to exit; its exit status and
    /// what it logged.
    pub fn wait(mut self, limit: Duration) -> (ExitStatus, String) {
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return (status, self.log());
            }
            if start.elapsed() > limit {
                self.child.kill_now();
                panic!(
                    "worker did not exit within {limit:?}; its log:\n{}",
                    self.log()
                );
            }
            // How often the exit is polled for, not a wait for an effect.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the worker logged so far; bytes that are not UTF-8 are shown
    /// as U+FFFD rather than emptying the whole log (which would make an
    /// assertion that something is absent pass without looking).
    pub fn log(&self) -> String {
        match std::fs::read(self.log.path()) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => panic!(
                "cannot read the worker's log {}: {e}",
                self.log.path().display()
            ),
        }
    }
}

/// Whether this benchmark binary was started by `cargo bench` (which passes
/// `--bench`). `cargo test --all-targets` also runs benchmark binaries, with
/// no such argument: a benchmark with its own `main` then says so and
/// returns at once instead of running for minutes.
pub fn benchmarking() -> bool {
    if std::env::args().any(|a| a == "--bench") {
        return true;
    }
    eprintln!("not run: this benchmark runs under `cargo bench`");
    false
}
