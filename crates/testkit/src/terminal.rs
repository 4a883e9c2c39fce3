//! A pseudo-terminal for tests of what a person sees: a command run in a
//! tmux session of its own (own socket, fixed size), its screen read with
//! `capture-pane`, keys sent with `send-keys`. `.ci/run` installs tmux.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One tmux server with one window running a command.
pub struct Terminal {
    socket: PathBuf,
    /// Holds the socket; removed when dropped.
    _dir: tempfile::TempDir,
}

impl Terminal {
    /// Runs `command` (a shell command line) in `dir`, on a `width` ×
    /// `height` terminal.
    pub fn start(command: &str, dir: &Path, width: u16, height: u16) -> Terminal {
        let tmp = crate::temp_dir("tmux");
        let socket = tmp.path().join("socket");
        let status = Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args(["-f", "/dev/null", "new-session", "-d", "-x"])
            .arg(width.to_string())
            .arg("-y")
            .arg(height.to_string())
            .arg("-c")
            .arg(dir)
            .arg(command)
            .status()
            .unwrap_or_else(|e| {
                panic!("cannot run tmux ({e}): .ci/run installs it (apt-get install tmux)")
            });
        assert!(status.success(), "tmux new-session failed");
        Terminal { socket, _dir: tmp }
    }

    fn tmux(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.arg("-S").arg(&self.socket);
        cmd
    }

    /// What the screen shows now (empty once the command has exited).
    pub fn screen(&self) -> String {
        self.tmux()
            .args(["capture-pane", "-p"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// Types `keys` (tmux key names: `C-c`, `Enter`, or text).
    pub fn send_keys(&self, keys: &str) {
        let _ = self.tmux().args(["send-keys", keys]).status();
    }

    /// Whether the command still runs.
    pub fn running(&self) -> bool {
        self.tmux()
            .args(["has-session"])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self
            .tmux()
            .arg("kill-server")
            .stderr(std::process::Stdio::null())
            .status();
    }
}
