//! The robots.txt policy of one host: may this user agent fetch this URL, and
//! what crawl delay does the host ask for.
//!
//! Pure: no I/O and no clock. Fetching `/robots.txt`, caching what the fetch
//! gave in Redis for the whole cluster and deciding when to fetch it again
//! belong to the downloader; this module only turns what one fetch gave
//! ([`Fetched`]) into answers ([`Robots`]). Parsing and matching are the
//! `robotxt` crate's (RFC 9309, Google's semantics); this module adds what a
//! crawler needs around it: the HTTP status rules, the product token and the
//! crawl-delay bounds.
//!
//! # What a fetch means
//!
//! | the fetch of `/robots.txt` gave                           | policy                   | `is_failure()` |
//! |-----------------------------------------------------------|--------------------------|----------------|
//! | 2xx                                                       | the file's rules (below) | false          |
//! | 3xx (redirects were already followed by the caller)       | allow everything         | false          |
//! | 4xx except 429 (404, 401, 403, 410, …)                    | allow everything         | false          |
//! | 429, 5xx, any other status (1xx, ≥ 600), a network error  | disallow everything      | true           |
//!
//! This is what Google does, and RFC 9309 (§2.3.1): a 4xx means "there is
//! no robots.txt", even 401 and 403 (Python's `urllib.robotparser`, behind
//! older Scrapy setups, disallows everything on those), while 429 and 5xx
//! mean "the server could not say", so nothing is fetched until a later
//! fetch says more; `is_failure()` tells the caller to fetch again soon
//! rather than after the normal TTL. A 3xx that reaches us means the
//! redirect chain was not followed to its end (too many hops), which Google
//! treats as a 4xx.
//!
//! Whatever the policy, `/robots.txt` itself is always allowed.
//!
//! # The file's rules
//!
//! - **Size.** Only the first 500 KiB are read, as Google does. The line that
//!   crosses the limit is dropped too, so a cut rule never applies
//!   (`Allow: /private-but-public` cut to `Allow: /pri` would allow too much).
//! - **Encoding.** The body is read as bytes, as Google's parser does: a body
//!   that is not valid UTF-8 is neither rejected nor decoded with
//!   replacement characters. A leading UTF-8 BOM is skipped; any other
//!   non-ASCII byte in a rule is percent-encoded, so a Latin-1
//!   `Disallow: /caf\xE9` blocks `/caf%E9` (the Latin-1 URL), and the
//!   file's other lines are unaffected.
//! - **Lines.** Directive names are case-insensitive (`DISALLOW`, `user-agent`)
//!   and common misspellings (`Dissallow`, `useragent`) are accepted; `#`
//!   starts a comment; unknown lines are ignored. Paths are case-sensitive.
//! - **Groups.** A group is one or more `User-agent` lines and the rules
//!   after them. The groups whose `User-agent` value equals the product token
//!   (below), ignoring case, are merged and used; only if there is none are the
//!   `User-agent: *` groups used; if there is none of those either, nothing is
//!   disallowed. A group for our agent replaces `*` completely, its
//!   `Crawl-delay` included. Rules before the first `User-agent` line apply to
//!   no one.
//! - **Matching.** A rule is matched against the URL's path and query (the
//!   fragment is never sent, so it is ignored). A pattern matches any URL it
//!   is a prefix of; `*` matches any run of characters; `$` at the end of a
//!   pattern anchors it to the end of the URL. `Disallow: /*?sessionid=`
//!   blocks `/list?sessionid=1` but not `/list?page=2&sessionid=1`.
//! - **Precedence.** Of the rules that match, the longest pattern wins,
//!   whichever order they are written in; between an `Allow` and a `Disallow`
//!   of the same length, `Allow` wins. No matching rule means allowed. An empty
//!   `Disallow:` matches nothing.
//! - **Percent-encoding.** Patterns and URLs are normalised the same way
//!   before matching: escapes of unreserved characters are decoded (`/%7Ea`
//!   is `/~a`), other escapes get upper-case hex (`%2f` is `%2F`), and spaces,
//!   controls and non-ASCII are encoded (`/a b` is `/a%20b`).
//!
//! # The product token
//!
//! Groups are chosen by the *product token* of the spider's User-Agent
//! header, its first product name: the leading run of HTTP token characters,
//! so `crawlworker/0.1.0 (+https://example.com/bot)` is `crawlworker`.
//!
//! A browser-compatible header starts with `Mozilla`, which names no robot;
//! such bots put their own name after `compatible;` in a comment, so when the
//! first product is `Mozilla` and a comment holds `compatible; Name/…`, the
//! token is `Name`: `Mozilla/5.0 (compatible; MyBot/1.0; +https://…)` is
//! `MyBot`, as the convention of Googlebot and bingbot intends. A plain
//! browser header (no `compatible;`) stays `Mozilla`, which in practice gets
//! the `*` group.
//!
//! The token is compared with each `User-agent` value whole: a file that
//! writes `User-agent: crawlworker/1.0` does not name `crawlworker` (Google's
//! parser would cut the value at the `/`; `robotxt` follows RFC 9309, whose
//! values are bare product tokens).
//!
//! # Crawl-delay
//!
//! `Crawl-delay` is not in RFC 9309 (Google ignores it; Bing and Yandex obey
//! it). It is read from the groups chosen for the agent, in seconds,
//! fractions allowed (`10`, `0.5`); if the merged groups give several, the
//! smallest wins. A value that is not a number, is negative or not finite,
//! or is over one day, is ignored as if absent.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use url::{Position, Url};

