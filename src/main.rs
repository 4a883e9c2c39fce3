//! The `crawlworker` binary: parses the command line and hands it to
//! [`crawlworker::cli::run`]. Fatal errors print their whole cause chain.

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = crawlworker::cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CRAWLWORKER_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match crawlworker::cli::run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("crawlworker: {e:#}");
            ExitCode::FAILURE
        }
    }
}
