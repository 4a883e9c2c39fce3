//! `type = "datetime"`: the dates pages write, read into RFC 3339 text.
//!
//! A value is tried against the field's strftime `formats` in order, then
//! against the forms sites write without being asked: RFC 3339 / ISO
//! 8601, what forum engines and frameworks print by default ([`written`]:
//! Django, phpBB, XenForo, vBulletin, Discuz, Discourse's epoch
//! milliseconds, HTTP and RFC 2822 dates, epoch seconds), absolute
//! Chinese dates ("2024年3月1日 14:02"), and relative dates in English and
//! Chinese ("3 hours ago", "yesterday 14:02", "Sunday at 5:01 PM",
//! "3分钟前", "昨天 14:02", "前天", "刚刚"), counted from the response's
//! fetch time. A time written without an offset is in the field's zone.
//! A value matching none, or a date outside the years RFC 3339 writes
//! (0001–9999), is not a date: the field counts it as unconverted.
//!
//! The fetch time comes with the response: the extractor reads no clock.
//! Which fields are dates, and their formats and zone, are the spider's.

mod written;

use std::sync::LazyLock;
use std::time::SystemTime;

use chrono::format::{Item, StrftimeItems};
use chrono::{
    DateTime, Datelike, Days, Months, NaiveDate, NaiveDateTime, NaiveTime, SecondsFormat,
    TimeDelta, TimeZone, Utc,
};
use chrono_tz::Tz;
use regex::Regex;
use serde_json::Value;

use crate::spider::DateSpec;

/// Whether `format` is strftime chrono can read (the spider's check).
pub fn check_format(format: &str) -> Result<(), String> {
    if format.trim().is_empty() {
        return Err("it is empty".into());
    }
    match StrftimeItems::new(format).find(|i| matches!(i, Item::Error)) {
        Some(_) => Err("it has an unknown `%` directive".into()),
        None => Ok(()),
    }
}

/// One value of a datetime field: its RFC 3339 text, or why it is not a
/// date.
pub fn convert(v: &Value, spec: &DateSpec, fetched_at: SystemTime) -> Result<Value, String> {
    let text = match v {
        Value::String(s) => s.trim(),
        other => return Err(format!("{other} is not a date")),
    };
    let fetched: DateTime<Utc> = fetched_at.into();
    let shown = || crate::wording::cut(text, 80);
    let date = parse(text, spec, fetched.with_timezone(&spec.zone))
        .ok_or_else(|| format!("`{}` is not a date", shown()))?;
    if !(1..=9999).contains(&date.year()) {
        return Err(format!(
            "`{}` is a date in year {}, outside the years RFC 3339 writes (0001-9999)",
            shown(),
            date.year()
        ));
    }
    Ok(Value::String(
        date.to_rfc3339_opts(SecondsFormat::Secs, true),
    ))
}

/// `text` as a date, `now` being the fetch time in the field's zone.
pub fn parse(text: &str, spec: &DateSpec, now: DateTime<Tz>) -> Option<DateTime<Tz>> {
    spec.formats
        .iter()
        .find_map(|f| with_format(text, f, spec.zone))
        .or_else(|| rfc3339(text, spec.zone))
        .or_else(|| written::parse(text, now))
        .or_else(|| chinese_absolute(text, now))
        .or_else(|| relative_ago(text, now))
        .or_else(|| relative_day(text, now))
}

/// One strftime format: with an offset, a date and time, or a date alone
/// (its midnight).
fn with_format(text: &str, format: &str, zone: Tz) -> Option<DateTime<Tz>> {
    if let Ok(d) = DateTime::parse_from_str(text, format) {
        return Some(d.with_timezone(&zone));
    }
    if let Ok(d) = NaiveDateTime::parse_from_str(text, format) {
        return local(zone, d);
    }
    let d = NaiveDate::parse_from_str(text, format).ok()?;
    local(zone, d.and_time(NaiveTime::MIN))
}

fn rfc3339(text: &str, zone: Tz) -> Option<DateTime<Tz>> {
    if let Ok(d) = DateTime::parse_from_rfc3339(text) {
        return Some(d.with_timezone(&zone));
    }
    ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())
        .and_then(|d| local(zone, d))
}