/// What a host's robots.txt fetch gave: what the cluster caches in Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// The server answered (after the caller followed redirects).
    Status {
        /// The final HTTP status code.
        status: u16,
        /// The raw response body, before any decoding.
        body: Vec<u8>,
    },
    /// No HTTP answer: DNS, connect, TLS, timeout or a broken body.
    NetworkError,
}

/// The robots.txt policy for one host, built once per fetch and asked once
/// per request. Cheap to share: wrap it in an `Arc`.
pub struct Robots {
    /// What the fetch decided.
    policy: Policy,
}

/// The three outcomes of a fetch (see the module doc's table).
enum Policy {
    /// No robots.txt (3xx, 4xx): everything is allowed.
    AllowAll,
    /// The server could not say (429, 5xx, network): nothing but
    /// `/robots.txt` is allowed until a later fetch.
    Unreachable,
    /// A robots.txt was served (2xx).
    Rules(Rules),
}

/// A served robots.txt. `robotxt` parses a file for one agent at a time, so
/// the body is kept and parsed on first use for each product token.
struct Rules {
    /// The body, cut to what `robotxt` reads (it drops the rest).
    body: Box<[u8]>,
    /// The file parsed for each product token seen so far (lower-cased), so
    /// a per-request check does not parse up to 500 KiB again. A worker
    /// usually has one token per spider, so a short list is enough.
    parsed: Mutex<Vec<(String, Arc<robotxt::Robots>)>>,
}

/// How many product tokens a [`Rules`] remembers; more are parsed per call.
const MAX_PARSED_AGENTS: usize = 16;

/// The longest `Crawl-delay` obeyed; a longer one is taken as a mistake.
const MAX_CRAWL_DELAY: Duration = Duration::from_secs(24 * 60 * 60);

impl Robots {
    /// The policy that a fetch of `/robots.txt` gave (see the module doc).
    pub fn from_fetch(fetched: &Fetched) -> Robots {
        let policy = match fetched {
            Fetched::NetworkError => Policy::Unreachable,
            Fetched::Status { status, body } => match *status {
                200..=299 => Policy::Rules(Rules::new(body)),
                // Too many requests is the server failing to answer, not
                // "no robots.txt" (Google treats it as a 5xx).
                429 => Policy::Unreachable,
                300..=499 => Policy::AllowAll,
                _ => Policy::Unreachable,
            },
        };
        Robots { policy }
    }

    /// May `user_agent` (the spider's whole User-Agent header) fetch `url`?
    ///
    /// `url` is absolute; only its path and query matter, since a `Robots`
    /// is one host's. A string that does not parse as a URL is matched as a
    /// path.
    pub fn allows(&self, user_agent: &str, url: &str) -> bool {
        let target = path_and_query(url);
        if target == "/robots.txt" {
            return true;
        }
        match &self.policy {
            Policy::AllowAll => true,
            Policy::Unreachable => false,
            Policy::Rules(rules) => rules
                .for_agent(product_token(user_agent))
                .is_allowed(&target),
        }
    }

