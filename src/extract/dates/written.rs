//! Dates as forum engines and web frameworks print them by default, read
//! without `formats`:
//!
//! - month names, in either order, with or without a weekday, a year, a
//!   clock and `at`: Django (`Jan. 20, 2025, 10:39 a.m.`, `March 3, 2025,
//!   noon`, `Sept. 5, 2025, 5 p.m.`), phpBB (`Sat Nov 28, 2026 5:01 pm`),
//!   XenForo (`Nov 28, 2026 at 5:01 PM`), `28 November 2026 17:01`;
//! - numbers with the year first (Discuz `2026-11-28 17:01`, `2026/11/28`,
//!   ISO 8601 without an offset or with `Z`/`+08:00`);
//! - vBulletin's `11-28-2026, 05:01 PM`: month first, and only with a
//!   12-hour clock (the US convention); any other year-last date is
//!   ambiguous (`05-06-2026`) and needs `formats`;
//! - HTTP dates (RFC 9110: IMF-fixdate, RFC 850, asctime) and RFC 2822;
//! - epoch seconds (9 or 10 digits, a fraction allowed) and milliseconds
//!   (12 or 13 digits: Discourse's `data-time`).
//!
//! Why not a crate: the date crates that fit chrono either assume
//! month-first for `05/06/2026` and fill a missing date with today's
//! (`dateparser`), guess orders and missing parts dateutil's way
//! (`dtparse`), moved to another time library (`parse_datetime`, on
//! jiff), or read relative phrases, not engines' defaults
//! (`chrono-english`); none reads `a.m.`, `noon` or `Sept.`. This reads a
//! closed set of shapes and says "not a date" for anything else.

use std::sync::LazyLock;

use chrono::{DateTime, Datelike, FixedOffset, NaiveDate, NaiveTime, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use regex::Regex;

use super::local;

/// `text` (trimmed) as one of the forms above; `now` (the fetch time in
/// the field's zone) gives a missing year.
pub(super) fn parse(text: &str, now: DateTime<Tz>) -> Option<DateTime<Tz>> {
    let zone = now.timezone();
    epoch(text, zone)
        .or_else(|| http(text, zone))
        .or_else(|| year_first(text, zone))
        .or_else(|| month_first_12h(text, zone))
        .or_else(|| with_month_name(text, now))
}

/// `a.m.`, `p.m.`, `noon` and `midnight` as the plain `am`, `pm`, `12:00
/// pm` and `12:00 am` the readers here know.
pub(super) fn plain_clock(text: &str) -> std::borrow::Cow<'_, str> {
    static WORDS: LazyLock<Option<Regex>> =
        LazyLock::new(|| Regex::new(r"(?i)\b([ap])\.\s?m\.?|\bnoon\b|\bmidnight\b").ok());
    let Some(re) = WORDS.as_ref() else {
        return text.into();
    };
    re.replace_all(text, |c: &regex::Captures<'_>| {
        match c.get(1).map(|m| m.as_str().to_ascii_lowercase()) {
            Some(letter) => format!("{letter}m"),
            None if c[0].eq_ignore_ascii_case("noon") => "12:00 pm".to_string(),
            None => "12:00 am".to_string(),
        }
    })
}

/// A clock as pages write it: `14:02`, `14:02:33`, `2:02 pm`, `2:02pm`,
/// `5 pm`; `None` when `text` is none of these.
pub(super) fn clock(text: &str) -> Option<NaiveTime> {
    static CLOCK: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r"(?i)^(\d{1,2})(?:\s*[:：]\s*(\d{2})(?:\s*[:：]\s*(\d{2}))?)?\s*(am|pm)?$").ok()
    });
    let caps = CLOCK.as_ref()?.captures(text.trim())?;
    let number = |i: usize| caps.get(i).and_then(|m| m.as_str().parse::<u32>().ok());
    let meridiem = caps.get(4).map(|m| m.as_str().eq_ignore_ascii_case("pm"));
    let minute = number(2);
    if minute.is_none() && meridiem.is_none() {
        // A bare number is no clock.
        return None;
    }
    let hour = twelve_hour(number(1)?, meridiem)?;
    NaiveTime::from_hms_opt(hour, minute.unwrap_or(0), number(3).unwrap_or(0))
}

