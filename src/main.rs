//! The `crawlworker` binary: parses the command line and hands it to
//! [`crawlworker::cli::run`]. Fatal errors print their whole cause chain
//! (exit code 1); input a person must fix prints as it is (exit code 2).

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = crawlworker::cli::Cli::parse();
    crawlworker::cli::logging::init();
    match crawlworker::cli::run(cli).await {
        Ok(code) => code,
        Err(e) => match e.downcast_ref::<crawlworker::cli::InvalidInput>() {
            Some(invalid) => {
                eprintln!("{invalid}");
                ExitCode::from(2)
            }
            None => {
                eprintln!("crawlworker: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}
