//! The worker image, run with podman as a user runs it with Docker: one-shot
//! commands in it and [`Container`]s (removed when dropped, so a failing
//! test leaves none running). Every container is on the host's network and
//! reaches only loopback addresses.
//!
//! `scripts/container-image` builds the image (`scripts/test` runs it
//! first); [`image`] fails loudly when podman or the image is missing, or
//! when the image holds another build than `target/release/crawlworker`.
//! podman reads `deploy/podman/containers.conf` (no default ulimits, runc).

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::{root, stderr, stdout};

/// The image `scripts/container-image` tags.
pub const IMAGE: &str = "localhost/crawlworker:latest";

/// The same with Chromium, for rules that render (`Dockerfile`'s
/// `prebuilt-chromium` target).
pub const CHROMIUM_IMAGE: &str = "localhost/crawlworker:chromium";

/// `podman` with the project's containers.conf, run from the repository
/// root.
pub fn podman() -> Command {
    let mut cmd = Command::new("podman");
    cmd.current_dir(root()).env(
        "CONTAINERS_CONF",
        root().join("deploy/podman/containers.conf"),
    );
    cmd
}

/// Runs `podman ARGS…` to its end.
pub fn run(args: &[&str]) -> Output {
    podman().args(args).output().unwrap_or_else(|e| {
        panic!("cannot run podman ({e}): scripts/test installs it (apt-get install podman runc)")
    })
}

/// Runs `podman ARGS…`, which must succeed; its standard output.
pub fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "podman {} failed: {}{}",
        args.join(" "),
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}

/// The image, checked once: it exists and holds the very binary
/// `target/release/crawlworker` (a stale image would test old code).
pub fn image() -> &'static str {
    static CHECKED: OnceLock<()> = OnceLock::new();
    CHECKED.get_or_init(|| check_image(IMAGE));
    IMAGE
}

/// [`CHROMIUM_IMAGE`], checked once as [`image`] is.
pub fn chromium_image() -> &'static str {
    static CHECKED: OnceLock<()> = OnceLock::new();
    CHECKED.get_or_init(|| check_image(CHROMIUM_IMAGE));
    CHROMIUM_IMAGE
}

fn check_image(image: &str) {
    let exists = run(&["image", "exists", image]);
    assert!(
        exists.status.success(),
        "no image {image}: scripts/container-image builds it (scripts/test runs it first)"
    );
    let host = sha256(&release_binary("crawlworker"));
    let inside = ok(&[
        "run",
        "--rm",
        "--network",
        "host",
        "--entrypoint",
        "sha256sum",
        image,
        "/usr/local/bin/crawlworker",
    ]);
    assert!(
        inside.starts_with(&host),
        "{image} holds another build than target/release/crawlworker ({inside} vs {host}): run scripts/container-image"
    );
}

/// `target/release/NAME`, which scripts/test builds (`cargo build
/// --release`); a missing one fails loudly.
pub fn release_binary(name: &str) -> PathBuf {
    let path = root().join("target/release").join(name);
    assert!(
        path.exists(),
        "no {}: scripts/test builds it (cargo build --release --locked -p {name})",
        path.display()
    );
    path
}

fn sha256(path: &std::path::Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run sha256sum: {e}"));
    assert!(
        out.status.success(),
        "sha256sum {}: {}",
        path.display(),
        stderr(&out)
    );
    stdout(&out)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// A container by name, force-removed when dropped.
#[derive(Debug)]
pub struct Container {
    pub name: String,
}

impl Container {
    /// A name no other test's container has.
    pub fn unique_name(label: &str) -> String {
        format!(
            "crawlworker-test-{label}-{}-{}",
            std::process::id(),
            random_suffix()
        )
    }

    /// Starts `podman run -d --network host --name NAME OPTIONS… IMAGE
    /// ARGS…` (options such as `-e K=V`, `--read-only`).
    pub fn start(label: &str, options: &[&str], args: &[&str]) -> Container {
        let container = Container {
            name: Container::unique_name(label),
        };
        let mut argv = vec![
            "run",
            "-d",
            "--network",
            "host",
            "--name",
            container.name.as_str(),
        ];
        argv.extend(options);
        argv.push(image());
        argv.extend(args);
        ok(&argv);
        container
    }

    /// Guards a container started by other means (`podman-compose run`).
    pub fn named(name: &str) -> Container {
        Container {
            name: name.to_string(),
        }
    }

    /// `podman inspect --format FORMAT`, trimmed.
    pub fn inspect(&self, format: &str) -> String {
        ok(&["inspect", "--format", format, &self.name])
            .trim()
            .to_string()
    }

    /// Its logs (standard output and error).
    pub fn logs(&self) -> String {
        let out = run(&["logs", &self.name]);
        format!("{}{}", stdout(&out), stderr(&out))
    }

    /// Runs its health check once (`podman healthcheck run`): whether it
    /// passed.
    pub fn check_health(&self) -> bool {
        run(&["healthcheck", "run", &self.name]).status.success()
    }

    /// Its health as podman keeps it: `starting`, `healthy`, `unhealthy`.
    pub fn health(&self) -> String {
        self.inspect("{{.State.Healthcheck.Status}}")
    }

    /// `podman kill -s KILL`: it dies at once, wherever it is.
    pub fn kill(&self) {
        ok(&["kill", "-s", "KILL", &self.name]);
    }

    /// `podman stop -t GRACE` (SIGTERM, SIGKILL after `grace`): how long
    /// it took.
    pub fn stop(&self, grace: Duration) -> Duration {
        let started = Instant::now();
        ok(&["stop", "-t", &grace.as_secs().to_string(), &self.name]);
        started.elapsed()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman()
            .args(["rm", "-f", "-t", "0", &self.name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A few random hex digits, without a crate for it.
fn random_suffix() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("{:08x}", h.finish() as u32)
}
