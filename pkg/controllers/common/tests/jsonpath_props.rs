//! Hostile JSONPath: a policy author writes the `statePreservation` rules' `jsonPath` templates,
//! and a member cluster reports the status they are evaluated against. Random and adversarial
//! templates must evaluate or be refused with an error naming the template; nothing may panic,
//! overflow the stack or allocate without bound.

use std::time::{Duration, Instant};

use karmada_controllers_common::failover::{StatePreservationError, json_path};
use proptest::prelude::*;
use serde_json::{Value, json};

const CASES: u32 = 256;

fn status() -> Value {
    json!({
        "replicas": 3, "ratio": 0.5, "big": 1e300, "neg": -7, "ok": true, "none": null,
        "name": "web", "empty": {}, "list": [],
        "conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "False"}],
        "nested": {"a": {"b": {"c": [1, 2, 3]}}},
    })
}

/// Random JSON statuses (as a member might report), bounded in size.
fn any_status() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z]{1,3}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Templates from JSONPath's alphabet, so many get past the first character.
fn template_like() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just(".".to_owned()),
        Just("..".to_owned()),
        Just("$".to_owned()),
        Just("@".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just("*".to_owned()),
        Just("?(".to_owned()),
        Just(")".to_owned()),
        Just("==".to_owned()),
        Just("=~".to_owned()),
        Just(":".to_owned()),
        Just(",".to_owned()),
        Just("'".to_owned()),
        Just("\"".to_owned()),
        Just("\\".to_owned()),
        Just(" ".to_owned()),
        Just("range".to_owned()),
        Just("end".to_owned()),
        Just("replicas".to_owned()),
        Just("conditions".to_owned()),
        Just("nested".to_owned()),
        Just("type".to_owned()),
        Just("-1".to_owned()),
        Just("0".to_owned()),
        Just("9223372036854775807".to_owned()),
        Just("-9223372036854775808".to_owned()),
        Just("99999999999999999999".to_owned()),
        Just("length(".to_owned()),
        Just("é".to_owned()),
    ];
    proptest::collection::vec(piece, 0..16).prop_map(|p| p.concat())
}

fn well_formed() -> impl Strategy<Value = String> {
    let step = prop_oneof![
        "\\.[a-z]{1,10}",
        Just("[*]".to_owned()),
        Just("..".to_owned()),
        "\\[-?[0-9]{1,20}\\]",
        "\\[-?[0-9]{0,20}:-?[0-9]{0,20}(:-?[0-9]{0,20})?\\]",
        Just("[?(@.type==\"A\")]".to_owned()),
        Just("[?(@.status)]".to_owned()),
        Just("['name','ok']".to_owned()),
        Just("[0,1,-1]".to_owned()),
    ];
    proptest::collection::vec(step, 1..6).prop_map(|s| format!("{{{}}}", s.concat()))
}

fn check(template: &str, status: &Value) -> Result<(), TestCaseError> {
    let started = Instant::now();
    match json_path(template, status) {
        Ok(text) => prop_assert!(text.len() <= 1 << 20, "{template:?}: {} bytes", text.len()),
        Err(e) => {
            let text = e.to_string();
            match &e {
                StatePreservationError::Parse { path, .. }
                | StatePreservationError::NotFound { path, .. } => {
                    prop_assert_eq!(path, template);
                }
                StatePreservationError::NotCollected(_) => {
                    prop_assert!(false, "unexpected {text}");
                }
            }
            prop_assert!(text.contains("jsonPath"), "{text}");
        }
    }
    prop_assert!(
        started.elapsed() < Duration::from_secs(2),
        "{template:?} took {:?}",
        started.elapsed()
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn template_like_text_evaluates_or_is_refused(template in template_like()) {
        check(&template, &status())?;
    }

    #[test]
    fn arbitrary_text_evaluates_or_is_refused(template in "\\PC{0,40}") {
        check(&template, &status())?;
    }

    #[test]
    fn well_formed_paths_on_any_status(template in well_formed(), status in any_status()) {
        check(&template, &status)?;
    }
}

#[test]
fn deep_nesting_and_huge_numbers_are_refused_or_bounded() {
    let status = status();
    let depth = 10_000;
    for template in [
        format!("{{{}}}", "[".repeat(depth)),
        format!("{{.a{}}}", "[?(@".repeat(depth)),
        format!("{{{}replicas{}}}", "(".repeat(depth), ")".repeat(depth)),
        format!(
            "{{.conditions[?({}@.type{})]}}",
            "(".repeat(depth),
            ")".repeat(depth)
        ),
        format!("{{.conditions[?({}]}}", "!".repeat(depth)),
        format!("{{{}}}", ".".repeat(depth)),
        "{".repeat(depth),
        "{.conditions[0:9223372036854775807:1]}".to_owned(),
        "{.conditions[-9223372036854775808:9223372036854775807]}".to_owned(),
        "{.conditions[::-9223372036854775808]}".to_owned(),
        "{.conditions[::0]}".to_owned(),
        "{.conditions[18446744073709551616]}".to_owned(),
        "{.conditions[-9223372036854775808]}".to_owned(),
        format!("{{.name}}{}", "{.name}".repeat(depth)),
    ] {
        check(&template, &status).unwrap();
    }
}
