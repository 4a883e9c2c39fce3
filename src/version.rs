//! What `--version` says: the crate version and the git revision it was
//! built from.

/// `0.1.0 (3f2a9c1b7e0d)`.
pub const LONG: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("CRAWLWORKER_REVISION"),
    ")"
);
