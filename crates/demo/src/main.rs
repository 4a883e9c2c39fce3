//! `crawlworker-demo`: serves the demo site on a loopback address, or
//! prints the demo crawl's start tasks. The quick start and the benchmark
//! scripts use it; it is not part of the crawler.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use crawlworker_demo::{serve, Chrome, Hits, ServeOptions, Site};

/// The demo forum and news site crawlworker's examples crawl.
#[derive(Debug, Parser)]
#[command(name = "crawlworker-demo", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the demo site on a loopback address until interrupted.
    Serve {
        /// The loopback address and port to listen on.
        #[arg(long, default_value = "127.0.0.1:8700")]
        listen: SocketAddr,
        /// Delay every response by this long, in seconds (0.02) or with a
        /// unit (20ms), to watch a crawl progress.
        #[arg(long, value_parser = duration, default_value = "0")]
        latency: Duration,
        /// Add this many KiB of page chrome (a menu, a sidebar of links, a
        /// footer, inline style and script) to every HTML page, so pages
        /// weigh what a real forum's do; items and links stay the same.
        #[arg(long, default_value_t = 0)]
        page_kb: usize,
        #[command(flatten)]
        size: Size,
    },
    /// Print the demo crawl's start tasks, one JSON object per line.
    Tasks {
        #[command(flatten)]
        size: Size,
    },
}

/// The demo forum, or a larger generated one (for benchmarks).
#[derive(Debug, Clone, Copy, Args)]
struct Size {
    /// Use a generated forum with this many forums instead of the demo's
    /// three (for benchmarks).
    #[arg(long, requires = "pages")]
    forums: Option<usize>,
    /// List pages per generated forum.
    #[arg(long, requires = "forums")]
    pages: Option<usize>,
}

/// Seconds (`0.02`) or a number with a unit (`20ms`), as crawlworker reads
/// durations.
fn duration(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(secs) => {
            Duration::try_from_secs_f64(secs).map_err(|_| format!("`{s}` is not a duration"))
        }
        Err(_) => humantime::parse_duration(s.trim()).map_err(|_| {
            format!("`{s}` is not a duration: write seconds (0.02) or a number with a unit (20ms)")
        }),
    }
}

impl Size {
    fn site(&self) -> Site {
        match (self.forums, self.pages) {
            (Some(f), Some(p)) => Site::generate(f, p, 42),
            _ => Site::demo(),
        }
    }

    fn tasks(&self) -> Vec<String> {
        match (self.forums, self.pages) {
            (Some(_), Some(p)) => self
                .site()
                .forums
                .iter()
                .map(|f| serde_json::json!({"forum_id": f.id, "max_page": p}).to_string())
                .collect(),
            _ => crawlworker_demo::demo_tasks(),
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Serve {
            listen,
            latency,
            page_kb,
            size,
        } => {
            if !listen.ip().is_loopback() {
                eprintln!(
                    "crawlworker-demo: the demo site only listens on loopback addresses (127.0.0.0/8 or ::1), not {}",
                    listen.ip()
                );
                return ExitCode::from(2);
            }
            let listener = match tokio::net::TcpListener::bind(listen).await {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("crawlworker-demo: cannot listen on {listen}: {e}");
                    return ExitCode::FAILURE;
                }
            };
            eprintln!(
                "crawlworker-demo: demo site (forum and news) on http://{listen}/ (Ctrl-C stops it)"
            );
            let options = ServeOptions {
                latency,
                routes: None,
                chrome: Chrome::of_kb(page_kb),
            };
            let stopped = serve(
                listener,
                Arc::new(size.site()),
                Hits::default(),
                options,
                async {
                    let _ = tokio::signal::ctrl_c().await;
                },
            )
            .await;
            match stopped {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("crawlworker-demo: the server failed: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Tasks { size } => {
            let mut out = std::io::stdout().lock();
            for task in size.tasks() {
                // A reader that stopped reading (`| head -1`) is not a failure.
                match writeln!(out, "{task}") {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => break,
                    Err(e) => {
                        eprintln!("crawlworker-demo: cannot write the tasks: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
            ExitCode::SUCCESS
        }
    }
}
