//! Cron schedules as Karmada runs them: gocron's `Cron(expr)` hands the expression to robfig/cron's
//! standard parser (five fields `minute hour day-of-month month day-of-week`, names such as `JAN`
//! and `MON`, `*`, `?`, ranges, steps and lists, the `@yearly`…`@hourly` and `@every <duration>`
//! descriptors, an optional `TZ=`/`CRON_TZ=` prefix) in the rule's time zone. [`Schedule::next`]
//! walks the calendar the same way robfig's `SpecSchedule.Next` does, daylight-saving jumps
//! included. No crate implements exactly this grammar (the common ones also accept seconds, `L`,
//! `W` or `#`, which Karmada's controller refuses), and it is small; time zones come from jiff.

use std::time::Duration;

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan, Unit, Zoned};

/// Set in a field's bits when the field was `*` or `?` (day-of-month/day-of-week matching).
const STAR_BIT: u64 = 1 << 63;

/// A parsed schedule.
#[derive(Clone, Debug)]
pub enum Schedule {
    /// A calendar schedule.
    Spec(Spec),
    /// `@every <duration>`: runs every `duration` (whole seconds, at least one).
    Every(Duration),
}

/// A calendar schedule: one bit per allowed value of each field, in a time zone.
#[derive(Clone, Debug)]
pub struct Spec {
    minute: u64,
    hour: u64,
    dom: u64,
    month: u64,
    dow: u64,
    tz: TimeZone,
}

/// Why an expression is not a schedule (robfig/cron's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(String);

struct Bounds {
    min: u32,
    max: u32,
    names: &'static [(&'static str, u32)],
}

const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DOM: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

impl Schedule {
    /// Parses `expr` in time zone `tz` (a `TZ=`/`CRON_TZ=` prefix in `expr` wins, as in gocron).
    pub fn parse(expr: &str, tz: TimeZone) -> Result<Schedule, ParseError> {
        if expr.is_empty() {
            return Err(ParseError("empty spec string".into()));
        }
        let mut spec = expr;
        let mut tz = tz;
        if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
            let (prefix, rest) = spec.split_once(' ').unwrap_or((spec, ""));
            let name = prefix.split_once('=').map(|(_, n)| n).unwrap_or_default();
            tz = load_time_zone(name)
                .map_err(|e| ParseError(format!("provided bad location {name}: {e}")))?;
            spec = rest.trim();
        }
        if spec.starts_with('@') {
            return descriptor(spec, tz);
        }
        let fields: Vec<&str> = spec.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(ParseError(format!(
                "expected exactly 5 fields, found {}: {}",
                fields.len(),
                fields.join(" ")
            )));
        }
        Ok(Schedule::Spec(Spec {
            minute: field(fields[0], &MINUTES)?,
            hour: field(fields[1], &HOURS)?,
            dom: field(fields[2], &DOM)?,
            month: field(fields[3], &MONTHS)?,
            dow: field(fields[4], &DOW)?,
            tz,
        }))
    }

    /// The first activation strictly after `after` (robfig's `Next`); `None` when none falls in the
    /// next five years (e.g. `30 0 31 2 *`).
    pub fn next(&self, after: Timestamp) -> Option<Timestamp> {
        match self {
            Schedule::Every(every) => {
                let truncated = after
                    .round(
                        jiff::TimestampRound::new()
                            .smallest(Unit::Second)
                            .mode(jiff::RoundMode::Trunc),
                    )
                    .ok()?;
                truncated.checked_add(*every).ok()
            }
            Schedule::Spec(spec) => spec.next(after),
        }
    }
}

/// Loads an IANA time zone the way Go's `time.LoadLocation` names them (`UTC`, `Local`, `Area/City`).
pub fn load_time_zone(name: &str) -> Result<TimeZone, jiff::Error> {
    match name {
        "" | "UTC" => Ok(TimeZone::UTC),
        "Local" => Ok(TimeZone::system()),
        _ => TimeZone::get(name),
    }
}

fn descriptor(spec: &str, tz: TimeZone) -> Result<Schedule, ParseError> {
    let all = |b: &Bounds| bits(b.min, b.max, 1) | STAR_BIT;
    let at = |minute: u64, hour: u64, dom: u64, month: u64, dow: u64| {
        Ok(Schedule::Spec(Spec {
            minute,
            hour,
            dom,
            month,
            dow,
            tz: tz.clone(),
        }))
    };
    match spec {
        "@yearly" | "@annually" => at(1, 1, 1 << 1, 1 << 1, all(&DOW)),
        "@monthly" => at(1, 1, 1 << 1, all(&MONTHS), all(&DOW)),
        "@weekly" => at(1, 1, all(&DOM), all(&MONTHS), 1),
        "@daily" | "@midnight" => at(1, 1, all(&DOM), all(&MONTHS), all(&DOW)),
        "@hourly" => at(1, all(&HOURS), all(&DOM), all(&MONTHS), all(&DOW)),
        _ => {
            if let Some(duration) = spec.strip_prefix("@every ") {
                let every = parse_go_duration(duration).ok_or_else(|| {
                    ParseError(format!(
                        "failed to parse duration {spec}: time: invalid duration \"{duration}\""
                    ))
                })?;
                // robfig rounds down to whole seconds, with a one-second minimum.
                let secs = every.as_secs().max(1);
                return Ok(Schedule::Every(Duration::from_secs(secs)));
            }
            Err(ParseError(format!("unrecognized descriptor: {spec}")))
        }
    }
}

