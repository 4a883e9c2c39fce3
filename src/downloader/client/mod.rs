//! The HTTP client of the downloader: one [`HttpClient`] per spider run turns
//! a [`Request`] into a [`Fetched`] response or a [`FetchError`] that says
//! what failed, on which URL, and is safe to log.
//!
//! It owns the HTTP clients and everything about one exchange: only http and
//! https, the SSRF guard (`guard`), connect and whole-download timeouts,
//! the size limits while streaming (`body`), decompression (gzip, deflate,
//! brotli, zstd), HTTP/2 by ALPN, proxies (`proxy`), the cookie jar
//! (`cookies`) and the connection pools (`connections`).
//!
//! # What it keeps per host
//!
//! Idle keep-alive connections: at most `concurrent_requests_per_domain`
//! per host (no request could use more at once), each closed after
//! [`POOL_IDLE_TIMEOUT`] unused, and in all, idle or not, at most
//! `max_open_connections` besides one per request in progress
//! (`connections`), so a crawl over many hosts holds the connections of
//! the hosts it used last rather than of every host it has seen (each one
//! a socket and about 20 KiB). Cookies: the most recent
//! [`cookies::MAX_SITES`] sites'. Names are resolved for each connection
//! and not cached here.
//!
//! It does not follow redirects (a redirect is a response like any other;
//! [`super::redirect`] turns a Location into a new request), retry, wait for
//! politeness, read robots.txt, or parse what it downloads.
//!
//! # Proxies and the guard
//!
//! Proxies are configured by the operator (the spider's `proxies`, or
//! `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY` minus `NO_PROXY` when that list is
//! empty) and trusted: the guard never refuses a proxy's own address. The
//! target is still checked: its IP literal before sending, and its name by
//! resolving it here before the request leaves whenever a proxy may carry
//! it (the proxy resolves it again; a name that flips between the two
//! lookups is beyond our reach). Without a proxy the check happens in the
//! resolver, on the addresses the connection then uses.

mod body;
mod connections;
#[cfg(test)]
mod connections_tests;
pub mod cookies;
mod guard;
pub(crate) mod proxy;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

pub use guard::{refusal as address_refusal, LookupFailed, Refused};
pub use proxy::{redact as redact_proxy, BadProxy, ProxyMode, ProxyUrl};

use super::budget::{Budget, Held};
use crate::request::Request;
use crate::settings::Settings;

/// How long an idle keep-alive connection is kept for its host's next
/// request. A host crawled politely (a request every few seconds) keeps
/// its connection; one left behind gives its socket back soon.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(15);

/// A downloaded response.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub url: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// When the response arrived: relative dates on the page ("3 hours
    /// ago") count from it.
    pub fetched_at: std::time::SystemTime,
    /// The body's bytes in the worker's memory budget, given back when the
    /// last clone of the response is dropped (after its extraction).
    pub held: Held,
}

impl Fetched {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why a download failed (or a downloader could not be built). Every
/// message names what failed and where, and never shows proxy credentials.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FetchError {
    #[error("invalid setting `proxies`: {0}")]
    Proxy(#[from] BadProxy),
    #[error("cannot build the HTTP client: {detail}")]
    Client { detail: String },
    #[error("cannot fetch `{url}`: {problem}")]
    InvalidUrl { url: String, problem: String },
    #[error("cannot fetch {url}: only http and https URLs are fetched, not `{scheme}`")]
    Scheme { url: String, scheme: String },
    #[error("cannot fetch {url}: `{method}` is not a valid HTTP method")]
    Method { url: String, method: String },
    #[error("refused to fetch {url}: {refused}; set allow_private_networks = true to crawl private networks")]
    ForbiddenAddress { url: String, refused: Refused },
    #[error("cannot fetch {url}: {lookup}")]
    Dns { url: String, lookup: LookupFailed },
    #[error("{what} {url}{via} timed out after {} ({setting})", humantime::format_duration(*.after))]
    Timeout {
        url: String,
        via: Via,
        what: &'static str,
        setting: &'static str,
        after: Duration,
    },
    #[error("cannot connect for {url}{via}: {detail}")]
    Connect {
        url: String,
        via: Via,
        refused: bool,
        detail: String,
    },
    #[error("request to {url}{via} is invalid: {detail}")]
    InvalidRequest {
        url: String,
        via: Via,
        detail: String,
    },
    #[error("request to {url}{via} failed: {detail}")]
    Http {
        url: String,
        via: Via,
        detail: String,
    },
    #[error("response from {url} is larger than download_maxsize ({limit} bytes): {}", if *.announced { format!("Content-Length is {size}") } else { format!("cut off after {size} bytes") })]
    TooLarge {
        url: String,
        limit: u64,
        size: u64,
        announced: bool,
    },
    #[error("response from {url} is larger than the worker's whole download_memory_budget ({budget} bytes): {size} bytes or more; not fetched (raise download_memory_budget, or lower download_maxsize to under it)")]
    OverBudget { url: String, budget: u64, size: u64 },
}

/// The proxy a request went through, shown redacted (` via proxy …`), or
/// nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Via(Option<String>);

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(proxy) => write!(f, " via proxy {proxy}"),
            None => Ok(()),
        }
    }
}

