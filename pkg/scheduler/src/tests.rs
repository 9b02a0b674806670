use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use karmada_apis::cluster::v1alpha1::{ApiEnablement, ApiResource, ResourceSummary};
use karmada_apis::names::fnv32a;
use karmada_apis::policy::v1alpha1::{
    ClusterAffinity, ClusterAffinityTerm, ClusterPreferences, DynamicWeightFactor,
    OverflowClusterAffinity, Placement, ReplicaDivisionPreference, ReplicaSchedulingStrategy,
    ReplicaSchedulingType, SpreadConstraint, SpreadFieldValue, StaticClusterWeight,
};
use karmada_apis::well_known::{
    CLUSTER_CONDITION_COMPLETE_API_ENABLEMENTS, TAINT_CLUSTER_NOT_READY,
};
use karmada_apis::work::v1alpha2::{
    Component, ComponentReplicaRequirements, GracefulEvictionTask, ObjectReference,
    ReplicaRequirements, ResourceBindingSpec, ResourceBindingStatus, TargetCluster,
};
use karmada_apis::{Cluster, ClusterSpec, ClusterStatus};

use super::*;

// ---------------------------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------------------------

fn complete_condition() -> Condition {
    Condition {
        type_: CLUSTER_CONDITION_COMPLETE_API_ENABLEMENTS.into(),
        status: "True".into(),
        reason: "Complete".into(),
        message: String::new(),
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
        observed_generation: None,
    }
}