/// An hour on a 12-hour clock (`pm`: `Some(true)`) on the 24-hour one.
fn twelve_hour(hour: u32, pm: Option<bool>) -> Option<u32> {
    match pm {
        None => Some(hour),
        Some(_) if !(1..=12).contains(&hour) => None,
        Some(true) => Some(hour % 12 + 12),
        Some(false) => Some(hour % 12),
    }
}

/// Epoch seconds (`1764349260`, `1764349260.5`) or milliseconds
/// (`1764349260000`).
fn epoch(text: &str, zone: Tz) -> Option<DateTime<Tz>> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(fraction) {
        return None;
    }
    let n: i64 = whole.parse().ok()?;
    let instant = match (whole.len(), fraction.len()) {
        (9 | 10, _) => {
            let nanos = format!("{fraction:0<9}").get(..9)?.parse().ok()?;
            Utc.timestamp_opt(n, nanos).single()?
        }
        (12 | 13, 0) => Utc.timestamp_millis_opt(n).single()?,
        _ => return None,
    };
    Some(instant.with_timezone(&zone))
}

/// An HTTP date (IMF-fixdate, RFC 850, asctime) or an RFC 2822 one.
fn http(text: &str, zone: Tz) -> Option<DateTime<Tz>> {
    if let Ok(at) = httpdate::parse_http_date(text) {
        return Some(DateTime::<Utc>::from(at).with_timezone(&zone));
    }
    DateTime::parse_from_rfc2822(text)
        .ok()
        .map(|d| d.with_timezone(&zone))
}

/// `2026-11-28 17:01`, `2026/11/28`, `2026.11.28 17:01:05`,
/// `2026-11-28T17:01:05.123+08:00`, `2026-11-28 17:01 UTC`.
fn year_first(text: &str, zone: Tz) -> Option<DateTime<Tz>> {
    static YMD: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r"(?i)^(\d{4})([-/.])(\d{1,2})[-/.](\d{1,2})(?:(?:t|\s+)(\d{1,2})[:：](\d{2})(?:[:：](\d{2})(?:[.,]\d+)?)?)?\s*(z|utc|gmt|[+-]\d{2}:?\d{2})?$").ok()
    });
    let caps = YMD.as_ref()?.captures(text)?;
    let separator = caps.get(2)?.as_str();
    // One separator throughout: `2026-11/28` is no date.
    if text[caps.get(3)?.end()..].chars().next()? != separator.chars().next()? {
        return None;
    }
    let number = |i: usize| caps.get(i).and_then(|m| m.as_str().parse::<u32>().ok());
    let date =
        NaiveDate::from_ymd_opt(caps.get(1)?.as_str().parse().ok()?, number(3)?, number(4)?)?;
    let time = match number(5) {
        Some(h) => NaiveTime::from_hms_opt(h, number(6)?, number(7).unwrap_or(0))?,
        None => NaiveTime::MIN,
    };
    at(date, time, caps.get(8).map(|m| m.as_str()), zone)
}

/// vBulletin's `11-28-2026, 05:01 PM` (`m-d-Y, h:i A`): month first, with
/// a 12-hour clock.
fn month_first_12h(text: &str, zone: Tz) -> Option<DateTime<Tz>> {
    static MDY: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r"(?i)^(\d{1,2})-(\d{1,2})-(\d{4}),?\s+(\d{1,2}:\d{2}(?::\d{2})?\s*[ap]m)$").ok()
    });
    let caps = MDY.as_ref()?.captures(text)?;
    let number = |i: usize| caps.get(i).and_then(|m| m.as_str().parse::<u32>().ok());
    let date =
        NaiveDate::from_ymd_opt(caps.get(3)?.as_str().parse().ok()?, number(1)?, number(2)?)?;
    at(date, clock(caps.get(4)?.as_str())?, None, zone)
}

