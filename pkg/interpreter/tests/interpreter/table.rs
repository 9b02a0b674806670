//! The rule table: lookup by group and kind, extension and override.

use karmada_apis::work::v1alpha1::ResourceHealth;
use karmada_interpreter::{
    Cause, GroupKind, Interpreter, InterpreterOptions, KindRules, Operation, Replicas,
};
use serde_json::{Value, json};

use crate::interpreter;

fn widget(replicas: i64) -> Value {
    json!({"apiVersion": "example.io/v1alpha1", "kind": "Widget", "metadata": {"name": "w", "namespace": "n"},
        "spec": {"size": replicas}, "status": {"ready": true}})
}

#[test]
fn group_kind_from_api_version() {
    assert_eq!(
        GroupKind::from_api_version("apps/v1", "Deployment"),
        GroupKind::new("apps", "Deployment")
    );
    assert_eq!(
        GroupKind::from_api_version("v1", "Pod"),
        GroupKind::new("", "Pod")
    );
    assert_eq!(
        GroupKind::new("apps", "Deployment").to_string(),
        "Deployment.apps"
    );
    assert_eq!(GroupKind::new("", "Pod").to_string(), "Pod");
    assert!(GroupKind::of(&json!({"apiVersion": "v1"})).is_err());
}

#[test]
fn native_table_covers_karmadas_kinds() {
    let i = interpreter();
    let has = |g: &str, k: &str, op| i.hook_enabled(&GroupKind::new(g, k), op);
    for (g, k) in [
        ("apps", "Deployment"),
        ("apps", "StatefulSet"),
        ("apps", "ReplicaSet"),
        ("batch", "Job"),
        ("", "Pod"),
    ] {
        assert!(has(g, k, Operation::InterpretReplica), "{k}");
    }
    for (g, k) in [
        ("apps", "Deployment"),
        ("apps", "StatefulSet"),
        ("apps", "ReplicaSet"),
        ("apps", "DaemonSet"),
        ("", "Service"),
        ("networking.k8s.io", "Ingress"),
        ("", "PersistentVolumeClaim"),
        ("", "Pod"),
        ("policy", "PodDisruptionBudget"),
    ] {
        assert!(has(g, k, Operation::InterpretHealth), "{k}");
    }
    for (g, k) in [
        ("apps", "Deployment"),
        ("apps", "StatefulSet"),
        ("apps", "ReplicaSet"),
        ("apps", "DaemonSet"),
        ("batch", "Job"),
        ("batch", "CronJob"),
        ("", "Service"),
        ("networking.k8s.io", "Ingress"),
        ("", "Pod"),
        ("", "PersistentVolume"),
        ("", "PersistentVolumeClaim"),
        ("policy", "PodDisruptionBudget"),
        ("autoscaling", "HorizontalPodAutoscaler"),
    ] {
        assert!(has(g, k, Operation::AggregateStatus), "{k}");
    }
    for (g, k) in [
        ("apps", "Deployment"),
        ("", "Pod"),
        ("", "Service"),
        ("", "ServiceAccount"),
        ("", "PersistentVolumeClaim"),
        ("", "PersistentVolume"),
        ("batch", "Job"),
        ("", "Secret"),
    ] {
        assert!(has(g, k, Operation::Retain), "{k}");
    }
    assert!(!has("", "ConfigMap", Operation::Retain));
    assert!(!has(
        "example.io",
        "Deployment",
        Operation::InterpretReplica
    ));
    assert!(format!("{i:?}").contains("Deployment"));
}

#[test]
fn custom_kinds_get_every_operation() {
    let mut i = interpreter();
    let gk = GroupKind::new("example.io", "Widget");
    assert_eq!(i.get_replicas(&widget(3)).unwrap(), None);
    i.register(
        gk.clone(),
        KindRules::default()
            .with_replicas(|o, ctx| {
                let size = o["spec"]["size"].as_i64().ok_or_else(|| {
                    ctx.error(Cause::Missing { path: "spec.size".into() })
                })?;
                Ok(Replicas { replicas: i32::try_from(size).unwrap_or(i32::MAX), requirements: None })
            })
            .with_revise_replica(|o, n, _| {
                o["spec"]["size"] = json!(n);
                Ok(())
            })
            .with_health(|o, _| Ok(o["status"]["ready"] == json!(true)))
            .with_aggregate_status(|_, items, ctx| {
                Ok(Some(json!({"clusters": items.len(), "at": serde_json::to_value(ctx.now()).unwrap_or_default()})))
            }),
    );
    assert!(i.hook_enabled(&gk, Operation::InterpretReplica));
    assert!(!i.hook_enabled(&gk, Operation::Retain));
    assert_eq!(i.get_replicas(&widget(3)).unwrap().unwrap().replicas, 3);
    let mut w = widget(3);
    assert!(i.revise_replica(&mut w, 1).unwrap());
    assert_eq!(w["spec"]["size"], json!(1));
    assert_eq!(i.interpret_health(&widget(1)), ResourceHealth::Healthy);
    let mut not_ready = widget(1);
    not_ready["status"]["ready"] = json!(false);
    assert_eq!(i.interpret_health(&not_ready), ResourceHealth::Unhealthy);
    assert_eq!(
        i.aggregate_status(&widget(1), &[crate::item("a", None)])
            .unwrap(),
        Some(json!({"clusters": 1, "at": crate::NOW}))
    );
    let mut bad = widget(1);
    bad["spec"]["size"] = json!("x");
    assert_eq!(
        i.get_replicas(&bad).unwrap_err().to_string(),
        "Widget n/w: field `spec.size` is missing"
    );
    // Defaults still apply to operations the custom rules leave out.
    assert_eq!(
        i.reflect_status(&widget(1)).unwrap(),
        Some(json!({"ready": true}))
    );

    assert!(i.unregister(&gk).is_some());
    assert_eq!(i.get_replicas(&widget(3)).unwrap(), None);
}

#[test]
fn registering_over_a_native_kind_replaces_only_the_given_operations() {
    let mut i = interpreter();
    let deployment = GroupKind::new("apps", "Deployment");
    i.register(
        deployment.clone(),
        KindRules::default().with_health(|_, _| Ok(false)),
    );
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "generation": 1},
        "spec": {"replicas": 2}, "status": {"observedGeneration": 1, "updatedReplicas": 2, "availableReplicas": 2}});
    assert_eq!(i.interpret_health(&d), ResourceHealth::Unhealthy);
    assert_eq!(i.get_replicas(&d).unwrap().unwrap().replicas, 2);
    assert_eq!(interpreter().interpret_health(&d), ResourceHealth::Healthy);
}

#[test]
fn an_interpreter_without_native_rules_uses_the_defaults() {
    let i = Interpreter::without_native_rules(InterpreterOptions::default());
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "uid": "u"},
        "spec": {"replicas": 2}, "status": {"replicas": 5}});
    assert_eq!(i.get_replicas(&d).unwrap(), None);
    assert_eq!(i.reflect_status(&d).unwrap(), Some(json!({"replicas": 5})));
    assert_eq!(i.interpret_health(&d), ResourceHealth::Healthy);
    assert_eq!(i.aggregate_status(&d, &[]).unwrap(), None);
    let mut pruned = d.clone();
    i.prune(&mut pruned).unwrap();
    assert_eq!(
        pruned,
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 2}})
    );
}

#[test]
fn interpreter_is_shareable_across_workers() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Interpreter>();
    assert_send_sync::<KindRules>();
}