/// A Go duration string (`1h30m`, `90s`, `1.5h`): sequences of a decimal number and a unit.
fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    if rest.is_empty() || rest.starts_with('-') {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let nanos_per = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_end..];
        total += number * nanos_per;
    }
    Some(Duration::from_nanos(total as u64))
}

fn field(text: &str, bounds: &Bounds) -> Result<u64, ParseError> {
    let mut out = 0;
    for part in text.split(',') {
        out |= range(part, bounds)?;
    }
    Ok(out)
}

fn range(expr: &str, bounds: &Bounds) -> Result<u64, ParseError> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let (start, mut end, mut extra);
    if low_and_high[0] == "*" || low_and_high[0] == "?" {
        start = bounds.min;
        end = bounds.max;
        extra = STAR_BIT;
    } else {
        start = int_or_name(low_and_high[0], bounds)?;
        end = match low_and_high.len() {
            1 => start,
            2 => int_or_name(low_and_high[1], bounds)?,
            _ => return Err(ParseError(format!("too many hyphens: {expr}"))),
        };
        extra = 0;
    }
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = int(range_and_step[1])?;
            if single {
                end = bounds.max;
            }
            if step > 1 {
                extra = 0;
            }
            step
        }
        _ => return Err(ParseError(format!("too many slashes: {expr}"))),
    };
    if start < bounds.min {
        return Err(ParseError(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            bounds.min
        )));
    }
    if end > bounds.max {
        return Err(ParseError(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            bounds.max
        )));
    }
    if start > end {
        return Err(ParseError(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        )));
    }
    if step == 0 {
        return Err(ParseError(format!(
            "step of range should be a positive number: {expr}"
        )));
    }
    Ok(bits(start, end, step) | extra)
}

fn int_or_name(text: &str, bounds: &Bounds) -> Result<u32, ParseError> {
    let lower = text.to_ascii_lowercase();
    if let Some((_, value)) = bounds.names.iter().find(|(name, _)| *name == lower) {
        return Ok(*value);
    }
    int(text)
}

fn int(text: &str) -> Result<u32, ParseError> {
    let number: i64 = text
        .parse()
        .map_err(|_| ParseError(format!("failed to parse int from {text}: invalid syntax")))?;
    if number < 0 {
        return Err(ParseError(format!(
            "negative number ({number}) not allowed: {text}"
        )));
    }
    u32::try_from(number).map_err(|_| {
        ParseError(format!(
            "failed to parse int from {text}: value out of range"
        ))
    })
}

/// Bits `min..=max` every `step`.
fn bits(min: u32, max: u32, step: u32) -> u64 {
    if step == 1 {
        return (!(u64::MAX << (max + 1))) & (u64::MAX << min);
    }
    let mut out = 0;
    let mut i = min;
    while i <= max {
        out |= 1 << i;
        // A step may be as large as `u32::MAX`: stop instead of overflowing.
        let Some(next) = i.checked_add(step) else {
            break;
        };
        i = next;
    }
    out
}

fn has(bits: u64, value: i8) -> bool {
    u32::try_from(value).is_ok_and(|v| v < 64 && bits & (1 << v) != 0)
}

impl Spec {
    fn day_matches(&self, t: &Zoned) -> bool {
        let dom = has(self.dom, t.day());
        let dow = has(self.dow, t.weekday().to_sunday_zero_offset());
        if self.dom & STAR_BIT != 0 || self.dow & STAR_BIT != 0 {
            dom && dow
        } else {
            dom || dow
        }
    }

    fn at(&self, date: Date, hour: i8, minute: i8) -> Option<Zoned> {
        DateTime::from_parts(date, jiff::civil::Time::new(hour, minute, 0, 0).ok()?)
            .to_zoned(self.tz.clone())
            .ok()
    }