/// A date and time with the offset written (`Z`, `UTC`, `+0800`), or in
/// `zone`.
fn at(date: NaiveDate, time: NaiveTime, offset: Option<&str>, zone: Tz) -> Option<DateTime<Tz>> {
    let wall = date.and_time(time);
    match offset {
        None => local(zone, wall),
        Some(o) => {
            let offset = fixed_offset(o)?;
            let instant = offset.from_local_datetime(&wall).single()?;
            Some(instant.with_timezone(&zone))
        }
    }
}

/// `Z`, `UTC`, `GMT`, `+08:00`, `-0500`.
fn fixed_offset(text: &str) -> Option<FixedOffset> {
    if ["z", "utc", "gmt"]
        .iter()
        .any(|z| text.eq_ignore_ascii_case(z))
    {
        return FixedOffset::east_opt(0);
    }
    let sign = match text.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits: String = text[1..].chars().filter(|c| *c != ':').collect();
    if digits.len() != 4 {
        return None;
    }
    let hours: i32 = digits[..2].parse().ok()?;
    let minutes: i32 = digits[2..].parse().ok()?;
    FixedOffset::east_opt(sign * (hours * 3600 + minutes * 60))
}

/// One word of a date written with a month name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Word {
    Month(u32),
    /// A weekday name: said, not checked.
    Weekday,
    /// A number, and how many digits it has.
    Number(u32, usize),
    Clock(NaiveTime),
    /// `am` (false) or `pm` (true), after a number: `5 pm`.
    Meridiem(bool),
    Offset(FixedOffset),
}

/// A date with a month name: one month, a day, a year (or the fetch's),
/// maybe a clock and an offset, in any order.
fn with_month_name(text: &str, now: DateTime<Tz>) -> Option<DateTime<Tz>> {
    let text = plain_clock(text);
    let words = words(&text)?;
    let mut month = None;
    let mut day = None;
    let mut year = None;
    let mut time = None;
    let mut offset = None;
    let mut i = 0;
    while i < words.len() {
        match (words[i], words.get(i + 1)) {
            (Word::Number(h, _), Some(Word::Meridiem(pm))) => {
                i += 1;
                let hour = twelve_hour(h, Some(*pm))?;
                once(&mut time, NaiveTime::from_hms_opt(hour, 0, 0)?)?;
            }
            (Word::Clock(t), Some(Word::Meridiem(pm))) => {
                i += 1;
                let hour = twelve_hour(t.hour(), Some(*pm))?;
                once(&mut time, t.with_hour(hour)?)?;
            }
            (Word::Month(m), _) => once(&mut month, m)?,
            (Word::Number(n, 4), _) => once(&mut year, n as i32)?,
            (Word::Number(n, 1 | 2), _) => once(&mut day, n)?,
            (Word::Clock(t), _) => once(&mut time, t)?,
            (Word::Offset(o), _) => once(&mut offset, o)?,
            (Word::Weekday, _) => {}
            (Word::Number(..) | Word::Meridiem(_), _) => return None,
        }
        i += 1;
    }
    let (month, day) = (month?, day?);
    let time = time.unwrap_or(NaiveTime::MIN);
    let date = match year {
        Some(y) => NaiveDate::from_ymd_opt(y, month, day)?,
        None => this_years(now, month, day, time)?,
    };
    match offset {
        None => local(now.timezone(), date.and_time(time)),
        Some(o) => Some(
            o.from_local_datetime(&date.and_time(time))
                .single()?
                .with_timezone(&now.timezone()),
        ),
    }
}

