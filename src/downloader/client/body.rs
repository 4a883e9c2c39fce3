//! Reading a response body within the size limits: `download_maxsize` is
//! enforced while streaming (and at once from a Content-Length that already
//! exceeds it), `download_warnsize` is logged once per response. Bytes are
//! counted after decompression, so a compressed bomb is bounded too.
//!
//! The body is held once: with a Content-Length its buffer is allocated
//! at that size, else it grows by a quarter at a time, never past
//! `download_maxsize`. Every byte of the buffer is reserved from the
//! worker's memory budget ([`super::super::budget`]) before it is
//! allocated, so a download waits there while other bodies fill the budget.
//!
//! Time is not this module's concern: the caller bounds the whole download.

use std::sync::Arc;

use super::super::budget::{Budget, Held};

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
    let over = |size: u64, limit: u64| limit > 0 && size > limit;
    let announced = response
        .headers()
        .get(reqwest::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let mut warned = false;
    if let Some(size) = announced {
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
            warned = true;
        }
    }
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
        grow(&mut body, &mut reservation, size).await?;
    }
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Failed)? {
        let size = body.len() as u64 + chunk.len() as u64;
        if over(size, limits.max) {
            return Err(ReadError::TooLarge {
                limit: limits.max,
                size,
                announced: false,
            });
        }
        if size > body.capacity() as u64 {
            let cap = body.capacity() as u64;
            let mut to = size.max(cap + cap / 4).max(MIN_GROWTH);
            if limits.max > 0 {
                to = to.min(limits.max);
            }
            if let Some(r) = &reservation {
                // A quarter more may not fit the budget when the body does.
                to = to.min(r.budget_total()).max(size);
            }
            grow(&mut body, &mut reservation, to).await?;
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

/// Makes room for `to` bytes in all in `body`, reserving them first.
async fn grow(
    body: &mut Vec<u8>,
    reservation: &mut Option<super::super::budget::Reservation>,
    to: u64,
) -> Result<(), ReadError> {
    if let Some(r) = reservation {
        r.grow_to(to).await.map_err(|e| ReadError::OverBudget {
            budget: e.budget,
            size: e.size,
        })?;
    }
    let to = usize::try_from(to).unwrap_or(usize::MAX);
    body.reserve_exact(to.saturating_sub(body.len()));
    Ok(())
}
