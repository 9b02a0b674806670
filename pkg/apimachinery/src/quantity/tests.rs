//! apimachinery's own quantity cases (`k8s.io/apimachinery/pkg/api/resource/quantity_test.go`),
//! ported as tables: parsing with its rounding and formats, canonical printing, suffix handling,
//! the `BinarySI` cap and the values past `int64`.

use super::*;
use Format::{BinarySi as B, DecimalExponent as X, DecimalSi as D};

/// `mantissa × 10^exponent` in `format`, exactly (the Go tests' `decQuantity`).
fn dec(mantissa: i128, exponent: i32, format: Format) -> Quantity {
    Quantity::from_scaled(mantissa, exponent, format)
}

fn parse(s: &str) -> Quantity {
    Quantity::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

const MAX: i128 = i64::MAX as i128;

/// `TestQuantityParse`: input, value, format.
const PARSE: &[(&str, i128, i32, Format)] = &[
    ("0", 0, 0, D),
    ("0n", 0, 0, D),
    ("0u", 0, 0, D),
    ("0m", 0, 0, D),
    ("0Ki", 0, 0, B),
    ("0k", 0, 0, D),
    ("0Mi", 0, 0, B),
    ("0M", 0, 0, D),
    ("0Gi", 0, 0, B),
    ("0G", 0, 0, D),
    ("0Ti", 0, 0, B),
    ("0T", 0, 0, D),
    ("1", 1, 0, D),
    ("1Ki", 1024, 0, B),
    ("8Ki", 8 * 1024, 0, B),
    ("7Mi", 7 << 20, 0, B),
    ("6Gi", 6 << 30, 0, B),
    ("5Ti", 5 << 40, 0, B),
    ("4Pi", 4 << 50, 0, B),
    ("3Ei", 3 << 60, 0, B),
    ("10Ti", 10 << 40, 0, B),
    ("100Ti", 100 << 40, 0, B),
    ("5n", 5, -9, D),
    ("4u", 4, -6, D),
    ("3m", 3, -3, D),
    ("9", 9, 0, D),
    ("8k", 8, 3, D),
    ("50k", 5, 4, D),
    ("7M", 7, 6, D),
    ("6G", 6, 9, D),
    ("5T", 5, 12, D),
    ("40T", 4, 13, D),
    ("300T", 3, 14, D),
    ("2P", 2, 15, D),
    ("1E", 1, 18, D),
    ("1E-3", 1, -3, X),
    ("1e3", 1, 3, X),
    ("1E6", 1, 6, X),
    ("1e9", 1, 9, X),
    ("1E12", 1, 12, X),
    ("1e15", 1, 15, X),
    ("1E18", 1, 18, X),
    ("1e14", 1, 14, X),
    ("1e13", 1, 13, X),
    ("100.035k", 100_035, 0, D),
    ("0.001", 1, -3, D),
    ("0.0005k", 5, -1, D),
    ("0.005", 5, -3, D),
    ("0.05", 5, -2, D),
    ("0.5", 5, -1, D),
    ("0.00050k", 5, -1, D),
    ("0.00500", 5, -3, D),
    ("0.05000", 5, -2, D),
    ("0.50000", 5, -1, D),
    ("0.5e0", 5, -1, X),
    ("0.5e-1", 5, -2, X),
    ("0.5e-2", 5, -3, X),
    ("10.035M", 10_035, 3, D),
    ("1.2e3", 12, 2, X),
    ("1.3E+6", 13, 5, X),
    ("1.40e9", 14, 8, X),
    ("1.53E12", 153, 10, X),
    ("1.6e15", 16, 14, X),
    ("1.7E18", 17, 17, X),
    ("9.01", 901, -2, D),
    ("8.1k", 81, 2, D),
    ("7.123456M", 7_123_456, 0, D),
    ("6.987654321G", 6_987_654_321, 0, D),
    ("5.444T", 5444, 9, D),
    ("40.1T", 401, 11, D),
    ("300.2T", 3002, 11, D),
    ("2.5P", 25, 14, D),
    ("1.01E", 101, 16, D),
    // Things that saturate or round.
    ("3.001n", 4, -9, D),
    ("1.1E-9", 2, -9, X),
    ("0.0000000001", 1, -9, D),
    ("0.0000000005", 1, -9, D),
    ("0.00000000050", 1, -9, D),
    ("0.5e-9", 1, -9, X),
    ("0.9n", 1, -9, D),
    ("0.00000012345", 124, -9, D),
    ("0.00000012354", 124, -9, D),
    ("9Ei", MAX, 0, B),
    ("9223372036854775807Ki", MAX, 0, B),
    ("12E", 12, 18, D),
    // Fractional binary values.
    ("100.035Ki", 10_243_584, -2, B),
    ("0.5Mi", 512 * 1024, 0, B),
    ("0.05Gi", 536_870_912, -1, B),
    ("0.025Ti", 274_877_906_944, -1, B),
    // Odd spellings.
    ("0.000000000001Ki", 2, -9, D),
    (".001", 1, -3, D),
    (".0001k", 100, -3, D),
    ("1.", 1, 0, D),
    ("1.G", 1, 9, D),
];

#[test]
fn parses_like_apimachinery() {
    for &(input, mantissa, exponent, format) in PARSE {
        let want = dec(mantissa, exponent, format);
        for (text, want) in [
            (input.to_owned(), want),
            (format!("-{input}"), -want),
            (format!("+{input}"), want),
        ] {
            let got = parse(&text);
            assert_eq!(
                got.cmp_value(&want),
                Ordering::Equal,
                "{text}: got {got}, want {want}"
            );
            assert_eq!(got.format(), format, "{text}: format");
        }
    }
}

#[test]
fn rejects_what_apimachinery_rejects() {
    for bad in [
        "",
        "1.1.M",
        "1+1.0M",
        "0.1mi",
        "0.1am",
        "aoeu",
        ".5i",
        "1i",
        "-3.01i",
        "-3.01e-",
        " 1",
        "1 ",
        "Non-Numeric",
        "1e",
        "1Qi",
        "1ki",
        "1m5",
        "1Ee5",
        "1e+",
    ] {
        assert!(Quantity::parse(bad).is_err(), "{bad:?} should not parse");
    }
}

#[test]
fn accepts_what_apimachinery_accepts_without_digits() {
    // apimachinery's scanner reads an absent number as zero.
    for (text, format) in [
        (".", D),
        ("-.", D),
        ("+", D),
        ("m", D),
        ("Ki", B),
        ("e3", X),
    ] {
        let q = parse(text);
        assert!(q.is_zero(), "{text}");
        assert_eq!(q.format(), format, "{text}");
    }
}

/// `TestQuantityString`: value, canonical string, and an alternate spelling of it.
const STRINGS: &[(i128, i32, Format, &str, &str)] = &[
    (1024 * 1024 * 1024, 0, B, "1Gi", "1024Mi"),
    (300 * 1024 * 1024, 0, B, "300Mi", "307200Ki"),
    (6 * 1024, 0, B, "6Ki", ""),
    (1001 * 1024 * 1024 * 1024, 0, B, "1001Gi", "1025024Mi"),
    (1024 * 1024 * 1024 * 1024, 0, B, "1Ti", "1024Gi"),
    (5, 0, B, "5", "5000m"),
    (500, -3, B, "500m", "0.5"),
    (1, 9, D, "1G", "1000M"),
    (1000, 6, D, "1G", "0.001T"),
    (1_000_000, 3, D, "1G", ""),
    (1_000_000_000, 0, D, "1G", ""),
    (1, -3, D, "1m", "1000u"),
    (80, -3, D, "80m", ""),
    (1080, -3, D, "1080m", "1.08"),
    (108, -2, D, "1080m", "1080000000n"),
    (10800, -4, D, "1080m", ""),
    (300, 6, D, "300M", ""),
    (1, 12, D, "1T", ""),
    (1_234_567, 6, D, "1234567M", ""),
    (1_234_567, -3, B, "1234567m", ""),
    (3, 3, D, "3k", ""),
    (1025, 0, B, "1025", ""),
    (0, 0, D, "0", ""),
    (0, 0, B, "0", ""),
    (1, 9, X, "1e9", ".001e12"),
    (1, -3, X, "1e-3", "0.001e0"),
    (1, -9, X, "1e-9", "1000e-12"),
    (80, -3, X, "80e-3", ""),
    (300, 6, X, "300e6", ""),
    (1, 12, X, "1e12", ""),
    (1, 3, X, "1e3", ""),
    (3, 3, X, "3e3", ""),
    (3, 3, D, "3k", ""),
    (0, 0, X, "0", "00"),
    (1, -9, D, "1n", ""),
    (80, -9, D, "80n", ""),
    (1080, -9, D, "1080n", ""),
    (108, -8, D, "1080n", ""),
    (10800, -10, D, "1080n", ""),
    (1, -6, D, "1u", ""),
    (80, -6, D, "80u", ""),
    (1080, -6, D, "1080u", ""),
];

#[test]
fn prints_canonical_forms() {
    for &(mantissa, exponent, format, expect, alternate) in STRINGS {
        let q = dec(mantissa, exponent, format);
        assert_eq!(q.to_string(), expect, "{mantissa}e{exponent} {format:?}");
        assert_eq!(parse(expect).to_string(), expect, "{expect} reparsed");
        if !alternate.is_empty() {
            assert_eq!(
                parse(alternate).to_string(),
                expect,
                "alternate {alternate}"
            );
        }
        if !q.is_zero() {
            assert_eq!((-q).to_string(), format!("-{expect}"), "negated {expect}");
        }
    }
}

/// `TestQuantityParseEmit`: input and canonical output.
const EMIT: &[(&str, &str)] = &[
    ("1Ki", "1Ki"),
    ("1Mi", "1Mi"),
    ("1Gi", "1Gi"),
    ("1024Mi", "1Gi"),
    ("1000M", "1G"),
    (".001Ki", "1024m"),
    (".000001Ki", "1024u"),
    (".000000001Ki", "1024n"),
    (".000000000001Ki", "2n"),
];

#[test]
fn parse_then_print() {
    for &(input, expect) in EMIT {
        assert_eq!(parse(input).to_string(), expect, "{input}");
        assert_eq!(
            parse(&format!("-{input}")).to_string(),
            format!("-{expect}"),
            "-{input}"
        );
    }
    assert_eq!(parse("0").to_string(), "0");
}

/// `TestParseQuantity`: values around and past the `int64` range, as (input, mantissa,
/// exponent, canonical string when it differs from the input).
const WIDE: &[(&str, i128, i32, &str)] = &[
    ("999999999999999999", 999_999_999_999_999_999, 0, ""),
    (
        "999999999999999999.0",
        999_999_999_999_999_999,
        0,
        "999999999999999999",
    ),
    (
        "999999999999999999.1",
        9_999_999_999_999_999_991,
        -1,
        "999999999999999999100m",
    ),
    ("9999999999999999999", 9_999_999_999_999_999_999, 0, ""),
    ("1E", 1, 18, ""),
    ("1000000000000000000", 1, 18, "1E"),
    (
        "9999999999999999999.0",
        9_999_999_999_999_999_999,
        0,
        "9999999999999999999",
    ),
    ("1.0E", 1, 18, "1E"),
    ("1000000000000000000.0", 1, 18, "1E"),
    (
        "9999999999999999999000m",
        9_999_999_999_999_999_999,
        0,
        "9999999999999999999",
    ),
    (
        "9999999999999999999.1",
        99_999_999_999_999_999_991,
        -1,
        "9999999999999999999100m",
    ),
    (
        "1.0000000000000000001E",
        10_000_000_000_000_000_001,
        -1,
        "1000000000000000000100m",
    ),
    (
        "1000000000000000000.1",
        10_000_000_000_000_000_001,
        -1,
        "1000000000000000000100m",
    ),
    (
        "1.000000000000000001E",
        1_000_000_000_000_000_001,
        0,
        "1000000000000000001",
    ),
    ("1000000000000000001", 1_000_000_000_000_000_001, 0, ""),
    ("10E", 1, 19, ""),
    ("10000000000000000000", 1, 19, "10E"),
    ("10.0E", 1, 19, "10E"),
    ("10000000000000000000.0", 1, 19, "10E"),
    ("10000000000000000000000m", 1, 19, "10E"),
    (
        "10.0000000000000000001E",
        100_000_000_000_000_000_001,
        -1,
        "10000000000000000000100m",
    ),
    (
        "10000000000000000000.1",
        100_000_000_000_000_000_001,
        -1,
        "10000000000000000000100m",
    ),
    (
        "10.000000000000000001E",
        10_000_000_000_000_000_001,
        0,
        "10000000000000000001",
    ),
    ("10000000000000000001", 10_000_000_000_000_000_001, 0, ""),
    ("9223372036854775806", 9_223_372_036_854_775_806, 0, ""),
    (
        "9223372036854775806.0",
        9_223_372_036_854_775_806,
        0,
        "9223372036854775806",
    ),
    (
        "9223372036854775806000m",
        9_223_372_036_854_775_806,
        0,
        "9223372036854775806",
    ),
    (
        "9223372036854775806.1",
        92_233_720_368_547_758_061,
        -1,
        "9223372036854775806100m",
    ),
    ("9223372036854775807", MAX, 0, ""),
    ("9223372036854775807.0", MAX, 0, "9223372036854775807"),
    ("9223372036854775807000m", MAX, 0, "9223372036854775807"),
    (
        "9223372036854775807.1",
        92_233_720_368_547_758_071,
        -1,
        "9223372036854775807100m",
    ),
    ("9223372036854775808", MAX + 1, 0, ""),
    ("9223372036854775808.0", MAX + 1, 0, "9223372036854775808"),
    ("9223372036854775808000m", MAX + 1, 0, "9223372036854775808"),
    (
        "9223372036854775808.1",
        92_233_720_368_547_758_081,
        -1,
        "9223372036854775808100m",
    ),
];

#[test]
fn parses_values_past_int64() {
    for &(input, mantissa, exponent, canonical) in WIDE {
        let want = dec(mantissa, exponent, D);
        let canonical = if canonical.is_empty() {
            input
        } else {
            canonical
        };
        for (text, want, canonical) in [
            (input.to_owned(), want, canonical.to_owned()),
            (format!("-{input}"), -want, format!("-{canonical}")),
        ] {
            let got = parse(&text);
            assert_eq!(got.cmp_value(&want), Ordering::Equal, "{text}: got {got}");
            assert_eq!(got.to_string(), canonical, "{text}");
        }
    }
}

#[test]
fn new_quantities_print_canonically() {
    // TestNewSet, TestMilliNewSet, TestNewScaledSet.
    for (value, format, expect) in [
        (1, D, "1"),
        (1000, D, "1k"),
        (1_234_000, D, "1234k"),
        (1024, B, "1Ki"),
        (1_000_000, X, "1e6"),
        (1024 * 1024, B, "1Mi"),
    ] {
        let q = Quantity::from_value(value, format);
        assert_eq!(q.to_string(), expect);
        assert_eq!(i128::from(parse(expect).value()), value);
    }
    for (milli, format, expect, exact) in [
        (1, D, "1m", true),
        (1000, D, "1", true),
        (1_234_000, D, "1234", true),
        (1024, B, "1024m", false),
        (1_000_000, X, "1e3", true),
        (1024 * 1024, B, "1048576m", false),
    ] {
        let q = Quantity::from_milli(milli, format);
        assert_eq!(q.to_string(), expect);
        if exact {
            assert_eq!(i128::from(parse(expect).milli_value()), milli);
        }
    }
    for (value, exponent, expect) in [
        (1, -9, "1n"),
        (1000, -9, "1u"),
        (1, -6, "1u"),
        (1000, -6, "1m"),
        (1, -3, "1m"),
        (1000, -3, "1"),
        (1, 0, "1"),
        (0, -9, "0"),
        (0, 0, "0"),
    ] {
        let q = dec(value, exponent, D);
        assert_eq!(q.to_string(), expect);
        assert_eq!(i128::from(parse(expect).scaled_value(exponent)), value);
    }
}

#[test]
fn scaled_values_round_up() {
    // TestScaledValue: 1 at one scale read at another.
    for (from, to, expected) in [
        (-9, -9, 1),
        (-9, -6, 1),
        (-9, -3, 1),
        (-9, 0, 1),
        (-6, -9, 1000),
        (-6, -6, 1),
        (-6, -3, 1),
        (-6, 0, 1),
        (-3, -9, 1_000_000),
        (-3, -6, 1000),
        (-3, -3, 1),
        (-3, 0, 1),
        (0, -9, 1_000_000_000),
        (0, -6, 1_000_000),
        (0, -3, 1000),
        (0, 0, 1),
        (2, -2, 100 * 100),
    ] {
        assert_eq!(dec(1, from, D).scaled_value(to), expected, "{from} -> {to}");
    }
    // Value() and MilliValue() round away from zero, as for apimachinery's int64 amounts.
    assert_eq!(parse("1500m").value(), 2);
    assert_eq!(parse("-1500m").value(), -2);
    assert_eq!(parse("100m").value(), 1);
    assert_eq!(parse("250u").milli_value(), 1);
    assert_eq!(parse("1n").milli_value(), 1);
    assert_eq!(parse("1Gi").value(), 1 << 30);
    // Past int64 the result saturates.
    assert_eq!(parse("100E").value(), i64::MAX);
    assert_eq!(parse("-100E").milli_value(), i64::MIN);
    assert_eq!(parse(&"9".repeat(41)).value(), i64::MAX);
}

#[test]
fn adds_and_subtracts() {
    // TestAdd, TestSub, and the zero-preserves-suffix cases.
    for (a, b, sum, difference) in [
        (dec(10, 0, D), dec(1, 1, D), dec(20, 0, D), dec(0, 0, D)),
        (dec(10, 0, D), dec(1, 0, B), dec(11, 0, D), dec(9, 0, D)),
        (dec(10, 0, B), dec(1, 0, D), dec(11, 0, B), dec(9, 0, B)),
        (
            Quantity::zero(D),
            dec(50, 0, D),
            dec(50, 0, D),
            dec(-50, 0, D),
        ),
        (
            dec(50, 0, D),
            Quantity::zero(D),
            dec(50, 0, D),
            dec(50, 0, D),
        ),
    ] {
        let mut s = a;
        s.add(&b);
        assert_eq!(s.cmp_value(&sum), Ordering::Equal, "{a} + {b}");
        let mut d = a;
        d.sub(&b);
        assert_eq!(d.cmp_value(&difference), Ordering::Equal, "{a} - {b}");
    }
    for text in ["100m", "1Gi"] {
        let value = parse(text);
        let mut v1 = value;
        v1.add(&parse("0"));
        assert_eq!(v1.to_string(), text);
        let mut v2 = parse("0");
        v2.add(&value);
        assert_eq!(v2.to_string(), text);
        let mut v3 = parse("0");
        v3.sub(&value);
        assert_eq!(v3.to_string(), (-value).to_string());
    }
    let mut gi = parse("32Gi");
    gi.add(&parse("32Gi"));
    assert_eq!(gi.to_string(), "64Gi");
    let mut cpu = parse("4");
    cpu.add(&parse("500m"));
    assert_eq!(cpu.to_string(), "4500m");
}

#[test]
fn compares_values() {
    // TestQuantityCmp.
    for (x, y, expect) in [
        ("0", "0", Ordering::Equal),
        ("100m", "50m", Ordering::Greater),
        ("50m", "100m", Ordering::Less),
        ("10000T", "100Gi", Ordering::Greater),
    ] {
        assert_eq!(parse(x).cmp_value(&parse(y)), expect, "{x} vs {y}");
    }
}

#[test]
fn approximates_floats() {
    // TestQuantityAsApproximateFloat64 (the cases inside the range held; fractions convert
    // through the nano-units, so they may differ from Go's in the last bit).
    for (q, want) in [
        (dec(0, 0, D), 0.0),
        (dec(1, 0, B), 1.0),
        (dec(1024, 0, B), 1024.0),
        (dec(7 * 1024 * 1024, 1, D), 7.0 * 1024.0 * 1024.0 * 10.0),
        (
            dec(7 * 1024 * 1024, 8, X),
            7.0 * 1024.0 * 1024.0 * 100_000_000.0,
        ),
        (dec(MAX, 0, B), i64::MAX as f64),
        (dec(12, 18, D), 1.2e19),
    ] {
        assert_eq!(q.as_approximate_f64(), want, "{q}");
    }
}

#[test]
fn reads_json_text_like_the_decoder() {
    // TestJSONWhitespace: the decoder trims surrounding spaces; ParseQuantity does not.
    for (text, expect) in [(" 1", "1"), ("1 ", "1"), (" -1", "-1"), ("10", "10")] {
        let q = Quantity::from_k8s(&K8sQuantity(text.to_owned())).unwrap();
        assert_eq!(q.to_string(), expect);
    }
}

#[test]
fn formats_past_the_largest_suffix() {
    assert_eq!(parse("1000E").to_string(), "1000E");
    assert_eq!(parse("1e21").to_string(), "1e21");
    assert_eq!(Quantity::from_value(1 << 62, B).to_string(), "4Ei");
    assert_eq!(Quantity::from_value(1 << 70, B).to_string(), "1024Ei");
}

#[test]
fn errors_say_what_is_wrong() {
    assert_eq!(Quantity::parse("lots"), Err(QuantityError::NoDigits));
    assert_eq!(Quantity::parse("x1"), Err(QuantityError::NoDigits));
    assert_eq!(Quantity::parse("1.2.3"), Err(QuantityError::DecimalPoint));
    assert_eq!(Quantity::parse("1Qi"), Err(QuantityError::Suffix));
    assert_eq!(Quantity::parse("1e+"), Err(QuantityError::Exponent));
    assert_eq!(Quantity::parse(""), Err(QuantityError::Empty));
}

#[test]
fn multiplies() {
    for (text, factor, product) in [
        ("100m", 3, "300m"),
        ("1Gi", 4, "4Gi"),
        ("500m", 2, "1"),
        ("2", 0, "0"),
        ("1.5", -2, "-3"),
    ] {
        let mut q = parse(text);
        q.mul(factor);
        assert_eq!(q.to_string(), product, "{text} * {factor}");
    }
}