/// Sets `slot` once; a second value (two months, two years) is no date.
fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    match slot {
        Some(_) => None,
        None => {
            *slot = Some(value);
            Some(())
        }
    }
}

/// A day written without a year: in the fetch's year, or the year before
/// when that would be more than a day after the fetch (`Dec 31` read on
/// January 2nd).
pub(super) fn this_years(
    now: DateTime<Tz>,
    month: u32,
    day: u32,
    time: NaiveTime,
) -> Option<NaiveDate> {
    let year = now.date_naive().year();
    let date = NaiveDate::from_ymd_opt(year, month, day)?;
    let ahead = date.and_time(time) - now.naive_local();
    if ahead > chrono::TimeDelta::days(1) {
        return NaiveDate::from_ymd_opt(year - 1, month, day);
    }
    Some(date)
}

/// The words of `text` (lower-cased), or `None` when one is not part of a
/// date. Commas, `at`, `on`, `of`, `the`, `-`, `|`, `@` and `·` separate.
fn words(text: &str) -> Option<Vec<Word>> {
    let lower = text.to_lowercase();
    let mut out = Vec::new();
    for raw in lower.split(|c: char| c.is_whitespace() || c == ',') {
        if raw.is_empty() || ["at", "on", "of", "the", "-", "|", "@", "·"].contains(&raw) {
            continue;
        }
        word(raw, &mut out)?;
    }
    Some(out)
}

/// One word, as one or two [`Word`]s (`5pm`, `5:01pm`).
fn word(raw: &str, out: &mut Vec<Word>) -> Option<()> {
    if let Some(o) = fixed_offset(raw) {
        out.push(Word::Offset(o));
        return Some(());
    }
    let bare = raw.trim_end_matches('.');
    if let Some(m) = month(bare) {
        out.push(Word::Month(m));
    } else if is_weekday(bare) {
        out.push(Word::Weekday);
    } else if bare == "am" || bare == "pm" {
        out.push(Word::Meridiem(bare == "pm"));
    } else if let Some(t) = bare.contains(':').then(|| clock(bare)).flatten() {
        out.push(Word::Clock(t));
    } else if let Some(hour) = bare.strip_suffix("am").or(bare.strip_suffix("pm")) {
        let n: u32 = hour.parse().ok()?;
        out.push(Word::Number(n, hour.len()));
        out.push(Word::Meridiem(bare.ends_with("pm")));
    } else {
        let digits = ["st", "nd", "rd", "th"]
            .iter()
            .find_map(|s| bare.strip_suffix(s))
            .unwrap_or(bare);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 4 {
            return None;
        }
        out.push(Word::Number(digits.parse().ok()?, digits.len()));
    }
    Some(())
}

/// A month's number from its English name or abbreviation (`sept` too).
fn month(word: &str) -> Option<u32> {
    const NAMES: [&str; 12] = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    if word == "sept" {
        return Some(9);
    }
    NAMES
        .iter()
        .position(|n| *n == word || (word.len() == 3 && n.starts_with(word)))
        .map(|i| i as u32 + 1)
}

/// Whether `word` is an English weekday's name or abbreviation.
pub(super) fn is_weekday(word: &str) -> bool {
    weekday(word).is_some()
}

/// The weekday `word` names (`sat`, `tues`, `thursday`).
pub(super) fn weekday(word: &str) -> Option<chrono::Weekday> {
    use chrono::Weekday::*;
    const NAMES: [(&str, chrono::Weekday); 7] = [
        ("monday", Mon),
        ("tuesday", Tue),
        ("wednesday", Wed),
        ("thursday", Thu),
        ("friday", Fri),
        ("saturday", Sat),
        ("sunday", Sun),
    ];
    let short = ["tues", "thur", "thurs"];
    NAMES
        .iter()
        .find(|(n, _)| {
            *n == word
                || (word.len() == 3 && n.starts_with(word))
                || (short.contains(&word) && n.starts_with(word))
        })
        .map(|(_, d)| *d)
}
