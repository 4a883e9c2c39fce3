//! Standard output for command results, written through a lock with errors
//! returned rather than panicking, so that output to a closed pipe
//! (`crawlworker items … | head -1`) ends the command quietly with exit
//! code 0, as `main` does for [`is_broken_pipe`] errors.

use std::fmt::Display;
use std::io::{self, Write};

/// Writes `text` to standard output.
pub fn print(text: impl Display) -> io::Result<()> {
    let mut out = io::stdout().lock();
    write!(out, "{text}")?;
    out.flush()
}

/// Writes `text` and a newline to standard output.
pub fn line(text: impl Display) -> io::Result<()> {
    print(format_args!("{text}\n"))
}

/// Whether `e` is the reader of our output having gone away.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