/// A wall-clock time in `zone`; in a DST gap or fold, the earlier one.
fn local(zone: Tz, d: NaiveDateTime) -> Option<DateTime<Tz>> {
    zone.from_local_datetime(&d).earliest()
}

/// "2024年3月1日", "2024年03月01日 14:02", "3月1日 14:02" (this year, or
/// the last when that is ahead of the fetch).
fn chinese_absolute(text: &str, now: DateTime<Tz>) -> Option<DateTime<Tz>> {
    static DATE: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r"^(?:(\d{4})\s*年\s*)?(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]\s*(?:(\d{1,2})\s*[:：时]\s*(\d{1,2})\s*分?)?$").ok()
    });
    let caps = DATE.as_ref()?.captures(text)?;
    let number = |i: usize| caps.get(i).and_then(|m| m.as_str().parse::<u32>().ok());
    let time = match (number(4), number(5)) {
        (Some(h), Some(m)) => NaiveTime::from_hms_opt(h, m, 0)?,
        _ => NaiveTime::MIN,
    };
    let date = match caps.get(1) {
        Some(y) => NaiveDate::from_ymd_opt(y.as_str().parse().ok()?, number(2)?, number(3)?)?,
        None => written::this_years(now, number(2)?, number(3)?, time)?,
    };
    local(now.timezone(), date.and_time(time))
}

/// "3 hours ago", "an hour ago", "3分钟前", "2 天前", "刚刚", "just now".
fn relative_ago(text: &str, now: DateTime<Tz>) -> Option<DateTime<Tz>> {
    static AGO: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r"(?i)^(\d+|an?|one)\s*(seconds?|secs?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?)\s+ago$").ok()
    });
    static QIAN: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(
            r"^(\d+|一|两|半)\s*(秒钟?|分钟|分|个?小时|天|日|周|个?星期|个月|年)\s*(?:之)?前$",
        )
        .ok()
    });
    const NOW: [&str; 8] = [
        "just now",
        "now",
        "less than a minute ago",
        "a few seconds ago",
        "a moment ago",
        "moments ago",
        "刚刚",
        "刚才",
    ];
    if NOW.contains(&text.to_lowercase().as_str()) {
        return Some(now);
    }
    let (count, unit) = if let Some(c) = AGO.as_ref()?.captures(text) {
        let count = match c.get(1)?.as_str().to_lowercase().as_str() {
            "a" | "an" | "one" => 1,
            n => n.parse().ok()?,
        };
        (count, english_unit(c.get(2)?.as_str())?)
    } else {
        let c = QIAN.as_ref()?.captures(text)?;
        let count = match c.get(1)?.as_str() {
            "一" => 1,
            "两" => 2,
            "半" => 0,
            n => n.parse().ok()?,
        };
        (count, chinese_unit(c.get(2)?.as_str())?)
    };
    back(now, count, unit)
}

