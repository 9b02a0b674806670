//! Hostile durations: besides flags, Go-syntax durations arrive from outside the process (e.g. the
//! `window` of a metrics API response from a remote cluster). Random and adversarial text must
//! parse or be refused with an error naming the input; nothing may panic, and no input may wrap
//! around into a duration of the other sign.

use lariat::runtime::duration::GoDuration;
use proptest::prelude::*;

const CASES: u32 = 256;

fn duration_like() -> impl Strategy<Value = String> {
    let part = (
        prop_oneof![
            "[0-9]{1,3}",
            "[0-9]{0,40}",
            "[0-9]{0,20}\\.[0-9]{0,30}",
            Just("170141183460469231731687303715884105727".to_owned()),
            Just("47261417516352230480".to_owned()),
            Just(".".to_owned()),
        ],
        prop_oneof![
            Just("ns"),
            Just("us"),
            Just("\u{b5}s"),
            Just("\u{3bc}s"),
            Just("ms"),
            Just("s"),
            Just("m"),
            Just("h"),
            Just("d"),
            Just(""),
            Just("é"),
        ],
    )
        .prop_map(|(n, u)| format!("{n}{u}"));
    (
        prop_oneof![Just(""), Just("-"), Just("+")],
        proptest::collection::vec(part, 0..4),
    )
        .prop_map(|(sign, parts)| format!("{sign}{}", parts.concat()))
}

fn check(text: &str) -> Result<(), TestCaseError> {
    match GoDuration::parse(text) {
        Ok(d) => {
            let _ = d.to_std();
            if text.starts_with('-') {
                prop_assert!(!d.is_positive(), "{text:?} parsed as positive {d:?}");
            } else {
                prop_assert!(!d.is_negative(), "{text:?} parsed as negative {d:?}");
            }
        }
        Err(e) => prop_assert!(e.to_string().contains(&format!("{text:?}")), "{e}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn duration_like_text_parses_or_is_refused(text in duration_like()) {
        check(&text)?;
    }

    #[test]
    fn arbitrary_text_parses_or_is_refused(text in "\\PC{0,30}") {
        check(&text)?;
    }
}

/// A whole part just below `i128::MAX` hours plus a fraction overflowed the accumulator (a panic
/// in debug builds, a wrap to a negative duration in release builds).
#[test]
fn a_fraction_past_the_largest_whole_part_is_refused() {
    let err = GoDuration::parse("47261439850130342147690917.9h").unwrap_err();
    assert!(err.to_string().contains("overflow"), "{err}");
}
