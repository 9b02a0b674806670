//! Kubernetes resource quantities as the cluster status needs them: parse, add, and print in
//! the canonical form Kubernetes (`resource.Quantity.String()`) prints, so summaries read the same
//! as Karmada's.

use std::fmt;

/// How a quantity is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Powers of ten: `m`, ``, `k`, `M`, `G`, `T`, `P`, `E`.
    DecimalSi,
    /// Powers of two: `Ki`, `Mi`, `Gi`, `Ti`, `Pi`, `Ei`.
    BinarySi,
}

/// A quantity held exactly in thousandths ("milli" units), with its print format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quantity {
    /// The value times 1000.
    pub milli: i128,
    /// The print format.
    pub format: Format,
}

/// A quantity string that is not a valid Kubernetes quantity.
#[derive(Debug, thiserror::Error)]
#[error("invalid quantity {0:?}")]
pub struct ParseError(pub String);

const BINARY: [(&str, u32); 6] = [
    ("Ki", 10),
    ("Mi", 20),
    ("Gi", 30),
    ("Ti", 40),
    ("Pi", 50),
    ("Ei", 60),
];
const DECIMAL: [(&str, i32); 8] = [
    ("m", -3),
    ("", 0),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

impl Quantity {
    /// A quantity of `milli` thousandths in `format`.
    pub fn from_milli(milli: i128, format: Format) -> Self {
        Quantity { milli, format }
    }

    /// A whole-number quantity.
    pub fn from_value(value: i128, format: Format) -> Self {
        Quantity {
            milli: value.saturating_mul(1000),
            format,
        }
    }

    /// Parses `text` (e.g. `100m`, `2`, `1.5Gi`, `1e3`). Values finer than a thousandth are
    /// rounded up, as Kubernetes does for milli values.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let err = || ParseError(text.to_string());
        let s = text.trim();
        let num_end = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
            .unwrap_or(s.len());
        let (num, suffix) = s.split_at(num_end);
        if num.is_empty() {
            return Err(err());
        }
        let (negative, digits) = match num.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, num.strip_prefix('+').unwrap_or(num)),
        };
        let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(err());
        }
        if !int_part.chars().all(|c| c.is_ascii_digit())
            || !frac_part.chars().all(|c| c.is_ascii_digit())
        {
            return Err(err());
        }
        // mantissa = int_part.frac_part as an integer over 10^frac_len
        let mantissa: i128 = format!("{int_part}{frac_part}")
            .trim_start_matches('0')
            .parse::<i128>()
            .or_else(|e| {
                if format!("{int_part}{frac_part}").chars().all(|c| c == '0') {
                    Ok(0)
                } else {
                    Err(e)
                }
            })
            .map_err(|_| err())?;
        let frac_len = frac_part.len() as i32;
        let (format, scale_num, scale_exp10): (Format, i128, i32) =
            if let Some((_, shift)) = BINARY.iter().find(|(s, _)| *s == suffix) {
                (Format::BinarySi, 1i128 << shift, 0)
            } else if let Some((_, exp)) = DECIMAL.iter().find(|(s, _)| *s == suffix) {
                (Format::DecimalSi, 1, *exp)
            } else if let Some(exp) = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))
                .and_then(|e| e.parse::<i32>().ok())
            {
                (Format::DecimalSi, 1, exp)
            } else {
                return Err(err());
            };
        // milli = mantissa * scale_num * 10^(scale_exp10 + 3 - frac_len), rounded up.
        let exp = scale_exp10 + 3 - frac_len;
        let base = mantissa.checked_mul(scale_num).ok_or_else(err)?;
        let milli = if exp >= 0 {
            base.checked_mul(10i128.checked_pow(exp as u32).ok_or_else(err)?)
                .ok_or_else(err)?
        } else {
            let div = 10i128.checked_pow((-exp) as u32).ok_or_else(err)?;
            (base + div - 1) / div
        };
        Ok(Quantity {
            milli: if negative { -milli } else { milli },
            format,
        })
    }

    /// The value rounded up to a whole number (Kubernetes' `Value()`).
    pub fn value(&self) -> i128 {
        if self.milli >= 0 {
            (self.milli + 999) / 1000
        } else {
            self.milli / 1000
        }
    }

    /// The value as a float (Kubernetes' `AsApproximateFloat64()`).
    pub fn as_f64(&self) -> f64 {
        self.milli as f64 / 1000.0
    }

    /// Adds `other`, keeping this quantity's format.
    pub fn add(&mut self, other: &Quantity) {
        self.milli = self.milli.saturating_add(other.milli);
    }

    /// The k8s-openapi form of this quantity.
    pub fn to_k8s(&self) -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
        k8s_openapi::apimachinery::pkg::api::resource::Quantity(self.to_string())
    }
}

fn decimal(milli: i128) -> String {
    let negative = milli < 0;
    let mut m = milli.unsigned_abs();
    if m == 0 {
        return "0".to_string();
    }
    // Largest exponent (multiple of 3, from milli up to exa) that keeps the mantissa whole.
    let mut idx = 0;
    while idx + 1 < DECIMAL.len() && m.is_multiple_of(1000) {
        m /= 1000;
        idx += 1;
    }
    format!("{}{m}{}", if negative { "-" } else { "" }, DECIMAL[idx].0)
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.format {
            Format::DecimalSi => f.write_str(&decimal(self.milli)),
            Format::BinarySi => {
                // Small or fractional values print in decimal, as Kubernetes does.
                if self.milli % 1000 != 0 || self.milli.abs() < 1024 * 1000 {
                    return f.write_str(&decimal(self.milli));
                }
                let v = self.milli / 1000;
                let mut best: Option<(&str, i128)> = None;
                for (suffix, shift) in BINARY {
                    let unit = 1i128 << shift;
                    if v % unit == 0 {
                        best = Some((suffix, v / unit));
                    }
                }
                match best {
                    Some((suffix, n)) => write!(f, "{n}{suffix}"),
                    None => f.write_str(&decimal(self.milli)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(s: &str) -> String {
        Quantity::parse(s).unwrap().to_string()
    }

    #[test]
    fn parses_and_prints_canonically() {
        assert_eq!(rt("100m"), "100m");
        assert_eq!(rt("1000m"), "1");
        assert_eq!(rt("1.5"), "1500m");
        assert_eq!(rt("2000"), "2k");
        assert_eq!(rt("1500"), "1500");
        assert_eq!(rt("1Gi"), "1Gi");
        assert_eq!(rt("1024Mi"), "1Gi");
        assert_eq!(rt("1536Mi"), "1536Mi");
        assert_eq!(rt("110"), "110");
        assert_eq!(rt("0"), "0");
        assert_eq!(rt("1e3"), "1k");
        assert_eq!(Quantity::parse("4Gi").unwrap().value(), 4 << 30);
        assert!(Quantity::parse("abc").is_err());
        assert!(Quantity::parse("1Xi").is_err());
    }

    #[test]
    fn adds_in_the_first_format() {
        let mut a = Quantity::parse("32Gi").unwrap();
        a.add(&Quantity::parse("32Gi").unwrap());
        assert_eq!(a.to_string(), "64Gi");
        let mut c = Quantity::parse("4").unwrap();
        c.add(&Quantity::parse("500m").unwrap());
        assert_eq!(c.to_string(), "4500m");
    }
}
