use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karmada_apis::policy::v1alpha1::{
    ClusterAffinity, CommandArgsOverrider, FieldOverrider, ImageComponent, ImageOverrider,
    ImagePredicate, JsonPatchOperation, LabelAnnotationOverrider, OverriderOperator, Overriders,
    PlaintextOverrider, ResourceSelector, RuleWithCluster, YamlPatchOperation,
};
use karmada_apis::{Cluster, ClusterOverridePolicy, ClusterSpec, OverridePolicy, OverrideSpec};
use serde_json::{Value, json};

use super::*;

fn cluster(name: &str) -> Cluster {
    Cluster {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some([("env".to_owned(), name.to_owned())].into()),
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
        "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx"}},
        "spec": {
            "replicas": 3,
            "template": {"spec": {"containers": [
                {"name": "nginx", "image": "nginx:1.19", "command": ["nginx", "-g"]},
                {"name": "sidecar", "image": "registry.k8s.io/pause:3.9"}
            ]}}
        }
    })
}

fn op(ns: &str, name: &str, spec: OverrideSpec) -> OverridePolicy {
    OverridePolicy {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(ns.to_owned()),
            ..Default::default()
        },
        spec,
    }
}

fn cop(name: &str, spec: OverrideSpec) -> ClusterOverridePolicy {
    ClusterOverridePolicy::new(name, spec)
}

fn rule(target: Option<&str>, overriders: Overriders) -> RuleWithCluster {
    RuleWithCluster {
        target_cluster: target.map(|c| ClusterAffinity {
            cluster_names: vec![c.to_owned()],
            ..Default::default()
        }),
        overriders,
    }
}

fn spec(rules: Vec<RuleWithCluster>) -> OverrideSpec {
    OverrideSpec {
        override_rules: rules,
        ..Default::default()
    }
}

fn plaintext(path: &str, operator: OverriderOperator, value: Option<Value>) -> PlaintextOverrider {
    PlaintextOverrider {
        path: path.to_owned(),
        operator,
        value,
    }
}

fn only_plaintext(items: Vec<PlaintextOverrider>) -> Overriders {
    Overriders {
        plaintext: items,
        ..Default::default()
    }
}

fn apply_one(manifest: &Value, overriders: Overriders) -> Result<Value, Box<OverrideError>> {
    let policies = [op("default", "p", spec(vec![rule(None, overriders)]))];
    apply_overrides(manifest, &cluster("member1"), &[], &policies).map(|r| r.manifest)
}

fn image_overrider(
    predicate: Option<&str>,
    component: ImageComponent,
    operator: OverriderOperator,
    value: &str,
) -> Overriders {
    Overriders {
        image_overrider: vec![ImageOverrider {
            predicate: predicate.map(|p| ImagePredicate { path: p.to_owned() }),
            component,
            operator,
            value: value.to_owned(),
        }],
        ..Default::default()
    }
}

