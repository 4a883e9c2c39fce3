//! Reading a response body within the size limits: `download_maxsize` is
//! enforced while streaming (and at once from a Content-Length that already
//! exceeds it), `download_warnsize` is logged once per response. Bytes are
//! counted after decompression, so a compressed bomb is bounded too.
//!
//! The body is held once: with a Content-Length its buffer is allocated
//! at that size; else it grows by a quarter at a time up to 1 MiB, then
//! is allocated once at the most it may come to (`download_maxsize`, or
//! the budget), whose pages cost memory only as they are filled. Every
//! byte read is reserved from the worker's memory budget
//! ([`super::super::budget`]) first, so a download waits there while
//! other bodies fill the budget.
//!
//! Time is not this module's concern: the caller bounds the whole download.

use std::sync::Arc;

use super::super::budget::{Budget, Held, Reservation};

/// The size limits of one downloader; 0 turns a limit off, as in Scrapy.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max: u64,
    pub warn: u64,
}

/// Why a body could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// Over `download_maxsize`: `size` is the announced length, or the
    /// bytes read when reading stopped.
    TooLarge {
        limit: u64,
        size: u64,
        announced: bool,
    },
    /// More than the worker's whole `download_memory_budget`.
    OverBudget { budget: u64, size: u64 },
    /// The connection failed or the body did not decode.
    Failed(reqwest::Error),
}

/// The smallest buffer grown for a body of unknown length.
const MIN_GROWTH: u64 = 64 << 10;

/// Reads the body of `response`, fetched for `url`, holding its bytes in
/// `budget` (if any) until the returned [`Held`] is dropped.
pub async fn read(
    response: &mut reqwest::Response,
    url: &str,
    limits: Limits,
    budget: Option<&Arc<Budget>>,
) -> Result<(Vec<u8>, Held), ReadError> {
    let announced = response
        .headers()
        .get(reqwest::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let mut warned = match announced {
        Some(size) => check_announced(size, url, limits)?,
        None => false,
    };
    let claim = match (announced, limits.max) {
        (Some(size), _) => size,
        (None, 0) => u64::MAX,
        (None, max) => max,
    };
    let mut reservation = budget.map(|b| b.open(claim));
    let mut body = Vec::new();
    if let Some(size) = announced {
        // Within download_maxsize, and reserved before it is allocated: a
        // server announcing more than it sends costs its announced size
        // only until the body ends.
        reserve(&mut reservation, size).await?;
        body.reserve_exact(usize::try_from(size).unwrap_or(usize::MAX));
    }
    let ceiling = ceiling(limits, reservation.as_ref());
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Failed)? {
        let size = body.len() as u64 + chunk.len() as u64;
        if over(size, limits.max) {
            return Err(ReadError::TooLarge {
                limit: limits.max,
                size,
                announced: false,
            });
        }
        if let Some(r) = &reservation {
            if size > r.held() {
                // A quarter more at a time, within the budget.
                let held = r.held();
                let to = (held + held / 4).max(MIN_GROWTH).min(r.budget_total());
                reserve(&mut reservation, to.max(size)).await?;
            }
        }
        if size > body.capacity() as u64 {
            body.reserve_exact(capacity(body.capacity() as u64, size, ceiling) - body.len());
        }
        if !warned && over(size, limits.warn) {
            tracing::warn!(
                %url,
                size,
                download_warnsize = limits.warn,
                "response is larger than download_warnsize; still reading"
            );
            warned = true;
        }
        body.extend_from_slice(&chunk);
    }
    let held = match reservation {
        Some(mut r) => {
            r.settle();
            Held::new(r)
        }
        None => Held::default(),
    };
    Ok((body, held))
}

/// Whether the body's Content-Length is within `download_maxsize`, and
/// whether it was over `download_warnsize` (then logged, once).
fn check_announced(size: u64, url: &str, limits: Limits) -> Result<bool, ReadError> {
    if over(size, limits.max) {
        return Err(ReadError::TooLarge {
            limit: limits.max,
            size,
            announced: true,
        });
    }
    if over(size, limits.warn) {
        tracing::warn!(
            %url,
            size,
            download_warnsize = limits.warn,
            "expected response size is larger than download_warnsize"
        );
        return Ok(true);
    }
    Ok(false)
}

/// Whether `size` is over `limit` (0: no limit).
fn over(size: u64, limit: u64) -> bool {
    limit > 0 && size > limit
}

/// The most a body of unknown length may come to (none: no limit).
fn ceiling(limits: Limits, reservation: Option<&Reservation>) -> Option<u64> {
    match (limits.max, reservation) {
        (0, None) => None,
        (0, Some(r)) => Some(r.budget_total()),
        (max, Some(r)) => Some(max.min(r.budget_total())),
        (max, None) => Some(max),
    }
}

/// Bodies of unknown length up to this size grow by a quarter at a time;
/// past it, the buffer is made as large as the body may come to at once.
const SMALL_BODY: u64 = 1 << 20;

/// The capacity for `size` bytes of a body of unknown length whose buffer
/// holds `cap`. Growing a large buffer again and again would copy it each
/// time and leave the freed copies to the allocator (a 256 MiB body grown
/// by a quarter peaked at nearly three times its size): past
/// [`SMALL_BODY`] it is allocated once at its `ceiling`, whose pages cost
/// memory only as the body fills them (the budget counts the bytes read).
fn capacity(cap: u64, size: u64, ceiling: Option<u64>) -> usize {
    let to = match ceiling {
        Some(ceiling) if size > SMALL_BODY => ceiling,
        Some(ceiling) => (cap + cap / 4).max(MIN_GROWTH).min(ceiling),
        None => cap.saturating_mul(2).max(MIN_GROWTH),
    };
    usize::try_from(to.max(size)).unwrap_or(usize::MAX)
}

/// Grows `reservation` (if any) to `to` bytes in all.
async fn reserve(reservation: &mut Option<Reservation>, to: u64) -> Result<(), ReadError> {
    if let Some(r) = reservation {
        r.grow_to(to).await.map_err(|e| ReadError::OverBudget {
            budget: e.budget,
            size: e.size,
        })?;
    }
    Ok(())
}
