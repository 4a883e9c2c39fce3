//! The `crawlworker` binary: parses the command line, starts the async
//! runtime on the threads it asks for (`--threads`, one by default), and
//! hands it to [`crawlworker::cli::run`]. Fatal errors print their whole
//! cause chain (exit code 1); input a person must fix prints as it is
//! (exit code 2); output to a closed pipe ends quietly (exit code 0).

use std::process::ExitCode;

use clap::Parser;

/// mimalloc instead of the system allocator: a page's parse, extraction and
/// commit make thousands of small allocations, which cost glibc's malloc
/// about a fifth of the worker's instructions (callgrind, scripts/bench/compare's forum).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = crawlworker::cli::Cli::parse();
    match runtime(cli.threads).build() {
        Ok(runtime) => runtime.block_on(run(cli)),
        Err(e) => {
            eprintln!("crawlworker: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The async runtime for `--threads`: on one (the default) everything on the
/// main thread, so a page's download, extraction and commit never wake
/// another thread (a fifth less CPU per page than two threads); pages
/// above `worker::offload::INLINE_BYTES` are still parsed on the blocking
/// threads, one per core at most. With `--threads N` (N > 1), N threads
/// share the pages.
fn runtime(threads: u16) -> tokio::runtime::Builder {
    let mut runtime = match threads {
        1 => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(n.into());
            builder
        }
    };
    runtime.enable_all();
    runtime
}

async fn run(cli: crawlworker::cli::Cli) -> ExitCode {
    let options = cli.log_options();
    crawlworker::cli::logging::init(options);
    // With `--log-format json` every line on standard error is JSON, the
    // last error too: a log shipper reads them all.
    let json = options.format == crawlworker::cli::logging::LogFormat::Json;
    match crawlworker::cli::run(cli).await {
        Ok(code) => code,
        // Whoever read our output stopped reading (`| head`): not a failure.
        Err(e) if crawlworker::cli::output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<crawlworker::cli::InvalidInput>() {
            Some(invalid) => {
                match json {
                    true => tracing::error!("{invalid}"),
                    false => eprintln!("{invalid}"),
                }
                ExitCode::from(2)
            }
            None => {
                match json {
                    true => tracing::error!("{e:#}"),
                    false => eprintln!("crawlworker: {e:#}"),
                }
                ExitCode::FAILURE
            }
        },
    }
}
