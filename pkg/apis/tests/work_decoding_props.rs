//! Property tests of Work manifest decoding: whatever bytes or JSON a Work carries (the control
//! plane's store is written by users and other controllers), decoding never panics, keeps no
//! more than it was given, and fails with a message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use karmada_apis::Work;
use proptest::prelude::*;
use serde_json::{Value, json};

/// Arbitrary JSON, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A manifest: arbitrary JSON, or an object whose identity fields hold arbitrary JSON.
fn manifest() -> impl Strategy<Value = Value> {
    prop_oneof![
        any_json(),
        (any_json(), any_json(), any_json(), any_json()).prop_map(|(v, k, ns, n)| {
            json!({"apiVersion": v, "kind": k, "metadata": {"namespace": ns, "name": n}})
        }),
    ]
}

/// Decodes `bytes` as a Work and every manifest's identity and tree; `Err` carries a message.
fn decode_all(bytes: &[u8]) -> Result<usize, String> {
    let work: Work = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let mut kept = 0;
    for m in &work.spec.workload.manifests {
        kept += m.as_json().len();
        let _ = m.identity().map_err(|e| assert!(!e.to_string().is_empty()));
        let _ = m.to_value().map_err(|e| assert!(!e.to_string().is_empty()));
    }
    Ok(kept)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_bytes_fail_with_a_message(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        if let Err(e) = decode_all(&bytes) {
            prop_assert!(!e.is_empty());
        }
    }

    #[test]
    fn arbitrary_manifests_decode_or_fail_and_keep_at_most_the_input(
        manifests in prop::collection::vec(manifest(), 0..6)
    ) {
        let work = json!({"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
            "metadata": {"name": "w", "namespace": "karmada-es-m"},
            "spec": {"workload": {"manifests": manifests}}});
        let bytes = serde_json::to_vec(&work).unwrap();
        match decode_all(&bytes) {
            // The manifests are kept as compact text: never more than the input.
            Ok(kept) => prop_assert!(kept <= bytes.len()),
            Err(e) => prop_assert!(!e.is_empty()),
        }
    }

    #[test]
    fn arbitrary_work_json_decodes_or_fails(value in any_json()) {
        let bytes = serde_json::to_vec(&value).unwrap();
        if let Err(e) = decode_all(&bytes) {
            prop_assert!(!e.is_empty());
        }
    }

    #[test]
    fn deeply_nested_manifests_are_refused(depth in 129usize..20_000) {
        let bytes = format!(
            r#"{{"spec":{{"workload":{{"manifests":[{{"spec":{}{}}}]}}}}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let e = decode_all(bytes.as_bytes()).unwrap_err();
        prop_assert!(e.contains("recursion limit"), "{e}");
    }
}