fn images(manifest: &Value) -> Vec<String> {
    manifest["spec"]["template"]["spec"]["containers"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| c["image"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn plaintext_add_replace_remove() {
    let out = apply_one(
        &deployment(),
        only_plaintext(vec![
            plaintext("/spec/replicas", OverriderOperator::Replace, Some(json!(5))),
            plaintext(
                "/metadata/labels/tier",
                OverriderOperator::Add,
                Some(json!("web")),
            ),
            plaintext("/metadata/labels/app", OverriderOperator::Remove, None),
            plaintext(
                "/spec/template/spec/containers/-",
                OverriderOperator::Add,
                Some(json!({"name": "x"})),
            ),
        ]),
    )
    .unwrap();
    assert_eq!(out["spec"]["replicas"], json!(5));
    assert_eq!(out["metadata"]["labels"], json!({"tier": "web"}));
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][2],
        json!({"name": "x"})
    );
}

#[test]
fn plaintext_error_names_policy_rule_path_and_keeps_input() {
    let input = deployment();
    let policies = [op(
        "default",
        "broken",
        spec(vec![
            rule(Some("other"), only_plaintext(vec![])),
            rule(
                None,
                only_plaintext(vec![
                    plaintext("/spec/replicas", OverriderOperator::Replace, Some(json!(1))),
                    plaintext(
                        "/spec/missing/field",
                        OverriderOperator::Replace,
                        Some(json!(1)),
                    ),
                ]),
            ),
        ]),
    )];
    let err = apply_overrides(&input, &cluster("member1"), &[], &policies).unwrap_err();
    assert_eq!(err.policy_kind, OverridePolicyKind::OverridePolicy);
    assert_eq!(err.policy, "default/broken");
    assert_eq!(err.rule, 1);
    assert_eq!(err.overrider, "plaintext[1]");
    assert_eq!(err.path, "/spec/missing/field");
    assert_eq!(err.cluster, "member1");
    assert_eq!(err.resource, "apps/v1 Deployment default/nginx");
    let text = err.to_string();
    assert!(
        text.contains("default/broken") && text.contains("/spec/missing"),
        "{text}"
    );
    assert_eq!(input, deployment());
}

#[test]
fn plaintext_errors() {
    for bad in [
        plaintext("spec/replicas", OverriderOperator::Replace, Some(json!(1))),
        plaintext("/spec/nope", OverriderOperator::Remove, None),
        plaintext(
            "/spec/replicas",
            OverriderOperator::Other("move".into()),
            None,
        ),
        plaintext("/kind", OverriderOperator::Remove, None),
        plaintext(
            "/spec/template/spec/containers/9",
            OverriderOperator::Replace,
            Some(json!({})),
        ),
    ] {
        assert!(
            apply_one(&deployment(), only_plaintext(vec![bad.clone()])).is_err(),
            "{bad:?}"
        );
    }
    // A replace without value sets null (Karmada sends `value: null`).
    let out = apply_one(
        &deployment(),
        only_plaintext(vec![plaintext(
            "/spec/replicas",
            OverriderOperator::Replace,
            None,
        )]),
    )
    .unwrap();
    assert_eq!(out["spec"]["replicas"], Value::Null);
}

#[test]
fn image_overrider_default_paths() {
    let out = apply_one(
        &deployment(),
        image_overrider(
            None,
            ImageComponent::Registry,
            OverriderOperator::Replace,
            "my.registry.io",
        ),
    )
    .unwrap();
    assert_eq!(
        images(&out),
        vec!["my.registry.io/nginx:1.19", "my.registry.io/pause:3.9"]
    );

    let out = apply_one(
        &deployment(),
        image_overrider(
            None,
            ImageComponent::Registry,
            OverriderOperator::Add,
            "-cn",
        ),
    )
    .unwrap();
    assert_eq!(
        images(&out),
        vec!["-cn/nginx:1.19", "registry.k8s.io-cn/pause:3.9"]
    );

    let out = apply_one(
        &deployment(),
        image_overrider(
            None,
            ImageComponent::Registry,
            OverriderOperator::Remove,
            "",
        ),
    )
    .unwrap();
    assert_eq!(images(&out), vec!["nginx:1.19", "pause:3.9"]);

    let out = apply_one(
        &deployment(),
        image_overrider(
            None,
            ImageComponent::Repository,
            OverriderOperator::Replace,
            "library/busybox",
        ),
    )
    .unwrap();
    assert_eq!(
        images(&out),
        vec![
            "library/busybox:1.19",
            "registry.k8s.io/library/busybox:3.9"
        ]
    );

    let out = apply_one(
        &deployment(),
        image_overrider(
            None,
            ImageComponent::Repository,
            OverriderOperator::Add,
            "-debug",
        ),
    )
    .unwrap();
    assert_eq!(
        images(&out),
        vec!["nginx-debug:1.19", "registry.k8s.io/pause-debug:3.9"]
    );

    let out = apply_one(
        &deployment(),
        image_overrider(
            None,
            ImageComponent::Tag,
            OverriderOperator::Replace,
            "latest",
        ),
    )
    .unwrap();
    assert_eq!(
        images(&out),
        vec!["nginx:latest", "registry.k8s.io/pause:latest"]
    );

    let out = apply_one(
        &deployment(),
        image_overrider(None, ImageComponent::Tag, OverriderOperator::Add, "-alpine"),
    )
    .unwrap();
    assert_eq!(
        images(&out),
        vec!["nginx:1.19-alpine", "registry.k8s.io/pause:3.9-alpine"]
    );

    let out = apply_one(
        &deployment(),
        image_overrider(None, ImageComponent::Tag, OverriderOperator::Remove, ""),
    )
    .unwrap();
    assert_eq!(images(&out), vec!["nginx", "registry.k8s.io/pause"]);
}

#[test]
fn image_overrider_kinds_and_predicate() {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "initContainers": [{"name": "i", "image": "busybox"}]}
    });
    let out = apply_one(
        &pod,
        image_overrider(
            None,
            ImageComponent::Tag,
            OverriderOperator::Replace,
            "1.36",
        ),
    )
    .unwrap();
    assert_eq!(out["spec"]["containers"][0]["image"], json!("busybox:1.36"));
    assert_eq!(out["spec"]["initContainers"][0]["image"], json!("busybox"));

    // Kinds without known container paths are left alone.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}});
    let out = apply_one(
        &cm,
        image_overrider(None, ImageComponent::Tag, OverriderOperator::Replace, "x"),
    )
    .unwrap();
    assert_eq!(out, cm);

    // An explicit predicate path (here an init container).
    let out = apply_one(
        &pod,
        image_overrider(
            Some("/spec/initContainers/0/image"),
            ImageComponent::Registry,
            OverriderOperator::Add,
            "docker.io",
        ),
    )
    .unwrap();
    assert_eq!(
        out["spec"]["initContainers"][0]["image"],
        json!("docker.io/busybox")
    );

    for bad in [
        "/spec/initContainers/5/image",
        "/spec/nothing/image",
        "/spec/containers/0/name/x",
    ] {
        let err = apply_one(
            &pod,
            image_overrider(
                Some(bad),
                ImageComponent::Tag,
                OverriderOperator::Replace,
                "x",
            ),
        )
        .unwrap_err();
        assert_eq!(err.overrider, "imageOverrider[0]");
        assert_eq!(err.path, bad);
    }
}

