//! Extraction off the async runtime. Parsing and extracting a page is CPU
//! work (milliseconds for a large page, up to `extract_timeout` for a
//! hostile one): run on the runtime's threads, it would stall every
//! download, commit and lease renewal of the worker meanwhile, and a
//! stopping worker could not keep its grace period. So a large page is
//! extracted on tokio's blocking threads, at most one per CPU at once
//! (more would only share the same CPUs while holding more pages in
//! memory); pages wait for a turn in order.
//!
//! A small page (up to [`INLINE_BYTES`]) is extracted where it is, on the
//! runtime: its parse is bounded by its size (tens of milliseconds for the
//! worst such page, a fraction of one for a usual one), while handing it to
//! another thread and back costs two thread wake-ups, about as much CPU as
//! a small page's extraction itself, and spreads finished pages out so
//! that fewer share each commit (measured on the demo forum: 1.7 context
//! switches and 0.27 script calls per page handed off, 0.2 and 0.19 in
//! place). On the runtime's one thread (`--threads`' default) a worker
//! parses such pages on one core; a lower bound would spread pages of
//! 16–64 KiB over every core, at 13 % more CPU a page and a third more
//! wall time where two cores are shared (BENCHMARKS.md, "Threads per
//! worker").
//!
//! A page task abandoned by a stopping worker raises its extraction's stop
//! flag, which the extraction reads between slices of its parse and
//! between its steps ([`crate::extract::bounded`]), so the thread is free
//! soon after and the process exits without waiting for a runaway page.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use tokio::sync::Semaphore;

/// Pages up to this size are extracted in place, on the runtime.
pub const INLINE_BYTES: usize = 64 << 10;

/// Turns of the blocking threads, one per CPU, for all spiders of the process.
fn turns() -> Arc<Semaphore> {
    static TURNS: OnceLock<Arc<Semaphore>> = OnceLock::new();
    TURNS
        .get_or_init(|| {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            Arc::new(Semaphore::new(cpus))
        })
        .clone()
}

/// Raises the stop flag when the page task is dropped (finished, or
/// abandoned by a stopping worker).
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs `work`, on a page of `bytes`, in place if the page is small, else
/// on a blocking thread when one of the CPUs' turns is free;
/// `work` is handed the flag raised if this future is dropped before it
/// ends. `None` when the runtime is shutting down and dropped the work.
/// A panic in `work` is the caller's, as if it had run here.
pub async fn run<T: Send + 'static>(
    bytes: usize,
    work: impl FnOnce(Arc<AtomicBool>) -> T + Send + 'static,
) -> Option<T> {
    if bytes <= INLINE_BYTES {
        return Some(work(Arc::new(AtomicBool::new(false))));
    }
    // The semaphore is never closed: no turn means it was, and the work
    // runs without one rather than not at all.
    let turn = turns().acquire_owned().await.ok();
    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_drop = StopOnDrop(stop.clone());
    // What the work logs carries the page task's span (spider, worker).
    let span = tracing::Span::current();
    let done = tokio::task::spawn_blocking(move || {
        // The turn is held until the work ends, even if nobody awaits it.
        let _turn = turn;
        let _span = span.enter();
        work(stop)
    })
    .await;
    match done {
        Ok(out) => Some(out),
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(_) => None,
        },
    }
}
