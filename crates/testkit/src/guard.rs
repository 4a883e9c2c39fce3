//! [`KillOnDrop`]: a child process that cannot outlive the test that
//! started it. A test that fails unwinds, and the guard, dropped on the
//! way, kills its process (SIGKILL) and reaps it; without it a failing
//! test could leave a worker, a dashboard or a browser running after
//! `cargo test` exits. Every process the tests and the test kit start and
//! do not wait for at once is held by one.
//!
//! One-shot commands run with `Command::output` or `Command::status` need
//! none: those calls return only once the process has exited. A tmux
//! server, which runs detached from the command that starts it, is stopped
//! by [`crate::Terminal`]'s own drop.

use std::io;
use std::ops::{Deref, DerefMut};
use std::process::{Child, Command, Output};

/// A running child process, killed (SIGKILL) and reaped when dropped.
/// It derefs to the [`Child`] for its pid, pipes and `try_wait`.
#[derive(Debug)]
pub struct KillOnDrop {
    /// `None` only once [`KillOnDrop::wait_with_output`] has taken it to
    /// wait for its exit.
    child: Option<Child>,
}

impl KillOnDrop {
    /// Starts `cmd`; the error is the one `Command::spawn` gives (a
    /// missing program, say), for the caller to name what it needs.
    pub fn spawn(cmd: &mut Command) -> io::Result<KillOnDrop> {
        cmd.spawn().map(KillOnDrop::new)
    }

    /// Guards a child already started.
    pub fn new(child: Child) -> KillOnDrop {
        KillOnDrop { child: Some(child) }
    }

    /// SIGKILL now, and reap it (a process that has exited already is only
    /// reaped). Dropping the guard afterwards does nothing more.
    pub fn kill_now(&mut self) {
        if let Some(mut child) = self.child.take() {
            stop(&mut child);
        }
    }

    /// Whether it was killed with [`KillOnDrop::kill_now`] (or waited for).
    pub fn is_stopped(&self) -> bool {
        self.child.is_none()
    }

    /// Waits for it to exit and collects what it wrote to its piped
    /// stdout and stderr, as `Child::wait_with_output` does.
    pub fn wait_with_output(mut self) -> io::Result<Output> {
        match self.child.take() {
            Some(child) => child.wait_with_output(),
            None => Err(io::Error::other("the process was killed already")),
        }
    }
}

/// SIGKILL and reap; errors mean it had exited (and is reaped) already.
fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

impl Deref for KillOnDrop {
    type Target = Child;

    fn deref(&self) -> &Child {
        self.child
            .as_ref()
            .unwrap_or_else(|| panic!("the guarded process was killed or waited for already"))
    }
}

impl DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        self.child
            .as_mut()
            .unwrap_or_else(|| panic!("the guarded process was killed or waited for already"))
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.kill_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};

    /// A process that would run for ten minutes unless killed.
    fn long_sleep() -> KillOnDrop {
        KillOnDrop::spawn(Command::new("sleep").arg("600"))
            .unwrap_or_else(|e| panic!("cannot run sleep: {e}"))
    }

    /// Whether process `pid` exists (running, or exited and not reaped:
    /// a zombie keeps its `/proc` entry until its parent waits for it).
    fn exists(pid: u32) -> bool {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    }

    #[test]
    fn a_guarded_process_is_killed_when_a_panicking_scope_unwinds() {
        let mut pid = None;
        let unwound = catch_unwind(AssertUnwindSafe(|| {
            let running = long_sleep();
            pid = Some(running.id());
            assert!(exists(running.id()), "the process did not start");
            panic!("a failing test");
        }));
        assert!(unwound.is_err(), "the scope did not panic");
        let pid = pid.expect("the scope started the process");
        // Killed and reaped before the unwinding went on: gone already.
        assert!(!exists(pid), "process {pid} outlived the panic");
    }

    #[test]
    fn a_guarded_process_is_killed_when_dropped_and_kill_now_is_final() {
        let running = long_sleep();
        let pid = running.id();
        drop(running);
        assert!(!exists(pid), "process {pid} outlived its guard");

        let mut running = long_sleep();
        let pid = running.id();
        running.kill_now();
        assert!(running.is_stopped());
        assert!(!exists(pid), "process {pid} survived kill_now");
        drop(running);
    }

    #[test]
    fn wait_with_output_waits_instead_of_killing() {
        let out = KillOnDrop::spawn(
            Command::new("echo")
                .arg("done")
                .stdout(std::process::Stdio::piped()),
        )
        .unwrap_or_else(|e| panic!("cannot run echo: {e}"))
        .wait_with_output()
        .unwrap_or_else(|e| panic!("echo: {e}"));
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
    }
}