#[test]
fn image_overrider_invalid_image_fails() {
    let mut d = deployment();
    d["spec"]["template"]["spec"]["containers"][1]["image"] = json!("Bad Image");
    let err = apply_one(
        &d,
        image_overrider(None, ImageComponent::Tag, OverriderOperator::Replace, "x"),
    )
    .unwrap_err();
    assert_eq!(err.path, "/spec/template/spec/containers/1/image");
    assert!(err.cause.contains("Bad Image"), "{}", err.cause);
    let mut d = deployment();
    d["spec"]["template"]["spec"]["containers"] = json!("oops");
    assert!(
        apply_one(
            &d,
            image_overrider(None, ImageComponent::Tag, OverriderOperator::Replace, "x"),
        )
        .is_err()
    );
}

fn command_args(
    container: &str,
    operator: OverriderOperator,
    values: &[&str],
    args: bool,
) -> Overriders {
    let o = CommandArgsOverrider {
        container_name: container.to_owned(),
        operator,
        value: values.iter().map(|v| (*v).to_owned()).collect(),
    };
    if args {
        Overriders {
            args_overrider: vec![o],
            ..Default::default()
        }
    } else {
        Overriders {
            command_overrider: vec![o],
            ..Default::default()
        }
    }
}

#[test]
fn command_and_args_overriders() {
    let out = apply_one(
        &deployment(),
        command_args("nginx", OverriderOperator::Add, &["daemon off;"], false),
    )
    .unwrap();
    let c = &out["spec"]["template"]["spec"]["containers"];
    assert_eq!(c[0]["command"], json!(["nginx", "-g", "daemon off;"]));
    assert!(c[1].get("command").is_none());

    let out = apply_one(
        &deployment(),
        command_args("nginx", OverriderOperator::Remove, &["-g", "absent"], false),
    )
    .unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][0]["command"],
        json!(["nginx"])
    );

    // No args yet: added.
    let out = apply_one(
        &deployment(),
        command_args("sidecar", OverriderOperator::Add, &["--v=4"], true),
    )
    .unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][1]["args"],
        json!(["--v=4"])
    );

    // Removing from nothing creates an empty list, as Karmada does.
    let out = apply_one(
        &deployment(),
        command_args("sidecar", OverriderOperator::Remove, &["--v=4"], true),
    )
    .unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][1]["args"],
        json!([])
    );

    // Unknown container: no change.
    let out = apply_one(
        &deployment(),
        command_args("nope", OverriderOperator::Add, &["x"], true),
    )
    .unwrap();
    assert_eq!(out, deployment());

    // Non-string entries are an error, not a panic.
    let mut d = deployment();
    d["spec"]["template"]["spec"]["containers"][0]["command"] = json!(["a", 1]);
    let err = apply_one(
        &d,
        command_args("nginx", OverriderOperator::Add, &["x"], false),
    )
    .unwrap_err();
    assert_eq!(err.overrider, "commandOverrider[0]");
    assert_eq!(err.path, "/spec/template/spec/containers/0/command");
    let mut d = deployment();
    d["spec"]["template"]["spec"]["containers"][0]["args"] = json!("not-a-list");
    assert!(
        apply_one(
            &d,
            command_args("nginx", OverriderOperator::Add, &["x"], true)
        )
        .is_err()
    );
}

