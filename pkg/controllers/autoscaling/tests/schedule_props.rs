//! Hostile cron schedules: the author of a CronFederatedHPA writes each rule's `schedule` (with an
//! optional `TZ=`/`CRON_TZ=` prefix and `@every <duration>`) and `timeZone`. Random and adversarial
//! text must parse or be refused with an error; parsing and computing the next activation must
//! never panic or run without bound.

use std::time::{Duration, Instant};

use jiff::Timestamp;
use jiff::tz::TimeZone;
use karmada_controllers_autoscaling::cron_federated_hpa::schedule::{Schedule, load_time_zone};
use proptest::prelude::*;

const CASES: u32 = 256;

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{1,2}",
        Just("0".to_owned()),
        Just("4294967295".to_owned()),
        Just("4294967296".to_owned()),
        Just("2147483647".to_owned()),
        Just("9223372036854775807".to_owned()),
        Just("-1".to_owned()),
        Just("jan".to_owned()),
        Just("SUN".to_owned()),
        Just("*".to_owned()),
        Just("?".to_owned()),
        Just(String::new()),
    ]
}

/// One cron field: lists of ranges with steps, from the grammar's alphabet.
fn field() -> impl Strategy<Value = String> {
    let range = (
        number(),
        proptest::option::of(number()),
        proptest::option::of(number()),
    )
        .prop_map(|(low, high, step)| {
            let mut out = low;
            if let Some(high) = high {
                out = format!("{out}-{high}");
            }
            if let Some(step) = step {
                out = format!("{out}/{step}");
            }
            out
        });
    proptest::collection::vec(range, 1..3).prop_map(|r| r.join(","))
}

fn spec() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(field(), 5).prop_map(|f| f.join(" ")),
        proptest::collection::vec(field(), 0..8).prop_map(|f| f.join(" ")),
        "@every [0-9.]{0,25}(ns|us|µs|ms|s|m|h|d|x)?([0-9.]{0,5}(h|m|s))?",
        Just("@yearly".to_owned()),
        Just("@every ".to_owned()),
        "(CRON_)?TZ=[A-Za-z/_.+-]{0,30} [0-9*]{1,2} \\* \\* \\* \\*",
        "\\PC{0,30}",
    ]
}

fn check(expr: &str, tz: TimeZone, after: Timestamp) -> Result<(), TestCaseError> {
    let started = Instant::now();
    match Schedule::parse(expr, tz) {
        Ok(schedule) => {
            if let Some(next) = schedule.next(after) {
                prop_assert!(next > after, "{expr:?}: {next} is not after {after}");
            }
        }
        Err(e) => prop_assert!(!e.to_string().is_empty()),
    }
    prop_assert!(
        started.elapsed() < Duration::from_secs(2),
        "{expr:?} took {:?}",
        started.elapsed()
    );
    Ok(())
}

fn instant() -> impl Strategy<Value = Timestamp> {
    prop_oneof![
        Just(Timestamp::MIN),
        Just(Timestamp::MAX),
        (-377_705_116_800_i64..253_402_207_200)
            .prop_filter_map("in jiff's range", |s| Timestamp::from_second(s).ok()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn schedules_parse_or_are_refused(expr in spec(), after in instant()) {
        check(&expr, TimeZone::UTC, after)?;
    }

    #[test]
    fn time_zone_names_load_or_are_refused(name in prop_oneof![
        "[A-Za-z/_.+-]{0,30}",
        Just("../../../../etc/passwd".to_owned()),
        Just("/etc/localtime".to_owned()),
        Just("America/New_York".to_owned()),
        "\\PC{0,20}",
    ]) {
        if let Ok(tz) = load_time_zone(&name) {
            check("30 2 * * *", tz, Timestamp::from_second(1_700_000_000).unwrap())?;
        }
    }
}

/// Robfig's field grammar allows any `int` step; a step near `u32::MAX` must not overflow.
#[test]
fn huge_steps_are_refused_or_bounded() {
    for expr in [
        "*/4294967295 * * * *",
        "1/4294967295 * * * *",
        "5-10/4294967295 * * * *",
        "* * */4294967295 * *",
        "* * 1/4294967294 * *",
        "* * * */4294967295 *",
        "* * * * 1-6/4294967295",
    ] {
        check(
            expr,
            TimeZone::UTC,
            Timestamp::from_second(1_700_000_000).unwrap(),
        )
        .unwrap();
    }
}