impl FetchError {
    /// A short name for stats (`downloader/exception_type_count/<kind>`),
    /// Scrapy's where Scrapy has one.
    pub fn kind(&self) -> &'static str {
        match self {
            FetchError::Proxy(_) | FetchError::Client { .. } => "ClientError",
            FetchError::InvalidUrl { .. } => "InvalidURL",
            FetchError::Scheme { .. } => "UnsupportedScheme",
            FetchError::Method { .. } => "InvalidMethod",
            FetchError::ForbiddenAddress { .. } => "ForbiddenAddress",
            FetchError::Dns { .. } => "DNSLookupError",
            FetchError::Timeout { .. } => "TimeoutError",
            FetchError::Connect { refused: true, .. } => "ConnectionRefusedError",
            FetchError::Connect { .. } => "ConnectError",
            FetchError::InvalidRequest { .. } => "InvalidRequest",
            FetchError::Http { .. } => "ResponseFailed",
            FetchError::TooLarge { .. } | FetchError::OverBudget { .. } => "ResponseTooLarge",
        }
    }

    /// Whether trying the same request again may succeed (network trouble),
    /// as opposed to a refusal that will repeat (bad URL, forbidden address,
    /// too large).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            FetchError::Dns { .. }
                | FetchError::Timeout { .. }
                | FetchError::Connect { .. }
                | FetchError::Http { .. }
        )
    }
}

/// One route out: its clients and the proxy it goes through, if any.
struct Route {
    connections: connections::Connections,
    proxy: Option<ProxyUrl>,
}

/// The HTTP downloader of one spider run. Cheap to clone (clones share the
/// connection pools, the proxy rotation and the cookie jar).
#[derive(Clone)]
pub struct HttpClient {
    inner: Arc<Inner>,
}

struct Inner {
    /// One route per configured proxy, or a single one (direct, or through
    /// the environment's proxies).
    routes: Vec<Route>,
    rotation: proxy::Rotation,
    policy: Policy,
    /// The cookie jar the routes share, when cookies are enabled.
    jar: Option<Arc<cookies::CookieJar>>,
    /// The connections the routes hold, under `max_open_connections`.
    ledger: Arc<connections::Ledger>,
    http2: bool,
}

/// What every exchange obeys, whatever client carries it.
struct Policy {
    /// The SSRF guard is on (`allow_private_networks` is false).
    guard: bool,
    /// A proxy may carry requests, so target names are resolved and checked
    /// before sending.
    check_names: bool,
    download_timeout: Duration,
    connect_timeout: Duration,
    limits: body::Limits,
    /// The worker's memory budget for bodies, when it has one.
    budget: Option<Arc<Budget>>,
    scrub: proxy::Scrubber,
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        let proxies: Vec<String> = i
            .routes
            .iter()
            .filter_map(|r| r.proxy.as_ref().map(ToString::to_string))
            .collect();
        f.debug_struct("HttpClient")
            .field("proxies", &proxies)
            .field("proxy_mode", &i.rotation.mode())
            .field("guard", &i.policy.guard)
            .field("check_names", &i.policy.check_names)
            .field("download_timeout", &i.policy.download_timeout)
            .field("connect_timeout", &i.policy.connect_timeout)
            .field("limits", &i.policy.limits)
            .field("budget", &i.policy.budget)
            .field("cookies", &i.jar)
            .field("connections", &i.ledger)
            .field(
                "retired_clients",
                &i.routes
                    .iter()
                    .map(|r| r.connections.retired())
                    .sum::<usize>(),
            )
            .field("http2", &i.http2)
            .finish()
    }
}