fn labels_overrider(
    operator: OverriderOperator,
    pairs: &[(&str, &str)],
    annotations: bool,
) -> Overriders {
    let o = LabelAnnotationOverrider {
        operator,
        value: pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    };
    if annotations {
        Overriders {
            annotations_overrider: vec![o],
            ..Default::default()
        }
    } else {
        Overriders {
            labels_overrider: vec![o],
            ..Default::default()
        }
    }
}

#[test]
fn labels_and_annotations_overriders() {
    let out = apply_one(
        &deployment(),
        labels_overrider(
            OverriderOperator::Add,
            &[("karmada.io/cluster", "m1"), ("app", "x")],
            false,
        ),
    )
    .unwrap();
    assert_eq!(
        out["metadata"]["labels"],
        json!({"app": "x", "karmada.io/cluster": "m1"})
    );

    let out = apply_one(
        &deployment(),
        labels_overrider(
            OverriderOperator::Replace,
            &[("app", "y"), ("absent", "z")],
            false,
        ),
    )
    .unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"app": "y"}));

    let out = apply_one(
        &deployment(),
        labels_overrider(
            OverriderOperator::Remove,
            &[("app", ""), ("absent", "")],
            false,
        ),
    )
    .unwrap();
    assert_eq!(out["metadata"]["labels"], json!({}));

    // Annotations do not exist yet: add creates the map; replace/remove do nothing.
    let out = apply_one(
        &deployment(),
        labels_overrider(OverriderOperator::Add, &[("note", "hi")], true),
    )
    .unwrap();
    assert_eq!(out["metadata"]["annotations"], json!({"note": "hi"}));
    let out = apply_one(
        &deployment(),
        labels_overrider(OverriderOperator::Replace, &[("note", "hi")], true),
    )
    .unwrap();
    assert!(out["metadata"].get("annotations").is_none());
}