fn cluster(name: &str) -> Cluster {
    Cluster {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        spec: ClusterSpec::default(),
        status: Some(ClusterStatus {
            api_enablements: vec![
                ApiEnablement {
                    group_version: "apps/v1".into(),
                    resources: vec![ApiResource {
                        name: "deployments".into(),
                        kind: "Deployment".into(),
                    }],
                },
                ApiEnablement {
                    group_version: "v1".into(),
                    resources: vec![ApiResource {
                        name: "configmaps".into(),
                        kind: "ConfigMap".into(),
                    }],
                },
            ],
            conditions: vec![complete_condition()],
            resource_summary: Some(ResourceSummary {
                allocatable: [("pods".to_owned(), Quantity("110".into()))].into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
    }
}

fn with_pods(mut c: Cluster, pods: i64) -> Cluster {
    if let Some(summary) = c.status.as_mut().and_then(|s| s.resource_summary.as_mut()) {
        summary
            .allocatable
            .insert("pods".into(), Quantity(pods.to_string()));
    }
    c
}

fn with_label(mut c: Cluster, key: &str, value: &str) -> Cluster {
    c.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(key.into(), value.into());
    c
}

fn with_region(mut c: Cluster, region: &str) -> Cluster {
    c.spec.region = region.into();
    c
}

fn with_taint(mut c: Cluster, key: &str, effect: &str) -> Cluster {
    c.spec.taints.push(Taint {
        key: key.into(),
        effect: effect.into(),
        value: None,
        time_added: None,
    });
    c
}

fn deleting(mut c: Cluster) -> Cluster {
    c.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    c
}

fn names(clusters: &[&str]) -> Vec<String> {
    clusters.iter().map(|c| (*c).to_owned()).collect()
}

fn affinity_names(clusters: &[&str]) -> ClusterAffinity {
    ClusterAffinity {
        cluster_names: names(clusters),
        ..Default::default()
    }
}

fn divided(
    preference: Option<ReplicaDivisionPreference>,
    weights: Option<ClusterPreferences>,
) -> Option<ReplicaSchedulingStrategy> {
    Some(ReplicaSchedulingStrategy {
        replica_scheduling_type: ReplicaSchedulingType::Divided,
        replica_division_preference: preference,
        weight_preference: weights,
    })
}

fn static_weights(pairs: &[(&str, i64)]) -> Option<ReplicaSchedulingStrategy> {
    divided(
        Some(ReplicaDivisionPreference::Weighted),
        Some(ClusterPreferences {
            static_weight_list: pairs
                .iter()
                .map(|(c, w)| StaticClusterWeight {
                    target_cluster: affinity_names(&[c]),
                    weight: *w,
                })
                .collect(),
            dynamic_weight: None,
        }),
    )
}

fn dynamic_weights() -> Option<ReplicaSchedulingStrategy> {
    divided(
        Some(ReplicaDivisionPreference::Weighted),
        Some(ClusterPreferences {
            static_weight_list: vec![],
            dynamic_weight: Some(DynamicWeightFactor::AvailableReplicas),
        }),
    )
}

fn aggregated() -> Option<ReplicaSchedulingStrategy> {
    divided(Some(ReplicaDivisionPreference::Aggregated), None)
}

fn duplicated() -> Option<ReplicaSchedulingStrategy> {
    Some(ReplicaSchedulingStrategy {
        replica_scheduling_type: ReplicaSchedulingType::Duplicated,
        ..Default::default()
    })
}

fn deployment_spec(replicas: i32, placement: Placement) -> ResourceBindingSpec {
    ResourceBindingSpec {
        resource: ObjectReference {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: "default".into(),
            name: "nginx".into(),
            uid: String::new(),
            resource_version: String::new(),
        },
        replicas,
        placement: Some(placement),
        ..Default::default()
    }
}

fn configmap_spec(placement: Placement) -> ResourceBindingSpec {
    let mut spec = deployment_spec(0, placement);
    spec.resource.api_version = "v1".into();
    spec.resource.kind = "ConfigMap".into();
    spec
}

fn tc(name: &str, replicas: i32) -> TargetCluster {
    TargetCluster {
        name: name.into(),
        replicas,
        components: vec![],
    }
}

fn pairs(clusters: &[TargetCluster]) -> Vec<(&str, i32)> {
    clusters
        .iter()
        .map(|c| (c.name.as_str(), c.replicas))
        .collect()
}

fn run(spec: &ResourceBindingSpec, clusters: &[Cluster]) -> Result<ScheduleResult, ScheduleError> {
    schedule(spec, None, clusters, &ScheduleOptions::default())
}

fn ok_pairs(spec: &ResourceBindingSpec, clusters: &[Cluster]) -> Vec<(String, i32)> {
    match run(spec, clusters) {
        Ok(r) => r
            .clusters
            .into_iter()
            .map(|c| (c.name, c.replicas))
            .collect(),
        Err(e) => panic!("scheduling failed: {e}"),
    }
}

fn owned(v: &[(&str, i32)]) -> Vec<(String, i32)> {
    v.iter().map(|(n, r)| ((*n).to_owned(), *r)).collect()
}

fn uid_with_parity(parity: u32) -> String {
    (0..1000)
        .map(|i| format!("uid-{i}"))
        .find(|u| fnv32a(u.as_bytes()) & 1 == parity)
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Filters
// ---------------------------------------------------------------------------------------------

#[test]
fn cluster_affinity_names_exclude_and_labels() {
    let clusters = vec![
        with_label(cluster("m1"), "env", "prod"),
        with_label(cluster("m2"), "env", "dev"),
        cluster("m3"),
    ];
    let placement = Placement {
        cluster_affinity: Some(ClusterAffinity {
            cluster_names: names(&["m1", "m2"]),
            exclude_clusters: names(&["m2"]),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        ok_pairs(&configmap_spec(placement), &clusters),
        owned(&[("m1", 0)])
    );

    let placement = Placement {
        cluster_affinity: Some(ClusterAffinity {
            label_selector: Some(LabelSelector {
                match_labels: Some([("env".to_owned(), "dev".to_owned())].into()),
                match_expressions: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        ok_pairs(&configmap_spec(placement), &clusters),
        owned(&[("m2", 0)])
    );

    // Without affinity every cluster is selected.
    let all = ok_pairs(&configmap_spec(Placement::default()), &clusters);
    assert_eq!(all.len(), 3);
}

#[test]
fn no_cluster_fit_reports_diagnosis() {
    let clusters = vec![cluster("m1"), cluster("m2"), deleting(cluster("m3"))];
    let placement = Placement {
        cluster_affinity: Some(affinity_names(&["nope"])),
        ..Default::default()
    };
    let err = run(&configmap_spec(placement), &clusters).unwrap_err();
    assert_eq!(
        err.to_string(),
        "0/3 clusters are available: 2 cluster(s) did not match the placement cluster affinity constraint."
    );
    assert_eq!(err.reason(), "NoClusterFit");
    assert!(err.clears_clusters());
    assert!(!err.should_retry());
    match &err {
        ScheduleError::NoClusterFit { diagnosis, .. } => assert_eq!(diagnosis.len(), 2),
        other => panic!("unexpected {other:?}"),
    }
    // Only deleting clusters: nothing diagnosed.
    let err = run(
        &configmap_spec(Placement::default()),
        &[deleting(cluster("m1"))],
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "0/1 clusters are available: no cluster exists."
    );
    let err = run(
        &configmap_spec(Placement::default()),
        &Vec::<Cluster>::new(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "0/0 clusters are available: no cluster exists."
    );
}

#[test]
fn deleting_clusters_are_excluded() {
    let clusters = vec![deleting(cluster("m1")), cluster("m2")];
    assert_eq!(
        ok_pairs(&configmap_spec(Placement::default()), &clusters),
        owned(&[("m2", 0)])
    );
}

#[test]
fn taints_and_tolerations() {
    let clusters = vec![
        with_taint(cluster("m1"), TAINT_CLUSTER_NOT_READY, "NoSchedule"),
        cluster("m2"),
        with_taint(cluster("m3"), "soft", "PreferNoSchedule"),
        with_taint(cluster("m4"), "evict", "NoExecute"),
    ];
    let spec = configmap_spec(Placement::default());
    assert_eq!(ok_pairs(&spec, &clusters), owned(&[("m2", 0), ("m3", 0)]));

    let tolerant = Placement {
        cluster_tolerations: vec![Toleration {
            key: Some(TAINT_CLUSTER_NOT_READY.into()),
            operator: Some("Exists".into()),
            effect: Some("NoSchedule".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    assert_eq!(
        ok_pairs(&configmap_spec(tolerant), &clusters),
        owned(&[("m1", 0), ("m2", 0), ("m3", 0)])
    );

    // A cluster already in the result is kept despite an untolerated taint.
    let mut spec = configmap_spec(Placement::default());
    spec.clusters = vec![tc("m1", 0)];
    let result = ok_pairs(&spec, &clusters);
    assert!(result.iter().any(|(n, _)| n == "m1"), "{result:?}");

    let err = run(&configmap_spec(Placement::default()), &clusters[..1]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "0/1 clusters are available: 1 cluster(s) had untolerated taint {cluster.karmada.io/not-ready:NoSchedule}."
    );
}

#[test]
fn api_enablement_filter() {
    let mut missing = cluster("m1");
    if let Some(s) = missing.status.as_mut() {
        s.api_enablements.retain(|e| e.group_version != "apps/v1");
    }
    let mut unknown = cluster("m2");
    if let Some(s) = unknown.status.as_mut() {
        s.api_enablements.clear();
        s.conditions.clear();
    }
    let clusters = vec![missing, unknown, cluster("m3")];
    let spec = deployment_spec(
        2,
        Placement {
            replica_scheduling: duplicated(),
            ..Default::default()
        },
    );
    assert_eq!(ok_pairs(&spec, &clusters), owned(&[("m3", 2)]));

    // Already scheduled clusters pass regardless.
    let mut spec = spec;
    spec.clusters = vec![tc("m1", 2)];
    let got = ok_pairs(&spec, &clusters);
    assert!(got.contains(&("m1".to_owned(), 2)), "{got:?}");

    let err = run(&deployment_spec(1, Placement::default()), &clusters[..2]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "0/2 clusters are available: 2 cluster(s) did not have the API resource."
    );
}

#[test]
fn graceful_eviction_excludes_cluster() {
    let mut spec = configmap_spec(Placement::default());
    spec.graceful_eviction_tasks = vec![GracefulEvictionTask {
        from_cluster: "m1".into(),
        reason: "TaintUntolerated".into(),
        producer: "TaintManager".into(),
        ..Default::default()
    }];
    assert_eq!(
        ok_pairs(&spec, &[cluster("m1"), cluster("m2")]),
        owned(&[("m2", 0)])
    );
}

// ---------------------------------------------------------------------------------------------
// clusterAffinities
// ---------------------------------------------------------------------------------------------

fn term(name: &str, clusters: &[&str]) -> ClusterAffinityTerm {
    ClusterAffinityTerm {
        affinity_name: name.into(),
        cluster_affinity: affinity_names(clusters),
        overflow_affinities: vec![],
    }
}

#[test]
fn cluster_affinities_fall_back_in_order() {
    let clusters = vec![cluster("m1"), cluster("m2")];
    let placement = Placement {
        cluster_affinities: vec![
            term("local", &["gone"]),
            term("cloud", &["m2"]),
            term("all", &["m1", "m2"]),
        ],
        ..Default::default()
    };
    let spec = configmap_spec(placement);
    let report = schedule_detailed(&spec, None, &clusters, &ScheduleOptions::default());
    let result = report.result.unwrap();
    assert_eq!(result.affinity_name.as_deref(), Some("cloud"));
    assert_eq!(pairs(&result.clusters), vec![("m2", 0)]);
    assert_eq!(report.failed_terms.len(), 1);
    assert_eq!(report.failed_terms[0].affinity_name, "local");
    assert_eq!(report.failed_terms[0].index, 0);

    // Starting from the observed term.
    let status = ResourceBindingStatus {
        scheduler_observed_affinity_name: "all".into(),
        ..Default::default()
    };
    let result = schedule(&spec, Some(&status), &clusters, &ScheduleOptions::default()).unwrap();
    assert_eq!(result.affinity_name.as_deref(), Some("all"));
    assert_eq!(result.clusters.len(), 2);

    // A reschedule request starts from the first term again.
    let mut rescheduled = spec.clone();
    rescheduled.reschedule_triggered_at = Some(Time(
        Timestamp::from_second(200).unwrap_or(Timestamp::UNIX_EPOCH),
    ));
    let status = ResourceBindingStatus {
        scheduler_observed_affinity_name: "all".into(),
        last_scheduled_time: Some(Time(
            Timestamp::from_second(100).unwrap_or(Timestamp::UNIX_EPOCH),
        )),
        ..Default::default()
    };
    let result = schedule(
        &rescheduled,
        Some(&status),
        &clusters,
        &ScheduleOptions::default(),
    )
    .unwrap();
    assert_eq!(result.affinity_name.as_deref(), Some("cloud"));

    // All terms failing: the first term's error.
    let failing = configmap_spec(Placement {
        cluster_affinities: vec![term("a", &["x"]), term("b", &["y"])],
        ..Default::default()
    });
    let report = schedule_detailed(&failing, None, &clusters, &ScheduleOptions::default());
    assert!(matches!(
        report.result,
        Err(ScheduleError::NoClusterFit { .. })
    ));
    assert_eq!(report.failed_terms.len(), 2);
}

#[test]
fn overflow_affinities_fill_primary_first() {
    let clusters = vec![with_pods(cluster("m1"), 5), with_pods(cluster("m2"), 10)];
    let placement = Placement {
        cluster_affinities: vec![ClusterAffinityTerm {
            affinity_name: "primary".into(),
            cluster_affinity: affinity_names(&["m1"]),
            overflow_affinities: vec![OverflowClusterAffinity {
                affinity_name: "burst".into(),
                cluster_affinity: affinity_names(&["m2"]),
            }],
        }],
        replica_scheduling: aggregated(),
        ..Default::default()
    };
    let spec = deployment_spec(8, placement.clone());
    let result = run(&spec, &clusters).unwrap();
    assert_eq!(pairs(&result.clusters), vec![("m1", 5), ("m2", 3)]);
    assert_eq!(result.affinity_name.as_deref(), Some("primary"));

    // Not enough in all groups.
    let err = run(&deployment_spec(100, placement.clone()), &clusters).unwrap_err();
    assert_eq!(err.reason(), "Unschedulable");

    // Non-workloads only use the primary group.
    assert_eq!(
        ok_pairs(&configmap_spec(placement), &clusters),
        owned(&[("m1", 0)])
    );
}

// ---------------------------------------------------------------------------------------------
// Replica assignment
// ---------------------------------------------------------------------------------------------

#[test]
fn duplicated_and_non_workloads() {
    let clusters = vec![cluster("m1"), cluster("m2")];
    let spec = deployment_spec(3, Placement::default());
    assert_eq!(ok_pairs(&spec, &clusters), owned(&[("m1", 3), ("m2", 3)]));
    let spec = configmap_spec(Placement {
        replica_scheduling: static_weights(&[("m1", 1)]),
        ..Default::default()
    });
    // Non-workloads ignore division and go everywhere.
    assert_eq!(ok_pairs(&spec, &clusters), owned(&[("m1", 0), ("m2", 0)]));
    // A workload scaled to zero (with requirements) gets no cluster...
    let mut zero = deployment_spec(0, Placement::default());
    zero.replica_requirements = Some(ReplicaRequirements::default());
    assert_eq!(ok_pairs(&zero, &clusters), owned(&[]));
    // ...unless empty workloads are propagated.
    let result = schedule(
        &zero,
        None,
        &clusters,
        &ScheduleOptions {
            enable_empty_workload_propagation: true,
            ..ScheduleOptions::default()
        },
    )
    .unwrap();
    assert_eq!(pairs(&result.clusters), vec![("m1", 0), ("m2", 0)]);
}

#[test]
fn static_weights_divide_with_webster() {
    let clusters = vec![cluster("m1"), cluster("m2"), cluster("m3")];
    let spec = deployment_spec(
        3,
        Placement {
            replica_scheduling: static_weights(&[("m1", 2), ("m2", 1)]),
            ..Default::default()
        },
    );
    // m3 has no weight and is left out.
    assert_eq!(ok_pairs(&spec, &clusters), owned(&[("m1", 2), ("m2", 1)]));

    let spec = deployment_spec(
        9,
        Placement {
            replica_scheduling: static_weights(&[("m1", 1), ("m2", 3)]),
            ..Default::default()
        },
    );
    assert_eq!(ok_pairs(&spec, &clusters), owned(&[("m1", 2), ("m2", 7)]));

    // No weight preference: equal weights; the remainder follows the uid's tie-break.
    let mut spec = deployment_spec(
        4,
        Placement {
            replica_scheduling: divided(Some(ReplicaDivisionPreference::Weighted), None),
            ..Default::default()
        },
    );
    spec.resource.uid = uid_with_parity(0);
    assert_eq!(
        ok_pairs(&spec, &clusters),
        owned(&[("m1", 2), ("m2", 1), ("m3", 1)])
    );
    spec.resource.uid = uid_with_parity(1);
    assert_eq!(
        ok_pairs(&spec, &clusters),
        owned(&[("m1", 1), ("m2", 1), ("m3", 2)])
    );

    // Division preference unset defaults to Weighted.
    let spec = deployment_spec(
        2,
        Placement {
            replica_scheduling: divided(None, None),
            ..Default::default()
        },
    );
    assert_eq!(
        ok_pairs(&spec, &clusters[..2]),
        owned(&[("m1", 1), ("m2", 1)])
    );

    // Weights whose clusters are all gone: equal weights for the rest.
    let spec = deployment_spec(
        2,
        Placement {
            replica_scheduling: static_weights(&[("gone", 5)]),
            ..Default::default()
        },
    );
    assert_eq!(
        ok_pairs(&spec, &clusters[..2]),
        owned(&[("m1", 1), ("m2", 1)])
    );
}

#[test]
fn static_weight_by_label_takes_highest_matching_weight() {
    let clusters = vec![
        with_label(cluster("m1"), "tier", "gold"),
        with_label(cluster("m2"), "tier", "silver"),
    ];
    let gold = ClusterAffinity {
        label_selector: Some(LabelSelector {
            match_labels: Some([("tier".to_owned(), "gold".to_owned())].into()),
            match_expressions: None,
        }),
        ..Default::default()
    };
    let spec = deployment_spec(
        4,
        Placement {
            replica_scheduling: divided(
                Some(ReplicaDivisionPreference::Weighted),
                Some(ClusterPreferences {
                    static_weight_list: vec![
                        StaticClusterWeight {
                            target_cluster: gold,
                            weight: 3,
                        },
                        StaticClusterWeight {
                            target_cluster: ClusterAffinity::default(),
                            weight: 1,
                        },
                    ],
                    dynamic_weight: None,
                }),
            ),
            ..Default::default()
        },
    );
    assert_eq!(ok_pairs(&spec, &clusters), owned(&[("m1", 3), ("m2", 1)]));
}

#[test]
fn aggregated_uses_fewest_clusters_and_scales_stably() {
    let clusters = vec![
        with_pods(cluster("m1"), 3),
        with_pods(cluster("m2"), 10),
        with_pods(cluster("m3"), 5),
    ];
    let placement = Placement {
        replica_scheduling: aggregated(),
        ..Default::default()
    };
    let spec = deployment_spec(6, placement.clone());
    assert_eq!(ok_pairs(&spec, &clusters), owned(&[("m2", 6)]));

    // Scale up: m2 keeps its replicas; the extra go to the fewest clusters, m2 first.
    let fuller = vec![
        with_pods(cluster("m1"), 3),
        with_pods(cluster("m2"), 4),
        with_pods(cluster("m3"), 5),
    ];
    let mut up = deployment_spec(12, placement.clone());
    up.clusters = vec![tc("m2", 6)];
    assert_eq!(ok_pairs(&up, &fuller), owned(&[("m2", 9), ("m3", 3)]));

    // Scale down: proportional to the previous result, fewest clusters first.
    let mut down = deployment_spec(4, placement.clone());
    down.clusters = vec![tc("m2", 9), tc("m3", 3)];
    assert_eq!(ok_pairs(&down, &fuller), owned(&[("m2", 4)]));

    // Unchanged replicas: the previous result is kept as is.
    let mut same = deployment_spec(12, placement.clone());
    same.clusters = vec![tc("m2", 9), tc("m3", 3)];
    assert_eq!(ok_pairs(&same, &fuller), owned(&[("m2", 9), ("m3", 3)]));

    // Not enough capacity.
    let err = run(&deployment_spec(100, placement), &clusters).unwrap_err();
    assert_eq!(err.reason(), "Unschedulable");
    assert_eq!(
        err.to_string(),
        "failed to assign replicas: failed to scale up: Clusters available replicas 18 are not enough to schedule."
    );
    assert!(!err.clears_clusters());
}

#[test]
fn dynamic_weights_by_available_replicas() {
    let clusters = vec![with_pods(cluster("m1"), 10), with_pods(cluster("m2"), 30)];
    let placement = Placement {
        replica_scheduling: dynamic_weights(),
        ..Default::default()
    };
    assert_eq!(
        ok_pairs(&deployment_spec(8, placement.clone()), &clusters),
        owned(&[("m1", 2), ("m2", 6)])
    );

    let mut down = deployment_spec(4, placement.clone());
    down.clusters = vec![tc("m2", 9), tc("m1", 3)];
    assert_eq!(ok_pairs(&down, &clusters), owned(&[("m1", 1), ("m2", 3)]));

    // A cluster that left the candidates: its replicas are redistributed as a scale up.
    let mut moved = deployment_spec(8, placement.clone());
    moved.clusters = vec![tc("m1", 2), tc("gone", 6)];
    let got = ok_pairs(&moved, &clusters);
    assert_eq!(got.iter().map(|(_, r)| r).sum::<i32>(), 8);
    assert!(got.iter().any(|(n, r)| n == "m1" && *r >= 2), "{got:?}");

    // Resource requests drive the estimate.
    let mut spec = deployment_spec(4, placement);
    spec.replica_requirements = Some(ReplicaRequirements {
        resource_request: [("cpu".to_owned(), Quantity("1".into()))].into(),
        ..Default::default()
    });
    let mut with_cpu = clusters.clone();
    for (c, cpu) in with_cpu.iter_mut().zip(["1", "3"]) {
        if let Some(summary) = c.status.as_mut().and_then(|s| s.resource_summary.as_mut()) {
            summary
                .allocatable
                .insert("cpu".into(), Quantity(cpu.into()));
        }
    }
    assert_eq!(ok_pairs(&spec, &with_cpu), owned(&[("m1", 1), ("m2", 3)]));
    spec.replicas = 5;
    assert_eq!(run(&spec, &with_cpu).unwrap_err().reason(), "Unschedulable");
}

fn with_accurate(
    spec: &ResourceBindingSpec,
    clusters: &[Cluster],
    answers: &[(&str, Option<i32>)],
) -> Vec<(String, i32)> {
    let options = ScheduleOptions {
        accurate_estimates: Some(answers.iter().map(|(n, a)| ((*n).to_owned(), *a)).collect()),
        ..Default::default()
    };
    match schedule(spec, None, clusters, &options) {
        Ok(r) => r
            .clusters
            .into_iter()
            .map(|c| (c.name, c.replicas))
            .collect(),
        Err(e) => panic!("scheduling failed: {e}"),
    }
}

#[test]
fn accurate_estimates_lower_the_general_estimate() {
    // General estimate: m1 10 pods, m2 30 pods.
    let clusters = vec![with_pods(cluster("m1"), 10), with_pods(cluster("m2"), 30)];
    let spec = deployment_spec(
        8,
        Placement {
            replica_scheduling: dynamic_weights(),
            ..Default::default()
        },
    );
    assert_eq!(ok_pairs(&spec, &clusters), owned(&[("m1", 2), ("m2", 6)]));
    // The estimator of m2 says 0: the minimum wins, everything goes to m1.
    assert_eq!(
        with_accurate(&spec, &clusters, &[("m1", Some(10)), ("m2", Some(0))]),
        owned(&[("m1", 8)])
    );
    // A larger accurate answer never raises the general estimate.
    assert_eq!(
        with_accurate(&spec, &clusters, &[("m1", Some(1000)), ("m2", Some(1000))]),
        owned(&[("m1", 2), ("m2", 6)])
    );
    // "Cannot tell" (-1) is ignored for that cluster only.
    assert_eq!(
        with_accurate(
            &spec,
            &clusters,
            &[("m1", Some(UNAUTHENTIC_REPLICA)), ("m2", Some(10))]
        ),
        owned(&[("m1", 4), ("m2", 4)])
    );
}

#[test]
fn one_missing_accurate_answer_discards_them_all() {
    let clusters = vec![with_pods(cluster("m1"), 10), with_pods(cluster("m2"), 30)];
    let spec = deployment_spec(
        8,
        Placement {
            replica_scheduling: dynamic_weights(),
            ..Default::default()
        },
    );
    // m1's estimator did not answer: m2's answer of 0 is ignored too (Karmada's aggregate error).
    assert_eq!(
        with_accurate(&spec, &clusters, &[("m1", None), ("m2", Some(0))]),
        owned(&[("m1", 2), ("m2", 6)])
    );
    // A cluster absent from the answers counts as no answer.
    assert_eq!(
        with_accurate(&spec, &clusters, &[("m2", Some(0))]),
        owned(&[("m1", 2), ("m2", 6)])
    );
    // Clusters filtered out do not matter: only the feasible ones must have answered.
    let mut only_m2 = spec.clone();
    if let Some(p) = only_m2.placement.as_mut() {
        p.cluster_affinity = Some(affinity_names(&["m2"]));
    }
    let options = ScheduleOptions {
        accurate_estimates: Some([("m1".to_owned(), None), ("m2".to_owned(), Some(5))].into()),
        ..Default::default()
    };
    let err = schedule(&only_m2, None, &clusters, &options).unwrap_err();
    assert_eq!(err.reason(), "Unschedulable", "{err}");
}

fn with_cpu(mut c: Cluster, cpu: &str) -> Cluster {
    if let Some(summary) = c.status.as_mut().and_then(|s| s.resource_summary.as_mut()) {
        summary
            .allocatable
            .insert("cpu".into(), Quantity(cpu.into()));
    }
    c
}

/// A two-component workload (1 + 2 replicas of 1 CPU each: 3 pods and 3 CPUs a set) placed on
/// exactly one cluster.
fn two_component_spec() -> ResourceBindingSpec {
    let component = |name: &str, replicas: i32| Component {
        name: name.into(),
        replicas,
        replica_requirements: Some(ComponentReplicaRequirements {
            resource_request: [("cpu".to_owned(), Quantity("1".into()))].into(),
            ..Default::default()
        }),
    };
    let mut spec = deployment_spec(
        0,
        Placement {
            spread_constraints: vec![spread(Some(SpreadFieldValue::Cluster), "", 1, 1)],
            replica_scheduling: aggregated(),
            ..Default::default()
        },
    );
    spec.components = vec![component("jobmanager", 1), component("taskmanager", 2)];
    spec
}

#[test]
fn multi_template_applies_to_two_components_on_exactly_one_cluster() {
    let spec = two_component_spec();
    assert!(multi_template_applicable(&spec));
    let mut one = spec.clone();
    one.components.truncate(1);
    assert!(!multi_template_applicable(&one));
    let mut two_clusters = spec.clone();
    if let Some(p) = two_clusters.placement.as_mut() {
        p.spread_constraints = vec![spread(Some(SpreadFieldValue::Cluster), "", 1, 2)];
    }
    assert!(!multi_template_applicable(&two_clusters));
    let mut by_region = spec.clone();
    if let Some(p) = by_region.placement.as_mut() {
        p.spread_constraints = vec![spread(Some(SpreadFieldValue::Region), "", 1, 1)];
    }
    assert!(!multi_template_applicable(&by_region));
    // A constraint with neither field nor label spreads by cluster (as Karmada's webhook defaults
    // it).
    let mut defaulted = spec.clone();
    if let Some(p) = defaulted.placement.as_mut() {
        p.spread_constraints = vec![spread(None, "", 1, 1)];
    }
    assert!(multi_template_applicable(&defaulted));
    let mut no_placement = spec;
    no_placement.placement = None;
    assert!(!multi_template_applicable(&no_placement));
}

#[test]
fn component_sets_choose_the_cluster_with_room_for_a_whole_set() {
    // m1: many pods but 2 CPUs (no set of 3 CPUs fits); m2: 10 pods and 8 CPUs (2 sets).
    let clusters = vec![
        with_cpu(with_pods(cluster("m1"), 100), "2"),
        with_cpu(with_pods(cluster("m2"), 10), "8"),
    ];
    let spec = two_component_spec();
    let chosen = |options: &ScheduleOptions| -> Vec<(String, i32)> {
        match schedule(&spec, None, &clusters, options) {
            Ok(r) => r
                .clusters
                .into_iter()
                .map(|c| (c.name, c.replicas))
                .collect(),
            Err(e) => panic!("scheduling failed: {e}"),
        }
    };
    // Gate off: estimated in replicas without requirements, i.e. by free pods.
    assert_eq!(chosen(&ScheduleOptions::default()), owned(&[("m1", 0)]));
    // Gate on: in whole sets.
    let sets = ScheduleOptions {
        multiple_pod_templates: true,
        ..Default::default()
    };
    assert_eq!(chosen(&sets), owned(&[("m2", 0)]));
    // The accurate estimators' sets lower the general ones.
    let accurate = ScheduleOptions {
        accurate_estimates: Some([("m1".to_owned(), Some(5)), ("m2".to_owned(), Some(0))].into()),
        ..sets.clone()
    };
    assert_eq!(chosen(&accurate), owned(&[("m1", 0)]));
    // Not applicable (two clusters wanted): estimated in replicas, both clusters taken.
    let mut two = spec.clone();
    if let Some(p) = two.placement.as_mut() {
        p.spread_constraints = vec![spread(Some(SpreadFieldValue::Cluster), "", 1, 2)];
    }
    let result = schedule(&two, None, &clusters, &sets).map(|r| pairs(&r.clusters).len());
    assert_eq!(result, Ok(2));
}

#[test]
fn candidates_are_the_clusters_any_term_lets_through() {
    let clusters = vec![
        cluster("m1"),
        cluster("m2"),
        cluster("m3"),
        deleting(cluster("m4")),
    ];
    let by_terms = deployment_spec(
        2,
        Placement {
            cluster_affinities: vec![term("a", &["m1"]), term("b", &["m2", "m4"])],
            ..Default::default()
        },
    );
    let got: Vec<String> =
        candidate_cluster_names(&by_terms, &clusters, &ScheduleOptions::default())
            .into_iter()
            .collect();
    assert_eq!(got, names(&["m1", "m2"]));
    let everywhere = deployment_spec(2, Placement::default());
    assert_eq!(
        candidate_cluster_names(&everywhere, &clusters, &ScheduleOptions::default()).len(),
        3
    );
}

#[test]
fn fresh_reschedule_recomputes_from_scratch() {
    let clusters = vec![with_pods(cluster("m1"), 5), with_pods(cluster("m2"), 100)];
    let mut spec = deployment_spec(
        5,
        Placement {
            replica_scheduling: aggregated(),
            ..Default::default()
        },
    );
    spec.clusters = vec![tc("m1", 5)];
    assert_eq!(ok_pairs(&spec, &clusters), owned(&[("m1", 5)]));
    spec.reschedule_triggered_at = Some(Time(
        Timestamp::from_second(200).unwrap_or(Timestamp::UNIX_EPOCH),
    ));
    let status = ResourceBindingStatus {
        last_scheduled_time: Some(Time(
            Timestamp::from_second(100).unwrap_or(Timestamp::UNIX_EPOCH),
        )),
        ..Default::default()
    };
    let result = schedule(&spec, Some(&status), &clusters, &ScheduleOptions::default()).unwrap();
    assert_eq!(pairs(&result.clusters), vec![("m2", 5)]);
}

#[test]
fn unsupported_strategy_is_a_scheduler_error() {
    let spec = deployment_spec(
        2,
        Placement {
            replica_scheduling: divided(
                Some(ReplicaDivisionPreference::Other("Random".into())),
                None,
            ),
            ..Default::default()
        },
    );
    let err = run(&spec, &[cluster("m1")]).unwrap_err();
    assert_eq!(err.reason(), "SchedulerError");
    assert!(
        err.to_string()
            .starts_with("failed to assign replicas: unsupported replica scheduling strategy")
    );
}

// ---------------------------------------------------------------------------------------------
// Spread constraints
// ---------------------------------------------------------------------------------------------

fn spread(field: Option<SpreadFieldValue>, label: &str, min: i64, max: i64) -> SpreadConstraint {
    SpreadConstraint {
        spread_by_field: field,
        spread_by_label: label.into(),
        min_groups: min,
        max_groups: max,
    }
}

#[test]
fn spread_by_cluster() {
    let clusters = vec![cluster("m1"), cluster("m2"), cluster("m3")];
    let placement = Placement {
        spread_constraints: vec![spread(Some(SpreadFieldValue::Cluster), "", 2, 2)],
        ..Default::default()
    };
    assert_eq!(
        ok_pairs(&deployment_spec(1, placement), &clusters),
        owned(&[("m1", 1), ("m2", 1)])
    );

    // Too few clusters.
    let placement = Placement {
        spread_constraints: vec![spread(None, "", 4, 5)],
        ..Default::default()
    };
    let err = run(&deployment_spec(1, placement), &clusters).unwrap_err();
    assert_eq!(err.reason(), "SchedulerError");
    assert_eq!(
        err.to_string(),
        "failed to select clusters: the number of feasible clusters is less than spreadConstraint.MinGroups"
    );

    // maxGroups left at 0 selects nothing, as in Karmada.
    let placement = Placement {
        spread_constraints: vec![spread(Some(SpreadFieldValue::Cluster), "", 1, 0)],
        ..Default::default()
    };
    let err = run(&deployment_spec(1, placement), &clusters).unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to assign replicas: no clusters available to schedule"
    );
}

#[test]
fn spread_by_cluster_swaps_in_capacity() {
    // m1 already runs the workload (score 100) but cannot hold the new total.
    let clusters = vec![with_pods(cluster("m1"), 3), with_pods(cluster("m2"), 10)];
    let mut spec = deployment_spec(
        8,
        Placement {
            spread_constraints: vec![spread(Some(SpreadFieldValue::Cluster), "", 1, 1)],
            replica_scheduling: aggregated(),
            ..Default::default()
        },
    );
    spec.clusters = vec![tc("m1", 2)];
    assert_eq!(ok_pairs(&spec, &clusters), owned(&[("m2", 8)]));

    spec.replicas = 50;
    let err = run(&spec, &clusters).unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to select clusters: no enough resource when selecting 1 clusters"
    );
}

#[test]
fn spread_by_region() {
    let clusters = vec![
        with_region(cluster("a1"), "r1"),
        with_region(cluster("a2"), "r1"),
        with_region(cluster("b1"), "r2"),
        with_region(cluster("c1"), "r3"),
        with_region(cluster("c2"), "r3"),
        with_region(cluster("c3"), "r3"),
    ];
    let placement = Placement {
        spread_constraints: vec![
            spread(Some(SpreadFieldValue::Region), "", 2, 2),
            spread(Some(SpreadFieldValue::Cluster), "", 3, 4),
        ],
        ..Default::default()
    };
    assert_eq!(
        ok_pairs(&deployment_spec(1, placement.clone()), &clusters),
        owned(&[("c1", 1), ("a1", 1), ("a2", 1), ("c2", 1)])
    );

    // A cluster without region is filtered out.
    let mut with_bare = clusters.clone();
    with_bare.push(cluster("bare"));
    let got = ok_pairs(&deployment_spec(1, placement.clone()), &with_bare);
    assert!(!got.iter().any(|(n, _)| n == "bare"));

    let one_region = vec![with_region(cluster("a1"), "r1")];
    let err = run(&deployment_spec(1, placement), &one_region).unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to select clusters: the number of feasible region is less than spreadConstraint.MinGroups"
    );
}

#[test]
fn spread_by_zone_provider_and_label() {
    let mut z1 = cluster("z1");
    z1.spec.zones = vec!["zone-a".into()];
    z1.spec.provider = "aws".into();
    let clusters = vec![z1, cluster("plain")];
    let placement = Placement {
        spread_constraints: vec![
            spread(Some(SpreadFieldValue::Zone), "", 1, 1),
            spread(Some(SpreadFieldValue::Provider), "", 1, 1),
            spread(Some(SpreadFieldValue::Cluster), "", 1, 2),
        ],
        ..Default::default()
    };
    assert_eq!(
        ok_pairs(&deployment_spec(1, placement), &clusters),
        owned(&[("z1", 1)])
    );

    let err = run(
        &deployment_spec(
            1,
            Placement {
                spread_constraints: vec![spread(Some(SpreadFieldValue::Zone), "", 1, 1)],
                ..Default::default()
            },
        ),
        &clusters[1..],
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "0/1 clusters are available: 1 cluster(s) did not have zones property."
    );

    let err = run(
        &deployment_spec(
            1,
            Placement {
                spread_constraints: vec![spread(None, "topology", 1, 1)],
                ..Default::default()
            },
        ),
        &clusters,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to select clusters: just support cluster and region spread constraint"
    );
}

#[test]
fn static_weights_ignore_spread_constraints() {
    let clusters = vec![cluster("m1"), cluster("m2"), cluster("m3")];
    let spec = deployment_spec(
        3,
        Placement {
            spread_constraints: vec![spread(Some(SpreadFieldValue::Cluster), "", 1, 1)],
            replica_scheduling: static_weights(&[("m1", 1), ("m2", 1), ("m3", 1)]),
            ..Default::default()
        },
    );
    assert_eq!(
        ok_pairs(&spec, &clusters),
        owned(&[("m1", 1), ("m2", 1), ("m3", 1)])
    );
}

// ---------------------------------------------------------------------------------------------
// Property-style tests
// ---------------------------------------------------------------------------------------------

/// A small deterministic generator for property tests (no external crates); also used by
/// `divide`'s tests.
pub(crate) struct Lcg(pub(crate) u64);

impl Lcg {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn random_case(rng: &mut Lcg) -> (ResourceBindingSpec, Vec<Cluster>) {
    let count = 1 + rng.below(6) as usize;
    let clusters: Vec<Cluster> = (0..count)
        .map(|i| with_pods(cluster(&format!("m{i}")), rng.below(60) as i64))
        .collect();
    let strategy = match rng.below(4) {
        0 => {
            let mut weights: Vec<(String, i64)> = Vec::new();
            for i in 0..count {
                if rng.below(3) > 0 {
                    weights.push((format!("m{i}"), 1 + rng.below(5) as i64));
                }
            }
            let refs: Vec<(&str, i64)> = weights.iter().map(|(n, w)| (n.as_str(), *w)).collect();
            static_weights(&refs)
        }
        1 => dynamic_weights(),
        2 => aggregated(),
        _ => divided(Some(ReplicaDivisionPreference::Weighted), None),
    };
    let mut spec = deployment_spec(
        1 + rng.below(80) as i32,
        Placement {
            replica_scheduling: strategy,
            ..Default::default()
        },
    );
    spec.resource.uid = format!("uid-{}", rng.next());
    (spec, clusters)
}

#[test]
fn property_divided_sum_equals_replicas_and_is_stable() {
    let mut rng = Lcg(7);
    let mut scheduled = 0;
    for _ in 0..500 {
        let (spec, clusters) = random_case(&mut rng);
        let Ok(first) = run(&spec, &clusters) else {
            continue;
        };
        scheduled += 1;
        let sum: i32 = first.clusters.iter().map(|c| c.replicas).sum();
        assert_eq!(sum, spec.replicas, "{spec:?}");
        assert!(first.clusters.iter().all(|c| c.replicas > 0));

        // Re-running with the result as the previous schedule changes nothing.
        let mut again = spec.clone();
        again.clusters = first.clusters.clone();
        let second = run(&again, &clusters).unwrap();
        assert_eq!(second.clusters, first.clusters, "{spec:?}");
        // And neither does a third run.
        assert_eq!(run(&again, &clusters).unwrap().clusters, first.clusters);
    }
    assert!(scheduled > 200, "only {scheduled} cases scheduled");
}

#[test]
fn property_dynamic_scaling_keeps_existing_assignments() {
    let mut rng = Lcg(99);
    for _ in 0..400 {
        let count = 1 + rng.below(5) as usize;
        let clusters: Vec<Cluster> = (0..count)
            .map(|i| with_pods(cluster(&format!("m{i}")), 20 + rng.below(80) as i64))
            .collect();
        let strategy = if rng.below(2) == 0 {
            dynamic_weights()
        } else {
            aggregated()
        };
        let mut spec = deployment_spec(
            1 + rng.below(20) as i32,
            Placement {
                replica_scheduling: strategy,
                ..Default::default()
            },
        );
        let Ok(first) = run(&spec, &clusters) else {
            continue;
        };
        spec.clusters = first.clusters.clone();
        let before: BTreeMap<String, i32> = first
            .clusters
            .iter()
            .map(|c| (c.name.clone(), c.replicas))
            .collect();

        // Scale up: nobody loses replicas.
        let mut up = spec.clone();
        up.replicas += 1 + rng.below(20) as i32;
        if let Ok(scaled) = run(&up, &clusters) {
            assert_eq!(
                scaled.clusters.iter().map(|c| c.replicas).sum::<i32>(),
                up.replicas
            );
            for (name, replicas) in &before {
                let now = scaled
                    .clusters
                    .iter()
                    .find(|c| &c.name == name)
                    .map_or(0, |c| c.replicas);
                assert!(
                    now >= *replicas,
                    "scale up reshuffled {name}: {before:?} -> {scaled:?}"
                );
            }
        }
        // Scale down: nobody gains replicas, no new clusters.
        if spec.replicas > 1 {
            let mut down = spec.clone();
            down.replicas = 1 + rng.below(u64::try_from(spec.replicas - 1).unwrap_or(1)) as i32;
            let scaled = run(&down, &clusters).unwrap();
            assert_eq!(
                scaled.clusters.iter().map(|c| c.replicas).sum::<i32>(),
                down.replicas
            );
            for c in &scaled.clusters {
                assert!(
                    c.replicas <= before.get(&c.name).copied().unwrap_or(0),
                    "{before:?} -> {scaled:?}"
                );
            }
        }
    }
}

#[test]
fn property_static_weights_are_deterministic_and_order_independent() {
    let mut rng = Lcg(3);
    for _ in 0..300 {
        let (spec, clusters) = random_case(&mut rng);
        let mut reversed = clusters.clone();
        reversed.reverse();
        let a = run(&spec, &clusters);
        let b = run(&spec, &reversed);
        match (a, b) {
            (Ok(a), Ok(b)) => {
                let mut a = a.clusters;
                let mut b = b.clusters;
                a.sort_by(|x, y| x.name.cmp(&y.name));
                b.sort_by(|x, y| x.name.cmp(&y.name));
                assert_eq!(a, b);
            }
            (Err(a), Err(b)) => assert_eq!(a, b),
            (a, b) => panic!("order changed the outcome: {a:?} vs {b:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Triggers, conditions, annotations, events
// ---------------------------------------------------------------------------------------------

#[test]
fn placement_change_detection() {
    let placement = Placement {
        cluster_affinity: Some(affinity_names(&["m1"])),
        ..Default::default()
    };
    let applied = applied_placement_annotation(&placement);
    assert!(!placement_changed(&placement, Some(&applied), ""));
    assert!(placement_changed(&placement, None, ""));
    assert!(placement_changed(&placement, Some(""), ""));
    assert!(!placement_changed(&placement, Some("{not json"), ""));
    let other = Placement {
        cluster_affinity: Some(affinity_names(&["m2"])),
        ..Default::default()
    };
    assert!(placement_changed(&other, Some(&applied), ""));

    // clusterAffinities: only a change of the observed term counts.
    let with_terms = Placement {
        cluster_affinities: vec![term("a", &["m1"]), term("b", &["m2"])],
        ..Default::default()
    };
    let applied = applied_placement_annotation(&with_terms);
    let changed_b = Placement {
        cluster_affinities: vec![term("a", &["m1"]), term("b", &["m3"])],
        ..Default::default()
    };
    assert!(!placement_changed(&changed_b, Some(&applied), "a"));
    assert!(placement_changed(&changed_b, Some(&applied), "b"));
    assert!(placement_changed(&changed_b, Some(&applied), ""));
}

#[test]
fn replicas_change_and_reschedule_detection() {
    let mut spec = deployment_spec(
        3,
        Placement {
            replica_scheduling: aggregated(),
            ..Default::default()
        },
    );
    spec.clusters = vec![tc("m1", 2), tc("m2", 1)];
    assert!(!replicas_changed(&spec));
    spec.replicas = 4;
    assert!(replicas_changed(&spec));
    let mut dup = deployment_spec(
        3,
        Placement {
            replica_scheduling: duplicated(),
            ..Default::default()
        },
    );
    dup.clusters = vec![tc("m1", 3), tc("m2", 2)];
    assert!(replicas_changed(&dup));
    let mut none = deployment_spec(3, Placement::default());
    none.clusters = vec![tc("m1", 1)];
    assert!(!replicas_changed(&none));

    let t = |s: i64| {
        Some(Time(
            Timestamp::from_second(s).unwrap_or(Timestamp::UNIX_EPOCH),
        ))
    };
    let mut spec = deployment_spec(1, Placement::default());
    assert!(!reschedule_required(&spec, None));
    spec.reschedule_triggered_at = t(10);
    assert!(!reschedule_required(&spec, None));
    let status = ResourceBindingStatus {
        last_scheduled_time: t(5),
        ..Default::default()
    };
    assert!(reschedule_required(&spec, Some(&status)));
    let later = ResourceBindingStatus {
        last_scheduled_time: t(10),
        ..Default::default()
    };
    assert!(!reschedule_required(&spec, Some(&later)));
}

#[test]
fn schedule_trigger_order() {
    let clusters = vec![cluster("m1"), deleting(cluster("m2"))];
    let placement = Placement {
        replica_scheduling: aggregated(),
        ..Default::default()
    };
    let mut spec = deployment_spec(2, placement.clone());
    spec.clusters = vec![tc("m1", 2)];
    assert_eq!(
        schedule_trigger(None, &spec, None, &clusters),
        Some(ScheduleTrigger::PlacementChanged)
    );
    let annotations: BTreeMap<String, String> = [(
        karmada_apis::well_known::POLICY_PLACEMENT_ANNOTATION.to_owned(),
        applied_placement_annotation(&placement),
    )]
    .into();
    assert_eq!(
        schedule_trigger(Some(&annotations), &spec, None, &clusters),
        None
    );
    spec.replicas = 3;
    assert_eq!(
        schedule_trigger(Some(&annotations), &spec, None, &clusters),
        Some(ScheduleTrigger::ReplicasChanged)
    );
    assert_eq!(
        ScheduleTrigger::ReplicasChanged.schedule_type(),
        "ScaleSchedule"
    );
    spec.replicas = 2;
    spec.clusters = vec![tc("m1", 1), tc("m2", 1)];
    assert_eq!(
        schedule_trigger(Some(&annotations), &spec, None, &clusters),
        Some(ScheduleTrigger::TerminatingTargetClusters)
    );
    let cm = configmap_spec(placement);
    assert_eq!(
        schedule_trigger(Some(&annotations), &cm, None, &clusters),
        Some(ScheduleTrigger::Duplicated)
    );
}

#[test]
fn conditions_and_messages() {
    let now = Time(Timestamp::from_second(1000).unwrap_or(Timestamp::UNIX_EPOCH));
    let ok: Result<ScheduleResult, ScheduleError> = Ok(ScheduleResult {
        clusters: vec![tc("m1", 2), tc("m2", 1)],
        affinity_name: None,
        feasible: Default::default(),
    });
    let c = scheduled_condition(&ok, now.clone());
    assert_eq!(
        (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
        ("Scheduled", "True", "Success")
    );
    assert_eq!(c.message, "Binding has been scheduled successfully.");
    let err: Result<ScheduleResult, ScheduleError> =
        Err(ScheduleError::Unschedulable("no room".into()));
    let later = Time(Timestamp::from_second(2000).unwrap_or(Timestamp::UNIX_EPOCH));
    let e = scheduled_condition(&err, later.clone());
    assert_eq!(
        (e.status.as_str(), e.reason.as_str(), e.message.as_str()),
        ("False", "Unschedulable", "no room")
    );

    let mut conditions = vec![];
    apimachinery::set_status_condition(&mut conditions, c.clone());
    apimachinery::set_status_condition(
        &mut conditions,
        Condition {
            message: "again".into(),
            last_transition_time: later.clone(),
            ..c
        },
    );
    assert_eq!(conditions.len(), 1);
    assert_eq!(conditions[0].last_transition_time, now);
    assert_eq!(conditions[0].message, "again");
    apimachinery::set_status_condition(&mut conditions, e);
    assert_eq!(conditions[0].last_transition_time, later);

    let clusters = vec![tc("m1", 2), tc("m2", 1)];
    assert_eq!(
        success_event_message(&clusters, false),
        "Binding has been scheduled successfully. Result: {m1:2, m2:1}"
    );
    assert_eq!(
        success_event_message(&clusters, true),
        "Binding has been scheduled successfully. Result {m1:2, m2:1}"
    );
}

#[test]
fn feasible_names_follow_observed_term() {
    let clusters = vec![
        cluster("m1"),
        with_taint(cluster("m2"), TAINT_CLUSTER_NOT_READY, "NoSchedule"),
        cluster("m3"),
    ];
    let spec = configmap_spec(Placement {
        cluster_affinities: vec![term("a", &["m1", "m2"]), term("b", &["m3"])],
        ..Default::default()
    });
    let names = feasible_cluster_names(&spec, None, &clusters, &ScheduleOptions::default());
    assert_eq!(names.into_iter().collect::<Vec<_>>(), vec!["m1".to_owned()]);
    let status = ResourceBindingStatus {
        scheduler_observed_affinity_name: "b".into(),
        ..Default::default()
    };
    let names =
        feasible_cluster_names(&spec, Some(&status), &clusters, &ScheduleOptions::default());
    assert_eq!(names.into_iter().collect::<Vec<_>>(), vec!["m3".to_owned()]);
}

#[test]
fn arc_clusters_are_accepted() {
    let clusters = vec![std::sync::Arc::new(cluster("m1"))];
    let result = schedule(
        &configmap_spec(Placement::default()),
        None,
        &clusters,
        &ScheduleOptions::default(),
    )
    .unwrap();
    assert_eq!(pairs(&result.clusters), vec![("m1", 0)]);
}

#[test]
fn application_failover_moves_to_the_next_affinity() {
    let clusters = vec![cluster("m1"), cluster("m2")];
    let placement = Placement {
        cluster_affinities: vec![term("primary", &["m1"]), term("backup", &["m2"])],
        replica_scheduling: duplicated(),
        ..Default::default()
    };
    let mut spec = deployment_spec(1, placement);
    spec.graceful_eviction_tasks = vec![GracefulEvictionTask {
        from_cluster: "m1".into(),
        reason: "ApplicationFailure".into(),
        producer: "resource-binding-application-failover-controller".into(),
        ..Default::default()
    }];
    let status = ResourceBindingStatus {
        scheduler_observed_affinity_name: "primary".into(),
        scheduler_observed_generation: 1,
        ..Default::default()
    };
    let report = schedule_detailed(&spec, Some(&status), &clusters, &ScheduleOptions::default());
    let result = report.result.unwrap();
    assert_eq!(result.affinity_name.as_deref(), Some("backup"));
    assert_eq!(
        result
            .clusters
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        ["m2"]
    );
}

#[test]
fn disabled_plugins_are_skipped() {
    use crate::plugins::PluginSet;
    let clusters = vec![
        with_taint(cluster("m1"), TAINT_CLUSTER_NOT_READY, "NoSchedule"),
        cluster("m2"),
    ];
    let spec = configmap_spec(Placement::default());
    let options = ScheduleOptions {
        plugins: PluginSet::parse(&["*", "-TaintToleration"]).unwrap(),
        ..ScheduleOptions::default()
    };
    let result = schedule(&spec, None, &clusters, &options).unwrap();
    assert_eq!(pairs(&result.clusters), vec![("m1", 0), ("m2", 0)]);
    // No filter at all: every cluster not being deleted fits.
    let none = ScheduleOptions {
        plugins: PluginSet::none(),
        ..ScheduleOptions::default()
    };
    let names = feasible_cluster_names(&spec, None, &clusters, &none);
    assert_eq!(names.len(), 2);
}

#[derive(Default)]
struct Recorded {
    steps: Vec<&'static str>,
    points: Vec<(&'static str, &'static str)>,
    plugins: Vec<(&'static str, &'static str, &'static str)>,
}

impl crate::observe::Observer for Recorded {
    fn step(&mut self, step: crate::observe::Step, _: std::time::Duration) {
        self.steps.push(step.as_str());
    }
    fn extension_point(
        &mut self,
        point: crate::observe::ExtensionPoint,
        code: crate::observe::Code,
        _: std::time::Duration,
    ) {
        self.points.push((point.as_str(), code.as_str()));
    }
    fn plugin(
        &mut self,
        plugin: crate::plugins::Plugin,
        point: crate::observe::ExtensionPoint,
        code: crate::observe::Code,
        _: std::time::Duration,
    ) {
        self.plugins
            .push((plugin.name(), point.as_str(), code.as_str()));
    }
}

#[test]
fn a_run_reports_steps_extension_points_and_plugins() {
    let clusters = vec![
        with_taint(cluster("m1"), TAINT_CLUSTER_NOT_READY, "NoSchedule"),
        cluster("m2"),
    ];
    let spec = deployment_spec(
        2,
        Placement {
            replica_scheduling: aggregated(),
            ..Default::default()
        },
    );
    let mut seen = Recorded::default();
    let report = schedule_observed(
        &spec,
        None,
        &clusters,
        &ScheduleOptions::default(),
        &mut seen,
    );
    assert!(report.result.is_ok(), "{:?}", report.result);
    assert_eq!(seen.steps, ["Filter", "Score", "Select", "AssignReplicas"]);
    // Filter once per cluster (m1 fails on its taint), Score once.
    assert_eq!(
        seen.points,
        [
            ("Filter", "Unschedulable"),
            ("Filter", "Success"),
            ("Score", "Success")
        ]
    );
    assert!(
        seen.plugins
            .contains(&("TaintToleration", "Filter", "Unschedulable"))
    );
    assert!(
        seen.plugins
            .contains(&("ClusterEviction", "Filter", "Success"))
    );
    // The filters stop at the first failure: m1 never reaches ClusterAffinity.
    let affinity_filters = seen
        .plugins
        .iter()
        .filter(|p| p.0 == "ClusterAffinity" && p.1 == "Filter")
        .count();
    assert_eq!(affinity_filters, 1);
    // Scores run on the one feasible cluster; ClusterAffinity normalizes once.
    assert!(
        seen.plugins
            .contains(&("ClusterLocality", "Score", "Success"))
    );
    assert!(
        seen.plugins
            .contains(&("ClusterAffinity", "ScoreExtensionNormalize", "Success"))
    );

    // No cluster fits: only the filter step ran.
    let mut seen = Recorded::default();
    let report = schedule_observed(
        &spec,
        None,
        &clusters[..1],
        &ScheduleOptions::default(),
        &mut seen,
    );
    assert!(report.result.is_err());
    assert_eq!(seen.steps, ["Filter"]);
}

fn peers(affinity: &[&[&str]], anti_affinity: &[&str]) -> Option<WorkloadGroupPeers> {
    let set = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect();
    Some(WorkloadGroupPeers {
        affinity: affinity.iter().map(|names| set(names)).collect(),
        anti_affinity: set(anti_affinity),
    })
}

#[test]
fn workload_anti_affinity_keeps_a_group_apart() {
    let clusters = vec![cluster("m1"), cluster("m2"), cluster("m3")];
    let spec = configmap_spec(Placement::default());
    let options = ScheduleOptions {
        workload_groups: peers(&[], &["m1", "m3"]),
        ..ScheduleOptions::default()
    };
    let result = schedule(&spec, None, &clusters, &options).unwrap();
    assert_eq!(pairs(&result.clusters), vec![("m2", 0)]);
    // Every cluster taken: Karmada's fit error, with the plugin's reason.
    let options = ScheduleOptions {
        workload_groups: peers(&[], &["m1", "m2", "m3"]),
        ..ScheduleOptions::default()
    };
    let Err(ScheduleError::NoClusterFit { message, .. }) =
        schedule(&spec, None, &clusters, &options)
    else {
        panic!("expected no cluster to fit");
    };
    assert_eq!(
        message,
        "0/3 clusters are available: 3 cluster already has workload with the same anti-affinity group."
    );
}

#[test]
fn workload_affinity_follows_every_placed_peer() {
    let clusters = vec![cluster("m1"), cluster("m2"), cluster("m3")];
    let spec = configmap_spec(Placement::default());
    let options = ScheduleOptions {
        workload_groups: peers(&[&["m1", "m2"], &["m2", "m3"]], &[]),
        ..ScheduleOptions::default()
    };
    let result = schedule(&spec, None, &clusters, &options).unwrap();
    assert_eq!(pairs(&result.clusters), vec![("m2", 0)]);
    // No placed peer: nothing to follow.
    let options = ScheduleOptions {
        workload_groups: peers(&[], &[]),
        ..ScheduleOptions::default()
    };
    assert_eq!(
        schedule(&spec, None, &clusters, &options)
            .unwrap()
            .clusters
            .len(),
        3
    );
}

#[test]
fn workload_groups_never_take_a_scheduled_cluster_away() {
    let clusters = vec![cluster("m1"), cluster("m2")];
    let mut spec = configmap_spec(Placement::default());
    spec.clusters = vec![tc("m1", 0)];
    let options = ScheduleOptions {
        workload_groups: peers(&[&["m2"]], &["m1"]),
        ..ScheduleOptions::default()
    };
    let names = feasible_cluster_names(&spec, None, &clusters, &options);
    assert_eq!(names.into_iter().collect::<Vec<_>>(), ["m1", "m2"]);
    // Disabled by `--plugins`, the groups are ignored.
    let options = ScheduleOptions {
        plugins: crate::plugins::PluginSet::parse(&[
            "*",
            "-WorkloadAntiAffinity",
            "-WorkloadAffinity",
        ])
        .unwrap(),
        workload_groups: peers(&[&["m9"]], &["m1", "m2"]),
        ..ScheduleOptions::default()
    };
    spec.clusters.clear();
    assert_eq!(
        feasible_cluster_names(&spec, None, &clusters, &options).len(),
        2
    );
}
