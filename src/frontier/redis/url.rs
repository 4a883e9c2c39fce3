//! Redis addresses: checked when the settings are built ([`RedisUrl`]), and
//! shown as people see them, the password replaced, so it never reaches a
//! log line or an error message.

use std::fmt;

/// A Redis address that Redis's client accepts (`redis://`, `rediss://`,
/// `unix://`), or a Redis Cluster's (`redis+cluster://host:port,host:port`,
/// `rediss+cluster://…` for TLS: some of its nodes, the others are learnt
/// from them). Its `Display` hides the password; [`RedisUrl::as_str`] is
/// for connecting only.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl(String);

impl RedisUrl {
    /// Checks `url`; the error never shows the password.
    pub fn parse(url: &str) -> Result<RedisUrl, String> {
        let url = url.trim();
        if let Some(nodes) = cluster_nodes(url) {
            let nodes = nodes?;
            for node in &nodes {
                redis::IntoConnectionInfo::into_connection_info(node.as_str()).map_err(|e| {
                    format!(
                        "`{}` is not a Redis Cluster address: node {} ({e}); write e.g. redis+cluster://127.0.0.1:7000,127.0.0.1:7001",
                        redact(url),
                        redact(node)
                    )
                })?;
            }
            return Ok(RedisUrl(url.to_string()));
        }
        match redis::IntoConnectionInfo::into_connection_info(url) {
            Ok(_) => Ok(RedisUrl(url.to_string())),
            Err(e) => Err(format!(
                "`{}` is not a Redis address ({e}); write e.g. redis://127.0.0.1:6379, rediss://:PASSWORD@HOST:6380 or redis+cluster://HOST:7000,HOST:7001",
                redact(url)
            )),
        }
    }

    /// `redis://127.0.0.1:6379`, the default.
    pub fn local() -> RedisUrl {
        RedisUrl("redis://127.0.0.1:6379".to_string())
    }

    /// The address with its password, to connect with.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether it names a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        cluster_nodes(&self.0).is_some()
    }

    /// The node URLs of a cluster address (`None`: not one).
    pub fn cluster_nodes(&self) -> Option<Result<Vec<String>, String>> {
        cluster_nodes(&self.0)
    }
}

/// The node URLs of a `redis+cluster://` or `rediss+cluster://` address
/// (`None`: not a cluster address). The user and password, if any, apply
/// to every node.
fn cluster_nodes(url: &str) -> Option<Result<Vec<String>, String>> {
    let (scheme, rest) = url.split_once("://")?;
    let node_scheme = match scheme.to_ascii_lowercase().as_str() {
        "redis+cluster" => "redis",
        "rediss+cluster" => "rediss",
        _ => return None,
    };
    let (auth, hosts) = match rest.rsplit_once('@') {
        Some((auth, hosts)) => (format!("{auth}@"), hosts),
        None => (String::new(), rest),
    };
    let (hosts, query) = match hosts.split_once('?') {
        Some((h, q)) => (h, format!("?{q}")),
        None => (hosts, String::new()),
    };
    let hosts = hosts.trim_end_matches('/');
    let nodes: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| format!("{node_scheme}://{auth}{h}{query}"))
        .collect();
    if nodes.is_empty() {
        return Some(Err(format!(
            "`{}` names no nodes; write e.g. redis+cluster://127.0.0.1:7000,127.0.0.1:7001",
            redact(url)
        )));
    }
    if nodes
        .iter()
        .any(|n| n[n.find("://").map_or(0, |i| i + 3)..].contains('/'))
    {
        return Some(Err(format!(
            "`{}`: a Redis Cluster has only database 0, so its address has no /DB; write e.g. redis+cluster://127.0.0.1:7000,127.0.0.1:7001",
            redact(url)
        )));
    }
    Some(Ok(nodes))
}

impl fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact(&self.0))
    }
}

impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RedisUrl({})", redact(&self.0))
    }
}

/// `url` with any password replaced by `***`.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            if u.password().is_some() {
                let _ = u.set_password(Some("***"));
            }
            u.to_string()
        }
        // Not a URL the url crate reads (a cluster's node list): hide what
        // follows the user name; unless even that is unclear, then show
        // only the scheme, the rest may hold a secret.
        Err(_) => match url.split_once("://") {
            Some((scheme, rest)) => match rest.rsplit_once('@') {
                Some((auth, hosts)) if !hosts.contains(['@', '[']) => match auth.split_once(':') {
                    Some((user, _)) => format!("{scheme}://{user}:***@{hosts}"),
                    None => format!("{scheme}://{auth}@{hosts}"),
                },
                None if !rest.contains('[') => url.to_string(),
                _ => format!("{scheme}://(unparsable address)"),
            },
            None => "(unparsable Redis address)".to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact("redis://:s3cret@127.0.0.1:6379/0"),
            "redis://:***@127.0.0.1:6379/0"
        );
        assert_eq!(
            redact("rediss://user:pw@127.0.0.1:6380"),
            "rediss://user:***@127.0.0.1:6380"
        );
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert!(!redact("redis://:pw@[bad").contains("pw"));
        let url = RedisUrl::parse("redis://:s3cret@127.0.0.1:6379").unwrap();
        assert_eq!(url.to_string(), "redis://:***@127.0.0.1:6379");
        assert!(!format!("{url:?}").contains("s3cret"));
    }

    #[test]
    fn cluster_addresses_name_their_nodes() {
        assert_eq!(
            cluster_nodes("redis+cluster://:pw@127.0.0.1:7000,127.0.0.1:7001/"),
            Some(Ok(vec![
                "redis://:pw@127.0.0.1:7000".to_string(),
                "redis://:pw@127.0.0.1:7001".to_string()
            ]))
        );
        assert_eq!(cluster_nodes("redis://127.0.0.1:7000"), None);
        let url = RedisUrl::parse("rediss+cluster://u:s3cret@127.0.0.1:7000").unwrap();
        assert!(url.is_cluster());
        assert_eq!(url.to_string(), "rediss+cluster://u:***@127.0.0.1:7000");
        assert_eq!(
            redact("redis+cluster://:pw@127.0.0.1:7000,127.0.0.1:7001"),
            "redis+cluster://:***@127.0.0.1:7000,127.0.0.1:7001"
        );
        let e = RedisUrl::parse("redis+cluster://:s3cret@127.0.0.1:7000/2").unwrap_err();
        assert!(
            e.contains("only database 0") && !e.contains("s3cret"),
            "{e}"
        );
        assert!(RedisUrl::parse("redis+cluster://").is_err());
    }

    #[test]
    fn bad_addresses_are_refused_without_their_password() {
        let e = RedisUrl::parse("http://:s3cret@127.0.0.1:6379").unwrap_err();
        assert!(
            e.contains("not a Redis address") && !e.contains("s3cret"),
            "{e}"
        );
    }
}
