//! How a long-running command stops: the first SIGINT or SIGTERM asks it
//! to finish what it has in hand and stop; a second exits at once. Nothing
//! is lost either way: what a command holds and has not finished goes back
//! to the cluster when its lease runs out.

use tokio::sync::watch;

/// What a command says as it stops.
pub(super) struct Stopping {
    /// Who stops, in "stop the {who} with SIGKILL".
    pub who: &'static str,
    /// What it finishes before it stops, in "finishing {finishing}".
    pub finishing: &'static str,
    /// What becomes of its unfinished work when it exits at once.
    pub unfinished: &'static str,
}

/// The worker's words.
pub(super) const WORKER: Stopping = Stopping {
    who: "worker",
    finishing: "pages in flight",
    unfinished: "unfinished pages return to the queue when their leases expire",
};

/// The exporter's words: what it took and did not acknowledge goes to
/// another exporter once its lease runs out.
pub(super) const EXPORTER: Stopping = Stopping {
    who: "exporter",
    finishing: "the batch in flight",
    unfinished: "unacknowledged items go to another exporter when this one's lease runs out",
};

/// First signal: `stop` is set. Second: exit now. The handlers are in
/// place when this returns (a task spawned to register them could run
/// after a signal that came early, which would then kill the process).
pub(super) fn listen_for_signals(stop: watch::Sender<bool>, says: Stopping) {
    use tokio::signal::unix::{signal, SignalKind};
    // A write past `ulimit -f` would kill the process (SIGXFSZ) with no
    // word; caught, the write fails with EFBIG and the command says so.
    // Its handler stays installed once registered.
    let _ = signal(SignalKind::from_raw(libc::SIGXFSZ));
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        tracing::warn!(
            "cannot listen for signals; stop the {} with SIGKILL (nothing is lost)",
            says.who
        );
        return;
    };
    tokio::spawn(async move {
        for n in 0.. {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            if n == 0 {
                tracing::info!(
                    "stopping: finishing {} (signal again to exit at once)",
                    says.finishing
                );
                let _ = stop.send(true);
            } else {
                tracing::warn!("second signal: exiting now; {}", says.unfinished);
                std::process::exit(130);
            }
        }
    });
}
