//! Leases handed to a waiting worker in its wake-up. A commit that queues
//! more work than it leases itself leases the rest to the workers waiting
//! for work, in the same atomic step, and publishes each worker's leases
//! on its own wake channel (`scripts/lib/leasing.lua`, `hand_waiting`).
//! The worker takes them from here (`Backend::take_handed`) before it
//! would ask Redis for a lease: a list page's new posts reach the idle
//! workers with no script call per worker.
//!
//! The lease is in Redis before the message is sent, so nothing depends on
//! the message: one that never arrives (the worker stopped, its
//! subscription was down) leaves leases that expire and go back to the
//! queue like any lost worker's. A worker that stops hands back what it
//! was handed and did not start (`worker::stop`).
//!
//! A message is [`MARK`], then the queue key the leases are of (a sharded
//! spider's shards share one wake channel), then each lease's id, JSON,
//! wait and interval (ms), every part as `<length>:<bytes>`, so any bytes
//! pass.

/// What a handed-leases message starts with (other messages on a wake
/// channel are a count, or `control`).
pub const MARK: &str = "handed:";

/// One message's leases, not yet decoded.
#[derive(Debug, PartialEq)]
pub struct Handed {
    /// The queue key they were leased from.
    pub queue: String,
    /// id, JSON, wait, interval, for each lease.
    pub fields: Vec<Vec<u8>>,
}

/// Whether a wake channel's message carries leases.
pub fn is_handed(payload: &[u8]) -> bool {
    payload.starts_with(MARK.as_bytes())
}

/// Reads a handed-leases message; `None` when it is not one or is cut
/// short (its leases then expire and go back to the queue).
pub fn parse(payload: &[u8]) -> Option<Handed> {
    let mut rest = payload.strip_prefix(MARK.as_bytes())?;
    let mut parts = Vec::new();
    while !rest.is_empty() {
        let colon = rest.iter().position(|&b| b == b':')?;
        let len: usize = std::str::from_utf8(&rest[..colon]).ok()?.parse().ok()?;
        let body = rest.get(colon + 1..colon + 1 + len)?;
        parts.push(body.to_vec());
        rest = &rest[colon + 1 + len..];
    }
    let mut parts = parts.into_iter();
    let queue = String::from_utf8(parts.next()?).ok()?;
    let fields: Vec<Vec<u8>> = parts.collect();
    fields
        .len()
        .is_multiple_of(4)
        .then_some(Handed { queue, fields })
}

/// The Lua constant the scripts build messages with (generated, so the
/// two never disagree).
pub fn lua_constants() -> String {
    format!("local HANDED_MARK = '{MARK}'\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_reads_back_whatever_bytes_it_carries() {
        let json = "{\"url\":\"http://127.0.0.1/a:b\"}";
        let msg = format!("{MARK}12:bbs:requests2:ab{}:{json}1:03:250", json.len());
        let raw = msg.into_bytes();
        let h = parse(&raw).expect("parses");
        assert_eq!(h.queue, "bbs:requests");
        assert_eq!(
            h.fields,
            vec![
                b"ab".to_vec(),
                json.as_bytes().to_vec(),
                b"0".to_vec(),
                b"250".to_vec()
            ]
        );
        let binary = [MARK.as_bytes(), b"1:q1:\xff1:\x001:01:0"].concat();
        assert_eq!(parse(&binary).map(|h| h.fields.len()), Some(4));
        assert!(is_handed(&raw) && !is_handed(b"3") && !is_handed(b"control"));
    }

    #[test]
    fn a_cut_or_foreign_message_is_no_leases() {
        assert_eq!(parse(b"3"), None);
        assert_eq!(parse(format!("{MARK}12:bbs:requ").as_bytes()), None);
        assert_eq!(
            parse(format!("{MARK}1:q2:ab").as_bytes()),
            None,
            "not a whole lease"
        );
        assert_eq!(parse(format!("{MARK}x:q").as_bytes()), None);
    }
}
