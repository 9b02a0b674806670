//! Kubernetes resource quantities (`100m`, `1.5Gi`, `2e3`) as apimachinery's `resource.Quantity`
//! parses, rounds, adds and prints them.
//!
//! A [`Quantity`] holds its value exactly in nano-units (10⁻⁹) in an `i128`, which is the precision
//! apimachinery keeps after parsing (finer digits round up to the next nano-unit), together with
//! its [`Format`]. Parsing follows `ParseQuantity` (the same grammar, suffixes, rounding, the
//! `BinarySI` cap at 2⁶³−1 and the switch of tiny binary values to `DecimalSI`); `Display`
//! prints apimachinery's canonical `String()` form; [`Quantity::value`] and
//! [`Quantity::milli_value`] round away from zero like `Value()` and `MilliValue()`.
//!
//! Where apimachinery's arbitrary-precision decimal differs, the difference is deliberate and
//! only reachable with values no cluster reports:
//! - magnitudes above about 10²⁹ units saturate instead of being kept exactly, and `value()` /
//!   `milli_value()` saturate at the `i64` range where Go returns a wrapped number;
//! - digits after the 38th significant one only round the value up (exact for decimal suffixes,
//!   at most one nano-unit off for a binary suffix with more than 20 significant digits);
//! - a `DecimalSI` value of 10²¹ or more prints with the `E` suffix (`1000E`) where Go prints the
//!   bare mantissa without a suffix;
//! - apimachinery keeps the text it parsed when it is already canonical, so `+1` or `1E3` print
//!   as written there; `Display` always prints the computed canonical form (`1`, `1e3`).
//!
//! Why not the `kube_quantity` crate: checked against the cases of apimachinery's own
//! `quantity_test.go` it does not round to nano-units (`3.001n` stays `3.001n`), does not
//! canonicalize (`1024Mi` prints `1024Mi`, `1000M` prints `1000M`), parses through `f64` (losing
//! digits of values such as `9223372036854775807Ki`), has no `DecimalExponent` format, rejects
//! `9Ei` and `12E`, and has no `Value()`/`MilliValue()` rounding; 14 of 29 sampled cases failed.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

/// How a quantity is printed (apimachinery's `Format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Powers of ten as an exponent: `12e6`.
    DecimalExponent,
    /// Powers of two: `12Mi` (12 × 2²⁰).
    BinarySi,
    /// Powers of ten with SI suffixes: `12M` (12 × 10⁶).
    DecimalSi,
}

/// Why a string is not a Kubernetes quantity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string is empty.
    #[error("empty quantity")]
    Empty,
    /// Neither a number nor a suffix starts the string.
    #[error("no digits")]
    NoDigits,
    /// A second decimal point follows the number.
    #[error("more than one decimal point")]
    DecimalPoint,
    /// The text after the number is not a quantity suffix.
    #[error("unknown suffix")]
    Suffix,
    /// An `e`/`E` exponent that is not an integer.
    #[error("invalid exponent")]
    Exponent,
}

/// A Kubernetes resource quantity, exact to a nano-unit, with the format it prints in.
///
/// Equality compares value and format; [`Quantity::cmp_value`] compares values only, as
/// apimachinery's `Cmp` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

const NANO: u128 = 1_000_000_000;
/// The largest magnitude held; larger values saturate here.
const MAX_NANOS: u128 = i128::MAX as u128;
/// apimachinery caps `BinarySI` quantities at the largest `int64`.
const MAX_BINARY_NANOS: u128 = (i64::MAX as u128) * NANO;
/// Significant digits accumulated exactly (10³⁸ < 2¹²⁸).
const MAX_DIGITS: usize = 38;
/// Suffix characters apimachinery's scanner accepts before an optional signed exponent.
const SUFFIX_CHARS: &[u8] = b"eEinumkKMGTP";
const DECIMAL_SUFFIXES: [(&str, i32); 10] = [
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("", 0),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];
const BINARY_SUFFIXES: [(&str, u32); 7] = [
    ("", 0),
    ("Ki", 10),
    ("Mi", 20),
    ("Gi", 30),
    ("Ti", 40),
    ("Pi", 50),
    ("Ei", 60),
];

