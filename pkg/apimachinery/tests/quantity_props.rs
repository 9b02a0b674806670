//! Hostile quantities: a policy author or a member cluster controls the quantity strings this
//! crate parses (resource requests in templates, `allocatable` in Cluster status, quotas). Random
//! and adversarial text must parse or be refused with an error, never panic, and the arithmetic
//! on whatever parses must saturate rather than overflow.

use std::cmp::Ordering;

use apimachinery::quantity::{Format, Quantity};
use proptest::prelude::*;

const CASES: u32 = 256;

/// Text built from the quantity alphabet, so that many cases get past the first character.
fn quantity_like() -> &'static str {
    "[+-]?[0-9]{0,45}(\\.[0-9]{0,45})?([eE][+-]?[0-9]{0,25}|[numkMGTPE]|[KMGTPE]i)?"
}

/// Any short string, including non-ASCII and control characters.
fn any_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(any::<char>(), 0..40).prop_map(|c| c.into_iter().collect())
}

/// Pieces an attacker might splice together.
fn spliced() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("9".repeat(40)),
        Just("0".repeat(100)),
        Just(".".to_owned()),
        Just("e9223372036854775807".to_owned()),
        Just("e-9223372036854775808".to_owned()),
        Just("e99999999999999999999".to_owned()),
        Just("Ei".to_owned()),
        Just("E".to_owned()),
        Just("n".to_owned()),
        Just("-".to_owned()),
        Just("+".to_owned()),
        Just("1".to_owned()),
        Just("\u{663}".to_owned()),
        Just(" ".to_owned()),
    ];
    proptest::collection::vec(piece, 0..8).prop_map(|p| p.concat())
}

fn exercise(q: &Quantity) {
    let _ = q.to_string();
    let _ = q.value();
    let _ = q.milli_value();
    for exponent in [-30, -9, -3, 0, 3, 9, 30, i32::MIN, i32::MAX] {
        let _ = q.scaled_value(exponent);
    }
    let _ = q.as_approximate_f64();
    let _ = -*q;
    let mut sum = *q;
    sum.add(q);
    sum.add(&Quantity::parse("170141183460469231731687303715884105727").unwrap_or(*q));
    let mut difference = -*q;
    difference.sub(q);
    difference.sub(&Quantity::parse("9999999999999999999999999999999999999999E").unwrap_or(*q));
    let _ = difference.to_string();
    let mut product = *q;
    product.mul(i64::MAX);
    product.mul(i64::MIN);
    let _ = product.to_string();
    let _ = product.cmp_value(&sum);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn quantity_like_text_never_panics(text in quantity_like()) {
        if let Ok(q) = Quantity::parse(&text) {
            exercise(&q);
            // The canonical form parses back to the same value.
            let again = Quantity::parse(&q.to_string());
            prop_assert!(again.is_ok(), "{text:?} printed {q} which does not parse");
            // Exact only inside the documented range (magnitudes past about 10^29 saturate).
            let exact = q.value() > i64::MIN && q.value() < i64::MAX;
            if let (Ok(again), true) = (again, exact) {
                prop_assert_eq!(again.cmp_value(&q), Ordering::Equal, "{} -> {}", text, q);
            }
        }
    }

    #[test]
    fn arbitrary_text_is_refused_or_parsed(text in any_text()) {
        match Quantity::parse(&text) {
            Ok(q) => exercise(&q),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn spliced_pieces_never_panic(text in spliced()) {
        if let Ok(q) = Quantity::parse(&text) {
            exercise(&q);
        }
    }

    #[test]
    fn constructors_saturate(value in any::<i128>(), exponent in any::<i32>(), format in 0..3u8) {
        let format = match format {
            0 => Format::DecimalSi,
            1 => Format::BinarySi,
            _ => Format::DecimalExponent,
        };
        exercise(&Quantity::from_scaled(value, exponent, format));
        exercise(&Quantity::from_value(value, format));
        exercise(&Quantity::from_milli(value, format));
    }
}

#[test]
fn extreme_exponents_and_lengths_are_bounded() {
    for text in [
        "1e9223372036854775807",
        "1e-9223372036854775808",
        "-1e-9223372036854775808",
        "0.0000000001e-9223372036854775808",
        "1e99999999999999999999",
        "9999999999999999999999999999999999999999999999999999Ei",
        "-9999999999999999999999999999999999999999999999999999E",
    ] {
        if let Ok(q) = Quantity::parse(text) {
            exercise(&q);
        }
    }
    let long = format!("{}.{}", "9".repeat(100_000), "9".repeat(100_000));
    let q = Quantity::parse(&long).unwrap();
    exercise(&q);
}