    /// The `Crawl-delay` the host asks of `user_agent`, if it asks a sane one
    /// (see the module doc).
    pub fn crawl_delay(&self, user_agent: &str) -> Option<Duration> {
        match &self.policy {
            Policy::AllowAll | Policy::Unreachable => None,
            Policy::Rules(rules) => rules
                .for_agent(product_token(user_agent))
                .crawl_delay()
                .filter(|delay| *delay <= MAX_CRAWL_DELAY),
        }
    }

    /// Whether the fetch failed (429, 5xx, an unexpected status or a network
    /// error): everything is disallowed for now, and the caller should fetch
    /// again soon rather than after the normal TTL.
    pub fn is_failure(&self) -> bool {
        matches!(self.policy, Policy::Unreachable)
    }

    /// About how many bytes this policy takes, for a cache's budget: the
    /// kept body, and as much again twice for the file parsed for the
    /// spider's agent (rules as strings, plus the index `robotxt` builds),
    /// which a worker does on the first check. Without a body, the fixed
    /// part only.
    pub fn approx_bytes(&self) -> usize {
        const FIXED: usize = 256;
        match &self.policy {
            Policy::AllowAll | Policy::Unreachable => FIXED,
            Policy::Rules(rules) => FIXED + 3 * rules.body.len(),
        }
    }
}

impl fmt::Debug for Robots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.policy {
            Policy::AllowAll => f.write_str("Robots(allow all)"),
            Policy::Unreachable => f.write_str("Robots(unreachable: disallow all)"),
            Policy::Rules(rules) => write!(f, "Robots(rules, {} bytes)", rules.body.len()),
        }
    }
}

impl Rules {
    fn new(body: &[u8]) -> Rules {
        // One byte past the limit lets `robotxt` tell whether the last line
        // it reads was cut.
        let kept = body.len().min(robotxt::BYTE_LIMIT + 1);
        Rules {
            body: body[..kept].into(),
            parsed: Mutex::new(Vec::new()),
        }
    }

    /// The file as it applies to `token`, parsed once per token.
    fn for_agent(&self, token: &str) -> Arc<robotxt::Robots> {
        let key = token.to_ascii_lowercase();
        if let Some(found) = self.lookup(&key) {
            return found;
        }
        // Parse outside the lock: a large file takes a while, and another
        // task racing us to the same token only wastes its own parse.
        let parsed = Arc::new(robotxt::Robots::parse(&self.body, token));
        let mut cache = self.parsed.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() < MAX_PARSED_AGENTS && !cache.iter().any(|(k, _)| *k == key) {
            cache.push((key, Arc::clone(&parsed)));
        }
        parsed
    }

    fn lookup(&self, key: &str) -> Option<Arc<robotxt::Robots>> {
        let cache = self.parsed.lock().unwrap_or_else(PoisonError::into_inner);
        cache
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, parsed)| Arc::clone(parsed))
    }
}

/// The part of `url` that robots.txt rules see: path and query.
fn path_and_query(url: &str) -> Cow<'_, str> {
    match Url::parse(url) {
        Ok(parsed) => Cow::Owned(parsed[Position::BeforePath..Position::AfterQuery].to_owned()),
        Err(_) => Cow::Borrowed(url.split_once('#').map_or(url, |(before, _)| before)),
    }
}

/// The product token of a User-Agent header (see the module doc).
fn product_token(user_agent: &str) -> &str {
    let first = leading_token(user_agent.trim_start());
    if first.eq_ignore_ascii_case("mozilla") {
        if let Some(compatible) = compatible_product(user_agent) {
            return compatible;
        }
    }
    first
}