fn field(
    path: &str,
    json_ops: Vec<JsonPatchOperation>,
    yaml_ops: Vec<YamlPatchOperation>,
) -> Overriders {
    Overriders {
        field_overrider: vec![FieldOverrider {
            field_path: path.to_owned(),
            json: json_ops,
            yaml: yaml_ops,
        }],
        ..Default::default()
    }
}

fn configmap(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "default"}, "data": data})
}

#[test]
fn field_overrider_json() {
    let cm = configmap(json!({"config.json": "{\"b\": 1, \"a\": {\"url\": \"http://x<y\"}}"}));
    let out = apply_one(
        &cm,
        field(
            "/data/config.json",
            vec![
                JsonPatchOperation {
                    sub_path: "/a/url".into(),
                    operator: OverriderOperator::Replace,
                    value: Some(json!("http://member1")),
                },
                JsonPatchOperation {
                    sub_path: "/c".into(),
                    operator: OverriderOperator::Add,
                    value: Some(json!([1, 2])),
                },
                JsonPatchOperation {
                    sub_path: "/b".into(),
                    operator: OverriderOperator::Remove,
                    value: None,
                },
            ],
            vec![],
        ),
    )
    .unwrap();
    assert_eq!(
        out["data"]["config.json"],
        json!(r#"{"a":{"url":"http://member1"},"c":[1,2]}"#)
    );
}

#[test]
fn field_overrider_yaml() {
    let cm = configmap(json!({"app.yaml": "server:\n  port: 80\n  hosts:\n  - a\nname: demo\n"}));
    let out = apply_one(
        &cm,
        field(
            "/data/app.yaml",
            vec![],
            vec![
                YamlPatchOperation {
                    sub_path: "/server/port".into(),
                    operator: OverriderOperator::Replace,
                    value: Some(json!(8080)),
                },
                YamlPatchOperation {
                    sub_path: "/server/hosts/-".into(),
                    operator: OverriderOperator::Add,
                    value: Some(json!("b")),
                },
            ],
        ),
    )
    .unwrap();
    assert_eq!(
        out["data"]["app.yaml"],
        json!("name: demo\nserver:\n  hosts:\n  - a\n  - b\n  port: 8080\n")
    );
}

#[test]
fn field_overrider_errors() {
    let cm = configmap(json!({"c.json": "{not json", "n": "1"}));
    let bad_json = field(
        "/data/c.json",
        vec![JsonPatchOperation {
            sub_path: "/a".into(),
            operator: OverriderOperator::Add,
            value: Some(json!(1)),
        }],
        vec![],
    );
    let err = apply_one(&cm, bad_json).unwrap_err();
    assert_eq!(err.overrider, "fieldOverrider[0]");
    assert_eq!(err.path, "/data/c.json");

    let not_string = field(
        "/metadata",
        vec![JsonPatchOperation {
            sub_path: "/a".into(),
            operator: OverriderOperator::Add,
            value: Some(json!(1)),
        }],
        vec![],
    );
    assert!(
        apply_one(&cm, not_string)
            .unwrap_err()
            .cause
            .contains("not a string")
    );

    let missing = field(
        "/data/absent",
        vec![],
        vec![YamlPatchOperation {
            sub_path: "/a".into(),
            operator: OverriderOperator::Add,
            value: Some(json!(1)),
        }],
    );
    assert!(apply_one(&cm, missing).is_err());

    let bad_sub_path = field(
        "/data/n",
        vec![],
        vec![YamlPatchOperation {
            sub_path: "/a/b".into(),
            operator: OverriderOperator::Replace,
            value: Some(json!(1)),
        }],
    );
    let err = apply_one(&cm, bad_sub_path).unwrap_err();
    assert!(err.path.contains("yaml[0]"), "{}", err.path);
}

#[test]
fn order_cluster_policies_first_then_priority_then_name() {
    let replicas = |n: i64| {
        only_plaintext(vec![plaintext(
            "/spec/replicas",
            OverriderOperator::Replace,
            Some(json!(n)),
        )])
    };
    let by_name = ResourceSelector {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: "nginx".into(),
        ..Default::default()
    };
    let match_all = ResourceSelector {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        ..Default::default()
    };
    // The last applied wins: the by-name OP "a" must be applied after the match-all OP "z".
    let ops = vec![
        op(
            "default",
            "a",
            OverrideSpec {
                resource_selectors: vec![by_name.clone()],
                ..spec(vec![rule(None, replicas(1))])
            },
        ),
        op(
            "default",
            "z",
            OverrideSpec {
                resource_selectors: vec![match_all.clone()],
                ..spec(vec![rule(None, replicas(2))])
            },
        ),
        op("other-ns", "zz", spec(vec![rule(None, replicas(99))])),
    ];
    let cops = vec![
        cop("c2", spec(vec![rule(None, replicas(30))])),
        cop("c1", spec(vec![rule(None, replicas(31))])),
        cop("c0", spec(vec![rule(Some("member2"), replicas(32))])),
    ];
    let result = apply_overrides(&deployment(), &cluster("member1"), &cops, &ops).unwrap();
    assert_eq!(result.manifest["spec"]["replicas"], json!(1));
    let names = |a: &AppliedOverrides| {
        a.items
            .iter()
            .map(|i| i.policy_name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&result.applied_cluster_overrides), vec!["c1", "c2"]);
    assert_eq!(names(&result.applied_overrides), vec!["z", "a"]);

    // Only cluster policies apply to cluster-scoped resources.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}});
    let cops = vec![cop(
        "label",
        spec(vec![rule(
            None,
            labels_overrider(OverriderOperator::Add, &[("a", "b")], false),
        )]),
    )];
    let ops = vec![op(
        "",
        "ignored",
        spec(vec![rule(
            None,
            labels_overrider(OverriderOperator::Add, &[("c", "d")], false),
        )]),
    )];
    let result = apply_overrides(&ns, &cluster("member1"), &cops, &ops).unwrap();
    assert_eq!(result.manifest["metadata"]["labels"], json!({"a": "b"}));
    assert!(result.applied_overrides.is_empty());
}

#[test]
fn target_cluster_selection_and_deprecated_form() {
    let deprecated = OverrideSpec {
        target_cluster: Some(ClusterAffinity {
            label_selector: Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                    match_labels: Some([("env".to_owned(), "member2".to_owned())].into()),
                    match_expressions: None,
                },
            ),
            ..Default::default()
        }),
        overriders: labels_overrider(OverriderOperator::Add, &[("x", "y")], false),
        ..Default::default()
    };
    let policies = [op("default", "old", deprecated)];
    let r1 = apply_overrides(&deployment(), &cluster("member1"), &[], &policies).unwrap();
    assert_eq!(r1.manifest, deployment());
    assert!(r1.applied_overrides.is_empty());
    let r2 = apply_overrides(&deployment(), &cluster("member2"), &[], &policies).unwrap();
    assert_eq!(r2.manifest["metadata"]["labels"]["x"], json!("y"));
    assert_eq!(r2.applied_overrides.items.len(), 1);

    // A policy with nothing but selectors is still recorded as applied (Karmada's behaviour).
    let empty = [op("default", "empty", OverrideSpec::default())];
    let r = apply_overrides(&deployment(), &cluster("member1"), &[], &empty).unwrap();
    assert_eq!(
        r.applied_overrides.annotation_value().as_deref(),
        Some(r#"[{"policyName":"empty","overriders":{}}]"#)
    );
}

