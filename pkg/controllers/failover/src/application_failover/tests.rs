use super::*;
use karmada_apis::policy::v1alpha1::{PurgeMode, StatePreservation, StatePreservationRule};
use serde_json::json;

fn item(cluster: &str, health: ResourceHealth) -> AggregatedStatusItem {
    AggregatedStatusItem {
        cluster_name: cluster.into(),
        health: Some(health),
        status: Some(json!({"replicas": 2, "readyReplicas": 0}).into()),
        ..Default::default()
    }
}

#[test]
fn unhealthy_clusters_being_evicted_are_left_alone() {
    let mut spec = ResourceBindingSpec::default();
    spec.graceful_eviction_tasks.push(GracefulEvictionTask {
        from_cluster: "m3".into(),
        ..Default::default()
    });
    let items = [
        item("m1", ResourceHealth::Unhealthy),
        item("m2", ResourceHealth::Healthy),
        item("m3", ResourceHealth::Unhealthy),
        item("m4", ResourceHealth::Unknown),
    ];
    let (unhealthy, others) = unhealthy_and_others(&items, &spec);
    assert_eq!(unhealthy, ["m1"]);
    assert_eq!(others, ["m2", "m4"]);
}

#[test]
fn failure_is_decided_after_the_toleration() {
    let since = UnhealthySince::default();
    let key = ObjectKey::new(Some("ns"), "b");
    let t0 = Timestamp::from_second(1000).unwrap();
    let tol = Duration::from_secs(10);
    let m1 = vec!["m1".to_owned()];
    assert_eq!(since.detect("RB", &key, &m1, tol, t0), (vec![], Some(tol)));
    let t4 = Timestamp::from_second(1004).unwrap();
    assert_eq!(
        since.detect("RB", &key, &m1, tol, t4),
        (vec![], Some(Duration::from_secs(6)))
    );
    // Exactly the toleration: not yet, but looked at again at once.
    let t10 = Timestamp::from_second(1010).unwrap();
    assert_eq!(
        since.detect("RB", &key, &m1, tol, t10),
        (vec![], Some(Duration::from_millis(1)))
    );
    let t11 = Timestamp::from_second(1011).unwrap();
    assert_eq!(since.detect("RB", &key, &m1, tol, t11), (m1.clone(), None));
    // Healthy again: the count starts over.
    since.retain("RB", &key, &["m1".to_owned()].into(), &m1);
    assert_eq!(since.detect("RB", &key, &m1, tol, t11), (vec![], Some(tol)));
    // No longer scheduled there: forgotten too.
    since.retain("RB", &key, &BTreeSet::new(), &[]);
    let t30 = Timestamp::from_second(1030).unwrap();
    assert_eq!(since.detect("RB", &key, &m1, tol, t30), (vec![], Some(tol)));
}

fn behavior(mode: PurgeMode) -> ApplicationFailoverBehavior {
    ApplicationFailoverBehavior {
        purge_mode: mode,
        state_preservation: Some(StatePreservation {
            rules: vec![StatePreservationRule {
                alias_label_name: "failover.karmada.io/replicas".into(),
                json_path: "{.replicas}".into(),
            }],
        }),
        ..Default::default()
    }
}

#[test]
fn tasks_follow_purge_mode_and_gates() {
    let items = [item("m1", ResourceHealth::Unhealthy)];
    let before = ["m1".to_owned()];
    let all = |_: &str| true;
    let task = build_task(
        &behavior(PurgeMode::Directly),
        &items,
        "m1",
        RB_CONTROLLER_NAME,
        &before,
        &all,
    )
    .unwrap();
    assert_eq!(task.reason, "ApplicationFailure");
    assert_eq!(task.producer, RB_CONTROLLER_NAME);
    assert_eq!(
        task.preserved_label_state["failover.karmada.io/replicas"],
        "2"
    );
    assert_eq!(task.clusters_before_failover, before);
    assert_eq!(
        (task.grace_period_seconds, task.suppress_deletion),
        (None, None)
    );

    let task = build_task(
        &behavior(PurgeMode::Gracefully),
        &items,
        "m1",
        RB_CONTROLLER_NAME,
        &before,
        &all,
    )
    .unwrap();
    assert_eq!(task.grace_period_seconds, Some(600));
    let task = build_task(
        &behavior(PurgeMode::Never),
        &items,
        "m1",
        RB_CONTROLLER_NAME,
        &before,
        &all,
    )
    .unwrap();
    assert_eq!(task.suppress_deletion, Some(true));

    // Gates off: no state, and Gracefully refused.
    let none = |_: &str| false;
    let task = build_task(
        &behavior(PurgeMode::Directly),
        &items,
        "m1",
        RB_CONTROLLER_NAME,
        &before,
        &none,
    )
    .unwrap();
    assert!(task.preserved_label_state.is_empty() && task.clusters_before_failover.is_empty());
    let err = build_task(
        &behavior(PurgeMode::Gracefully),
        &items,
        "m1",
        RB_CONTROLLER_NAME,
        &before,
        &none,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "GracefulEviction featureGate must be enabled when purgeMode is Gracefully"
    );
    // Status not collected yet: no eviction.
    let bare = [AggregatedStatusItem {
        cluster_name: "m1".into(),
        health: Some(ResourceHealth::Unhealthy),
        ..Default::default()
    }];
    assert!(
        build_task(
            &behavior(PurgeMode::Directly),
            &bare,
            "m1",
            RB_CONTROLLER_NAME,
            &before,
            &all
        )
        .is_err()
    );
}
