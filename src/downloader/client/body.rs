//! Reading a response body within the size limits: `download_maxsize` is
//! enforced while streaming (and at once from a Content-Length that already
//! exceeds it), `download_warnsize` is logged once per response. Bytes are
//! counted after decompression, so a compressed bomb is bounded too.
//!
//! Time is not this module's concern: the caller bounds the whole download.

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
    /// The connection failed or the body did not decode.
    Failed(reqwest::Error),
}

/// Largest buffer reserved up front from a Content-Length (a server may lie).
const MAX_PREALLOCATION: u64 = 8 << 20;

/// Reads the body of `response`, fetched for `url`.
pub async fn read(
    response: &mut reqwest::Response,
    url: &str,
    limits: Limits,
) -> Result<Vec<u8>, ReadError> {
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
    let reserve = announced.unwrap_or(0).min(MAX_PREALLOCATION) as usize;
    let mut body = Vec::with_capacity(reserve);
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Failed)? {
        let size = body.len() as u64 + chunk.len() as u64;
        if over(size, limits.max) {
            return Err(ReadError::TooLarge {
                limit: limits.max,
                size,
                announced: false,
            });
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
    Ok(body)
}
