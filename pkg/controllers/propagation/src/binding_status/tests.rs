use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use karmada_apis::ResourceBindingSpec;
use karmada_apis::policy::v1alpha1::PurgeMode;
use karmada_apis::well_known::WORK_APPLIED;
use karmada_apis::work::v1alpha1::{ManifestStatus, ResourceIdentifier, WorkloadTemplate};
use karmada_apis::work::v1alpha2::{
    AggregatedStatusItem, ObjectReference as TemplateReference, ResourceHealth,
};
use karmada_apis::work::v1alpha2::{GracefulEvictionTask, TargetCluster};
use karmada_apis::{WorkSpec, WorkStatus};
use karmada_controllers_common::set_condition;
use serde_json::json;

use super::*;

fn template() -> TemplateReference {
    TemplateReference {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        namespace: "default".into(),
        name: "nginx".into(),
        ..Default::default()
    }
}

fn t0() -> Time {
    Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

fn applied(status: &str, message: &str) -> Condition {
    Condition {
        type_: WORK_APPLIED.into(),
        status: status.into(),
        reason: "x".into(),
        message: message.into(),
        observed_generation: None,
        last_transition_time: t0(),
    }
}

fn work(cluster: &str, conditions: Vec<Condition>, ordinal: i64) -> Work {
    let mut w = Work::new(
        "nginx-687f7fb96f",
        WorkSpec {
            workload: WorkloadTemplate {
                manifests: vec![
                    json!({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"namespace": "default", "name": "nginx"}})
                    .into(),
                ],
            },
            ..Default::default()
        },
    );
    w.metadata.namespace = Some(format!("karmada-es-{cluster}"));
    w.status = Some(WorkStatus {
        conditions,
        manifest_statuses: vec![ManifestStatus {
            identifier: ResourceIdentifier {
                ordinal,
                group: "apps".into(),
                version: "v1".into(),
                kind: "Deployment".into(),
                resource: "deployments".into(),
                namespace: "default".into(),
                name: "nginx".into(),
            },
            status: Some(json!({"readyReplicas": 2}).into()),
            health: Some(ResourceHealth::Healthy),
        }],
    });
    w
}

#[test]
fn applied_work_reports_status_and_health() {
    let item = aggregated_item(&work("m1", vec![applied("True", "")], 0), &template(), "rb")
        .unwrap()
        .unwrap();
    assert_eq!(item.cluster_name, "m1");
    assert!(item.applied);
    assert_eq!(item.status, Some(json!({"readyReplicas": 2}).into()));
    assert_eq!(item.health, Some(ResourceHealth::Healthy));
}

#[test]
fn unapplied_work_reports_message_and_unknown_health() {
    let item = aggregated_item(
        &work("m1", vec![applied("False", "boom")], 0),
        &template(),
        "rb",
    )
    .unwrap()
    .unwrap();
    assert!(!item.applied);
    assert_eq!(item.applied_message, "boom");
    assert_eq!(item.status, None);
    assert_eq!(item.health, Some(ResourceHealth::Unknown));
    // no Applied condition yet
    let item = aggregated_item(&work("m1", vec![], 0), &template(), "rb")
        .unwrap()
        .unwrap();
    assert!(!item.applied);
    assert_eq!(item.applied_message, "");
}

#[test]
fn status_of_another_manifest_is_not_used() {
    let item = aggregated_item(&work("m1", vec![applied("True", "")], 3), &template(), "rb")
        .unwrap()
        .unwrap();
    assert!(item.applied);
    assert_eq!(item.status, None);
    assert_eq!(item.health, Some(ResourceHealth::Unknown));
}

#[test]
fn work_without_the_template_is_an_error() {
    let mut other = template();
    other.name = "other".into();
    let err =
        aggregated_item(&work("m1", vec![], 0), &other, "ResourceBinding default/x").unwrap_err();
    assert!(err.to_string().contains("karmada-es-m1/nginx-687f7fb96f"));
    let mut deleting = work("m1", vec![], 0);
    deleting.metadata.deletion_timestamp = Some(t0());
    assert!(
        aggregated_item(&deleting, &template(), "rb")
            .unwrap()
            .is_none()
    );
}

fn item(cluster: &str, applied: bool) -> AggregatedStatusItem {
    AggregatedStatusItem {
        cluster_name: cluster.into(),
        applied,
        ..Default::default()
    }
}

fn spec(clusters: &[&str]) -> ResourceBindingSpec {
    ResourceBindingSpec {
        resource: template(),
        clusters: clusters
            .iter()
            .map(|c| TargetCluster {
                name: (*c).into(),
                replicas: 1,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

#[test]
fn fully_applied_rules() {
    let s = spec(&["m1", "m2"]);
    let c = fully_applied_condition(&s, &[item("m1", true), item("m2", true)], t0());
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("True", "FullyAppliedSuccess")
    );
    assert_eq!(c.message, "All works have been successfully applied");
    let c = fully_applied_condition(&s, &[item("m1", true), item("m2", false)], t0());
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "FullyAppliedFailed")
    );
    assert_eq!(
        c.message,
        "Failed to apply all works, see status.aggregatedStatus for details"
    );
    // missing Work, extra Work, not scheduled
    assert!(!fully_applied(&[item("m1", true)], &binding_clusters(&s)));
    assert!(!fully_applied(
        &[item("m1", true), item("m3", true)],
        &binding_clusters(&s)
    ));
    assert!(!fully_applied(&[], &binding_clusters(&spec(&[]))));
}

#[test]
fn evicted_clusters_count_unless_purged_directly() {
    let mut s = spec(&["m1"]);
    s.graceful_eviction_tasks = vec![
        GracefulEvictionTask {
            from_cluster: "m2".into(),
            ..Default::default()
        },
        GracefulEvictionTask {
            from_cluster: "m3".into(),
            purge_mode: Some(PurgeMode::Directly),
            ..Default::default()
        },
    ];
    let clusters: Vec<_> = binding_clusters(&s).into_iter().collect();
    assert_eq!(clusters, vec!["m1".to_string(), "m2".to_string()]);
}

#[test]
fn condition_transition_time_only_moves_with_status() {
    let s = spec(&["m1"]);
    let later = Time(k8s_openapi::jiff::Timestamp::from_second(1000).unwrap());
    let mut conditions = vec![];
    set_condition(
        &mut conditions,
        fully_applied_condition(&s, &[item("m1", true)], t0()),
    );
    set_condition(
        &mut conditions,
        fully_applied_condition(&s, &[item("m1", true)], later.clone()),
    );
    assert_eq!(conditions.len(), 1);
    assert_eq!(conditions[0].last_transition_time, t0());
    set_condition(
        &mut conditions,
        fully_applied_condition(&s, &[item("m1", false)], later.clone()),
    );
    assert_eq!(conditions[0].last_transition_time, later);
}

#[test]
fn drifted_condition_names_the_clusters_and_clears() {
    use super::aggregate::drifted_condition;
    // A binding that never drifted gets no condition.
    assert!(drifted_condition(&[], &[], t0()).is_none());
    let drifted =
        drifted_condition(&[], &["member1".into(), "member2".into()], t0()).expect("condition");
    assert_eq!(
        (drifted.status.as_str(), drifted.reason.as_str()),
        ("True", "DriftDetected")
    );
    assert!(
        drifted.message.contains("member1, member2"),
        "{}",
        drifted.message
    );
    let cleared = drifted_condition(&[drifted], &[], t0()).expect("condition");
    assert_eq!(
        (cleared.status.as_str(), cleared.reason.as_str()),
        ("False", "NoDrift")
    );
}
