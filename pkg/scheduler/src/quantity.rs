//! Kubernetes resource quantities (`100m`, `1.5Gi`, `2e3`), held exactly in nano-units so that
//! sums, differences and the rounding of `Value()` / `MilliValue()` match apimachinery.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// A parsed quantity, in units of 10⁻⁹ (saturating at the `i128` range). Precision below a
/// nano-unit is rounded up, as apimachinery does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Amount(i128);

const NANO: i128 = 1_000_000_000;

impl Amount {
    /// Zero.
    pub const ZERO: Self = Self(0);

    /// Parses a quantity string; `None` when it is not a valid Kubernetes quantity.
    pub fn parse(text: &str) -> Option<Self> {
        let s = text.trim();
        let (negative, s) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let number_len = s
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        let (number, suffix) = s.split_at(number_len);
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
            return None;
        }
        let (exp10, exp2): (i64, u32) = match suffix {
            "" => (0, 0),
            "n" => (-9, 0),
            "u" => (-6, 0),
            "m" => (-3, 0),
            "k" => (3, 0),
            "M" => (6, 0),
            "G" => (9, 0),
            "T" => (12, 0),
            "P" => (15, 0),
            "E" => (18, 0),
            "Ki" => (0, 10),
            "Mi" => (0, 20),
            "Gi" => (0, 30),
            "Ti" => (0, 40),
            "Pi" => (0, 50),
            "Ei" => (0, 60),
            other => {
                let exponent = other.strip_prefix(['e', 'E'])?;
                let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                (exponent.parse::<i64>().ok()?, 0)
            }
        };
        // mantissa = int_part.frac_part = digits × 10^-scale
        let digits = format!("{int_part}{frac_part}");
        let digits = digits.trim_start_matches('0');
        let scale = i64::try_from(frac_part.len()).ok()?;
        let mut value: i128 = 0;
        let mut extra_exp: i64 = 0;
        for b in digits.bytes() {
            match value
                .checked_mul(10)
                .and_then(|v| v.checked_add(i128::from(b - b'0')))
            {
                Some(v) => value = v,
                // Too many significant digits: keep the magnitude, round up below it.
                None => {
                    extra_exp += 1;
                }
            }
        }
        let mut value = value.checked_mul(1_i128.checked_shl(exp2)?)?;
        let power = exp10 + 9 - scale + extra_exp;
        if power >= 0 {
            for _ in 0..power {
                value = value.checked_mul(10).unwrap_or(i128::MAX);
                if value == i128::MAX {
                    break;
                }
            }
        } else {
            let mut divisor: i128 = 1;
            for _ in 0..(-power) {
                match divisor.checked_mul(10) {
                    Some(d) => divisor = d,
                    None => {
                        // Far below a nano-unit: anything non-zero rounds up to one.
                        value = i128::from(value > 0);
                        divisor = 1;
                        break;
                    }
                }
            }
            value = ceil_div(value, divisor);
        }
        Some(Self(if negative { -value } else { value }))
    }

    /// Parses a [`Quantity`]; invalid text yields `None`.
    pub fn from_quantity(q: &Quantity) -> Option<Self> {
        Self::parse(&q.0)
    }

    /// apimachinery's `Value()`: the value rounded up to an integer.
    pub fn value(self) -> i64 {
        saturate(ceil_div(self.0, NANO))
    }

    /// apimachinery's `MilliValue()`: the value in thousandths, rounded up.
    pub fn milli_value(self) -> i64 {
        saturate(ceil_div(self.0, NANO / 1000))
    }

    /// `self - other`, saturating.
    pub fn saturating_sub(self, other: Self) -> Self {
        Self(self.0.saturating_sub(other.0))
    }
}

fn ceil_div(value: i128, divisor: i128) -> i128 {
    let quotient = value / divisor;
    if value % divisor > 0 {
        quotient + 1
    } else {
        quotient
    }
}

fn saturate(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v > 0 { i64::MAX } else { i64::MIN })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amount(s: &str) -> Amount {
        Amount::parse(s).unwrap()
    }

    #[test]
    fn parses_suffixes() {
        assert_eq!(amount("1").value(), 1);
        assert_eq!(amount("100m").milli_value(), 100);
        assert_eq!(amount("100m").value(), 1);
        assert_eq!(amount("1.5").milli_value(), 1500);
        assert_eq!(amount("1Ki").value(), 1024);
        assert_eq!(amount("1.5Gi").value(), 1_610_612_736);
        assert_eq!(amount("2e3").value(), 2000);
        assert_eq!(amount("2E3").value(), 2000);
        assert_eq!(amount("1E").value(), 1_000_000_000_000_000_000);
        assert_eq!(amount("5e-3").milli_value(), 5);
        assert_eq!(amount("1n").value(), 1);
        assert_eq!(amount("1n").milli_value(), 1);
        assert_eq!(amount(".5").milli_value(), 500);
        assert_eq!(amount("-1").value(), -1);
        assert_eq!(amount("0").value(), 0);
        assert_eq!(amount("1e-12").value(), 1);
        assert_eq!(amount("110").value(), 110);
    }

    #[test]
    fn rejects_invalid() {
        for bad in ["", "abc", "1x", "1.2.3", ".", "1e", "1ee3", "Ki", "1 Ki"] {
            assert!(Amount::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn arithmetic_rounds_like_apimachinery() {
        let available = amount("4").saturating_sub(amount("3500m"));
        assert_eq!(available.value(), 1);
        assert_eq!(available.milli_value(), 500);
        let negative = amount("1").saturating_sub(amount("2"));
        assert!(negative.value() <= 0);
        assert_eq!(
            amount("99999999999999999999999999999999999999999").value(),
            i64::MAX
        );
    }
}