/// The product after `compatible;` in the header's comments, if any:
/// `MyBot` in `Mozilla/5.0 (compatible; MyBot/1.0; +https://…)`.
fn compatible_product(user_agent: &str) -> Option<&str> {
    let mut rest = user_agent;
    while let Some(open) = rest.find('(') {
        let after = &rest[open + 1..];
        let close = after.find(')').unwrap_or(after.len());
        let mut parts = after[..close].split(';').map(str::trim);
        if parts.any(|part| part.eq_ignore_ascii_case("compatible")) {
            let token = parts.next().map(leading_token).unwrap_or_default();
            if !token.is_empty() {
                return Some(token);
            }
        }
        rest = &after[close..];
    }
    None
}

/// The leading run of HTTP token characters (RFC 9110 `tchar`).
fn leading_token(s: &str) -> &str {
    let is_tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    let end = s.find(|c: char| !is_tchar(c)).unwrap_or(s.len());
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    const UA: &str = "crawlworker/0.1.0 (+https://example.com/bot)";

    fn served(body: &str) -> Robots {
        served_bytes(body.as_bytes())
    }

    fn served_bytes(body: &[u8]) -> Robots {
        Robots::from_fetch(&Fetched::Status {
            status: 200,
            body: body.to_vec(),
        })
    }

    fn status(status: u16, body: &str) -> Robots {
        Robots::from_fetch(&Fetched::Status {
            status,
            body: body.as_bytes().to_vec(),
        })
    }

    fn allows(robots: &Robots, path: &str) -> bool {
        robots.allows(UA, &format!("https://example.com{path}"))
    }

    #[test]
    fn robots_is_shareable_across_tasks() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Robots>();
    }

    // --- what a fetch means ---

    #[test]
    fn success_obeys_the_rules() {
        for code in [200, 203, 299] {
            let robots = status(code, "User-agent: *\nDisallow: /private\n");
            assert!(!robots.is_failure(), "{code}");
            assert!(!allows(&robots, "/private/x"), "{code}");
            assert!(allows(&robots, "/public"), "{code}");
        }
    }

    #[test]
    fn empty_success_allows_everything() {
        let robots = served("");
        assert!(allows(&robots, "/anything"));
        assert!(!robots.is_failure());
        assert_eq!(robots.crawl_delay(UA), None);
    }

    #[test]
    fn redirect_status_allows_everything() {
        for code in [301, 302, 307, 308] {
            let robots = status(code, "User-agent: *\nDisallow: /\n");
            assert!(allows(&robots, "/private"), "{code}");
            assert!(!robots.is_failure(), "{code}");
        }
    }

    #[test]
    fn client_errors_allow_everything_even_401_and_403() {
        for code in [400, 401, 403, 404, 410, 451, 499] {
            let robots = status(code, "User-agent: *\nDisallow: /\nCrawl-delay: 5\n");
            assert!(allows(&robots, "/private"), "{code}");
            assert!(!robots.is_failure(), "{code}");
            assert_eq!(robots.crawl_delay(UA), None, "{code}");
        }
    }

    #[test]
    fn too_many_requests_is_a_failure_not_a_client_error() {
        let robots = status(429, "");
        assert!(robots.is_failure());
        assert!(!allows(&robots, "/page"));
    }

    #[test]
    fn server_errors_disallow_everything_and_are_failures() {
        for code in [500, 502, 503, 504, 599] {
            let robots = status(code, "User-agent: *\nAllow: /\n");
            assert!(robots.is_failure(), "{code}");
            assert!(!allows(&robots, "/"), "{code}");
            assert!(!allows(&robots, "/page"), "{code}");
            assert_eq!(robots.crawl_delay(UA), None, "{code}");
        }
    }

    #[test]
    fn network_error_disallows_everything_and_is_a_failure() {
        let robots = Robots::from_fetch(&Fetched::NetworkError);
        assert!(robots.is_failure());
        assert!(!allows(&robots, "/page"));
        assert_eq!(robots.crawl_delay(UA), None);
    }

    #[test]
    fn unexpected_statuses_are_failures() {
        for code in [0, 100, 199, 600, 999] {
            let robots = status(code, "");
            assert!(robots.is_failure(), "{code}");
            assert!(!allows(&robots, "/page"), "{code}");
        }
    }

    #[test]
    fn robots_txt_itself_is_always_allowed() {
        let cases = [
            served("User-agent: *\nDisallow: /\n"),
            served("User-agent: *\nDisallow: /\nDisallow: /robots.txt$\n"),
            status(503, ""),
            Robots::from_fetch(&Fetched::NetworkError),
        ];
        for robots in &cases {
            assert!(allows(robots, "/robots.txt"), "{robots:?}");
            assert!(!allows(robots, "/other"), "{robots:?}");
        }
    }

    // --- lines and directives ---

    #[test]
    fn directive_names_are_case_insensitive_and_paths_are_not() {
        let robots = served("USER-AGENT: *\nDISALLOW: /Private\ndisallow: /lower\n");
        assert!(!allows(&robots, "/Private/x"));
        assert!(allows(&robots, "/private/x"));
        assert!(!allows(&robots, "/lower"));
    }

    #[test]
    fn comments_blank_lines_and_unknown_lines_are_ignored() {
        let robots = served(
            "# a comment\n\nUser-agent: * # everyone\nHost: example.com\n\
             Disallow: /a # not /b\nSitemap: https://example.com/s.xml\n",
        );
        assert!(!allows(&robots, "/a"));
        assert!(allows(&robots, "/b"));
    }

    #[test]
    fn crlf_line_endings_and_bom() {
        let robots = served("\u{feff}User-agent: *\r\nDisallow: /a\r\nDisallow: /b\r\n");
        assert!(!allows(&robots, "/a"));
        assert!(!allows(&robots, "/b"));
        assert!(allows(&robots, "/c"));
    }

    #[test]
    fn empty_disallow_disallows_nothing() {
        let robots = served("User-agent: *\nDisallow:\n");
        assert!(allows(&robots, "/anything"));
        // ...and does not outweigh a real rule.
        let robots = served("User-agent: *\nDisallow:\nDisallow: /\n");
        assert!(!allows(&robots, "/anything"));
    }

    #[test]
    fn rules_before_any_user_agent_apply_to_no_one() {
        let robots = served("Disallow: /a\nUser-agent: *\nDisallow: /b\n");
        assert!(allows(&robots, "/a"));
        assert!(!allows(&robots, "/b"));
    }

    // --- matching ---

    #[test]
    fn prefix_matching() {
        let robots = served("User-agent: *\nDisallow: /fish\n");
        for path in [
            "/fish",
            "/fish.html",
            "/fish/salmon",
            "/fishheads",
            "/fish?id=1",
        ] {
            assert!(!allows(&robots, path), "{path}");
        }
        for path in ["/Fish", "/catfish", "/?id=fish", "/desert/fish", "/"] {
            assert!(allows(&robots, path), "{path}");
        }
    }

    #[test]
    fn star_wildcard() {
        let robots = served("User-agent: *\nDisallow: /*.php\nDisallow: /a*b*c\n");
        for path in [
            "/index.php",
            "/dir/file.php?x=1",
            "/a.php.html",
            "/abc",
            "/a/x/b/y/c/z",
        ] {
            assert!(!allows(&robots, path), "{path}");
        }
        for path in ["/", "/windows.PHP", "/ab", "/acb"] {
            assert!(allows(&robots, path), "{path}");
        }
    }

    #[test]
    fn dollar_anchors_the_end() {
        let robots = served("User-agent: *\nDisallow: /*.php$\nDisallow: /exact$\n");
        assert!(!allows(&robots, "/file.php"));
        assert!(!allows(&robots, "/dir/file.php"));
        assert!(allows(&robots, "/file.php?x=1"));
        assert!(allows(&robots, "/file.php/"));
        assert!(allows(&robots, "/file.php5"));
        assert!(!allows(&robots, "/exact"));
        assert!(allows(&robots, "/exact/"));
        assert!(allows(&robots, "/exactly"));
    }

    #[test]
    fn dollar_alone_matches_only_the_root() {
        let robots = served("User-agent: *\nDisallow: /$\n");
        assert!(!allows(&robots, "/"));
        assert!(!allows(&robots, ""));
        assert!(allows(&robots, "/page"));
    }

    #[test]
    fn query_strings_are_matched() {
        let robots = served("User-agent: *\nDisallow: /*?sessionid=\nDisallow: /search?\n");
        assert!(!allows(&robots, "/list?sessionid=abc"));
        assert!(!allows(&robots, "/a/b?sessionid="));
        assert!(allows(&robots, "/list?page=2&sessionid=abc"));
        assert!(allows(&robots, "/list"));
        assert!(!allows(&robots, "/search?q=x"));
        assert!(allows(&robots, "/search"));

        let robots = served("User-agent: *\nDisallow: /*sessionid=\n");
        assert!(!allows(&robots, "/list?page=2&sessionid=abc"));
    }

    #[test]
    fn the_fragment_is_ignored() {
        let robots = served("User-agent: *\nDisallow: /page$\n");
        assert!(!allows(&robots, "/page#comments"));
    }

    #[test]
    fn percent_encoding_is_normalised_on_both_sides() {
        let robots =
            served("User-agent: *\nDisallow: /a b\nDisallow: /c%20d\nDisallow: /%7Euser\n");
        // A raw space in the rule matches the encoded URL, and back.
        assert!(!allows(&robots, "/a%20b"));
        assert!(!allows(&robots, "/a b"));
        assert!(!allows(&robots, "/c d"));
        assert!(!allows(&robots, "/c%20d"));
        // Escaped unreserved characters are the characters.
        assert!(!allows(&robots, "/~user/home"));
        assert!(!allows(&robots, "/%7euser/home"));
        assert!(allows(&robots, "/a"));

        let robots = served("User-agent: *\nDisallow: /x%2fy\n");
        assert!(!allows(&robots, "/x%2Fy"));
        // An escaped slash is not a slash.
        assert!(allows(&robots, "/x/y"));
    }

    #[test]
    fn non_ascii_rules_match_utf8_encoded_urls() {
        let robots = served("User-agent: *\nDisallow: /café\n");
        assert!(!allows(&robots, "/caf%C3%A9"));
        assert!(!allows(&robots, "/café/menu"));
        assert!(allows(&robots, "/cafe"));
    }

    #[test]
    fn unparsable_url_is_matched_as_a_path() {
        let robots = served("User-agent: *\nDisallow: /private\n");
        assert!(!robots.allows(UA, "/private/x"));
        assert!(robots.allows(UA, "/public#/private"));
    }

    // --- precedence ---

    #[test]
    fn longest_match_wins_in_either_order() {
        for body in [
            "User-agent: *\nDisallow: /folder\nAllow: /folder/page\n",
            "User-agent: *\nAllow: /folder/page\nDisallow: /folder\n",
        ] {
            let robots = served(body);
            assert!(allows(&robots, "/folder/page.html"), "{body}");
            assert!(!allows(&robots, "/folder/other"), "{body}");
        }
        let robots = served("User-agent: *\nAllow: /p\nDisallow: /page\n");
        assert!(!allows(&robots, "/page"));
        assert!(allows(&robots, "/pig"));
    }

    #[test]
    fn allow_wins_a_tie() {
        for body in [
            "User-agent: *\nDisallow: /page\nAllow: /page\n",
            "User-agent: *\nAllow: /page\nDisallow: /page\n",
            "User-agent: *\nAllow: /p*e\nDisallow: /pa*\n",
        ] {
            let robots = served(body);
            assert!(allows(&robots, "/page"), "{body}");
        }
    }

    #[test]
    fn allow_root_and_disallow_all_but() {
        let robots = served("User-agent: *\nDisallow: /\nAllow: /public/\nAllow: /$\n");
        assert!(allows(&robots, "/"));
        assert!(allows(&robots, "/public/page"));
        assert!(!allows(&robots, "/private"));
    }

    // --- groups and the product token ---

    #[test]
    fn specific_group_beats_star() {
        let robots = served(
            "User-agent: *\nDisallow: /\n\n\
             User-agent: crawlworker\nDisallow: /private\n",
        );
        assert!(allows(&robots, "/page"));
        assert!(!allows(&robots, "/private"));
        // Another bot gets the star group.
        assert!(!robots.allows("otherbot/2.0", "https://example.com/page"));
    }

    #[test]
    fn star_applies_when_no_group_names_us() {
        let robots =
            served("User-agent: otherbot\nDisallow: /\n\nUser-agent: *\nDisallow: /private\n");
        assert!(allows(&robots, "/page"));
        assert!(!allows(&robots, "/private"));
    }

    #[test]
    fn no_matching_group_and_no_star_allows_everything() {
        let robots = served("User-agent: otherbot\nDisallow: /\n");
        assert!(allows(&robots, "/page"));
    }

    #[test]
    fn group_names_are_case_insensitive() {
        let robots = served("User-agent: CrawlWorker\nDisallow: /x\n");
        assert!(!allows(&robots, "/x"));
        assert!(!robots.allows("CRAWLWORKER/9", "https://example.com/x"));
    }

    #[test]
    fn group_with_several_user_agents_and_merged_groups() {
        let robots = served(
            "User-agent: otherbot\nUser-agent: crawlworker\nDisallow: /a\n\n\
             User-agent: *\nDisallow: /b\n\n\
             User-agent: crawlworker\nDisallow: /c\n",
        );
        assert!(!allows(&robots, "/a"));
        assert!(allows(&robots, "/b"));
        assert!(!allows(&robots, "/c"));
        assert!(!robots.allows("otherbot", "https://example.com/a"));
        assert!(robots.allows("otherbot", "https://example.com/c"));
    }

    #[test]
    fn product_token_of_user_agent_headers() {
        assert_eq!(product_token(UA), "crawlworker");
        assert_eq!(product_token("crawlworker"), "crawlworker");
        assert_eq!(product_token("  my-bot_2/1.0"), "my-bot_2");
        assert_eq!(
            product_token("Mozilla/5.0 (compatible; MyBot/1.0; +https://example.com/bot)"),
            "MyBot"
        );
        assert_eq!(
            product_token(
                "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; \
                 Googlebot/2.1; +http://www.google.com/bot.html) Chrome/120 Safari/537.36"
            ),
            "Googlebot"
        );
        assert_eq!(
            product_token("Mozilla/5.0 (Windows NT 10.0; Win64; x64) Firefox/120.0"),
            "Mozilla"
        );
        assert_eq!(product_token("Mozilla/5.0 (compatible;)"), "Mozilla");
        assert_eq!(product_token(""), "");
    }

    #[test]
    fn compatible_bot_gets_its_own_group() {
        let robots = served("User-agent: mybot\nDisallow: /mine\n\nUser-agent: *\nDisallow: /\n");
        let ua = "Mozilla/5.0 (compatible; MyBot/1.0; +https://example.com/bot)";
        assert!(robots.allows(ua, "https://example.com/page"));
        assert!(!robots.allows(ua, "https://example.com/mine"));
        let browser = "Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0";
        assert!(!robots.allows(browser, "https://example.com/page"));
    }

    #[test]
    fn versioned_user_agent_line_does_not_name_the_token() {
        // Documented difference from Google's parser (see the module doc).
        let robots = served("User-agent: crawlworker/1.0\nDisallow: /\n");
        assert!(allows(&robots, "/page"));
    }

    #[test]
    fn one_robots_answers_for_several_agents() {
        let robots = served(
            "User-agent: alpha\nDisallow: /a\nCrawl-delay: 1\n\n\
             User-agent: beta\nDisallow: /b\nCrawl-delay: 2\n",
        );
        for _ in 0..2 {
            assert!(!robots.allows("alpha/1", "https://example.com/a"));
            assert!(robots.allows("alpha/1", "https://example.com/b"));
            assert!(!robots.allows("beta/1", "https://example.com/b"));
            assert!(robots.allows("beta/1", "https://example.com/a"));
            assert_eq!(robots.crawl_delay("alpha"), Some(Duration::from_secs(1)));
            assert_eq!(robots.crawl_delay("BETA"), Some(Duration::from_secs(2)));
        }
        // Past the memo's size, answers stay right (parsed per call).
        for i in 0..MAX_PARSED_AGENTS + 4 {
            assert!(robots.allows(&format!("bot{i}"), "https://example.com/a"));
        }
        assert!(!robots.allows("alpha", "https://example.com/a"));
    }

    // --- crawl-delay ---

    fn delay_of(body: &str) -> Option<Duration> {
        served(body).crawl_delay(UA)
    }

    #[test]
    fn crawl_delay_whole_and_fractional_seconds() {
        assert_eq!(
            delay_of("User-agent: *\nCrawl-delay: 10\n"),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            delay_of("User-agent: *\ncrawl-delay: 0.5\n"),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            delay_of("User-agent: *\nCrawl-Delay: 2.25 # s\n"),
            Some(Duration::from_millis(2250))
        );
        assert_eq!(
            delay_of("User-agent: *\nCrawl-delay: 0\n"),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn crawl_delay_absent() {
        assert_eq!(delay_of("User-agent: *\nDisallow: /x\n"), None);
        // A group for us without a delay does not inherit the star's.
        assert_eq!(
            delay_of("User-agent: *\nCrawl-delay: 5\n\nUser-agent: crawlworker\nDisallow: /x\n"),
            None
        );
        // Nor does a delay for another bot apply.
        assert_eq!(delay_of("User-agent: otherbot\nCrawl-delay: 5\n"), None);
    }

    #[test]
    fn crawl_delay_of_our_group() {
        let body = "User-agent: *\nCrawl-delay: 5\n\nUser-agent: crawlworker\nCrawl-delay: 1.5\n";
        assert_eq!(delay_of(body), Some(Duration::from_millis(1500)));
        assert_eq!(
            served(body).crawl_delay("otherbot"),
            Some(Duration::from_secs(5))
        );
    }

    #[test]
    fn crawl_delay_garbage_is_ignored() {
        for value in ["soon", "5s", "1,5", "", "-3", "-0.5", "NaN", "inf", "1e400"] {
            let body = format!("User-agent: *\nCrawl-delay: {value}\n");
            assert_eq!(delay_of(&body), None, "{value:?}");
        }
    }

    #[test]
    fn crawl_delay_over_a_day_is_ignored() {
        assert_eq!(
            delay_of("User-agent: *\nCrawl-delay: 86400\n"),
            Some(Duration::from_secs(86_400))
        );
        assert_eq!(delay_of("User-agent: *\nCrawl-delay: 86401\n"), None);
        assert_eq!(delay_of("User-agent: *\nCrawl-delay: 1e9\n"), None);
    }

    // --- encodings and sizes ---

    #[test]
    fn non_utf8_body_is_read_bytewise() {
        let mut body = b"User-agent: *\n# caf\xe9 cr\xe8me \xff\xfe\nDisallow: /caf\xe9\n".to_vec();
        body.extend_from_slice(b"Disallow: /after\n");
        let robots = served_bytes(&body);
        assert!(!robots.is_failure());
        // The Latin-1 byte is percent-encoded as is, matching a Latin-1 URL.
        assert!(!allows(&robots, "/caf%E9"));
        assert!(!allows(&robots, "/caf%e9/x"));
        assert!(allows(&robots, "/caf%C3%A9"));
        // The rest of the file still counts.
        assert!(!allows(&robots, "/after"));
        assert!(allows(&robots, "/other"));
    }

    #[test]
    fn body_over_500_kib_is_cut() {
        let limit = 500 * 1024;
        let mut body = String::from("User-agent: *\nDisallow: /early\n");
        while body.len() < limit - 100 {
            body.push_str("# padding padding padding padding padding padding\n");
        }
        body.push_str("Disallow: /late-but-inside\n");
        // This line crosses the limit: dropped whole, not cut to `Allow: /`.
        let crossing = "Allow: /early/and-a-long-path-that-crosses-the-500-kib-limit\n";
        while body.len() + crossing.len() / 2 < limit {
            body.push('#');
        }
        body.push('\n');
        let start = body.len();
        body.push_str(crossing);
        assert!(start < limit && body.len() > limit);
        body.push_str("Disallow: /beyond\n");
        body.push_str(&"# more\n".repeat(200_000));

        let robots = served(&body);
        assert!(!allows(
            &robots,
            "/early/and-a-long-path-that-crosses-the-500-kib-limit"
        ));
        assert!(!allows(&robots, "/late-but-inside"));
        assert!(allows(&robots, "/beyond"));
        assert!(format!("{robots:?}").contains(&format!("{} bytes", limit + 1)));
    }
}
