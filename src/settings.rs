//! Every worker setting, defined once: its name, type, default and meaning.
//!
//! The names are Scrapy's, lower-cased (`concurrent_requests`,
//! `download_delay`, …) so a Scrapy user finds what they know. Values are
//! layered, each layer overriding the one before: built-in defaults <
//! the `config/` file < the spider's `[settings]` < environment variables
//! (`CRAWLWORKER_<NAME>`) < the command line. This module owns the defaults
//! and the layering; each stage reads only the finished [`Settings`].

use std::collections::BTreeMap;
use std::time::Duration;

pub use crate::frontier::redis_url::RedisUrl;
use crate::reader::TableReader;

/// A value type a setting can have: how it is read from TOML and from an
/// environment variable, and how its default is shown in docs.
pub(crate) trait SettingValue: Sized + Clone {
    /// What to write, for error messages ("a whole number", …).
    const EXPECTED: &'static str;
    fn read(table: &TableReader<'_>, key: &'static str) -> Option<Self>;
    fn parse_str(s: &str) -> Result<Self, String>;
    fn show(&self) -> String;
    /// A raw value as an error message may show it.
    fn shown_raw(raw: &str) -> String {
        format!("{raw:?}")
    }
}

impl SettingValue for u32 {
    const EXPECTED: &'static str = "a whole number";
    fn read(t: &TableReader<'_>, key: &'static str) -> Option<Self> {
        t.int_in(key, 0, u32::MAX.into()).map(|v| v.value as u32)
    }
    fn parse_str(s: &str) -> Result<Self, String> {
        s.trim().parse().map_err(|e| format!("{e}"))
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

/// A Bloom filter's capacity: at least one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity(pub u64);

impl SettingValue for Capacity {
    const EXPECTED: &'static str = "a whole number of 1 or more";
    fn read(t: &TableReader<'_>, key: &'static str) -> Option<Self> {
        t.int_in(key, 1, i64::MAX).map(|v| Capacity(v.value as u64))
    }
    fn parse_str(s: &str) -> Result<Self, String> {
        match s.trim().parse::<u64>() {
            Ok(0) => Err("0 is not a capacity of 1 or more".into()),
            Ok(v) => Ok(Capacity(v)),
            Err(e) => Err(e.to_string()),
        }
    }
    fn show(&self) -> String {
        self.0.to_string()
    }
}

/// A probability strictly between 0 and 1 (a Bloom filter's error rate).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate(pub f64);

impl Rate {
    fn check(v: f64) -> Result<Rate, String> {
        if v > 0.0 && v < 1.0 {
            Ok(Rate(v))
        } else {
            Err(format!("{v} is not between 0 and 1"))
        }
    }
}

impl SettingValue for Rate {
    const EXPECTED: &'static str = "a number between 0 and 1 (e.g. 0.001)";
    fn read(t: &TableReader<'_>, key: &'static str) -> Option<Self> {
        let v = t.float(key)?;
        Rate::check(v.value)
            .map_err(|e| {
                t.reader().problem(
                    &v.loc,
                    e,
                    Some("use a number between 0 and 1, such as 0.001".into()),
                )
            })
            .ok()
    }
    fn parse_str(s: &str) -> Result<Self, String> {
        Rate::check(s.trim().parse::<f64>().map_err(|e| e.to_string())?)
    }
    fn show(&self) -> String {
        self.0.to_string()
    }
}

impl SettingValue for i64 {
    const EXPECTED: &'static str = "an integer";
    fn read(t: &TableReader<'_>, key: &'static str) -> Option<Self> {
        t.int(key).map(|v| v.value)
    }
    fn parse_str(s: &str) -> Result<Self, String> {
        s.trim().parse().map_err(|e| format!("{e}"))
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl SettingValue for f64 {
    const EXPECTED: &'static str = "a number of 0 or more";
    fn read(t: &TableReader<'_>, key: &'static str) -> Option<Self> {
        let v = t.float(key)?;
        if !(v.value >= 0.0 && v.value.is_finite()) {
            t.reader().problem(
                &v.loc,
                format!("{} is not allowed", v.value),
                Some("use a number of 0 or more".into()),
            );
            return None;
        }
        Some(v.value)
    }
    fn parse_str(s: &str) -> Result<Self, String> {
        match s.trim().parse::<f64>() {
            Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
            Ok(v) => Err(format!("{v} is not a number of 0 or more")),
            Err(e) => Err(e.to_string()),
        }
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl SettingValue for bool {
    const EXPECTED: &'static str = "true or false";
    fn read(t: &TableReader<'_>, key: &'static str) -> Option<Self> {
        t.bool(key).map(|v| v.value)
    }
    fn parse_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(true),
            "0" | "false" | "no" | "off" => Ok(false),
            other => Err(format!("`{other}` is not true or false")),
        }
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl SettingValue for String {
    const EXPECTED: &'static str = "a string";
    fn read(t: &TableReader<'_>, key: &'static str) -> Option<Self> {
        t.str(key).map(|v| v.value)
    }
    fn parse_str(s: &str) -> Result<Self, String> {
        Ok(s.to_string())
    }
    fn show(&self) -> String {
        format!("{self:?}")
    }
}

/// Reads a value written either as a number or as a string, through
/// `parse` (`None`: neither shape), reporting what is wrong with `hint`.
fn read_parsed<T: SettingValue>(
    t: &TableReader<'_>,
    key: &'static str,
    hint: &str,
    parse: impl FnOnce(crate::reader::Node<'_>) -> Option<Result<T, String>>,
) -> Option<T> {
    let (node, loc) = t.node(key)?;
    let parsed = parse(node).unwrap_or_else(|| {
        Err(format!(
            "expected {}, found {}",
            T::EXPECTED,
            node.type_name()
        ))
    });
    parsed
        .map_err(|e| t.reader().problem(&loc, e, Some(hint.to_string())))
        .ok()
}

/// A duration: a number of seconds (as Scrapy writes them) or a string such
/// as `"250ms"` or `"3m"`.
impl SettingValue for Duration {
    const EXPECTED: &'static str = "seconds as a number, or a duration such as \"250ms\"";
    fn read(t: &TableReader<'_>, key: &'static str) -> Option<Self> {
        read_parsed(
            t,
            key,
            &format!("e.g. `{key} = 1.5` or `{key} = \"1500ms\"`"),
            |node| match (node.as_float(), node.as_integer(), node.as_str()) {
                (Some(f), _, _) => Some(
                    Duration::try_from_secs_f64(f)
                        .map_err(|_| format!("{f} is not a duration of 0 seconds or more"))
                        .and_then(within_max),
                ),
                (_, Some(i), _) => Some(
                    u64::try_from(i)
                        .map(Duration::from_secs)
                        .map_err(|_| "a duration cannot be negative".to_string())
                        .and_then(within_max),
                ),
                (_, _, Some(s)) => Some(Self::parse_str(s)),
                _ => None,
            },
        )
    }
    fn parse_str(s: &str) -> Result<Self, String> {
        parse_duration(s)
    }
    fn show(&self) -> String {
        if self.is_zero() {
            "0".into()
        } else {
            humantime::format_duration(*self).to_string()
        }
    }
}

/// A duration as crawlworker reads one everywhere (settings, environment,
/// command line): seconds as a number (`1.5`), or numbers with units
/// (`250ms`, `30s`, `5m`, `1h 30m`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let parsed = match s.parse::<f64>() {
        Ok(secs) => Duration::try_from_secs_f64(secs).ok(),
        Err(_) => humantime::parse_duration(s).ok(),
    };
    let d = parsed.ok_or_else(|| {
        format!("`{s}` is not a duration: write seconds (1.5) or a number with a unit (250ms, 30s, 5m, 1h)")
    })?;
    within_max(d)
}

/// Refuses a duration longer than [`MAX_DURATION`].
fn within_max(d: Duration) -> Result<Duration, String> {
    if d > MAX_DURATION {
        return Err(format!(
            "{} is longer than the {} a duration may be",
            humantime::format_duration(d),
            humantime::format_duration(MAX_DURATION)
        ));
    }
    Ok(d)
}

/// A size in bytes: a whole number, or a string such as `"32 MiB"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl SettingValue for Bytes {
    const EXPECTED: &'static str = "bytes as a whole number, or a size such as \"32 MiB\"";
    fn read(t: &TableReader<'_>, key: &'static str) -> Option<Self> {
        read_parsed(
            t,
            key,
            "write bytes (1048576) or a size (\"1 MiB\", \"500KB\")",
            |node| match (node.as_integer(), node.as_str()) {
                (Some(i), _) => Some(
                    u64::try_from(i)
                        .map(Bytes)
                        .map_err(|_| "a size cannot be negative".to_string()),
                ),
                (_, Some(s)) => Some(Self::parse_str(s)),
                _ => None,
            },
        )
    }
    fn parse_str(s: &str) -> Result<Self, String> {
        s.trim()
            .parse::<bytesize::ByteSize>()
            .map(|b| Bytes(b.as_u64()))
            .map_err(|e| format!("`{s}` is not a size: {e}"))
    }
    fn show(&self) -> String {
        bytesize::ByteSize(self.0).display().iec().to_string()
    }
}

impl SettingValue for Vec<u16> {
    const EXPECTED: &'static str = "an array of HTTP status codes";
    fn read(t: &TableReader<'_>, key: &'static str) -> Option<Self> {
        let (node, loc) = t.node(key)?;
        let json = node.to_json();
        let codes = json.as_ref().and_then(|j| j.as_array()).and_then(|a| {
            a.iter()
                .map(|v| {
                    v.as_u64()
                        .filter(|c| (100..=999).contains(c))
                        .map(|c| c as u16)
                })
                .collect::<Option<Vec<u16>>>()
        });
        if codes.is_none() {
            t.reader().problem(
                &loc,
                format!("expected {}", Self::EXPECTED),
                Some(format!(
                    "write whole numbers from 100 to 999, e.g. `{key} = [500, 503]`"
                )),
            );
        }
        codes
    }
    fn parse_str(s: &str) -> Result<Self, String> {
        s.split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                p.trim()
                    .parse::<u16>()
                    .ok()
                    .filter(|c| (100..=999).contains(c))
                    .ok_or_else(|| format!("`{p}` is not an HTTP status code"))
            })
            .collect()
    }
    fn show(&self) -> String {
        format!("{self:?}")
    }
}

/// A list of strings (proxy URLs, …); a single string is a list of one.
impl SettingValue for Vec<String> {
    const EXPECTED: &'static str = "an array of strings";
    fn read(t: &TableReader<'_>, key: &'static str) -> Option<Self> {
        t.str_list(key)
            .map(|v| v.into_iter().map(|a| a.value).collect())
    }
    fn parse_str(s: &str) -> Result<Self, String> {
        Ok(s.split(',')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect())
    }
    fn show(&self) -> String {
        format!("{self:?}")
    }
}

/// Reads a setting written as a string, through `parse`.
fn read_text<T: SettingValue>(
    t: &TableReader<'_>,
    key: &'static str,
    hint: &str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Option<T> {
    read_parsed(t, key, hint, |node| node.as_str().map(parse))
}

/// A header value (the User-Agent): text an HTTP header can carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderText(String);

impl HeaderText {
    pub fn parse(s: &str) -> Result<HeaderText, String> {
        match reqwest::header::HeaderValue::from_str(s) {
            Ok(_) => Ok(HeaderText(s.to_string())),
            Err(_) => Err(format!(
                "{s:?} cannot be sent in an HTTP header (control characters?)"
            )),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for HeaderText {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl SettingValue for HeaderText {
    const EXPECTED: &'static str = "a string an HTTP header can carry";
    fn read(t: &TableReader<'_>, key: &'static str) -> Option<Self> {
        read_text(
            t,
            key,
            "use printable text without line breaks",
            Self::parse,
        )
    }
    fn parse_str(s: &str) -> Result<Self, String> {
        Self::parse(s)
    }
    fn show(&self) -> String {
        format!("{:?}", self.0)
    }
}

/// Headers sent with every request: names and values checked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Headers(BTreeMap<String, String>);

impl Headers {
    /// Checks one header.
    fn check(name: &str, value: &str) -> Result<(), String> {
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(format!("`{name}` is not a valid header name"));
        }
        if reqwest::header::HeaderValue::from_str(value).is_err() {
            return Err(format!("the value of `{name}` is not a valid header value"));
        }
        Ok(())
    }

    /// Checks every header of `map`.
    pub fn new(map: BTreeMap<String, String>) -> Result<Headers, String> {
        for (name, value) in &map {
            Headers::check(name, value)?;
        }
        Ok(Headers(map))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

impl SettingValue for Headers {
    const EXPECTED: &'static str = "a table of header names to string values";
    fn read(t: &TableReader<'_>, key: &'static str) -> Option<Self> {
        let table = t.table(key)?;
        let mut out = BTreeMap::new();
        let mut ok = true;
        for (name, node, loc) in table.entries() {
            let problem = match node.as_str() {
                Some(v) => Headers::check(&name.value, v)
                    .map(|()| {
                        out.insert(name.value.clone(), v.to_string());
                    })
                    .err(),
                None => Some(format!(
                    "expected a string header value, found {}",
                    node.type_name()
                )),
            };
            if let Some(problem) = problem {
                ok = false;
                table.reader().problem(
                    &loc,
                    problem,
                    Some("write e.g. `Accept-Language = \"en\"`".into()),
                );
            }
        }
        ok.then_some(Headers(out))
    }
    fn parse_str(s: &str) -> Result<Self, String> {
        let map: BTreeMap<String, String> = serde_json::from_str(s)
            .map_err(|e| format!("expected a JSON object of strings: {e}"))?;
        Headers::new(map)
    }
    fn show(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_default()
    }
}

/// How a spider remembers the requests it has seen (see
/// `frontier::dupefilter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DupefilterMode {
    /// scrapy-redis's SET of fingerprints.
    #[default]
    Exact,
    /// Exact, in about a quarter of the memory.
    Compact,
    /// A Bloom filter: about 2 bytes per entry, rare false positives.
    Bloom,
    /// Fingerprints forgotten after `dupefilter_ttl`.
    Expiring,
}

impl std::str::FromStr for DupefilterMode {
    type Err = String;

    fn from_str(s: &str) -> Result<DupefilterMode, String> {
        match s.trim() {
            "exact" => Ok(DupefilterMode::Exact),
            "compact" => Ok(DupefilterMode::Compact),
            "bloom" => Ok(DupefilterMode::Bloom),
            "expiring" => Ok(DupefilterMode::Expiring),
            other => Err(format!(
                "`{other}` is not a dupefilter mode; use \"exact\", \"compact\", \"bloom\" or \"expiring\""
            )),
        }
    }
}

impl SettingValue for DupefilterMode {
    const EXPECTED: &'static str = "\"exact\", \"compact\", \"bloom\" or \"expiring\"";
    fn read(t: &TableReader<'_>, key: &'static str) -> Option<Self> {
        read_text(
            t,
            key,
            "use \"exact\" (scrapy-redis's), \"compact\", \"bloom\" or \"expiring\"",
            str::parse,
        )
    }
    fn parse_str(s: &str) -> Result<Self, String> {
        s.parse()
    }
    fn show(&self) -> String {
        match self {
            DupefilterMode::Exact => "\"exact\"",
            DupefilterMode::Compact => "\"compact\"",
            DupefilterMode::Bloom => "\"bloom\"",
            DupefilterMode::Expiring => "\"expiring\"",
        }
        .to_string()
    }
}

/// How requests are spread over a spider's proxies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProxyMode {
    /// Each request takes the next proxy.
    #[default]
    RoundRobin,
    /// Each host always goes through the same proxy (a stable hash of the
    /// host, the same in every worker of the cluster).
    Sticky,
}

impl std::str::FromStr for ProxyMode {
    type Err = String;

    fn from_str(s: &str) -> Result<ProxyMode, String> {
        match s.trim() {
            "round_robin" => Ok(ProxyMode::RoundRobin),
            "sticky" => Ok(ProxyMode::Sticky),
            other => Err(format!(
                "`{other}` is not a proxy mode; use \"round_robin\" or \"sticky\""
            )),
        }
    }
}

impl SettingValue for ProxyMode {
    const EXPECTED: &'static str = "\"round_robin\" or \"sticky\"";
    fn read(t: &TableReader<'_>, key: &'static str) -> Option<Self> {
        read_text(t, key, "use \"round_robin\" or \"sticky\"", str::parse)
    }
    fn parse_str(s: &str) -> Result<Self, String> {
        s.parse()
    }
    fn show(&self) -> String {
        match self {
            ProxyMode::RoundRobin => "\"round_robin\"",
            ProxyMode::Sticky => "\"sticky\"",
        }
        .to_string()
    }
}

impl SettingValue for RedisUrl {
    const EXPECTED: &'static str = "a Redis URL (redis:// or rediss://)";
    fn read(t: &TableReader<'_>, key: &'static str) -> Option<Self> {
        read_text(
            t,
            key,
            "write e.g. \"redis://127.0.0.1:6379\"",
            RedisUrl::parse,
        )
    }
    fn parse_str(s: &str) -> Result<Self, String> {
        RedisUrl::parse(s)
    }
    fn show(&self) -> String {
        format!("{:?}", self.to_string())
    }
    fn shown_raw(raw: &str) -> String {
        format!("{:?}", crate::frontier::redis_url::redact(raw))
    }
}

macro_rules! settings {
    ($( $(#[doc = $doc:literal])+ $name:ident : $ty:ty = $default:expr; )+) => {
        /// The finished settings one spider runs with.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Settings {
            $( $(#[doc = $doc])+ pub $name: $ty, )+
        }

        impl Default for Settings {
            fn default() -> Self {
                Settings { $( $name: $default, )+ }
            }
        }

        /// One layer of settings: only what that layer sets.
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct Overrides {
            $( pub $name: Option<$ty>, )+
        }

        impl Overrides {
            /// Reads a `[settings]` table; unknown names are reported by the
            /// caller's `finish`.
            pub(crate) fn read(table: &TableReader<'_>) -> Overrides {
                let o = Overrides { $( $name: <$ty as SettingValue>::read(table, stringify!($name)), )+ };
                for (name, problem, hint) in o.unusable() {
                    if let Some((_, loc)) = table.node(name) {
                        table.reader().problem(&loc, problem, Some(hint));
                    }
                }
                o
            }

            /// Reads the `[settings]` table of a file, if it has one.
            pub(crate) fn read_section(parent: &TableReader<'_>) -> Overrides {
                match parent.table("settings") {
                    Some(t) => {
                        let o = Overrides::read(&t);
                        t.finish();
                        o
                    }
                    None => Overrides::default(),
                }
            }

            /// Reads `CRAWLWORKER_<NAME>` variables through `lookup`.
            pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<Overrides, String> {
                let mut o = Overrides::default();
                $(
                    let var = concat!("CRAWLWORKER_", stringify!($name)).to_ascii_uppercase();
                    if let Some(raw) = lookup(&var) {
                        o.$name = Some(<$ty as SettingValue>::parse_str(&raw)
                            .map_err(|e| format!("{var}={}: {e}; expected {}", <$ty as SettingValue>::shown_raw(&raw), <$ty as SettingValue>::EXPECTED))?);
                    }
                )+
                if let Some((name, problem, hint)) = o.unusable().into_iter().next() {
                    return Err(format!("CRAWLWORKER_{}: {problem}; {hint}", name.to_ascii_uppercase()));
                }
                Ok(o)
            }
        }

        impl Settings {
            /// Applies one layer on top of these settings.
            pub fn apply(&mut self, layer: &Overrides) {
                $( if let Some(v) = &layer.$name { self.$name = v.clone(); } )+
            }
        }

        /// Every setting: name, meaning and default, for `--help` and docs.
        pub fn catalogue() -> Vec<SettingDoc> {
            let d = Settings::default();
            vec![ $( SettingDoc {
                name: stringify!($name),
                doc: concat!($($doc, "\n"),+).trim(),
                default: SettingValue::show(&d.$name),
                expected: <$ty as SettingValue>::EXPECTED,
            }, )+ ]
        }
    };
}

/// Longest duration a setting may have: longer ones are mistakes, and
/// would overflow the clock arithmetic of timers and Redis scores.
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

impl Overrides {
    /// Values of the right type that a worker cannot run with (it would
    /// hang, fail every request or overflow): `(setting, problem, fix)`.
    /// Checked wherever a layer is read, so `check` and `run` refuse the
    /// same files.
    fn unusable(&self) -> Vec<(&'static str, String, String)> {
        let mut out = Vec::new();
        let mut at_least_one = |name: &'static str, v: Option<u32>, why: &str| {
            if v == Some(0) {
                out.push((name, format!("0 {why}"), "use 1 or more".to_string()));
            }
        };
        at_least_one(
            "concurrent_requests",
            self.concurrent_requests,
            "would never download anything",
        );
        at_least_one(
            "concurrent_requests_per_domain",
            self.concurrent_requests_per_domain,
            "would never download anything",
        );
        for (name, v, why) in [
            (
                "download_timeout",
                self.download_timeout,
                "would fail every download",
            ),
            (
                "connect_timeout",
                self.connect_timeout,
                "would fail every connection",
            ),
            (
                "lease_timeout",
                self.lease_timeout,
                "would hand every page to another worker while it is downloaded",
            ),
        ] {
            if v.is_some_and(|d| d < Duration::from_millis(100)) {
                out.push((
                    name,
                    format!("a duration under 100ms {why}"),
                    format!("use 100ms or more, e.g. `{name} = \"30s\"`"),
                ));
            }
        }
        if let Some(p) = self.depth_priority.filter(|p| {
            !(-crate::frontier::MAX_PRIORITY..=crate::frontier::MAX_PRIORITY).contains(p)
        }) {
            out.push((
                "depth_priority",
                format!("{p} is out of range"),
                format!(
                    "use a whole number from {} to {} (priorities themselves stay within that range)",
                    -crate::frontier::MAX_PRIORITY,
                    crate::frontier::MAX_PRIORITY
                ),
            ));
        }
        for raw in self.proxies.iter().flatten() {
            if let Err(e) = crate::downloader::client::proxy::ProxyUrl::parse(raw) {
                out.push((
                    "proxies",
                    e.to_string(),
                    "write each proxy as `http://host:port`, `http://user:pass@host:port` or `socks5://host:port`".to_string(),
                ));
            }
        }
        out
    }
}

/// One line of the settings catalogue.
#[derive(Debug, Clone)]
pub struct SettingDoc {
    pub name: &'static str,
    pub doc: &'static str,
    pub default: String,
    pub expected: &'static str,
}

/// Scrapy's `DEFAULT_REQUEST_HEADERS`.
fn default_headers() -> Headers {
    Headers(BTreeMap::from([
        (
            "Accept".to_string(),
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8".to_string(),
        ),
        ("Accept-Language".to_string(), "en".to_string()),
    ]))
}

/// The User-Agent sent unless a spider sets its own.
pub const DEFAULT_USER_AGENT: &str = concat!("crawlworker/", env!("CARGO_PKG_VERSION"));

settings! {
    /// Requests one worker downloads at once.
    concurrent_requests: u32 = 16;
    /// Requests one worker sends to a single host at once.
    concurrent_requests_per_domain: u32 = 8;
    /// Minimum time between two requests to the same host, for the whole cluster.
    download_delay: Duration = Duration::ZERO;
    /// Wait 0.5× to 1.5× `download_delay` instead of exactly it, as Scrapy does.
    randomize_download_delay: bool = true;
    /// Upper bound on requests per second to one host, for the whole cluster (0 = no bound).
    max_requests_per_second: f64 = 0.0;
    /// How seen requests are remembered: "exact" (scrapy-redis's SET, ~85 B per entry), "compact" (exact, ~20 B), "bloom" (~2 B, rare false positives that skip a URL), or "expiring" (forgotten after dupefilter_ttl).
    dupefilter: DupefilterMode = DupefilterMode::Exact;
    /// For "bloom": the entries one filter is sized for (about 1.8 bytes each at 0.001, allocated when the filter is made; a full filter is followed by another).
    dupefilter_capacity: Capacity = Capacity(100_000_000);
    /// For "bloom": the share of never-seen URLs the filter wrongly says it has seen.
    dupefilter_error_rate: Rate = Rate(0.001);
    /// For "expiring": how long a seen request is remembered.
    dupefilter_ttl: Duration = Duration::from_secs(7 * 24 * 3600);
    /// For "expiring": remember a request again for a whole TTL each time it is seen (links that keep appearing stay remembered).
    dupefilter_refresh: bool = true;
    /// Deepest request followed (0 = no limit); start requests have depth 0.
    depth_limit: u32 = 0;
    /// Scrapy's DEPTH_PRIORITY: a request's priority is lowered by depth × this (negative favours depth).
    depth_priority: i64 = 0;
    /// Retry failed downloads.
    retry_enabled: bool = true;
    /// Retries after the first attempt.
    retry_times: u32 = 2;
    /// Wait before the first retry; each further retry waits twice as long (with ±50 % jitter), unless the server's Retry-After says longer.
    retry_backoff_base: Duration = Duration::from_secs(1);
    /// Longest wait before a retry (a longer Retry-After is capped to this).
    retry_backoff_max: Duration = Duration::from_secs(300);
    /// Response statuses that are retried.
    retry_http_codes: Vec<u16> = vec![500, 502, 503, 504, 522, 524, 408, 429];
    /// Stop leasing once the whole cluster has received this many responses (0 = no limit; Scrapy's CLOSESPIDER_PAGECOUNT). The rest stays queued; `--until-drained` workers then stop.
    max_pages: u32 = 0;
    /// Fetch at most this many pages of one host, for the whole cluster (0 = no limit); further requests to it are dropped and counted (`quota/host_dropped`).
    max_pages_per_host: u32 = 0;
    /// With `[items] sink = "stream"`: stop leasing pages, for the whole cluster, while this many of the stream's items are not yet acknowledged by its slowest consumer group (without consumer groups: while the stream holds this many); pages in flight still commit theirs. Entries every group has acknowledged are trimmed (0 = no bound, nothing trimmed).
    items_stream_max_backlog: u32 = 100_000;
    /// Statuses that take a page off the revisit schedule (a rule's `revisit`): it is gone.
    revisit_drop_status: Vec<u16> = vec![404, 410];
    /// Non-2xx statuses whose pages are still extracted (Scrapy's HTTPERROR_ALLOWED_CODES).
    httperror_allowed_codes: Vec<u16> = Vec::new();
    /// The User-Agent header.
    user_agent: HeaderText = HeaderText(DEFAULT_USER_AGENT.to_string());
    /// Headers sent with every request unless the request sets them.
    default_request_headers: Headers = default_headers();
    /// Fetch and obey each host's robots.txt.
    robotstxt_obey: bool = false;
    /// How long a host's robots.txt is trusted before it is fetched again (once for the whole cluster).
    robotstxt_ttl: Duration = Duration::from_secs(3600);
    /// How long a robots.txt that could not be fetched (5xx, 429, timeout, network error) holds its host's requests before it is fetched again (once for the whole cluster). The requests wait in Redis meanwhile, like retries; after `retry_times` such waits they go into the failed key. Keep it under `retry_backoff_max`.
    robotstxt_failure_ttl: Duration = Duration::from_secs(60);
    /// Slow hosts down for the whole cluster: a 429 (or a 5xx with Retry-After) at once, other 5xx in proportion to the host's recent share of them (none while under one in five, up to `adaptive_backoff_max_delay` when all fail), recovering with good responses.
    adaptive_backoff: bool = true;
    /// The slowest pace adaptive back-off imposes on a host (delay between requests).
    adaptive_backoff_max_delay: Duration = Duration::from_secs(60);
    /// Longest a whole download may take.
    download_timeout: Duration = Duration::from_secs(180);
    /// Longest a connection may take to open.
    connect_timeout: Duration = Duration::from_secs(10);
    /// Most connections one spider keeps open, idle keep-alive ones included, besides one per request in progress (each costs the worker about 20 KiB); 0 keeps none once its response has arrived.
    max_open_connections: u32 = 1024;
    /// Responses larger than this are cut off and fail into the failed key (0: no limit). Scrapy's 1 GiB would let a few large pages exhaust a worker: a page costs its size while downloaded and 3.5 to 13 times more while parsed (docs/memory.md).
    download_maxsize: Bytes = Bytes(32 << 20);
    /// Bytes of response bodies one worker holds at once, its spiders together, from the download until the page is extracted; a download waits for room (0: no bound). A response larger than all of it fails as too large.
    download_memory_budget: Bytes = Bytes(256 << 20);
    /// Responses larger than this are logged as a warning (0: no warning).
    download_warnsize: Bytes = Bytes(32 << 20);
    /// Deepest element of a page the HTML parser builds (0: no limit): past it, the parse stops and the page is extracted as far as it was read (counted in `extract/cut_short_count`). Nesting costs the parser time in proportion to depth × elements; browsers stop nesting at 512 too.
    extract_max_depth: u32 = 512;
    /// Most nodes (elements, text, comments) of a page the HTML parser builds (0: no limit): past it, the parse stops and the page is extracted as far as it was read (counted in `extract/cut_short_count`).
    extract_max_nodes: u32 = 1_000_000;
    /// Longest a page's parse and extraction may take (0: no limit): then it stops, and what was extracted so far is committed (counted in `extract/cut_short_count`).
    extract_timeout: Duration = Duration::from_secs(10);
    /// Follow redirects (each hop is a new request through the dupefilter and domain checks).
    redirect_enabled: bool = true;
    /// Longest redirect chain followed.
    redirect_max_times: u32 = 20;
    /// Keep a cookie jar per worker.
    cookies_enabled: bool = false;
    /// Proxy URLs for this spider (`http://user:pass@host:port`, `socks5://…`); empty uses HTTP(S)_PROXY from the environment, if set. Credentials are never logged.
    proxies: Vec<String> = Vec::new();
    /// How requests are spread over `proxies`: "round_robin", or "sticky" (one proxy per host).
    proxy_mode: ProxyMode = ProxyMode::RoundRobin;
    /// Offer HTTP/2 to https servers (ALPN); servers without it get HTTP/1.1.
    http2: bool = true;
    /// Allow requests to loopback, private and link-local addresses (the demo forum needs it).
    allow_private_networks: bool = false;
    /// The Redis holding the crawl (`redis://`, or `rediss://` for TLS; `REDIS_URL` is read too). Its password is never logged.
    redis_url: RedisUrl = RedisUrl::local();
    /// How long a leased request stays with a worker that stops renewing it (a dead worker's requests return to the queue after this).
    lease_timeout: Duration = Duration::from_secs(30);
    /// How long a finished page may wait for others to share its commit (one Redis script call for several pages costs Redis far less than one each), while its download slot has gone to a request leased ahead, so the wait leaves no slot idle; pages finished while the previous commit is on its way always share the next (0: no extra wait).
    commit_wait: Duration = Duration::from_millis(2);
    /// How often an idle worker looks for start entries nothing announces: those its start-key watch cannot see (a set or zset without keyspace notifications, a list beyond the worker's 16 blocking waits). When the watch sees them all, it looks only every 30 s (or this, if longer), as a safety net. Retries, expired leases, revisits and politeness slots wake it when they come due, whatever this says.
    idle_recheck: Duration = Duration::from_secs(1);
    /// How often a worker logs its progress (pages and items with their rates, the cluster's queue), as Scrapy's LogStats (0: never).
    log_stats_interval: Duration = Duration::from_secs(60);
    /// How long a stopping worker lets downloads in progress finish before handing them back to the queue (requests not yet downloading go back at once).
    shutdown_grace: Duration = Duration::from_secs(30);
}

/// Builds the settings for one spider from its layers, lowest first.
pub fn layered(layers: &[&Overrides]) -> Settings {
    let mut s = Settings::default();
    for layer in layers {
        s.apply(layer);
    }
    s
}

/// The book's table of settings (docs/settings.md, kept in sync by a test):
/// every setting of [`catalogue`] with its default and meaning.
pub fn markdown_table() -> String {
    let mut out = String::from("| setting | default | meaning |\n|---|---|---|\n");
    for s in catalogue() {
        // A `|` inside a cell would end it (a default such as a header value).
        out.push_str(&format!(
            "| `{}` | `{}` | {} |\n",
            s.name,
            s.default.replace('|', "\\|"),
            s.doc
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_layer_parses_and_names_the_variable_on_error() {
        let o = Overrides::from_env(|k| match k {
            "CRAWLWORKER_DOWNLOAD_DELAY" => Some("250ms".into()),
            "CRAWLWORKER_RETRY_HTTP_CODES" => Some("500, 503".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(o.download_delay, Some(Duration::from_millis(250)));
        assert_eq!(o.retry_http_codes, Some(vec![500, 503]));
        let err = Overrides::from_env(|k| (k == "CRAWLWORKER_RETRY_TIMES").then(|| "many".into()))
            .unwrap_err();
        assert!(err.contains("CRAWLWORKER_RETRY_TIMES"), "{err}");
    }

    #[test]
    fn values_are_checked_when_the_settings_are_built() {
        let refused = |var: &str, value: &str| {
            Overrides::from_env(|k| (k == var).then(|| value.to_string())).unwrap_err()
        };
        let e = refused("CRAWLWORKER_PROXY_MODE", "random");
        assert!(
            e.contains("CRAWLWORKER_PROXY_MODE") && e.contains("round_robin"),
            "{e}"
        );
        let e = refused(
            "CRAWLWORKER_DEFAULT_REQUEST_HEADERS",
            r#"{"Bad Header": "x"}"#,
        );
        assert!(e.contains("`Bad Header` is not a valid header name"), "{e}");
        let e = refused("CRAWLWORKER_USER_AGENT", "bad\nagent");
        assert!(e.contains("cannot be sent in an HTTP header"), "{e}");
        let e = refused("CRAWLWORKER_REDIS_URL", "http://:hunter2@127.0.0.1:6379");
        assert!(
            e.contains("not a Redis address") && !e.contains("hunter2"),
            "{e}"
        );
        let ok = Overrides::from_env(|k| (k == "CRAWLWORKER_PROXY_MODE").then(|| "sticky".into()));
        assert_eq!(ok.unwrap().proxy_mode, Some(ProxyMode::Sticky));
    }

    #[test]
    fn later_layers_win() {
        let a = Overrides {
            retry_times: Some(5),
            ..Default::default()
        };
        let b = Overrides {
            retry_times: Some(1),
            ..Default::default()
        };
        assert_eq!(layered(&[&a, &b]).retry_times, 1);
        assert_eq!(layered(&[&a]).concurrent_requests, 16);
    }

    #[test]
    fn catalogue_lists_every_setting_with_its_default() {
        let c = catalogue();
        let delay = c.iter().find(|d| d.name == "download_timeout").unwrap();
        assert_eq!(delay.default, "3m");
        assert!(c.iter().all(|d| !d.doc.is_empty()));
    }
}
