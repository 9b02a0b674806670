//! Kubernetes resource quantities: parsing (exact, rounded up below one nano-unit as Kubernetes does)
//! and the canonical string forms apimachinery prints for the values Karmada computes.

/// Why a quantity string is invalid.
pub(crate) type QuantityError = &'static str;

/// A parsed quantity, in nano-units (1e-9), rounded away from zero below that precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Quantity {
    nanos: i128,
}

const NANOS_PER_UNIT: i128 = 1_000_000_000;
const NANOS_PER_MILLI: i128 = 1_000_000;
/// More significant digits than any real quantity has; keeps the arithmetic inside `i128`.
const MAX_DIGITS: usize = 30;

impl Quantity {
    /// Parses a quantity such as `100m`, `1.5Gi`, `2e3` or `+4`.
    pub(crate) fn parse(text: &str) -> Result<Self, QuantityError> {
        let (negative, rest) = match text.as_bytes().first() {
            Some(b'+') => (false, &text[1..]),
            Some(b'-') => (true, &text[1..]),
            Some(_) => (false, text),
            None => return Err("empty quantity"),
        };
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_len);
        let (int_part, frac_part) = match number.split_once('.') {
            Some((i, f)) => (i, f),
            None => (number, ""),
        };
        if frac_part.contains('.') {
            return Err("more than one decimal point");
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err("no digits");
        }
        let (binary_power, decimal_exponent) = parse_suffix(suffix)?;

        let digits = format!("{int_part}{frac_part}");
        let digits = digits.trim_start_matches('0');
        if digits.len() > MAX_DIGITS {
            return Err("too many digits");
        }
        let mantissa: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| "invalid digits")?
        };
        if mantissa == 0 {
            return Ok(Self { nanos: 0 });
        }
        let frac_len = i64::try_from(frac_part.len()).map_err(|_| "too many digits")?;
        let scaled = mantissa
            .checked_mul(1_i128 << (10 * binary_power))
            .ok_or("quantity too large")?;
        // value = scaled * 10^(decimal_exponent - frac_len); in nanos add 9 to the exponent.
        let exponent = decimal_exponent - frac_len + 9;
        let nanos = if exponent >= 0 {
            let factor = u32::try_from(exponent)
                .ok()
                .and_then(|e| 10_i128.checked_pow(e))
                .ok_or("quantity too large")?;
            scaled.checked_mul(factor).ok_or("quantity too large")?
        } else {
            match u32::try_from(-exponent)
                .ok()
                .and_then(|e| 10_i128.checked_pow(e))
            {
                Some(divisor) => ceil_div(scaled, divisor),
                // Far below a nano-unit: rounds up to the smallest unit.
                None => 1,
            }
        };
        Ok(Self {
            nanos: if negative { -nanos } else { nanos },
        })
    }

    /// The value in whole units, rounded away from zero (apimachinery's `Value()`), saturating.
    pub(crate) fn value(self) -> i64 {
        saturate(round_away(self.nanos, NANOS_PER_UNIT))
    }

    /// The value in thousandths, rounded away from zero (apimachinery's `MilliValue()`), saturating.
    pub(crate) fn milli_value(self) -> i64 {
        saturate(round_away(self.nanos, NANOS_PER_MILLI))
    }
}

fn parse_suffix(suffix: &str) -> Result<(u32, i64), QuantityError> {
    let known = match suffix {
        "" => Some((0, 0)),
        "Ki" => Some((1, 0)),
        "Mi" => Some((2, 0)),
        "Gi" => Some((3, 0)),
        "Ti" => Some((4, 0)),
        "Pi" => Some((5, 0)),
        "Ei" => Some((6, 0)),
        "n" => Some((0, -9)),
        "u" => Some((0, -6)),
        "m" => Some((0, -3)),
        "k" => Some((0, 3)),
        "M" => Some((0, 6)),
        "G" => Some((0, 9)),
        "T" => Some((0, 12)),
        "P" => Some((0, 15)),
        "E" => Some((0, 18)),
        _ => None,
    };
    if let Some(found) = known {
        return Ok(found);
    }
    let exponent = suffix
        .strip_prefix('e')
        .or_else(|| suffix.strip_prefix('E'))
        .ok_or("unknown suffix")?;
    let unsigned = exponent
        .strip_prefix('+')
        .or_else(|| exponent.strip_prefix('-'))
        .unwrap_or(exponent);
    if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return Err("invalid exponent");
    }
    let value: i64 = exponent.parse().map_err(|_| "invalid exponent")?;
    if !(-1000..=1000).contains(&value) {
        return Err("exponent out of range");
    }
    Ok((0, value))
}

fn ceil_div(value: i128, divisor: i128) -> i128 {
    // Only called with positive values.
    (value + divisor - 1) / divisor
}

fn round_away(value: i128, unit: i128) -> i128 {
    if value >= 0 {
        ceil_div(value, unit)
    } else {
        -ceil_div(-value, unit)
    }
}

fn saturate(value: i128) -> i64 {
    i64::try_from(value).unwrap_or(if value < 0 { i64::MIN } else { i64::MAX })
}

