//! The frontier's one error: a Redis operation that failed, with the
//! operation, the key and Redis's answer, and whether it is an outage
//! (retry later), fatal (a person must act) or neither.

/// A Redis operation that failed: what was done, on which key, and what
/// Redis said (part of the message, so one line tells it all).
#[derive(Debug, thiserror::Error)]
// `op` is a verb phrase the key completes ("read", "set aside the
// scrapy-redis queue in"): "on" after it read "… queue in on `key`".
#[error("Redis could not {op} `{key}`: {}", said(cause))]
pub struct FrontierError {
    pub op: &'static str,
    pub key: String,
    pub cause: redis::RedisError,
}

/// What Redis (or what answered in its place) said, for people: a reply
/// that is not the Redis protocol is named as such, not as the parser's
/// byte offsets.
fn said(cause: &redis::RedisError) -> String {
    if cause.kind() == redis::ErrorKind::ParseError {
        return "what answered is not Redis: its reply is not the Redis protocol (an HTTP server or another service on that port? check the port in --redis or REDIS_URL)".to_string();
    }
    without_script_location(&cause.to_string()).to_string()
}

/// `said` without the place in the Lua script Redis appends to an error a
/// script raised (` script: <sha or name>, on @user_script:22.`): the
/// message is for people, the line of a script of ours means nothing to
/// them.
fn without_script_location(said: &str) -> &str {
    let Some(at) = said.rfind(" script: ") else {
        return said;
    };
    let tail = &said[at + " script: ".len()..];
    let place = tail
        .split_once(", on @")
        .map(|(_, p)| p.trim_end_matches('.'));
    let ours = place.is_some_and(|p| {
        p.split_once(':').is_some_and(|(what, line)| {
            what.starts_with("user_") && line.chars().all(|c| c.is_ascii_digit())
        })
    });
    if ours {
        said[..at].trim_end()
    } else {
        said
    }
}

impl FrontierError {
    /// What Redis said (see [`said`]), without the operation.
    pub fn said(&self) -> String {
        said(&self.cause)
    }

    /// Whether the error is Redis being unreachable (retry later) rather
    /// than a mistake (report it).
    pub fn is_outage(&self) -> bool {
        let e = &self.cause;
        e.is_io_error()
            || e.is_connection_refusal()
            || e.is_connection_dropped()
            || e.is_timeout()
            || e.code() == Some("BUSY")
            || matches!(
                e.kind(),
                redis::ErrorKind::BusyLoadingError
                    | redis::ErrorKind::TryAgain
                    | redis::ErrorKind::ClusterDown
            )
    }

    /// Whether Redis redirected the call elsewhere (`MOVED`, `ASK`). A
    /// cluster client follows redirects itself; one it still returns means
    /// a failover or a slot migration is under way, an outage on a
    /// cluster. (On a single server it means the address is a cluster
    /// node named without `redis+cluster://`: a mistake.)
    pub fn is_redirect(&self) -> bool {
        matches!(
            self.cause.kind(),
            redis::ErrorKind::Moved | redis::ErrorKind::Ask
        )
    }

    /// What an outage is, for the log: Redis busy with a long script,
    /// loading its data, slow to answer, a cluster resharding or failing
    /// over, or unreachable. Only an error that
    /// [`FrontierError::is_outage`] (or, on a cluster, [`FrontierError::is_redirect`]).
    pub fn outage(&self) -> &'static str {
        let e = &self.cause;
        match e.code() {
            Some("BUSY") => "Redis is busy running a long script or function (BUSY)",
            Some("LOADING") => "Redis is loading its data set (LOADING)",
            Some("TRYAGAIN" | "CLUSTERDOWN") => "the Redis Cluster is resharding or down",
            Some("MOVED" | "ASK") => "the Redis Cluster is failing over or moving slots",
            _ if e.is_timeout() => {
                "Redis did not answer in time (busy with a long script, or overloaded?)"
            }
            _ => "Redis is unreachable",
        }
    }
}

impl FrontierError {
    /// Whether the error will not heal by retrying: a key of the wrong
    /// type (made by another tool), a missing or wrong password, an ACL
    /// permission missing. A person must act; the worker stops.
    pub fn is_fatal(&self) -> bool {
        self.fatal_kind().is_some()
    }