/// The parts of a quantity string, as apimachinery's `parseQuantityString` splits it.
struct Parts<'a> {
    negative: bool,
    /// Integer digits without leading zeros ("0" when none).
    num: &'a str,
    /// Fraction digits.
    denom: &'a str,
    suffix: &'a str,
}

fn split(text: &str) -> Result<Parts<'_>, QuantityError> {
    let bytes = text.as_bytes();
    let end = bytes.len();
    let mut pos = 0;
    let mut negative = false;
    match bytes.first() {
        Some(b'-') => {
            negative = true;
            pos = 1;
        }
        Some(b'+') => pos = 1,
        _ => {}
    }
    let zero = Parts {
        negative,
        num: "0",
        denom: "",
        suffix: "",
    };
    while pos < end && bytes[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(zero);
    }
    let num_start = pos;
    while pos < end && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    let mut num = &text[num_start..pos];
    if num.is_empty() {
        num = "0";
    }
    let digits_seen =
        pos > num_start || num_start > usize::from(bytes[0] == b'-' || bytes[0] == b'+');
    let mut denom = "";
    let mut point = false;
    if pos < end && bytes[pos] == b'.' {
        point = true;
        pos += 1;
        let denom_start = pos;
        while pos < end && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &text[denom_start..pos];
    }
    let suffix_start = pos;
    while pos < end && SUFFIX_CHARS.contains(&bytes[pos]) {
        pos += 1;
    }
    if pos < end && (bytes[pos] == b'-' || bytes[pos] == b'+') {
        pos += 1;
    }
    while pos < end && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(if bytes[pos] == b'.' {
            QuantityError::DecimalPoint
        } else if !digits_seen && !point && suffix_start == pos {
            QuantityError::NoDigits
        } else {
            QuantityError::Suffix
        });
    }
    Ok(Parts {
        negative,
        num,
        denom,
        suffix: &text[suffix_start..],
    })
}

/// What a suffix means: a power of ten or of two, and the format it implies.
enum Scale {
    Decimal(i64, Format),
    Binary(u32),
}

fn interpret(suffix: &str) -> Result<Scale, QuantityError> {
    if let Some((_, e)) = DECIMAL_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        return Ok(Scale::Decimal(i64::from(*e), Format::DecimalSi));
    }
    if let Some((_, b)) = BINARY_SUFFIXES[1..].iter().find(|(s, _)| *s == suffix) {
        return Ok(Scale::Binary(*b));
    }
    let exponent = suffix
        .strip_prefix(['e', 'E'])
        .filter(|e| !e.is_empty())
        .ok_or(QuantityError::Suffix)?;
    let value: i64 = exponent.parse().map_err(|_| QuantityError::Exponent)?;
    Ok(Scale::Decimal(value, Format::DecimalExponent))
}

