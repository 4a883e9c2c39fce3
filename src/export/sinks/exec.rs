//! `exec:COMMAND`: each batch goes to a command's standard input as JSON
//! Lines, one run per table of the batch (a team's existing pipeline code,
//! in any language), through `sh -c`. The items are acknowledged when the
//! command exits 0. A command that fails is run again with the same lines
//! (after 1 s, then twice as long each time, up to `retries` times); then
//! its items are dead-lettered with the end of its standard error. A
//! command that cannot run at all (exit 126 or 127: not found, not
//! executable) stops the exporter instead: every batch would fail alike.
//!
//! The command sees `CRAWLWORKER_TABLE` (the table's name) and
//! `CRAWLWORKER_ITEM_TYPE` in its environment. An item may reach it
//! twice (an exporter killed after the command ran and before the
//! acknowledgement): the command should write idempotently, by the item's
//! key.

use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Refusal, Sink, SinkError};
use crate::export::schema::{Row, Schema, Table};

/// How much of a failing command's standard error a dead letter keeps.
const STDERR_KEPT: usize = 2000;

/// One command.
pub struct Exec {
    command: String,
    limits: Limits,
}

/// How often and how long the command runs.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Runs after the first that failed, before the items are
    /// dead-lettered.
    pub retries: u32,
    /// The wait before the first retry (doubled each time).
    pub backoff: Duration,
    /// A run still going after this is killed and counts as failed.
    pub timeout: Duration,
}

/// How one run of the command ended.
enum Ran {
    Ok,
    /// `how` it failed (`exited with 1`), and the end of its standard
    /// error.
    Failed {
        how: String,
        stderr: String,
    },
}

impl Exec {
    pub fn new(command: String, limits: Limits) -> Exec {
        Exec { command, limits }
    }

    /// The command run once with `input` on its standard input, killed
    /// (with its process group) when it runs over the time limit.
    async fn run(&self, table: &Table, input: &[u8]) -> Result<Ran, SinkError> {
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .env("CRAWLWORKER_TABLE", &table.name)
            .env("CRAWLWORKER_ITEM_TYPE", &table.item_type)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            // Its own group: what it starts is killed with it.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| SinkError::Fatal(format!("cannot run `sh -c {}`: {e}", self.command)))?;
        let group = child
            .id()
            .and_then(|id| rustix::process::Pid::from_raw(id as i32));
        let mut stdin = child.stdin.take();
        let mut stderr = child.stderr.take();
        let mut said = Vec::new();
        let ran = tokio::time::timeout(self.limits.timeout, async {
            let feed = async {
                if let Some(stdin) = stdin.as_mut() {
                    // A command that exits without reading all of it says
                    // so by its exit status.
                    let _ = stdin.write_all(input).await;
                }
                drop(stdin.take());
            };
            let read = async {
                if let Some(err) = stderr.as_mut() {
                    let _ = err.read_to_end(&mut said).await;
                }
            };
            tokio::join!(feed, read);
            child.wait().await
        })
        .await;
        let status = match ran {
            Ok(status) => status.map_err(|e| {
                SinkError::Fatal(format!("cannot wait for `{}`: {e}", self.command))
            })?,
            Err(_) => {
                if let Some(group) = group {
                    let _ =
                        rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
                }
                let _ = child.kill().await;
                return Ok(Ran::Failed {
                    how: format!(
                        "ran over --exec-timeout ({}) and was killed",
                        humantime::format_duration(self.limits.timeout)
                    ),
                    stderr: tail(&said),
                });
            }
        };
        if status.success() {
            return Ok(Ran::Ok);
        }
        let stderr = tail(&said);
        if matches!(status.code(), Some(126 | 127)) {
            return Err(SinkError::Fatal(format!(
                "`{}` cannot run (exit {}): {stderr}",
                self.command,
                status.code().unwrap_or_default()
            )));
        }
        let how = status
            .code()
            .map_or("was killed by a signal".to_string(), |c| {
                format!("exited with {c}")
            });
        Ok(Ran::Failed { how, stderr })
    }

    /// The rows of one table, through the command with its retries: the
    /// reason they are refused, if they are.
    async fn deliver(&self, table: &Table, rows: &[&Row<'_>]) -> Result<Option<String>, SinkError> {
        let mut input = Vec::new();
        for row in rows {
            input.extend(serde_json::to_vec(&row.values).unwrap_or_default());
            input.push(b'\n');
        }
        let mut wait = self.limits.backoff;
        let mut tries = 0;
        loop {
            tries += 1;
            match self.run(table, &input).await? {
                Ran::Ok => return Ok(None),
                Ran::Failed { how, stderr } if tries > self.limits.retries => {
                    return Ok(Some(format!(
                        "`{}` {how} on the last of {tries} tries; its standard error: {stderr}",
                        self.command
                    )));
                }
                Ran::Failed { how, stderr } => {
                    tracing::warn!(
                        command = %self.command,
                        table = %table.name,
                        "the export command {how} ({stderr}); running it again in {wait:?} with the same {} items",
                        rows.len()
                    );
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
            }
        }
    }
}

/// The end of a command's standard error (its last [`STDERR_KEPT`]
/// bytes), as text.
fn tail(said: &[u8]) -> String {
    let text = String::from_utf8_lossy(said);
    let start = text.len().saturating_sub(STDERR_KEPT);
    let start = (start..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    text[start..].trim().to_string()
}

#[async_trait]
impl Sink for Exec {
    async fn open(&mut self, _schema: &Schema, _create: bool) -> Result<(), SinkError> {
        Ok(())
    }

    async fn write(&mut self, rows: &[Row<'_>]) -> Result<Vec<Refusal>, SinkError> {
        let mut tables: Vec<&Table> = Vec::new();
        for row in rows {
            if !tables.iter().any(|t| t.name == row.table.name) {
                tables.push(row.table);
            }
        }
        let mut refusals = Vec::new();
        for table in tables {
            let (indexes, batch): (Vec<usize>, Vec<&Row<'_>>) = rows
                .iter()
                .enumerate()
                .filter(|(_, r)| r.table.name == table.name)
                .unzip();
            if let Some(reason) = self.deliver(table, &batch).await? {
                refusals.extend(indexes.into_iter().map(|index| Refusal {
                    index,
                    reason: reason.clone(),
                }));
            }
        }
        Ok(refusals)
    }
}
