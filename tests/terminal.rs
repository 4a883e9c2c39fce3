//! What a person sees on a terminal, in a real pseudo-terminal
//! (tmux): `stats --watch` during a crawl, and its clean exit on Ctrl-C.

use std::time::Duration;

use crawlworker_testkit::process::binary;
use crawlworker_testkit::{eventually, DemoCrawl, Terminal, Worker};

const PATIENCE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_watch_shows_the_cluster_live_and_quits_on_ctrl_c() {
    // Slow pages: the crawl is still running while we look.
    let crawl = DemoCrawl::start(Duration::from_millis(150)).await;
    let (redis, spider, dir) = (&crawl.redis, &crawl.spider, &crawl.dir);
    let _worker = Worker::spawn(spider, &redis.url(), &["--concurrency", "2"], &[]);

    let done = dir.path().join("exit-code");
    let command = format!(
        "{} stats {} --watch --redis {}; echo $? > {}",
        binary().display(),
        spider.display(),
        redis.url(),
        done.display()
    );
    let term = Terminal::start(&command, dir.path(), 100, 40);
    let screen = eventually("the view shows the crawl under way", PATIENCE, || {
        let screen = term.screen();
        (screen.contains("workers (1 live)") && screen.contains("items") && screen.contains("/s"))
            .then_some(screen)
    });
    assert!(screen.contains("crawlworker · spider bbs"), "{screen}");
    assert!(screen.contains("queued"), "{screen}");
    assert!(screen.contains("Ctrl-C to quit"), "{screen}");
    // It refreshes: the page count moves.
    let pages = |s: &str| {
        s.lines()
            .find(|l| l.trim_start().starts_with("pages"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse::<u64>().ok())
    };
    let first = pages(&screen).unwrap_or_else(|| panic!("no page count:\n{screen}"));
    eventually("the view refreshes", PATIENCE, || {
        pages(&term.screen()).filter(|n| *n > first)
    });
    term.send_keys("C-c");
    let code = eventually("stats --watch exits on Ctrl-C", PATIENCE, || {
        exit_code(&done)
    });
    assert_eq!(code.trim(), "0", "a clean exit");
    crawl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_on_a_terminal_shows_a_live_status_line_under_its_log_lines() {
    let crawl = DemoCrawl::start(Duration::from_millis(150)).await;
    let (redis, spider, dir) = (&crawl.redis, &crawl.spider, &crawl.dir);
    let done = dir.path().join("exit-code");
    let command = format!(
        "{} run {} --concurrency 2 --redis {}; echo $? > {}",
        binary().display(),
        spider.display(),
        redis.url(),
        done.display()
    );
    let term = Terminal::start(&command, dir.path(), 160, 30);
    // The status line is drawn from the start, so the worker's first log
    // line may come a moment after it: wait for both.
    let screen = eventually("the status line shows the crawl", PATIENCE, || {
        let screen = term.screen();
        let status = screen.lines().rev().find(|l| !l.trim().is_empty())?;
        (status.contains("bbs: ")
            && status.contains("items")
            && status.contains("in flight")
            && screen.contains("worker started"))
        .then_some(screen)
    });
    // Log lines come above it, not through it.
    assert!(screen.contains("worker started"), "{screen}");
    let last = screen
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    assert!(!last.contains("worker started"), "{screen}");
    term.send_keys("C-c");
    let code = eventually("run stops on Ctrl-C", PATIENCE, || exit_code(&done));
    assert_eq!(code.trim(), "0");
    crawl.stop().await;
}

/// The exit code a test's shell wrote to `done`, once written: the shell
/// makes the file (`> done`) before `echo` writes to it, so an empty file
/// is not an answer yet.
fn exit_code(done: &std::path::Path) -> Option<String> {
    std::fs::read_to_string(done)
        .ok()
        .filter(|code| !code.trim().is_empty())
}
