//! Hostile overriders: a policy author writes OverridePolicies whose overriders carry JSON
//! pointers (`plaintext`, `fieldOverrider`, the image predicate), image references and YAML or
//! JSON documents embedded in string fields. Applying random and adversarial overriders to a
//! manifest must succeed or fail with an error naming the policy and the overrider; nothing may
//! panic, overflow the stack or allocate without bound.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karmada_apis::{Cluster, ClusterSpec, OverridePolicy};
use karmada_policy::apply_overrides;
use proptest::prelude::*;
use serde_json::{Value, json};

const CASES: u32 = 256;

fn cluster() -> Cluster {
    Cluster {
        metadata: ObjectMeta {
            name: Some("m1".to_owned()),
            ..Default::default()
        },
        spec: ClusterSpec::default(),
        status: None,
    }
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
                     "annotations": {"config": "a: 1\nb: [1, 2]\n", "json": "{\"a\": [1, 2]}"}},
        "spec": {"replicas": 3, "template": {"spec": {"containers": [
            {"name": "web", "image": "nginx:1.19", "command": ["nginx"], "args": ["-g"]},
            {"name": "side", "image": "registry.k8s.io/pause@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
        ]}}}
    })
}

fn pointer() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("metadata".to_owned()),
        Just("labels".to_owned()),
        Just("annotations".to_owned()),
        Just("config".to_owned()),
        Just("json".to_owned()),
        Just("spec".to_owned()),
        Just("template".to_owned()),
        Just("containers".to_owned()),
        Just("image".to_owned()),
        Just("a".to_owned()),
        Just("b".to_owned()),
        Just("0".to_owned()),
        Just("1".to_owned()),
        Just("-".to_owned()),
        Just("-1".to_owned()),
        Just("-9223372036854775808".to_owned()),
        Just("9223372036854775807".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("~".to_owned()),
        Just("~1".to_owned()),
        Just("~2".to_owned()),
        Just(String::new()),
        "\\PC{0,4}",
    ];
    prop_oneof![
        proptest::collection::vec(token, 0..6)
            .prop_map(|t| t.into_iter().map(|t| "/".to_owned() + &t).collect()),
        "\\PC{0,12}",
    ]
}

fn operator() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("add".to_owned()),
        Just("remove".to_owned()),
        Just("replace".to_owned()),
        "\\PC{0,6}",
    ]
}

/// A YAML or JSON document as a string: well-formed, deep, aliased or random.
fn embedded() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("a: 1")),
        Just(json!("[1, 2, {a: b}]")),
        Just(json!(format!("{}{}", "[".repeat(600), "]".repeat(600)))),
        Just(json!(format!(
            "{}1{}",
            "{\"a\":".repeat(600),
            "}".repeat(600)
        ))),
        Just(json!(
            "a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
        )),
        Just(json!(1e300)),
        Just(json!(u64::MAX)),
        Just(json!(null)),
        Just(json!({"a": [1, {"b": null}]})),
        "\\PC{0,30}".prop_map(Value::String),
    ]
}

fn image_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("registry.k8s.io".to_owned()),
        Just("localhost:5000".to_owned()),
        Just("karmada/web".to_owned()),
        Just("v1.0".to_owned()),
        Just("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef".to_owned()),
        Just("a".repeat(300)),
        Just(":::@@@///".to_owned()),
        "[A-Za-z0-9:/@._-]{0,30}",
        "\\PC{0,20}",
    ]
}