/// The spider's proxies and the environment's, read and validated.
struct Proxies {
    listed: Vec<ProxyUrl>,
    env: proxy::EnvProxies,
}

impl Proxies {
    fn read(
        settings: &Settings,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Proxies, FetchError> {
        let listed = settings
            .proxies
            .iter()
            .map(|raw| ProxyUrl::parse(raw))
            .collect::<Result<Vec<_>, _>>()?;
        // With a proxy list the environment's proxies are not used.
        let env = if listed.is_empty() {
            proxy::EnvProxies::read(env)
        } else {
            proxy::EnvProxies::default()
        };
        Ok(Proxies { listed, env })
    }
}

impl Policy {
    fn new(settings: &Settings, proxies: &Proxies, budget: Option<Arc<Budget>>) -> Policy {
        let guard = !settings.allow_private_networks;
        Policy {
            guard,
            check_names: guard && (!proxies.listed.is_empty() || proxies.env.any()),
            download_timeout: settings.download_timeout,
            connect_timeout: settings.connect_timeout,
            limits: body::Limits {
                max: settings.download_maxsize.0,
                warn: settings.download_warnsize.0,
            },
            budget,
            scrub: proxy::Scrubber::new(&proxies.listed, &proxies.env),
        }
    }
}

impl HttpClient {
    /// Builds the downloader for a spider's settings, validating what they
    /// say about HTTP (headers, user agent, proxies, proxy mode).
    pub fn new(settings: &Settings) -> Result<HttpClient, FetchError> {
        HttpClient::with_env(settings, |var| std::env::var(var).ok())
    }

    /// [`HttpClient::new`] whose bodies are held in `budget` (the worker's
    /// memory budget, shared by its spiders) while they are read and
    /// until each response is dropped.
    pub fn within(settings: &Settings, budget: Arc<Budget>) -> Result<HttpClient, FetchError> {
        HttpClient::build(settings, Some(budget), |var| std::env::var(var).ok())
    }