/// `ceil(digits × 2^binary × 10^exponent)` for a digit string without leading zeros, saturating
/// at [`MAX_NANOS`].
fn magnitude(digits: &str, binary: u32, exponent: i64) -> u128 {
    let trimmed = digits.trim_end_matches('0');
    if trimmed.is_empty() {
        return 0;
    }
    let mut exponent = exponent.saturating_add(to_i64(digits.len() - trimmed.len()));
    let kept = &trimmed[..trimmed.len().min(MAX_DIGITS)];
    // Digits beyond the kept ones end in a non-zero digit (trailing zeros are gone), so they
    // only round up.
    let mut sticky = kept.len() < trimmed.len();
    exponent = exponent.saturating_add(to_i64(trimmed.len() - kept.len()));
    let mut acc = kept
        .bytes()
        .fold(0_u128, |acc, b| acc * 10 + u128::from(b - b'0'));
    if binary > 0 {
        while acc > (u128::MAX >> binary) {
            if exponent >= 0 {
                return MAX_NANOS;
            }
            sticky |= acc % 10 != 0;
            acc /= 10;
            exponent += 1;
        }
        acc <<= binary;
    }
    let value = if exponent >= 0 {
        u32::try_from(exponent)
            .ok()
            .and_then(|e| 10_u128.checked_pow(e))
            .and_then(|f| acc.checked_mul(f))
            .unwrap_or(MAX_NANOS)
    } else {
        match u32::try_from(-exponent)
            .ok()
            .and_then(|e| 10_u128.checked_pow(e))
        {
            Some(divisor) => acc / divisor + u128::from(acc % divisor != 0 || sticky),
            // Far below a nano-unit: rounds up to one.
            None => 1,
        }
    };
    value.min(MAX_NANOS)
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Quantity {
    /// Zero in `format`.
    pub const fn zero(format: Format) -> Self {
        Quantity { nanos: 0, format }
    }

    /// Parses a quantity string as apimachinery's `ParseQuantity` does: no surrounding
    /// whitespace, values finer than a nano-unit rounded up (away from zero).
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        if text.is_empty() {
            return Err(QuantityError::Empty);
        }
        let parts = split(text)?;
        let (binary, exponent, mut format) = match interpret(parts.suffix)? {
            Scale::Decimal(e, f) => (0, e, f),
            Scale::Binary(b) => (b, 0, Format::BinarySi),
        };
        let digits = format!("{}{}", parts.num, parts.denom);
        let exponent = exponent
            .saturating_sub(to_i64(parts.denom.len()))
            .saturating_add(9);
        let mut nanos = magnitude(digits.trim_start_matches('0'), binary, exponent);
        if format == Format::BinarySi {
            nanos = nanos.min(MAX_BINARY_NANOS);
            if nanos > 0 && nanos < NANO {
                format = Format::DecimalSi;
            }
        }
        let nanos = i128::try_from(nanos).unwrap_or(i128::MAX);
        Ok(Quantity {
            nanos: if parts.negative { -nanos } else { nanos },
            format,
        })
    }

    /// Parses a quantity read from JSON: apimachinery's decoder trims surrounding whitespace
    /// before [`Quantity::parse`].
    pub fn from_k8s(q: &K8sQuantity) -> Result<Self, QuantityError> {
        Self::parse(q.0.trim())
    }

    /// `value × 10^exponent` in `format`; finer than a nano-unit rounds up (away from zero).
    pub fn from_scaled(value: i128, exponent: i32, format: Format) -> Self {
        let negative = value < 0;
        let nanos = magnitude(
            &value.unsigned_abs().to_string(),
            0,
            i64::from(exponent) + 9,
        );
        let nanos = i128::try_from(nanos).unwrap_or(i128::MAX);
        Quantity {
            nanos: if negative { -nanos } else { nanos },
            format,
        }
    }

    /// A whole number of units (apimachinery's `NewQuantity`).
    pub fn from_value(value: i128, format: Format) -> Self {
        Self::from_scaled(value, 0, format)
    }

    /// A number of thousandths (apimachinery's `NewMilliQuantity`).
    pub fn from_milli(milli: i128, format: Format) -> Self {
        Self::from_scaled(milli, -3, format)
    }

    /// The print format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// The value in units of `10^exponent`, rounded away from zero (apimachinery's
    /// `ScaledValue`), saturating at the `i64` range.
    pub fn scaled_value(&self, exponent: i32) -> i64 {
        let shift = i64::from(exponent) + 9;
        let scaled = if shift >= 0 {
            match u32::try_from(shift)
                .ok()
                .and_then(|s| 10_i128.checked_pow(s))
            {
                Some(unit) => {
                    let (q, r) = (self.nanos / unit, self.nanos % unit);
                    q + r.signum()
                }
                None => self.nanos.signum(),
            }
        } else {
            u32::try_from(-shift)
                .ok()
                .and_then(|s| 10_i128.checked_pow(s))
                .and_then(|f| self.nanos.checked_mul(f))
                .unwrap_or(if self.nanos < 0 { i128::MIN } else { i128::MAX })
        };
        i64::try_from(scaled).unwrap_or(if scaled < 0 { i64::MIN } else { i64::MAX })
    }

    /// The value in whole units, rounded away from zero (apimachinery's `Value()`).
    pub fn value(&self) -> i64 {
        self.scaled_value(0)
    }

    /// The value in thousandths, rounded away from zero (apimachinery's `MilliValue()`).
    pub fn milli_value(&self) -> i64 {
        self.scaled_value(-3)
    }

    /// The value as a float (apimachinery's `AsApproximateFloat64()`).
    pub fn as_approximate_f64(&self) -> f64 {
        let nano = NANO as i128;
        // Whole part and fraction apart, so whole numbers convert exactly when they can.
        (self.nanos / nano) as f64 + (self.nanos % nano) as f64 / NANO as f64
    }

    /// Compares values, ignoring formats (apimachinery's `Cmp`).
    pub fn cmp_value(&self, other: &Quantity) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }

    /// Adds `other` (saturating); a zero quantity takes `other`'s format (apimachinery's `Add`).
    pub fn add(&mut self, other: &Quantity) {
        if self.nanos == 0 {
            self.format = other.format;
        }
        self.nanos = self.nanos.saturating_add(other.nanos);
    }

    /// Subtracts `other` (saturating); a zero quantity takes `other`'s format (apimachinery's
    /// `Sub`).
    pub fn sub(&mut self, other: &Quantity) {
        if self.nanos == 0 {
            self.format = other.format;
        }
        self.nanos = self.nanos.saturating_sub(other.nanos);
    }

    /// Multiplies by `factor` (saturating), keeping the format (apimachinery's `Mul`): e.g. one
    /// replica's request times the replica count.
    pub fn mul(&mut self, factor: i64) {
        self.nanos = self.nanos.saturating_mul(i128::from(factor));
    }

    /// The k8s-openapi form, in canonical notation.
    pub fn to_k8s(&self) -> K8sQuantity {
        K8sQuantity(self.to_string())
    }
}

