//! The SSRF guard: which addresses a crawl may connect to, enforced on the
//! address actually connected to.
//!
//! Unless a spider sets `allow_private_networks`, only public unicast
//! addresses are fetched. Three checks make that hold:
//!
//! - an IP-literal host is classified before the request is sent
//!   ([`check_literal`]); the resolver is never asked about literals;
//! - every name the HTTP client resolves goes through [`GuardedResolver`],
//!   which drops non-public addresses and refuses the name when none remain,
//!   so the check applies to the very addresses the connection uses (a public
//!   name that resolves to a private address — DNS rebinding — is refused);
//! - when a request may go through a proxy, the target's name is resolved
//!   here first ([`check_name`]) because the proxy, not us, will resolve it.
//!
//! Proxies are configured by the operator and trusted: their own host names
//! are exempt from the filter. This module does not know about URLs, proxies
//! or settings beyond that list; `fetch` decides when each check runs.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// IPv4 ranges that are not public, with the name shown in errors. The
/// broadcast address sits before 240.0.0.0/4 so it gets its own name.
const V4_REFUSED: &[([u8; 4], u8, &str)] = &[
    ([0, 0, 0, 0], 8, "unspecified (\"this network\")"),
    ([10, 0, 0, 0], 8, "private (RFC 1918)"),
    ([100, 64, 0, 0], 10, "shared carrier-grade NAT (RFC 6598)"),
    ([127, 0, 0, 0], 8, "loopback"),
    (
        [169, 254, 0, 0],
        16,
        "link-local, home of cloud metadata services",
    ),
    ([172, 16, 0, 0], 12, "private (RFC 1918)"),
    ([192, 0, 0, 0], 24, "IETF protocol assignment"),
    ([192, 0, 2, 0], 24, "documentation (TEST-NET-1)"),
    ([192, 88, 99, 0], 24, "6to4 relay anycast (deprecated)"),
    ([192, 168, 0, 0], 16, "private (RFC 1918)"),
    ([198, 18, 0, 0], 15, "benchmarking"),
    ([198, 51, 100, 0], 24, "documentation (TEST-NET-2)"),
    ([203, 0, 113, 0], 24, "documentation (TEST-NET-3)"),
    ([224, 0, 0, 0], 4, "multicast"),
    ([255, 255, 255, 255], 32, "broadcast"),
    ([240, 0, 0, 0], 4, "reserved"),
];

/// IPv6 ranges that are not public. Forms that embed an IPv4 address
/// (mapped, translated, NAT64, 6to4) are judged by that address instead,
/// before this table; anything outside 2000::/3 (global unicast) is refused
/// after it.
const V6_REFUSED: &[(u128, u8, &str)] = &[
    (0, 128, "unspecified"),
    (1, 128, "loopback"),
    (0, 96, "IPv4-compatible (deprecated)"),
    (0x0064_ff9b_0001 << 80, 48, "NAT64 local-use"),
    (0x0100 << 112, 64, "discard-only"),
    (0x2001_0db8 << 96, 32, "documentation"),
    (
        0x2001 << 112,
        23,
        "IETF protocol assignment (Teredo, benchmarking, ORCHID)",
    ),
    (0x3fff << 112, 20, "documentation"),
    (0xfc00 << 112, 7, "unique-local"),
    (0xfe80 << 112, 10, "link-local"),
    (0xfec0 << 112, 10, "site-local (deprecated)"),
    (0xff00 << 112, 8, "multicast"),
];

/// Why `ip` may not be crawled, or `None` for a public address.
pub fn refusal(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refusal_v4(v4),
        IpAddr::V6(v6) => refusal_v6(v6),
    }
}

fn refusal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let n = u32::from(ip);
    V4_REFUSED
        .iter()
        .find(|(net, bits, _)| {
            let mask = u32::MAX.checked_shl(32 - u32::from(*bits)).unwrap_or(0);
            n & mask == u32::from_be_bytes(*net) & mask
        })
        .map(|(_, _, why)| *why)
}

fn refusal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let n = u128::from(ip);
    let within = |net: u128, bits: u8| {
        let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
        n & mask == net & mask
    };
    let low_v4 = Ipv4Addr::from(n as u32);
    // ::ffff:a.b.c.d (mapped), ::ffff:0:a.b.c.d (translated, RFC 2765),
    // 64:ff9b::a.b.c.d (NAT64, RFC 6052) reach the embedded IPv4 address.
    if within(0xffff << 32, 96) || within(0xffff << 48, 96) || within(0x0064_ff9b << 96, 96) {
        return refusal_v4(low_v4);
    }
    // 2002:AABB:CCDD::/48 is 6to4 for the IPv4 address AA.BB.CC.DD.
    if within(0x2002 << 112, 16) {
        return refusal_v4(Ipv4Addr::from((n >> 80) as u32));
    }
    if let Some((_, _, why)) = V6_REFUSED.iter().find(|(net, bits, _)| within(*net, *bits)) {
        return Some(why);
    }
    if !within(0x2000 << 112, 3) {
        return Some("reserved (outside global unicast 2000::/3)");
    }
    None
}