#[test]
fn annotation_shape_matches_go() {
    let overriders = Overriders {
        plaintext: vec![
            plaintext("/spec/replicas", OverriderOperator::Replace, Some(json!(2))),
            plaintext("/metadata/labels/app", OverriderOperator::Remove, None),
        ],
        image_overrider: vec![ImageOverrider {
            predicate: None,
            component: ImageComponent::Registry,
            operator: OverriderOperator::Replace,
            value: "a.io".into(),
        }],
        labels_overrider: vec![LabelAnnotationOverrider {
            operator: OverriderOperator::Add,
            value: [("k".to_owned(), "<v>".to_owned())].into(),
        }],
        field_overrider: vec![FieldOverrider {
            field_path: "/data/x".into(),
            json: vec![JsonPatchOperation {
                sub_path: "/a".into(),
                operator: OverriderOperator::Remove,
                value: None,
            }],
            yaml: vec![],
        }],
        ..Default::default()
    };
    let applied = AppliedOverrides {
        items: vec![
            AppliedOverride {
                policy_name: "b".into(),
                overriders: Overriders::default(),
            },
            AppliedOverride {
                policy_name: "a".into(),
                overriders,
            },
        ],
    };
    assert_eq!(
        applied.annotation_value().unwrap(),
        concat!(
            r#"[{"policyName":"a","overriders":{"plaintext":[{"path":"/spec/replicas","operator":"replace","value":2},"#,
            r#"{"path":"/metadata/labels/app","operator":"remove","value":null}],"#,
            r#""imageOverrider":[{"component":"Registry","operator":"replace","value":"a.io"}],"#,
            r#""labelsOverrider":[{"operator":"add","value":{"k":"\u003cv\u003e"}}],"#,
            r#""fieldOverrider":[{"fieldPath":"/data/x","json":[{"subPath":"/a","operator":"remove","value":null}]}]}},"#,
            r#"{"policyName":"b","overriders":{}}]"#
        )
    );
    assert_eq!(AppliedOverrides::default().annotation_value(), None);

    let mut annotations = BTreeMap::new();
    let result = OverrideResult {
        manifest: Value::Null,
        applied_cluster_overrides: applied.clone(),
        applied_overrides: AppliedOverrides::default(),
    };
    result.record_annotations(&mut annotations);
    assert_eq!(annotations.len(), 1);
    assert!(annotations.contains_key(APPLIED_CLUSTER_OVERRIDES_ANNOTATION));
}

