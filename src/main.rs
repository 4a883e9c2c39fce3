//! The `crawlworker` binary: parses the command line, starts the async
//! runtime on the threads it asks for (`--threads`), and hands it to
//! [`crawlworker::cli::run`]. Fatal errors print their whole cause chain
//! (exit code 1); input a person must fix prints as it is (exit code 2);
//! output to a closed pipe ends quietly (exit code 0).

use std::process::ExitCode;

use clap::Parser;

/// mimalloc instead of the system allocator: a page's parse, extraction and
/// commit make thousands of small allocations, which cost glibc's malloc
/// about a fifth of the worker's instructions (callgrind, scripts/bench/compare's forum).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = crawlworker::cli::Cli::parse();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let Some(threads) = cli.threads {
        runtime.worker_threads(threads.into());
    }
    match runtime.build() {
        Ok(runtime) => runtime.block_on(run(cli)),
        Err(e) => {
            eprintln!("crawlworker: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
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
