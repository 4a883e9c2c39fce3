//! Taking over a scrapy-redis crawl's request queue: the requests it
//! queued are pickles of Scrapy's `Request.to_dict()`, read here as plain
//! data ([`pickle`], which refuses anything that would import, call or
//! build) and turned into crawlworker requests ([`request`], by the
//! spider's `[scrapy_redis]` table). An entry that cannot be read or
//! mapped gets the reason a dead letter shows.
//!
//! Where the queue is and how entries move in Redis is the frontier's
//! (`frontier::redis::takeover`); the command is `cli::import_queue`.

pub mod pickle;
pub mod request;

pub use request::{NotMapped, Takeover};

use crate::request::Request;

/// What one queued entry becomes: a request to queue, or why it is set
/// aside (with what a person sees of it).
#[derive(Debug, Clone, PartialEq)]
pub enum Converted {
    Request(Box<Request>),
    Refused {
        /// Why, for the dead letter and the summary.
        reason: String,
        /// What the dead letter shows of it: the decoded request as JSON
        /// when it could be read, else its bytes (escaped).
        shown: String,
    },
}

/// Reads and maps one entry of a scrapy-redis queue for `spider`.
pub fn convert(entry: &[u8], takeover: &Takeover<'_>) -> Converted {
    let value = match pickle::decode(entry, pickle::REQUEST_LIMITS) {
        Ok(value) => value,
        Err(refused) => {
            let head = &entry[..entry.len().min(crate::frontier::records::PREVIEW_BYTES)];
            return Converted::Refused {
                reason: format!("scrapy-redis request not read: {refused}"),
                shown: crate::wording::escaped(head).into_owned(),
            };
        }
    };
    match takeover.request(&value) {
        Ok(request) => Converted::Request(Box::new(request)),
        Err(e) => Converted::Refused {
            reason: format!("scrapy-redis request not queued: {e}"),
            shown: request::shown(&value).to_string(),
        },
    }
}