/// A host refused because its address is not public.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct Refused {
    /// The host as written in the URL (a name or an IP literal).
    pub host: String,
    /// The (first) refused address.
    pub addr: IpAddr,
    /// What kind of address it is.
    pub reason: &'static str,
    /// Whether `host` is a name that resolved to `addr`.
    pub resolved: bool,
}

impl Refused {
    fn describe(&self) -> String {
        let (addr, why) = (self.addr, self.reason);
        if self.resolved {
            format!(
                "{} resolves to {addr}, which is not a public address ({why})",
                self.host
            )
        } else {
            format!("{addr} is not a public address ({why})")
        }
    }
}

/// A name that did not resolve.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot resolve {host}: {detail}")]
pub struct LookupFailed {
    pub host: String,
    pub detail: String,
}

/// Why [`check_name`] refused a target.
#[derive(Debug, Clone)]
pub enum Blocked {
    Refused(Refused),
    Lookup(LookupFailed),
}

/// Refuses an IP-literal host that is not public; names pass (they are
/// checked when resolved).
pub fn check_literal(host: &url::Host<&str>) -> Result<(), Refused> {
    let ip = match host {
        url::Host::Domain(_) => return Ok(()),
        url::Host::Ipv4(v4) => IpAddr::V4(*v4),
        url::Host::Ipv6(v6) => IpAddr::V6(*v6),
    };
    match refusal(ip) {
        Some(reason) => Err(Refused {
            host: host.to_string(),
            addr: ip,
            reason,
            resolved: false,
        }),
        None => Ok(()),
    }
}

/// Resolves a target name and refuses it unless it has a public address:
/// used when a proxy, not this process, will connect to the target.
pub async fn check_name(host: &str) -> Result<(), Blocked> {
    let addrs = lookup(host).await.map_err(Blocked::Lookup)?;
    public_only(host, addrs).map(drop).map_err(Blocked::Refused)
}

async fn lookup(host: &str) -> Result<Vec<SocketAddr>, LookupFailed> {
    let failed = |detail: String| LookupFailed {
        host: host.to_string(),
        detail,
    };
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, 0))
        .await
        .map_err(|e| failed(e.to_string()))?
        .collect();
    if addrs.is_empty() {
        return Err(failed("no addresses".into()));
    }
    Ok(addrs)
}