    /// [`HttpClient::new`] with the environment read through `env`.
    fn with_env(
        settings: &Settings,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<HttpClient, FetchError> {
        HttpClient::build(settings, None, env)
    }

    fn build(
        settings: &Settings,
        budget: Option<Arc<Budget>>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<HttpClient, FetchError> {
        let proxies = Proxies::read(settings, env)?;
        let mode = settings.proxy_mode;
        let policy = Policy::new(settings, &proxies, budget);
        let trusted = proxies
            .listed
            .iter()
            .map(|p| p.host().to_string())
            .chain(proxies.env.hosts.iter().cloned());
        let resolver = Arc::new(guard::GuardedResolver::new(policy.guard, trusted));
        let jar = settings
            .cookies_enabled
            .then(|| Arc::new(cookies::CookieJar::default()));
        let ledger = connections::Ledger::new(settings.max_open_connections as usize);
        let route = |proxy: Option<&ProxyUrl>| -> Result<Route, FetchError> {
            let recipe = Recipe {
                user_agent: settings.user_agent.as_str().to_string(),
                headers: default_headers(settings),
                connect_timeout: settings.connect_timeout,
                resolver: resolver.clone(),
                idle_per_host: settings.concurrent_requests_per_domain.max(1) as usize,
                http2: settings.http2,
                jar: jar.clone(),
                proxy: proxy.map(|p| reqwest_proxy(p, &policy.scrub)).transpose()?,
                scrub: policy.scrub.clone(),
            };
            let make: connections::Make = Box::new(move |pooling| recipe.build(pooling));
            Ok(Route {
                connections: connections::Connections::new(make, ledger.clone())?,
                proxy: proxy.cloned(),
            })
        };
        let routes = if proxies.listed.is_empty() {
            vec![route(None)?]
        } else {
            proxies
                .listed
                .iter()
                .map(|p| route(Some(p)))
                .collect::<Result<Vec<_>, _>>()?
        };
        Ok(HttpClient {
            inner: Arc::new(Inner {
                routes,
                rotation: proxy::Rotation::new(mode),
                policy,
                jar,
                ledger,
                http2: settings.http2,
            }),
        })
    }

    /// Sites whose cookies the jar remembers (0 without cookies).
    pub fn cookie_sites(&self) -> usize {
        self.inner.jar.as_ref().map_or(0, |jar| jar.sites())
    }

    /// Downloads `request`: at most `download_timeout` in all, at most
    /// `download_maxsize` bytes of (decoded) body.
    pub async fn fetch(&self, request: &Request) -> Result<Fetched, FetchError> {
        let i = &self.inner;
        i.policy
            .fetch(request, |host| {
                let route = &i.routes[i.rotation.pick(host, i.routes.len())];
                (route.connections.lease(), route.proxy.as_ref())
            })
            .await
    }
}

impl Policy {
    /// One exchange: checks, then the route `choose` picks for the host.
    async fn fetch<'a>(
        &self,
        request: &Request,
        choose: impl FnOnce(&str) -> (connections::Lease, Option<&'a ProxyUrl>),
    ) -> Result<Fetched, FetchError> {
        let raw = &request.url;
        let url = url::Url::parse(raw).map_err(|e| FetchError::InvalidUrl {
            url: raw.clone(),
            problem: e.to_string(),
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(FetchError::Scheme {
                url: raw.clone(),
                scheme: url.scheme().to_string(),
            });
        }
        let method = reqwest::Method::from_bytes(request.method.as_bytes()).map_err(|_| {
            FetchError::Method {
                url: raw.clone(),
                method: request.method.clone(),
            }
        })?;
        let Some(host) = url.host() else {
            return Err(FetchError::InvalidUrl {
                url: raw.clone(),
                problem: "it has no host".into(),
            });
        };
        if self.guard {
            guard::check_literal(&host).map_err(|refused| FetchError::ForbiddenAddress {
                url: raw.clone(),
                refused,
            })?;
        }
        let (lease, proxy) = choose(url.host_str().unwrap_or_default());
        let via = Via(proxy.map(ToString::to_string));
        let exchange = self.exchange(lease, method, url, request, &via);
        match tokio::time::timeout(self.download_timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(FetchError::Timeout {
                url: raw.clone(),
                via,
                what: "download of",
                setting: "download_timeout",
                after: self.download_timeout,
            }),
        }
    }

    /// Checks the target name if needed, sends, and reads the body.
    async fn exchange(
        &self,
        lease: connections::Lease,
        method: reqwest::Method,
        url: url::Url,
        request: &Request,
        via: &Via,
    ) -> Result<Fetched, FetchError> {
        let raw = &request.url;
        if let (true, Some(url::Host::Domain(name))) = (self.check_names, url.host()) {
            guard::check_name(name)
                .await
                .map_err(|blocked| match blocked {
                    guard::Blocked::Refused(refused) => FetchError::ForbiddenAddress {
                        url: raw.clone(),
                        refused,
                    },
                    guard::Blocked::Lookup(lookup) => FetchError::Dns {
                        url: raw.clone(),
                        lookup,
                    },
                })?;
        }
        let mut builder = lease.client.request(method, url);
        for (k, v) in &request.headers {
            builder = builder.header(k, v);
        }
        if !request.body.is_empty() {
            builder = builder.body(request.body.clone());
        }
        let sent = builder.send().await;
        // The head is in: the body needs the connection, not the client,
        // and a client held while the body streams keeps its pool alive.
        drop(lease);
        let mut response = sent.map_err(|e| self.failure(e, raw, via))?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let final_url = response.url().to_string();
        let (body, held) = body::read(&mut response, raw, self.limits, self.budget.as_ref())
            .await
            .map_err(|e| match e {
                body::ReadError::TooLarge {
                    limit,
                    size,
                    announced,
                } => FetchError::TooLarge {
                    url: raw.clone(),
                    limit,
                    size,
                    announced,
                },
                body::ReadError::OverBudget { budget, size } => FetchError::OverBudget {
                    url: raw.clone(),
                    budget,
                    size,
                },
                body::ReadError::Failed(e) => self.failure(e, raw, via),
            })?;
        Ok(Fetched {
            url: final_url,
            status,
            headers,
            body,
            fetched_at: std::time::SystemTime::now(),
            held,
        })
    }

    /// Turns an error of the HTTP stack into a [`FetchError`], finding the
    /// guard's refusal or a failed lookup among its causes.
    fn failure(&self, e: reqwest::Error, url: &str, via: &Via) -> FetchError {
        let url = url.to_string();
        let via = via.clone();
        let mut refused_io = false;
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(c) = cause {
            if let Some(refused) = c.downcast_ref::<Refused>() {
                return FetchError::ForbiddenAddress {
                    url,
                    refused: refused.clone(),
                };
            }
            if let Some(lookup) = c.downcast_ref::<guard::LookupFailed>() {
                return FetchError::Dns {
                    url,
                    lookup: lookup.clone(),
                };
            }
            refused_io |= c
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused);
            cause = c.source();
        }
        let e = e.without_url();
        let detail = self.scrub.scrub(chain(&e));
        if e.is_timeout() && e.is_connect() {
            FetchError::Timeout {
                url,
                via,
                what: "connecting for",
                setting: "connect_timeout",
                after: self.connect_timeout,
            }
        } else if e.is_timeout() {
            FetchError::Timeout {
                url,
                via,
                what: "download of",
                setting: "download_timeout",
                after: self.download_timeout,
            }
        } else if e.is_connect() {
            FetchError::Connect {
                url,
                via,
                refused: refused_io,
                detail,
            }
        } else if e.is_builder() {
            FetchError::InvalidRequest { url, via, detail }
        } else {
            FetchError::Http { url, via, detail }
        }
    }
}

/// What every client of a route is built from, the same for each of its
/// generations: they share the cookie jar, the resolver (and its guard)
/// and the proxy.
struct Recipe {
    user_agent: String,
    headers: HeaderMap,
    connect_timeout: Duration,
    resolver: Arc<guard::GuardedResolver>,
    /// Idle connections kept per host: `concurrent_requests_per_domain`.
    idle_per_host: usize,
    http2: bool,
    jar: Option<Arc<cookies::CookieJar>>,
    proxy: Option<reqwest::Proxy>,
    scrub: proxy::Scrubber,
}

impl Recipe {
    fn build(&self, pooling: connections::Pooling) -> Result<reqwest::Client, FetchError> {
        let mut b = reqwest::Client::builder()
            .user_agent(self.user_agent.as_str())
            .default_headers(self.headers.clone())
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(self.connect_timeout)
            .dns_resolver(self.resolver.clone())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .gzip(true)
            .deflate(true)
            .brotli(true)
            .zstd(true);
        b = match pooling {
            connections::Pooling::Counted(layer) => b
                .pool_max_idle_per_host(self.idle_per_host)
                .connector_layer(layer),
            connections::Pooling::Unpooled => b.pool_max_idle_per_host(0),
        };
        if !self.http2 {
            b = b.http1_only();
        }
        if let Some(jar) = &self.jar {
            b = b.cookie_provider(jar.clone());
        }
        if let Some(proxy) = &self.proxy {
            b = b.proxy(proxy.clone());
        }
        b.build().map_err(|e| FetchError::Client {
            detail: self.scrub.scrub(chain(&e)),
        })
    }
}

/// The reqwest form of a configured proxy (its credentials included).
fn reqwest_proxy(p: &ProxyUrl, scrub: &proxy::Scrubber) -> Result<reqwest::Proxy, FetchError> {
    reqwest::Proxy::all(p.secret_url()).map_err(|e| {
        FetchError::Proxy(proxy::BadProxy {
            proxy: p.to_string(),
            problem: scrub.scrub(chain(&e)),
        })
    })
}

/// The settings' `default_request_headers` (checked when the settings
/// were built, so none is dropped here).
fn default_headers(settings: &Settings) -> HeaderMap {
    settings
        .default_request_headers
        .iter()
        .filter_map(|(k, v)| {
            Some((
                HeaderName::from_bytes(k.as_bytes()).ok()?,
                HeaderValue::from_str(v).ok()?,
            ))
        })
        .collect()
}

/// An error and its causes, `: `-separated, each message once.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cause = Some(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cause = c.source();
    }
    parts.join(": ")
}
