//! The page cache for developing spiders (`--http-cache DIR`, the
//! `httpcache_dir` setting; Scrapy's `HTTPCACHE_ENABLED`): every response
//! is stored on disk under its request's fingerprint, and the next `parse`
//! or `run --local` of the same request replays it instead of asking the
//! site again, until it is older than `httpcache_expiration_secs` (0: kept
//! for ever). Edit a spider, run it again, and the site sees nothing.
//!
//! It is for writing spiders, not for crawls: a cluster on Redis refuses
//! it (every worker would replay its own stale copy of a page). It owns the
//! files under its directory and nothing else; what a response means is
//! the downloader's. `Set-Cookie` headers are not stored, so no session
//! cookie is written to disk by it.
//!
//! Layout: `DIR/<first two hex digits>/<fingerprint>.json` holds the URL,
//! status, headers and when it was stored; `<fingerprint>.body` the body.
//! Each file is written to a temporary name and renamed, so a crawl killed
//! mid-write leaves the old entry or none, never half of one; a write that
//! fails (a full disk) removes its temporary file. The JSON records the
//! body's length and SHA-1: a body that does not match (cut short, or
//! another entry's) is not replayed but fetched again, and said so.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::Fetched;
use crate::request::Request;
use crate::settings::Settings;

/// The page cache of one run.
#[derive(Debug, Clone)]
pub struct HttpCache {
    dir: PathBuf,
    /// Entries older than this are fetched again (zero: never).
    expiry: Duration,
}

/// What is stored beside a body.
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    url: String,
    status: u16,
    headers: Vec<(String, String)>,
    /// Seconds since the Unix epoch.
    stored_at: u64,
    /// The body's length and SHA-1 (hex), to tell a damaged body (absent
    /// in entries of older versions: not checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body_len: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body_sha1: Option<String>,
}

/// The SHA-1 of `body`, in hex.
fn digest(body: &[u8]) -> String {
    use sha1::Digest;
    sha1::Sha1::digest(body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl HttpCache {
    /// The cache the settings ask for, if any (`httpcache_dir` not empty).
    pub fn from_settings(settings: &Settings) -> Option<HttpCache> {
        (!settings.httpcache_dir.is_empty()).then(|| HttpCache {
            dir: PathBuf::from(&settings.httpcache_dir),
            expiry: settings.httpcache_expiration_secs,
        })
    }

    /// Where the cache lives.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn paths(&self, request: &Request) -> (PathBuf, PathBuf) {
        let fp = request.fingerprint();
        let sub = self.dir.join(&fp[..2.min(fp.len())]);
        (
            sub.join(format!("{fp}.json")),
            sub.join(format!("{fp}.body")),
        )
    }

    /// The stored response to `request`, unless there is none, it expired
    /// or it cannot be read (then it is fetched and stored again).
    pub fn get(&self, request: &Request) -> Option<Fetched> {
        let (meta, body) = self.paths(request);
        let entry: Entry = serde_json::from_slice(&std::fs::read(meta).ok()?).ok()?;
        if !self.expiry.is_zero()
            && now_secs().saturating_sub(entry.stored_at) >= self.expiry.as_secs()
        {
            return None;
        }
        let body = std::fs::read(body).ok()?;
        let damaged = entry.body_len.is_some_and(|n| n != body.len() as u64)
            || entry
                .body_sha1
                .as_ref()
                .is_some_and(|d| *d != digest(&body));
        if damaged {
            tracing::warn!(
                url = %entry.url,
                dir = %self.dir.display(),
                "the page cache's copy is damaged (its body is {} bytes, {} were stored, or differs); fetched again",
                body.len(),
                entry.body_len.unwrap_or(0)
            );
            return None;
        }
        Some(Fetched {
            url: entry.url,
            status: entry.status,
            headers: entry.headers,
            body,
            held: Default::default(),
            // Relative dates ("3 hours ago") read against when the page
            // was fetched, not when it is replayed.
            fetched_at: std::time::UNIX_EPOCH + std::time::Duration::from_secs(entry.stored_at),
        })
    }

    /// Stores `fetched` as the response to `request`. A cache that cannot
    /// be written is said once and the crawl goes on without it.
    pub fn put(&self, request: &Request, fetched: &Fetched) {
        if let Err(e) = self.write(request, fetched) {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                tracing::warn!(dir = %self.dir.display(), error = %e, "cannot write to the page cache (httpcache_dir); pages are fetched but not stored");
            });
        }
    }

    fn write(&self, request: &Request, fetched: &Fetched) -> std::io::Result<()> {
        let (meta, body) = self.paths(request);
        if let Some(parent) = meta.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let entry = Entry {
            url: fetched.url.clone(),
            status: fetched.status,
            headers: fetched
                .headers
                .iter()
                .filter(|(k, _)| !k.eq_ignore_ascii_case("set-cookie"))
                .cloned()
                .collect(),
            stored_at: now_secs(),
            body_len: Some(fetched.body.len() as u64),
            body_sha1: Some(digest(&fetched.body)),
        };
        // The body first: an entry is only read once its JSON is there.
        replace(&body, &fetched.body)?;
        replace(
            &meta,
            &serde_json::to_vec(&entry).map_err(std::io::Error::other)?,
        )
    }
}