/// Keeps the public addresses of `host`; refuses it if none remain.
fn public_only(host: &str, addrs: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, Refused> {
    let mut first_refused = None;
    let public: Vec<SocketAddr> = addrs
        .into_iter()
        .filter(|a| match refusal(a.ip()) {
            Some(reason) => {
                first_refused.get_or_insert((a.ip(), reason));
                false
            }
            None => true,
        })
        .collect();
    match (public.is_empty(), first_refused) {
        (true, Some((addr, reason))) => Err(Refused {
            host: host.to_string(),
            addr,
            reason,
            resolved: true,
        }),
        _ => Ok(public),
    }
}

/// The DNS resolver of every HTTP client: resolves with the system
/// resolver and, when the guard is on, keeps only public addresses.
#[derive(Debug, Clone, Default)]
pub struct GuardedResolver {
    /// False when the spider allows private networks.
    enforce: bool,
    /// Lower-cased host names of the configured proxies (trusted).
    trusted: HashSet<String>,
}

impl GuardedResolver {
    pub fn new(enforce: bool, trusted: impl IntoIterator<Item = String>) -> GuardedResolver {
        GuardedResolver {
            enforce,
            trusted: trusted
                .into_iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
        }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        let filter = self.enforce && !self.trusted.contains(&host.to_ascii_lowercase());
        Box::pin(async move {
            let addrs = lookup(&host).await?;
            let addrs = if filter {
                public_only(&host, addrs)?
            } else {
                addrs
            };
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_addresses() {
        let refused = [
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "unspecified"),
            ("10.0.0.1", "private"),
            ("10.255.255.255", "private"),
            ("100.64.0.1", "carrier-grade NAT"),
            ("100.127.255.254", "carrier-grade NAT"),
            ("127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("169.254.169.254", "link-local"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.0.0.8", "IETF"),
            ("192.0.2.10", "documentation"),
            ("192.88.99.1", "6to4 relay"),
            ("192.168.1.1", "private"),
            ("198.18.0.1", "benchmarking"),
            ("198.19.255.255", "benchmarking"),
            ("198.51.100.7", "documentation"),
            ("203.0.113.9", "documentation"),
            ("224.0.0.251", "multicast"),
            ("239.255.255.250", "multicast"),
            ("240.0.0.1", "reserved"),
            ("255.255.255.255", "broadcast"),
            ("::", "unspecified"),
            ("::1", "loopback"),
            ("::127.0.0.1", "IPv4-compatible"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:10.1.2.3", "private"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::ffff:0:127.0.0.1", "loopback"),
            ("64:ff9b::10.0.0.1", "private"),
            ("64:ff9b:1::1", "NAT64 local-use"),
            ("100::1", "discard-only"),
            ("2001::1", "Teredo"),
            ("2001:2::1", "benchmarking"),
            ("2001:db8::1", "documentation"),
            ("2002:7f00:1::", "loopback"),
            ("2002:a9fe:a9fe::1", "link-local"),
            ("3fff::1", "documentation"),
            ("fc00::1", "unique-local"),
            ("fd12:3456::1", "unique-local"),
            ("fe80::1", "link-local"),
            ("febf::1", "link-local"),
            ("fec0::1", "site-local"),
            ("ff02::1", "multicast"),
            ("4000::1", "reserved"),
            ("5f00::1", "reserved"),
        ];
        for (addr, why) in refused {
            let ip: IpAddr = addr.parse().unwrap();
            match refusal(ip) {
                Some(reason) => assert!(reason.contains(why), "{addr}: {reason} lacks {why}"),
                None => panic!("{addr} should be refused ({why})"),
            }
        }
        let public = [
            "1.1.1.1",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "126.255.255.255",
            "128.0.0.1",
            "169.253.255.255",
            "172.15.255.255",
            "172.32.0.1",
            "192.0.3.1",
            "192.167.255.255",
            "192.169.0.1",
            "198.17.255.255",
            "198.20.0.1",
            "223.255.255.255",
            "::ffff:8.8.8.8",
            "64:ff9b::8.8.8.8",
            "2002:808:808::1",
            "2001:200::1",
            "2001:4860:4860::8888",
            "2606:4700:4700::1111",
            "2a00:1450:4001::1",
        ];
        for addr in public {
            let ip: IpAddr = addr.parse().unwrap();
            assert_eq!(refusal(ip), None, "{addr} is public");
        }
    }

    #[test]
    fn literal_hosts_are_checked_and_names_pass() {
        let url = url::Url::parse("http://[::ffff:127.0.0.1]:8080/").unwrap();
        let err = check_literal(&url.host().unwrap()).unwrap_err();
        assert_eq!(err.addr, "::ffff:127.0.0.1".parse::<IpAddr>().unwrap());
        assert!(err.to_string().contains("loopback"), "{err}");
        // The URL parser turns odd IPv4 spellings into the address itself.
        let url = url::Url::parse("http://0x7f.1/").unwrap();
        assert!(check_literal(&url.host().unwrap()).is_err());
        let url = url::Url::parse("http://2130706433/").unwrap();
        assert!(check_literal(&url.host().unwrap()).is_err());
        let url = url::Url::parse("http://8.8.8.8/").unwrap();
        assert!(check_literal(&url.host().unwrap()).is_ok());
        let url = url::Url::parse("http://localhost/").unwrap();
        assert!(check_literal(&url.host().unwrap()).is_ok());
    }

    #[test]
    fn some_public_addresses_are_kept_and_none_refuses() {
        let a = |s: &str| SocketAddr::new(s.parse().unwrap(), 80);
        let kept = public_only("mixed.test", vec![a("10.0.0.1"), a("8.8.8.8")]).unwrap();
        assert_eq!(kept, vec![a("8.8.8.8")]);
        let err = public_only("inside.test", vec![a("10.0.0.1"), a("fd00::1")]).unwrap_err();
        assert_eq!(err.addr, "10.0.0.1".parse::<IpAddr>().unwrap());
        assert!(err.resolved);
        assert_eq!(
            err.to_string(),
            "inside.test resolves to 10.0.0.1, which is not a public address (private (RFC 1918))"
        );
    }

    #[tokio::test]
    async fn resolver_refuses_loopback_names_unless_trusted_or_allowed() {
        let name = || "localhost".parse::<Name>().unwrap();
        let err = GuardedResolver::new(true, [])
            .resolve(name())
            .await
            .err()
            .expect("localhost is refused");
        let refused = err.downcast_ref::<Refused>().expect("a Refused error");
        assert_eq!(refused.host, "localhost");
        assert!(refused.addr.is_loopback());

        let trusted = GuardedResolver::new(true, ["LOCALHOST".to_string()]);
        assert!(trusted.resolve(name()).await.unwrap().next().is_some());
        let open = GuardedResolver::new(false, []);
        assert!(open.resolve(name()).await.unwrap().next().is_some());
        assert!(matches!(
            check_name("localhost").await,
            Err(Blocked::Refused(_))
        ));
    }
}