    /// WRONGTYPE, NOPERM or NOAUTH for an error that will not heal. A
    /// script's command refused by an ACL answers ERR, not NOPERM.
    fn fatal_kind(&self) -> Option<&'static str> {
        let e = &self.cause;
        match e.code() {
            Some("WRONGTYPE") => Some("WRONGTYPE"),
            Some("NOPERM") => Some("NOPERM"),
            Some("NOAUTH" | "WRONGPASS") => Some("NOAUTH"),
            Some("ERR")
                if e.detail()
                    .is_some_and(|d| d.starts_with("The user executing the script can't")) =>
            {
                Some("NOPERM")
            }
            _ if e.kind() == redis::ErrorKind::AuthenticationFailed => Some("NOAUTH"),
            _ => None,
        }
    }

    /// The key of a WRONGTYPE error: the one a script's check names
    /// ("… key <name> … nothing was written"), else the operation's.
    fn wrong_key(&self) -> &str {
        self.cause
            .detail()
            .filter(|d| d.contains("nothing was"))
            .and_then(|d| d.split("key ").nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or(&self.key)
    }

    /// What to do about a fatal error (see [`FrontierError::is_fatal`]).
    pub fn remedy(&self) -> String {
        match self.fatal_kind() {
            Some("WRONGTYPE") => format!(
                "a key holds another type than crawlworker keeps there (made by another tool, or by a spider whose [keys] name the same key?): delete or rename it (e.g. `redis-cli RENAME {key} {key}.bak`), then start the worker again. Nothing of the failed step was written; the pages in flight go back to the queue",
                key = self.wrong_key()
            ),
            Some("NOPERM") => "the Redis user lacks a permission crawlworker needs (ACL): allow it the commands and keys of the spider (e.g. `ACL SETUSER <user> +@all ~<spider>:*` and `&*` for its channels), then start the worker again".to_string(),
            _ => "Redis refused the password (or wants one): put the user and password in the Redis URL (redis://user:password@host:port, or REDIS_URL), then start the worker again".to_string(),
        }
    }
}

pub(crate) type Result<T> = std::result::Result<T, FrontierError>;

pub(crate) fn err<'a>(
    op: &'static str,
    key: &'a str,
) -> impl FnOnce(redis::RedisError) -> FrontierError + 'a {
    move |cause| FrontierError {
        op,
        key: key.to_string(),
        cause,
    }
}

#[cfg(test)]
mod tests {
    use super::FrontierError;

    fn failed(cause: redis::RedisError) -> FrontierError {
        FrontierError {
            op: "commit",
            key: "bbs:requests".into(),
            cause,
        }
    }

    #[test]
    fn the_place_in_a_script_is_left_out_of_what_redis_said() {
        use super::without_script_location as cut;
        assert_eq!(
            cut("WRONGTYPE key bbs:requests is a hash; nothing was moved script: da4884e486f0353b9df1548462151cfc2bd03b35, on @user_script:22."),
            "WRONGTYPE key bbs:requests is a hash; nothing was moved"
        );
        assert_eq!(
            cut("ERR value is not an integer or out of range script: crawlworker_lease, on @user_function:310."),
            "ERR value is not an integer or out of range"
        );
        let kept = "ERR the word script: appears here";
        assert_eq!(cut(kept), kept);
    }

    #[test]
    fn the_operation_reads_as_a_sentence_with_its_key() {
        let e = FrontierError {
            op: "set aside the scrapy-redis queue in",
            key: "bbs:requests".into(),
            cause: redis::RedisError::from((redis::ErrorKind::ClientError, "refused")),
        };
        let said = e.to_string();
        assert!(
            said.starts_with(
                "Redis could not set aside the scrapy-redis queue in `bbs:requests`: "
            ),
            "{said}"
        );
        assert!(!said.contains(" in on "), "{said}");
    }

    #[test]
    fn a_busy_redis_is_an_outage_called_busy() {
        let busy = failed(redis::make_extension_error(
            "BUSY".into(),
            Some("Redis is busy running a script.".into()),
        ));
        assert!(busy.is_outage() && !busy.is_fatal());
        assert!(busy.outage().contains("busy"), "{}", busy.outage());
        let gone = failed(std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into());
        assert_eq!(gone.outage(), "Redis is unreachable");
    }

    #[tokio::test]
    async fn an_http_server_at_the_redis_address_is_named_as_not_redis() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                use tokio::io::AsyncWriteExt;
                let _ = stream
                    .write_all(b"HTTP/1.0 400 Bad Request\r\n\r\n<html></html>")
                    .await;
            }
        });
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
        let cause = client
            .get_multiplexed_async_connection()
            .await
            .err()
            .unwrap();
        let message = failed(cause).to_string();
        assert!(message.contains("what answered is not Redis"), "{message}");
        assert!(!message.contains("Unexpected"), "{message}");
    }
}