impl std::ops::Neg for Quantity {
    type Output = Quantity;

    /// The negated quantity, in the same format (apimachinery's `Neg`).
    fn neg(self) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_neg(),
            format: self.format,
        }
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// `mantissa × 10^exponent` with the factors of ten moved into the exponent and the exponent
/// lowered to a multiple of three (apimachinery's `AsCanonicalBytes`).
fn canonical_decimal(nanos: i128) -> (i128, i32) {
    let mut mantissa = nanos;
    let mut exponent: i32 = -9;
    while mantissa % 10 == 0 && mantissa != 0 {
        mantissa /= 10;
        exponent += 1;
    }
    match exponent.rem_euclid(3) {
        1 => {
            mantissa *= 10;
            exponent -= 1;
        }
        2 => {
            mantissa *= 100;
            exponent -= 2;
        }
        _ => {}
    }
    (mantissa, exponent)
}

impl fmt::Display for Quantity {
    /// apimachinery's canonical `String()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        let nano = NANO as i128;
        let magnitude = self.nanos.unsigned_abs();
        let binary =
            self.format == Format::BinarySi && magnitude >= 1024 * NANO && self.nanos % nano == 0;
        if binary {
            let mut amount = self.nanos / nano;
            let mut power = 0;
            while power + 1 < BINARY_SUFFIXES.len() && amount % 1024 == 0 {
                amount /= 1024;
                power += 1;
            }
            return write!(f, "{amount}{}", BINARY_SUFFIXES[power].0);
        }
        let (mut mantissa, mut exponent) = canonical_decimal(self.nanos);
        if self.format == Format::DecimalExponent {
            return if exponent == 0 {
                write!(f, "{mantissa}")
            } else {
                write!(f, "{mantissa}e{exponent}")
            };
        }
        while exponent > 18 {
            mantissa *= 1000;
            exponent -= 3;
        }
        let suffix = DECIMAL_SUFFIXES
            .iter()
            .find(|(_, e)| *e == exponent)
            .map_or("", |(s, _)| *s);
        write!(f, "{mantissa}{suffix}")
    }
}

#[cfg(test)]
mod tests;
