//! Hostile Work manifests: whoever can write a Work (or a template that becomes one) chooses the
//! manifests' raw JSON, and a member cluster chooses the statuses reflected back into Works and
//! bindings. Decoding them must succeed or fail with an error; nothing may panic, overflow the
//! stack on deep nesting or allocate without bound.

use karmada_apis::Work;
use karmada_apis::work::v1alpha1::{Manifest, RawExtension};
use proptest::prelude::*;
use serde_json::Value;

const CASES: u32 = 256;

/// Text from JSON's alphabet, so many cases get past the first byte.
fn json_like() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just(",".to_owned()),
        Just(":".to_owned()),
        Just("\"kind\"".to_owned()),
        Just("\"apiVersion\"".to_owned()),
        Just("\"metadata\"".to_owned()),
        Just("\"name\"".to_owned()),
        Just("\"\\u0000\"".to_owned()),
        Just("\"\\ud800\"".to_owned()),
        Just("\"é\"".to_owned()),
        Just("1e999".to_owned()),
        Just("-0".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just(" ".to_owned()),
    ];
    proptest::collection::vec(piece, 0..24).prop_map(|p| p.concat())
}

fn exercise(raw: &RawExtension) {
    let _ = raw.identity();
    let _ = raw.to_value();
    let _ = raw.decode::<Value>();
    let _ = serde_json::to_string(raw);
    let _ = *raw == raw.clone();
}

fn check(text: &str) -> Result<(), TestCaseError> {
    if let Ok(raw) = serde_json::from_str::<RawExtension>(text) {
        // What was accepted is valid JSON again.
        prop_assert!(
            serde_json::from_str::<Value>(raw.as_json()).is_ok(),
            "{text:?}"
        );
        exercise(&raw);
    }
    let work = format!(
        r#"{{"apiVersion":"work.karmada.io/v1alpha1","kind":"Work","metadata":{{"name":"w"}},"spec":{{"workload":{{"manifests":[{text}]}}}}}}"#
    );
    if let Ok(work) = serde_json::from_str::<Work>(&work) {
        for manifest in &work.spec.workload.manifests {
            exercise(manifest);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn json_like_manifests_decode_or_are_refused(text in json_like()) {
        check(&text)?;
    }

    #[test]
    fn arbitrary_manifests_decode_or_are_refused(text in "\\PC{0,80}") {
        check(&text)?;
    }
}

#[test]
fn deep_nesting_is_refused() {
    for depth in [200, 10_000, 1_000_000] {
        for text in [
            format!("{}{}", "[".repeat(depth), "]".repeat(depth)),
            format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth)),
            "[".repeat(depth),
        ] {
            let decoded = serde_json::from_str::<Manifest>(&text);
            assert!(decoded.is_err(), "depth {depth} accepted");
        }
    }
}

#[test]
fn a_manifest_identity_ignores_the_rest() {
    let text = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"x"}},"data":{{"k":"{}"}}}}"#,
        "v".repeat(1 << 20)
    );
    let raw: Manifest = serde_json::from_str(&text).unwrap();
    let id = raw.identity().unwrap();
    assert_eq!(
        (id.kind.as_str(), id.metadata.name.as_str()),
        ("ConfigMap", "x")
    );
}