/// Canonical decimal form (apimachinery `DecimalSI`) of `mantissa * 10^exponent`.
pub(crate) fn format_decimal_si(mantissa: i64, exponent: i32) -> String {
    let mut amount = i128::from(mantissa);
    let mut exponent = exponent;
    if amount == 0 {
        return "0".to_owned();
    }
    while amount.abs() >= 10 && amount % 10 == 0 {
        amount /= 10;
        exponent += 1;
    }
    match exponent.rem_euclid(3) {
        1 => {
            amount *= 10;
            exponent -= 1;
        }
        2 => {
            amount *= 100;
            exponent -= 2;
        }
        _ => {}
    }
    let suffix = match exponent {
        -9 => "n".to_owned(),
        -6 => "u".to_owned(),
        -3 => "m".to_owned(),
        0 => String::new(),
        3 => "k".to_owned(),
        6 => "M".to_owned(),
        9 => "G".to_owned(),
        12 => "T".to_owned(),
        15 => "P".to_owned(),
        18 => "E".to_owned(),
        other => format!("e{other}"),
    };
    format!("{amount}{suffix}")
}

/// Canonical binary form (apimachinery `BinarySI`) of an integer amount.
pub(crate) fn format_binary_si(value: i64) -> String {
    if value > -1024 && value < 1024 {
        return format_decimal_si(value, 0);
    }
    const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut amount = i128::from(value);
    let mut power = 0;
    while power < SUFFIXES.len() - 1 && amount.abs() >= 1024 && amount % 1024 == 0 {
        amount /= 1024;
        power += 1;
    }
    format!("{amount}{}", SUFFIXES[power])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn parses_every_suffix_kind() {
        assert_eq!(q("100m").milli_value(), 100);
        assert_eq!(q("1").milli_value(), 1000);
        assert_eq!(q("1.5").milli_value(), 1500);
        assert_eq!(q("0.1").milli_value(), 100);
        assert_eq!(q(".5").milli_value(), 500);
        assert_eq!(q("1.").value(), 1);
        assert_eq!(q("128Mi").value(), 134_217_728);
        assert_eq!(q("1Gi").value(), 1 << 30);
        assert_eq!(q("1G").value(), 1_000_000_000);
        assert_eq!(q("2k").value(), 2000);
        assert_eq!(q("1e3").value(), 1000);
        assert_eq!(q("1E3").value(), 1000);
        assert_eq!(q("1E").value(), 1_000_000_000_000_000_000);
        assert_eq!(q("5e-1").milli_value(), 500);
        assert_eq!(q("+2").value(), 2);
        assert_eq!(q("-2").value(), -2);
        assert_eq!(q("250u").milli_value(), 1);
        assert_eq!(q("1n").milli_value(), 1);
        assert_eq!(q("0").value(), 0);
        assert_eq!(q("000.000").value(), 0);
    }

    #[test]
    fn rounds_up_below_the_unit() {
        assert_eq!(q("0.1m").milli_value(), 1);
        assert_eq!(q("1.0001").value(), 2);
        assert_eq!(q("1e-30").value(), 1);
        assert_eq!(q("1500m").value(), 2);
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "", "abc", "1.2.3", "1Qi", "1e", "1e+", "m", ".", "1 ", "1e99999", "--1",
        ] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?} should not parse");
        }
        assert!(Quantity::parse(&"9".repeat(40)).is_err());
    }

    #[test]
    fn saturates_instead_of_overflowing() {
        assert_eq!(q("100E").value(), i64::MAX);
        assert_eq!(q("-100E").milli_value(), i64::MIN);
    }

    #[test]
    fn decimal_formatting_matches_apimachinery() {
        assert_eq!(format_decimal_si(1500, -3), "1500m");
        assert_eq!(format_decimal_si(2000, -3), "2");
        assert_eq!(format_decimal_si(100, -3), "100m");
        assert_eq!(format_decimal_si(2500, -3), "2500m");
        assert_eq!(format_decimal_si(1_000_000, -3), "1k");
        assert_eq!(format_decimal_si(110, 0), "110");
        assert_eq!(format_decimal_si(1000, 0), "1k");
        assert_eq!(format_decimal_si(0, 0), "0");
        assert_eq!(format_decimal_si(i64::MAX, 0), "9223372036854775807");
    }

    #[test]
    fn binary_formatting_matches_apimachinery() {
        assert_eq!(format_binary_si(134_217_728), "128Mi");
        assert_eq!(format_binary_si(1 << 30), "1Gi");
        assert_eq!(format_binary_si(1_000_000_000), "1000000000");
        assert_eq!(format_binary_si(1500), "1500");
        assert_eq!(format_binary_si(512), "512");
        assert_eq!(format_binary_si(1000), "1k");
        assert_eq!(format_binary_si(3 << 10), "3Ki");
        assert_eq!(format_binary_si(1 << 62), "4Ei");
    }

    #[test]
    fn formatting_round_trips_through_parsing() {
        for v in [
            1_i64,
            7,
            999,
            1000,
            1024,
            1536,
            123_456_789,
            5 << 40,
            10_i64.pow(15),
        ] {
            assert_eq!(q(&format_binary_si(v)).value(), v, "binary {v}");
            assert_eq!(q(&format_decimal_si(v, 0)).value(), v, "decimal {v}");
            assert_eq!(q(&format_decimal_si(v, -3)).milli_value(), v, "milli {v}");
        }
    }
}