    fn next(&self, after: Timestamp) -> Option<Timestamp> {
        // The next whole second after `after`, in the schedule's zone.
        let start = after
            .round(
                jiff::TimestampRound::new()
                    .smallest(Unit::Second)
                    .mode(jiff::RoundMode::Trunc),
            )
            .ok()?
            .checked_add(1.second())
            .ok()?;
        let mut t = start.to_zoned(self.tz.clone());
        let year_limit = t.year() + 5;
        let mut added = false;
        'wrap: loop {
            if t.year() > year_limit {
                return None;
            }
            while !has(self.month, t.month()) {
                if !added {
                    added = true;
                    t = self.at(t.date().first_of_month(), 0, 0)?;
                }
                t = self.at(t.date().checked_add(1.month()).ok()?, 0, 0)?;
                if t.month() == 1 {
                    continue 'wrap;
                }
            }
            while !self.day_matches(&t) {
                if !added {
                    added = true;
                    t = self.at(t.date(), 0, 0)?;
                }
                t = t.checked_add(1.day()).ok()?;
                // Midnight may have moved with a daylight-saving change.
                let hour = t.hour();
                if hour != 0 {
                    t = if hour > 12 {
                        t.checked_add(i64::from(24 - hour).hours()).ok()?
                    } else {
                        t.checked_sub(i64::from(hour).hours()).ok()?
                    };
                }
                if t.day() == 1 {
                    continue 'wrap;
                }
            }
            while !has(self.hour, t.hour()) {
                if !added {
                    added = true;
                    t = self.at(t.date(), t.hour(), 0)?;
                }
                t = t.checked_add(1.hour()).ok()?;
                if t.hour() == 0 {
                    continue 'wrap;
                }
            }
            while !has(self.minute, t.minute()) {
                if !added {
                    added = true;
                    t = truncate(&t, 60)?;
                }
                t = t.checked_add(1.minute()).ok()?;
                if t.minute() == 0 {
                    continue 'wrap;
                }
            }
            // Standard schedules fire at second 0.
            if t.second() != 0 {
                if !added {
                    t = truncate(&t, 1)?;
                }
                let to_next_minute = 60 - i64::from(t.second());
                t = t.checked_add(to_next_minute.seconds()).ok()?;
                added = true;
                if t.minute() == 0 || !has(self.minute, t.minute()) {
                    continue 'wrap;
                }
            }
            return Some(t.timestamp());
        }
    }
}

/// `t` truncated to a multiple of `seconds` since the Unix epoch (Go's `Time.Truncate`).
fn truncate(t: &Zoned, seconds: i64) -> Option<Zoned> {
    let secs = t.timestamp().as_second();
    let truncated = Timestamp::from_second(secs - secs.rem_euclid(seconds)).ok()?;
    Some(truncated.to_zoned(t.time_zone().clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> Timestamp {
        text.parse().expect("timestamp")
    }

    fn next(expr: &str, tz: &str, after: &str) -> String {
        let tz = load_time_zone(tz).expect("zone");
        Schedule::parse(expr, tz)
            .expect("parse")
            .next(utc(after))
            .expect("next")
            .to_string()
    }

    #[test]
    fn parses_like_robfig_standard() {
        for bad in [
            "",
            "* * * *",
            "* * * * * *",
            "61 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "* * * 13 *",
            "* * * * 7",
            "5-1 * * * *",
            "*/0 * * * *",
            "1-2-3 * * * *",
            "1/2/3 * * * *",
            "x * * * *",
            "-1 * * * *",
            "@fortnightly",
            "@every nonsense",
            "TZ=Nowhere/Atlantis * * * * *",
        ] {
            assert!(
                Schedule::parse(bad, TimeZone::UTC).is_err(),
                "{bad:?} parsed"
            );
        }
        for good in [
            "* * * * *",
            "?/5 1-3,7 */2 JAN-mar sun,SAT",
            "0 0 1 1 *",
            "@every 1h30m",
            "@daily",
            "@midnight",
            "CRON_TZ=Asia/Tokyo 0 9 * * *",
        ] {
            assert!(Schedule::parse(good, TimeZone::UTC).is_ok(), "{good:?}");
        }
        assert_eq!(
            Schedule::parse("61 * * * *", TimeZone::UTC)
                .expect_err("invalid")
                .to_string(),
            "end of range (61) above maximum (59): 61"
        );
    }

    #[test]
    fn next_activation() {
        assert_eq!(
            next("*/15 * * * *", "UTC", "2024-01-01T10:07:30Z"),
            "2024-01-01T10:15:00Z"
        );
        assert_eq!(
            next("30 9 * * *", "Asia/Tokyo", "2024-01-01T00:00:00Z"),
            "2024-01-01T00:30:00Z"
        );
        // Either day field matches when both are restricted.
        assert_eq!(
            next("0 0 13 * 5", "UTC", "2024-01-01T00:00:00Z"),
            "2024-01-05T00:00:00Z"
        );
        // Both must match when one is a star.
        assert_eq!(
            next("0 0 * 2 1", "UTC", "2024-01-01T00:00:00Z"),
            "2024-02-05T00:00:00Z"
        );
        assert_eq!(
            next("0 0 29 2 *", "UTC", "2024-03-01T00:00:00Z"),
            "2028-02-29T00:00:00Z"
        );
        // 02:30 does not exist on 2024-03-10 in New York: robfig skips that day.
        assert_eq!(
            next("30 2 * * *", "America/New_York", "2024-03-10T05:00:00Z"),
            "2024-03-11T06:30:00Z"
        );
        assert_eq!(
            next("@every 90s", "UTC", "2024-01-01T00:00:00.5Z"),
            "2024-01-01T00:01:30Z"
        );
        let never = Schedule::parse("0 0 31 2 *", TimeZone::UTC).expect("parse");
        assert!(never.next(utc("2024-01-01T00:00:00Z")).is_none());
    }
}