#[test]
fn override_spec_matching() {
    let d = deployment();
    let id = ResourceIdentity::from_manifest(&d);
    assert!(override_spec_matches(&OverrideSpec::default(), id.as_ref()));
    let other = OverrideSpec {
        resource_selectors: vec![ResourceSelector {
            api_version: "v1".into(),
            kind: "Service".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    assert!(!override_spec_matches(&other, id.as_ref()));

    let any_deployment = OverrideSpec {
        resource_selectors: vec![ResourceSelector {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    assert!(override_policy_matches(
        &op("default", "a", any_deployment.clone()),
        id.as_ref()
    ));
    assert!(!override_policy_matches(
        &op("other", "a", any_deployment.clone()),
        id.as_ref()
    ));
    assert!(cluster_override_policy_matches(
        &cop("c", any_deployment),
        id.as_ref()
    ));
    assert!(!cluster_override_policy_matches(
        &cop("c", other),
        id.as_ref()
    ));
}

#[test]
fn yaml_parser_behaviour() {
    // Pin how embedded YAML is read: mappings, sequences, numbers and quoted strings.
    let doc = yaml::parse("a: 1\nb: [x, 'y']\nc: \"2\"\nd: 1.5\ne: true\nf: null\n").unwrap();
    assert_eq!(
        doc.to_value().unwrap(),
        json!({"a": 1, "b": ["x", "y"], "c": "2", "d": 1.5, "e": true, "f": null})
    );
    assert!(yaml::parse("a: [unclosed").is_err());
}

#[test]
fn yaml_one_one_booleans_round_trip_like_go_yaml() {
    // go-yaml v2 reads `yes`/`on` as booleans and writes them back as `true`.
    let doc = yaml::parse("g: yes\nh: on\nl: 1e3\n").unwrap();
    assert_eq!(yaml::emit(&doc), "g: true\nh: true\nl: 1000\n");
}
