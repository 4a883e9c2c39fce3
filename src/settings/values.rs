//! The kinds of value a setting may have, each a [`SettingValue`]: how it
//! is read from a TOML table (with the problem reported where it is
//! written), parsed from an environment variable, and shown in the
//! catalogue. Numbers, booleans, strings and lists, durations, byte sizes,
//! rates, header text and header tables, the dupefilter mode and the Redis
//! address. Which setting has which kind, and its default, is the one
//! table in [`super`]; the proxy settings' kinds are [`super::proxy`]'s.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::frontier::redis_url::RedisUrl;
use crate::reader::TableReader;

/// Longest duration a setting may have: longer ones are mistakes, and
/// would overflow the clock arithmetic of timers and Redis scores.
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

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

impl Capacity {
    /// The most entries a Bloom dupefilter's first filter may be sized
    /// for: about 17 GiB at 0.001, more than one Redis usually holds
    /// (a full filter is followed by a larger one, so a chain starts small).
    pub const MAX: u64 = 10_000_000_000;

    fn check(v: u64) -> Result<Capacity, String> {
        match v {
            0 => Err("0 is not a capacity of 1 or more".into()),
            v if v > Capacity::MAX => Err(format!(
                "{v} entries would make a first Bloom filter of about {} GiB, more than one Redis holds (the largest accepted is {})",
                v.saturating_mul(18) / 10 / (1 << 30),
                Capacity::MAX
            )),
            v => Ok(Capacity(v)),
        }
    }
}

impl SettingValue for Capacity {
    const EXPECTED: &'static str = "a whole number from 1 to 10000000000";
    fn read(t: &TableReader<'_>, key: &'static str) -> Option<Self> {
        let v = t.int(key)?;
        Capacity::check(u64::try_from(v.value).unwrap_or(0))
            .map_err(|e| {
                t.reader().problem(
                    &v.loc,
                    e,
                    Some("size the first filter for the crawl's first stretch (e.g. 100000000); the chain grows by itself".into()),
                )
            })
            .ok()
    }
    fn parse_str(s: &str) -> Result<Self, String> {
        Capacity::check(s.trim().parse::<u64>().map_err(|e| e.to_string())?)
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
pub(super) fn read_text<T: SettingValue>(
    t: &TableReader<'_>,
    key: &'static str,
    hint: &str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Option<T> {
    read_parsed(t, key, hint, |node| node.as_str().map(parse))
}

/// A header value (the User-Agent): text an HTTP header can carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderText(pub(super) String);

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
pub struct Headers(pub(super) BTreeMap<String, String>);

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