#[derive(Clone, Copy)]
enum Unit {
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

fn english_unit(word: &str) -> Option<Unit> {
    let w = word.to_lowercase();
    let w = w.trim_end_matches('s');
    Some(match w {
        "second" | "sec" => Unit::Second,
        "minute" | "min" => Unit::Minute,
        "hour" | "hr" => Unit::Hour,
        "day" => Unit::Day,
        "week" => Unit::Week,
        "month" => Unit::Month,
        "year" => Unit::Year,
        _ => return None,
    })
}

fn chinese_unit(word: &str) -> Option<Unit> {
    Some(match word.trim_start_matches('个') {
        "秒" | "秒钟" => Unit::Second,
        "分钟" | "分" => Unit::Minute,
        "小时" => Unit::Hour,
        "天" | "日" => Unit::Day,
        "周" | "星期" => Unit::Week,
        "月" => Unit::Month,
        "年" => Unit::Year,
        _ => return None,
    })
}

/// `now` less `count` units (months and years by the calendar).
fn back(now: DateTime<Tz>, count: u32, unit: Unit) -> Option<DateTime<Tz>> {
    let n = i64::from(count);
    match unit {
        Unit::Second => now.checked_sub_signed(TimeDelta::try_seconds(n)?),
        Unit::Minute => now.checked_sub_signed(TimeDelta::try_minutes(n)?),
        Unit::Hour => now.checked_sub_signed(TimeDelta::try_hours(n)?),
        Unit::Day => now.checked_sub_signed(TimeDelta::try_days(n)?),
        Unit::Week => now.checked_sub_signed(TimeDelta::try_weeks(n)?),
        Unit::Month => now.checked_sub_months(Months::new(count)),
        Unit::Year => now.checked_sub_months(Months::new(count.checked_mul(12)?)),
    }
}

/// "today 14:02", "yesterday 14:02", "Yesterday, 05:01 PM", "yesterday",
/// "Sunday at 5:01 PM" (the last Sunday before the fetch's day), "今天
/// 14:02", "昨天 14:02", "前天", "前天 9:05": a day counted back in the
/// field's zone, at the time written (midnight without one).
fn relative_day(text: &str, now: DateTime<Tz>) -> Option<DateTime<Tz>> {
    static DAY: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r"(?i)^(today|yesterday|今天|昨天|前天|[a-z]+day)\s*,?\s*(?:at\s+)?(.*)$").ok()
    });
    let text = written::plain_clock(text);
    let caps = DAY.as_ref()?.captures(&text)?;
    let today = now.date_naive();
    let days_back = match caps.get(1)?.as_str().to_lowercase().as_str() {
        "today" | "今天" => 0,
        "yesterday" | "昨天" => 1,
        "前天" => 2,
        name => {
            let day = written::weekday(name)?;
            let back =
                (7 + today.weekday().num_days_from_monday() - day.num_days_from_monday()) % 7;
            // Today is "today": a weekday name is a day of the week before.
            if back == 0 {
                7
            } else {
                u64::from(back)
            }
        }
    };
    let date = today.checked_sub_days(Days::new(days_back))?;
    let time = match caps.get(2).map_or("", |m| m.as_str().trim()) {
        "" => NaiveTime::MIN,
        clock => written::clock(clock)?,
    };
    local(now.timezone(), date.and_time(time))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(formats: &[&str], zone: &str) -> DateSpec {
        DateSpec {
            formats: formats.iter().map(|f| f.to_string()).collect(),
            zone: zone.parse().expect("a zone"),
        }
    }

    /// 2024-03-05 10:30:00 in Shanghai (02:30 UTC).
    fn fetched() -> SystemTime {
        let utc = Utc
            .with_ymd_and_hms(2024, 3, 5, 2, 30, 0)
            .single()
            .expect("a time");
        utc.into()
    }

    fn read(text: &str, formats: &[&str]) -> Option<String> {
        let v = Value::String(text.to_string());
        convert(&v, &spec(formats, "Asia/Shanghai"), fetched())
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
    }

    #[test]
    fn formats_are_tried_in_order_in_the_fields_zone() {
        let formats = ["%Y-%m-%d %H:%M", "%b %d, %Y %I:%M %p"];
        assert_eq!(
            read("2024-03-01 14:02", &formats).as_deref(),
            Some("2024-03-01T14:02:00+08:00")
        );
        assert_eq!(
            read("Mar 1, 2024 2:02 PM", &formats).as_deref(),
            Some("2024-03-01T14:02:00+08:00")
        );
        assert_eq!(
            read("2024-03-01", &["%Y-%m-%d"]).as_deref(),
            Some("2024-03-01T00:00:00+08:00")
        );
    }

    #[test]
    fn written_offsets_are_kept_as_instants() {
        assert_eq!(
            read("2024-03-01T06:02:00Z", &[]).as_deref(),
            Some("2024-03-01T14:02:00+08:00")
        );
        assert_eq!(
            read("2024-03-01 06:02 +0000", &["%Y-%m-%d %H:%M %z"]).as_deref(),
            Some("2024-03-01T14:02:00+08:00")
        );
    }

    #[test]
    fn chinese_absolute_dates() {
        assert_eq!(
            read("2024年3月1日", &[]).as_deref(),
            Some("2024-03-01T00:00:00+08:00")
        );
        assert_eq!(
            read("2024年03月01日 14:02", &[]).as_deref(),
            Some("2024-03-01T14:02:00+08:00")
        );
        assert_eq!(
            read("3月1日 14:02", &[]).as_deref(),
            Some("2024-03-01T14:02:00+08:00")
        );
    }

    #[test]
    fn relative_dates_count_from_the_fetch_time() {
        assert_eq!(
            read("3 hours ago", &[]).as_deref(),
            Some("2024-03-05T07:30:00+08:00")
        );
        assert_eq!(
            read("an hour ago", &[]).as_deref(),
            Some("2024-03-05T09:30:00+08:00")
        );
        assert_eq!(
            read("2 days ago", &[]).as_deref(),
            Some("2024-03-03T10:30:00+08:00")
        );
        assert_eq!(
            read("3分钟前", &[]).as_deref(),
            Some("2024-03-05T10:27:00+08:00")
        );
        assert_eq!(
            read("5 小时前", &[]).as_deref(),
            Some("2024-03-05T05:30:00+08:00")
        );
        assert_eq!(
            read("刚刚", &[]).as_deref(),
            Some("2024-03-05T10:30:00+08:00")
        );
        assert_eq!(
            read("yesterday 14:02", &[]).as_deref(),
            Some("2024-03-04T14:02:00+08:00")
        );
        assert_eq!(
            read("Yesterday at 2:02 pm", &[]).as_deref(),
            Some("2024-03-04T14:02:00+08:00")
        );
        assert_eq!(
            read("昨天 14:02", &[]).as_deref(),
            Some("2024-03-04T14:02:00+08:00")
        );
        assert_eq!(
            read("前天", &[]).as_deref(),
            Some("2024-03-03T00:00:00+08:00")
        );
        assert_eq!(
            read("今天 09:15", &[]).as_deref(),
            Some("2024-03-05T09:15:00+08:00")
        );
    }

    #[test]
    fn days_are_counted_in_the_fields_zone() {
        // 2024-03-05 02:30 UTC is already the 5th in Shanghai, still the
        // 4th in Los Angeles.
        let v = Value::String("yesterday 14:02".into());
        let la = convert(&v, &spec(&[], "America/Los_Angeles"), fetched()).expect("a date");
        assert_eq!(la, Value::String("2024-03-03T14:02:00-08:00".into()));
        let utc = convert(&v, &spec(&[], "UTC"), fetched()).expect("a date");
        assert_eq!(utc, Value::String("2024-03-04T14:02:00Z".into()));
    }

    fn utc(text: &str) -> Option<String> {
        let v = Value::String(text.to_string());
        convert(&v, &spec(&[], "UTC"), fetched())
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
    }

    #[test]
    fn djangos_default_formats_are_read_without_formats() {
        for (written, want) in [
            ("Jan. 20, 2025, 10:39 a.m.", "2025-01-20T10:39:00Z"),
            ("Jan. 20, 2025, 10:39 p.m.", "2025-01-20T22:39:00Z"),
            ("March 3, 2025, noon", "2025-03-03T12:00:00Z"),
            ("March 3, 2025, midnight", "2025-03-03T00:00:00Z"),
            ("Sept. 5, 2025, 5 p.m.", "2025-09-05T17:00:00Z"),
            ("Sept. 5, 2025, 12 a.m.", "2025-09-05T00:00:00Z"),
            ("May 1, 2025, 12:30 p.m.", "2025-05-01T12:30:00Z"),
            ("June 9, 2025", "2025-06-09T00:00:00Z"),
            ("March 3, 2025", "2025-03-03T00:00:00Z"),
        ] {
            assert_eq!(utc(written).as_deref(), Some(want), "{written}");
        }
    }

    #[test]
    fn forum_engines_default_formats_are_read_without_formats() {
        for (written, want) in [
            // phpBB: "D M d, Y g:i a".
            ("Sat Nov 28, 2026 5:01 pm", "2026-11-28T17:01:00Z"),
            // XenForo: "M j, Y" "at" "g:i A".
            ("Nov 28, 2026 at 5:01 PM", "2026-11-28T17:01:00Z"),
            // vBulletin: "m-d-Y, h:i A".
            ("11-28-2026, 05:01 PM", "2026-11-28T17:01:00Z"),
            ("01-02-2026, 12:15 AM", "2026-01-02T00:15:00Z"),
            // Discuz: "Y-n-j H:i".
            ("2026-11-28 17:01", "2026-11-28T17:01:00Z"),
            ("2026-1-8 07:01", "2026-01-08T07:01:00Z"),
            ("2026/11/28 17:01:05", "2026-11-28T17:01:05Z"),
            // Discourse's data-time: epoch milliseconds.
            ("1795885260000", "2026-11-28T17:01:00Z"),
            ("1795885260", "2026-11-28T17:01:00Z"),
            ("28 November 2026 17:01", "2026-11-28T17:01:00Z"),
            ("Saturday, 28th November 2026", "2026-11-28T00:00:00Z"),
        ] {
            assert_eq!(utc(written).as_deref(), Some(want), "{written}");
        }
    }

    #[test]
    fn http_rfc_2822_and_iso_dates_keep_their_instant() {
        for (written, want) in [
            ("Sat, 28 Nov 2026 17:01:00 GMT", "2026-11-28T17:01:00Z"),
            ("Saturday, 28-Nov-26 17:01:00 GMT", "2026-11-28T17:01:00Z"),
            ("Sat Nov 28 17:01:00 2026", "2026-11-28T17:01:00Z"),
            ("Sat, 28 Nov 2026 18:01:00 +0100", "2026-11-28T17:01:00Z"),
            ("2026-11-28T17:01:00.250Z", "2026-11-28T17:01:00Z"),
            ("2026-11-28 18:01:00+01:00", "2026-11-28T17:01:00Z"),
            ("2026-11-28", "2026-11-28T00:00:00Z"),
            ("Nov 28, 2026 5:01 PM UTC", "2026-11-28T17:01:00Z"),
        ] {
            assert_eq!(utc(written).as_deref(), Some(want), "{written}");
        }
        // In the field's zone when the text names none.
        assert_eq!(
            read("Nov 28, 2026 at 5:01 PM", &[]).as_deref(),
            Some("2026-11-28T17:01:00+08:00")
        );
    }

    #[test]
    fn relative_forms_engines_print_count_from_the_fetch() {
        // Fetched Tuesday 2024-03-05 10:30 in Shanghai.
        for (written, want) in [
            ("Yesterday, 05:01 PM", "2024-03-04T17:01:00+08:00"),
            ("Today at 9:15 a.m.", "2024-03-05T09:15:00+08:00"),
            ("Sunday at 5:01 PM", "2024-03-03T17:01:00+08:00"),
            ("Tuesday at 5:01 PM", "2024-02-27T17:01:00+08:00"),
            ("less than a minute ago", "2024-03-05T10:30:00+08:00"),
            ("Mar 1 at 2:02 PM", "2024-03-01T14:02:00+08:00"),
            // A day ahead of the fetch without a year is last year's.
            ("Dec 31 at 11:00 PM", "2023-12-31T23:00:00+08:00"),
        ] {
            assert_eq!(read(written, &[]).as_deref(), Some(want), "{written}");
        }
    }

    #[test]
    fn ambiguous_or_out_of_range_dates_are_refused() {
        // Year last without a 12-hour clock: day or month first? `formats`
        // says.
        assert_eq!(utc("05-06-2026"), None);
        assert_eq!(utc("05/06/2026 17:01"), None);
        assert_eq!(
            read("05/06/2026 17:01", &["%d/%m/%Y %H:%M"]).as_deref(),
            Some("2026-06-05T17:01:00+08:00")
        );
        assert_eq!(utc("Nov 2026"), None);
        assert_eq!(utc("Nov 28 Dec 2026"), None);
        assert_eq!(utc("Nov 28, 2026 at 13:01 PM"), None);
        assert_eq!(utc("posted by ann on Nov 28, 2026"), None);
        let v = Value::String("99999999999 years ago".into());
        assert!(convert(&v, &spec(&[], "UTC"), fetched()).is_err());
        let v = Value::String("+242957-01-01".into());
        assert!(convert(&v, &spec(&["%+"], "UTC"), fetched()).is_err());
        let v = Value::String("9999999 days ago".into());
        let err = convert(&v, &spec(&[], "UTC"), fetched()).unwrap_err();
        assert!(err.contains("outside the years"), "{err}");
    }

    #[test]
    fn text_matching_nothing_is_not_a_date() {
        assert_eq!(read("last Tuesday-ish", &["%Y-%m-%d"]), None);
        assert_eq!(read("2024-13-01", &["%Y-%m-%d"]), None);
        assert_eq!(read("", &[]), None);
    }

    #[test]
    fn unknown_directives_are_refused() {
        assert!(check_format("%Y-%m-%d").is_ok());
        assert!(check_format("%Y-%Q").is_err());
        assert!(check_format(" ").is_err());
    }
}