fn overriders() -> impl Strategy<Value = Value> {
    (
        proptest::collection::vec((pointer(), operator(), embedded()), 0..3),
        proptest::collection::vec(
            (proptest::option::of(pointer()), prop_oneof![Just("Registry"), Just("Repository"), Just("Tag"), Just("x")], operator(), image_value()),
            0..2,
        ),
        proptest::collection::vec((pointer(), proptest::collection::vec((pointer(), operator(), embedded(), any::<bool>()), 0..3)), 0..2),
        proptest::collection::vec((operator(), "\\PC{0,8}", "\\PC{0,8}"), 0..2),
        proptest::collection::vec((operator(), "\\PC{0,8}"), 0..2),
    )
        .prop_map(|(plaintext, images, fields, labels, commands)| {
            json!({
                "plaintext": plaintext.into_iter().map(|(path, operator, value)| json!({"path": path, "operator": operator, "value": value})).collect::<Vec<_>>(),
                "imageOverrider": images.into_iter().map(|(path, component, operator, value)| {
                    let mut o = json!({"component": component, "operator": operator, "value": value});
                    if let Some(path) = path {
                        o["predicate"] = json!({"path": path});
                    }
                    o
                }).collect::<Vec<_>>(),
                "fieldOverrider": fields.into_iter().map(|(field_path, ops)| {
                    let (yaml, json_ops): (Vec<_>, Vec<_>) = ops.into_iter().partition(|op| op.3);
                    let op = |(sub_path, operator, value, _): (String, String, Value, bool)| json!({"subPath": sub_path, "operator": operator, "value": value});
                    json!({"fieldPath": field_path, "yaml": yaml.into_iter().map(op).collect::<Vec<_>>(), "json": json_ops.into_iter().map(op).collect::<Vec<_>>()})
                }).collect::<Vec<_>>(),
                "labelsOverrider": labels.into_iter().map(|(operator, k, v)| json!({"operator": operator, "value": {k: v}})).collect::<Vec<_>>(),
                "commandOverrider": commands.into_iter().map(|(operator, v)| json!({"containerName": "web", "operator": operator, "value": [v]})).collect::<Vec<_>>(),
            })
        })
}

fn policy(overriders: Value) -> Option<OverridePolicy> {
    serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "OverridePolicy",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            "overrideRules": [{"overriders": overriders}],
        },
    }))
    .ok()
}

fn check(overriders: Value) -> Result<(), TestCaseError> {
    check_on(&deployment(), overriders)
}

fn check_on(manifest: &Value, overriders: Value) -> Result<(), TestCaseError> {
    let Some(policy) = policy(overriders) else {
        return Ok(());
    };
    let started = std::time::Instant::now();
    match apply_overrides(manifest, &cluster(), &[], &[policy]) {
        Ok(result) => {
            prop_assert!(result.manifest.to_string().len() < 1 << 20);
        }
        Err(e) => {
            let text = e.to_string();
            prop_assert!(text.contains("default/p"), "{text}");
        }
    }
    prop_assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn overriders_apply_or_are_refused(overriders in overriders()) {
        check(overriders)?;
    }
}

/// The template's own annotations hold the documents a `fieldOverrider` parses: deep ones must
/// be refused (or handled) without exhausting the stack.
#[test]
fn deep_documents_in_a_field_are_refused_or_bounded() {
    for document in [
        format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
        format!("{}1{}", "{\"a\":".repeat(100_000), "}".repeat(100_000)),
        format!("{}1{}", "{\"a\":".repeat(500), "}".repeat(500)),
        format!("{}{}", "[".repeat(500), "]".repeat(500)),
        "- ".repeat(100_000),
        format!("a: {}", "{a: ".repeat(100_000)),
    ] {
        let mut manifest = deployment();
        manifest["metadata"]["annotations"]["doc"] = json!(document);
        for kind in ["yaml", "json"] {
            for (operator, sub) in [("replace", "/a"), ("add", "/a/0"), ("remove", "")] {
                check_on(&manifest, json!({"fieldOverrider": [{"fieldPath": "/metadata/annotations/doc", kind: [{"subPath": sub, "operator": operator, "value": {"x": 1}}]}]})).unwrap();
            }
        }
        check_on(&manifest, json!({"plaintext": [{"path": "/metadata/annotations/doc", "operator": "replace", "value": document}]})).unwrap();
    }
}
