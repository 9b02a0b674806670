//! Durations written the way Go's `time.ParseDuration` reads them (`15s`, `1m30s`, `500ms`, `-1s`).
//!
//! Kubernetes components take every duration flag in this form, so a drop-in binary must too. Negative
//! values parse (validation, not parsing, rejects them), so `--x=-1s` gets a "must be greater than 0"
//! message rather than a syntax error.

use std::fmt;
use std::time::Duration;

/// A signed duration with nanosecond precision, as Go's `time.Duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration {
    nanos: i128,
}

/// Why a duration string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason}")]
pub struct ParseDurationError {
    input: String,
    reason: &'static str,
}

const NANOS_PER_UNIT: &[(&str, i128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

impl GoDuration {
    /// The zero duration.
    pub const ZERO: GoDuration = GoDuration { nanos: 0 };

    /// A non-negative duration from a [`Duration`].
    pub fn from_std(d: Duration) -> Self {
        GoDuration {
            nanos: d.as_nanos() as i128,
        }
    }

    /// Parses Go's duration syntax: an optional sign, then one or more `<number><unit>` parts with
    /// units `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`; a bare `0` is allowed.
    pub fn parse(input: &str) -> Result<Self, ParseDurationError> {
        let err = |reason| ParseDurationError {
            input: input.to_string(),
            reason,
        };
        let mut s = input;
        let mut negative = false;
        if let Some(rest) = s.strip_prefix('-') {
            negative = true;
            s = rest;
        } else if let Some(rest) = s.strip_prefix('+') {
            s = rest;
        }
        if s == "0" {
            return Ok(GoDuration::ZERO);
        }
        if s.is_empty() {
            return Err(err("empty duration"));
        }
        let mut total: i128 = 0;
        while !s.is_empty() {
            let num_len = s
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(s.len());
            let number = &s[..num_len];
            if number.is_empty() || number == "." || number.matches('.').count() > 1 {
                return Err(err("expected a number"));
            }
            s = &s[num_len..];
            let unit_len = s
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(s.len());
            let unit = &s[..unit_len];
            s = &s[unit_len..];
            if unit.is_empty() {
                return Err(err("missing unit (one of ns, us, ms, s, m, h)"));
            }
            let scale = NANOS_PER_UNIT
                .iter()
                .find(|(u, _)| *u == unit)
                .map(|(_, n)| *n)
                .ok_or_else(|| err("unknown unit (expected one of ns, us, ms, s, m, h)"))?;
            let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
            let int: i128 = if int_part.is_empty() {
                0
            } else {
                int_part.parse().map_err(|_| err("number out of range"))?
            };
            let mut value = int.checked_mul(scale).ok_or_else(|| err("overflow"))?;
            let mut place = scale;
            for digit in frac_part.chars() {
                place /= 10;
                if place == 0 {
                    break;
                }
                // Checked: the whole part may already sit just below `i128::MAX`.
                value = value
                    .checked_add(i128::from(digit.to_digit(10).unwrap_or(0)) * place)
                    .ok_or_else(|| err("overflow"))?;
            }
            total = total.checked_add(value).ok_or_else(|| err("overflow"))?;
            if total > i128::from(i64::MAX) {
                return Err(err("overflow"));
            }
        }
        Ok(GoDuration {
            nanos: if negative { -total } else { total },
        })
    }

    /// True for durations strictly greater than zero.
    pub fn is_positive(&self) -> bool {
        self.nanos > 0
    }

    /// True for negative durations.
    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// The duration as a [`Duration`]; negative durations become zero.
    pub fn to_std(&self) -> Duration {
        if self.nanos <= 0 {
            Duration::ZERO
        } else {
            Duration::from_nanos(self.nanos as u64)
        }
    }
}

impl From<Duration> for GoDuration {
    fn from(d: Duration) -> Self {
        GoDuration::from_std(d)
    }
}

impl std::str::FromStr for GoDuration {
    type Err = ParseDurationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        GoDuration::parse(s)
    }
}

/// Formats like Go's `Duration.String()`: `1h0m0s`, `15s`, `1.5s`, `500ms`, `0s`.
impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.nanos < 0 { "-" } else { "" };
        let n = self.nanos.unsigned_abs();
        if n == 0 {
            return f.write_str("0s");
        }
        fn frac(value: u128, unit: u128) -> String {
            let int = value / unit;
            let rem = value % unit;
            if rem == 0 {
                return int.to_string();
            }
            let width = unit.ilog10() as usize;
            let digits = format!("{rem:0width$}");
            format!("{int}.{}", digits.trim_end_matches('0'))
        }
        if n < 1_000 {
            return write!(f, "{sign}{n}ns");
        }
        if n < 1_000_000 {
            return write!(f, "{sign}{}\u{b5}s", frac(n, 1_000));
        }
        if n < 1_000_000_000 {
            return write!(f, "{sign}{}ms", frac(n, 1_000_000));
        }
        let hours = n / 3_600_000_000_000;
        let rem = n % 3_600_000_000_000;
        let minutes = rem / 60_000_000_000;
        let secs = rem % 60_000_000_000;
        let secs = frac(secs, 1_000_000_000);
        if hours > 0 {
            write!(f, "{sign}{hours}h{minutes}m{secs}s")
        } else if minutes > 0 {
            write!(f, "{sign}{minutes}m{secs}s")
        } else {
            write!(f, "{sign}{secs}s")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> GoDuration {
        GoDuration::parse(s).unwrap()
    }

    #[test]
    fn parses_go_syntax() {
        assert_eq!(d("15s").to_std(), Duration::from_secs(15));
        assert_eq!(d("1m30s").to_std(), Duration::from_secs(90));
        assert_eq!(d("500ms").to_std(), Duration::from_millis(500));
        assert_eq!(d("1.5s").to_std(), Duration::from_millis(1500));
        assert_eq!(d("2h").to_std(), Duration::from_secs(7200));
        assert_eq!(d("10us").to_std(), Duration::from_micros(10));
        assert_eq!(d("10µs").to_std(), Duration::from_micros(10));
        assert_eq!(d("0"), GoDuration::ZERO);
        assert!(d("-1s").is_negative());
        assert_eq!(d("-1s").to_std(), Duration::ZERO);
        assert_eq!(d(".5s").to_std(), Duration::from_millis(500));
    }

    #[test]
    fn rejects_bad_syntax() {
        for bad in ["", "15", "s", "1x", "1..5s", "-", "abc", "1s2"] {
            assert!(GoDuration::parse(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(d("15s").to_string(), "15s");
        assert_eq!(d("2m").to_string(), "2m0s");
        assert_eq!(d("1h").to_string(), "1h0m0s");
        assert_eq!(d("1000s").to_string(), "16m40s");
        assert_eq!(d("5ms").to_string(), "5ms");
        assert_eq!(d("1.5s").to_string(), "1.5s");
        assert_eq!(d("0").to_string(), "0s");
        assert_eq!(d("-1s").to_string(), "-1s");
        assert_eq!(d("10m").to_string(), "10m0s");
    }
}
