//! Records the git revision the binary is built from, for `--version` and
//! the `crawlworker_build_info` metric ("unknown" outside a git checkout).

use std::process::Command;

fn main() {
    let revision = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=CRAWLWORKER_REVISION={revision}");
    for path in watched() {
        println!("cargo:rerun-if-changed={path}");
    }
}

/// What moves when the revision does: HEAD and the branch heads, where git
/// keeps them (in a worktree, `.git` is a file and they live elsewhere: a
/// path that does not exist would make every build run this again).
fn watched() -> Vec<String> {
    Command::new("git")
        .args([
            "rev-parse",
            "--git-path",
            "HEAD",
            "--git-path",
            "refs/heads",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.lines().map(str::to_string).collect::<Vec<_>>())
        .filter(|paths| !paths.is_empty())
        .unwrap_or_else(|| vec![".git/HEAD".to_string(), ".git/refs/heads".to_string()])
}