/// Writes `path` whole or not at all, leaving no temporary file behind.
fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetched(body: &str) -> Fetched {
        Fetched {
            url: "http://a.test/x".into(),
            status: 200,
            headers: vec![
                ("content-type".into(), "text/html".into()),
                ("set-cookie".into(), "sid=secret".into()),
            ],
            body: body.as_bytes().to_vec(),
            fetched_at: std::time::SystemTime::UNIX_EPOCH,
            held: Default::default(),
        }
    }

    #[test]
    fn a_stored_response_is_replayed_without_its_cookies() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = HttpCache {
            dir: dir.path().to_path_buf(),
            expiry: Duration::ZERO,
        };
        let request = Request::get("http://a.test/x");
        assert!(cache.get(&request).is_none());
        cache.put(&request, &fetched("<p>hi</p>"));
        let back = cache.get(&request).expect("replayed");
        assert_eq!(back.body, b"<p>hi</p>");
        assert_eq!(back.header("content-type"), Some("text/html"));
        assert_eq!(back.header("set-cookie"), None);
        assert!(cache.get(&Request::get("http://a.test/y")).is_none());
    }

    #[test]
    fn a_damaged_body_is_fetched_again_not_replayed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = HttpCache {
            dir: dir.path().to_path_buf(),
            expiry: Duration::ZERO,
        };
        let request = Request::get("http://a.test/x");
        cache.put(&request, &fetched("<p>a whole page</p>"));
        let (_, body) = cache.paths(&request);
        // Cut short, then the same length with other bytes.
        std::fs::write(&body, "<p>a who").expect("write");
        assert!(cache.get(&request).is_none());
        std::fs::write(&body, "<p>A WHOLE PAGE</p>").expect("write");
        assert!(cache.get(&request).is_none());
        std::fs::write(&body, "<p>a whole page</p>").expect("write");
        assert!(cache.get(&request).is_some());
    }

    #[test]
    fn a_write_that_fails_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        // A directory where the file should go: the rename fails.
        let path = dir.path().join("x.body");
        std::fs::create_dir(&path).expect("dir");
        std::fs::write(path.join("in-the-way"), "x").expect("write");
        assert!(replace(&path, b"body").is_err());
        let left: Vec<String> = std::fs::read_dir(dir.path())
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ["x.body"]);
    }

    #[test]
    fn an_expired_entry_is_fetched_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = HttpCache {
            dir: dir.path().to_path_buf(),
            expiry: Duration::from_secs(1),
        };
        let request = Request::get("http://a.test/x");
        cache.put(&request, &fetched("old"));
        let (meta, _) = cache.paths(&request);
        let mut entry: Entry =
            serde_json::from_slice(&std::fs::read(&meta).expect("meta")).expect("json");
        entry.stored_at -= 5;
        std::fs::write(&meta, serde_json::to_vec(&entry).expect("json")).expect("write");
        assert!(cache.get(&request).is_none());
    }
}
