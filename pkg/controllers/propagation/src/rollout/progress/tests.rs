//! Unit tests of one rollout step: a revision through three one-cluster stages, a halt, an
//! approval, a rollback.

use super::*;
use karmada_apis::rollout::{AfterStageTask, RolloutStage};
use serde_json::json;

fn strategy(approval_after_first: bool) -> RolloutStrategySpec {
    let stage = |name: &str, cluster: &str| RolloutStage {
        name: name.into(),
        cluster_names: vec![cluster.into()],
        ..Default::default()
    };
    let mut first = stage("canary", "m1");
    if approval_after_first {
        first.after_stage_tasks = vec![AfterStageTask {
            type_: TASK_APPROVAL.into(),
            wait_seconds: None,
        }];
    }
    RolloutStrategySpec {
        stages: vec![first, stage("early", "m2"), stage("rest", "m3")],
        min_success_seconds: Some(10),
        progress_deadline_seconds: Some(60),
        ..Default::default()
    }
}

fn obs(revision: &str, at: i64, healthy: &[&str], unhealthy: &[&str]) -> Observation {
    let mut health = BTreeMap::new();
    for c in healthy {
        health.insert((*c).to_owned(), Health::Healthy);
    }
    for c in unhealthy {
        health.insert((*c).to_owned(), Health::Unhealthy);
    }
    Observation {
        revision: revision.into(),
        content: json!({"spec": {"image": revision}}),
        targets: vec!["m1".into(), "m2".into(), "m3".into()],
        labels: BTreeMap::new(),
        health,
        now: Timestamp::from_second(1_000_000 + at).unwrap_or(Timestamp::UNIX_EPOCH),
    }
}

fn cluster<'a>(st: &'a RolloutStatus, name: &str) -> &'a ClusterRolloutStatus {
    st.clusters.iter().find(|c| c.name == name).unwrap()
}

fn states(st: &RolloutStatus) -> Vec<(String, String, String)> {
    st.clusters
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                c.revision.clone(),
                c.state.as_str().to_owned(),
            )
        })
        .collect()
}

fn s(items: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    items
        .iter()
        .map(|(a, b, c)| ((*a).into(), (*b).into(), (*c).into()))
        .collect()
}

/// The status after the first placement of `v1`, then a change to `v2`.
fn started(strategy: &RolloutStrategySpec, spec: &RolloutSpec) -> RolloutStatus {
    let first = step(
        spec,
        strategy,
        &RolloutStatus::default(),
        &obs("v1", 0, &[], &[]),
    );
    assert_eq!(first.status.phase, PHASE_COMPLETED);
    assert_eq!(first.status.stable_revision, "v1");
    let next = step(spec, strategy, &first.status, &obs("v2", 1, &[], &[]));
    assert!(next.notes.iter().any(|n| n.reason == reasons::STARTED));
    next.status
}

#[test]
fn a_good_revision_goes_through_every_stage() {
    let strategy = strategy(false);
    let spec = RolloutSpec::default();
    let st = started(&strategy, &spec);
    assert_eq!(
        states(&st),
        s(&[
            ("m1", "v2", "Progressing"),
            ("m2", "v1", "Pending"),
            ("m3", "v1", "Pending")
        ])
    );
    assert_eq!(st.current_stage, "canary");
    // Healthy, but not for the soak time yet.
    let st = step(&spec, &strategy, &st, &obs("v2", 2, &["m1"], &[])).status;
    assert_eq!(cluster(&st, "m1").state, RolloutState::Progressing);
    let next = step(&spec, &strategy, &st, &obs("v2", 12, &["m1"], &[]));
    let st = next.status;
    assert_eq!(
        states(&st),
        s(&[
            ("m1", "v2", "Succeeded"),
            ("m2", "v2", "Progressing"),
            ("m3", "v1", "Pending")
        ])
    );
    assert!(
        next.notes
            .iter()
            .any(|n| n.reason == reasons::STAGE_SUCCEEDED)
    );
    let st = step(&spec, &strategy, &st, &obs("v2", 13, &["m1", "m2"], &[])).status;
    let st = step(&spec, &strategy, &st, &obs("v2", 23, &["m1", "m2"], &[])).status;
    let st = step(
        &spec,
        &strategy,
        &st,
        &obs("v2", 24, &["m1", "m2", "m3"], &[]),
    )
    .status;
    let done = step(
        &spec,
        &strategy,
        &st,
        &obs("v2", 34, &["m1", "m2", "m3"], &[]),
    );
    assert_eq!(done.status.phase, PHASE_COMPLETED);
    assert_eq!(done.status.stable_revision, "v2");
    assert!(done.notes.iter().any(|n| n.reason == reasons::COMPLETED));
}

#[test]
fn a_bad_revision_halts_after_the_first_stage_and_rolls_back() {
    let strategy = strategy(false);
    let mut spec = RolloutSpec::default();
    let st = started(&strategy, &spec);
    let st = step(&spec, &strategy, &st, &obs("v2", 30, &[], &["m1"])).status;
    assert_eq!(cluster(&st, "m1").state, RolloutState::Progressing);
    let halted = step(&spec, &strategy, &st, &obs("v2", 62, &[], &["m1"]));
    let st = halted.status;
    assert_eq!(st.phase, PHASE_HALTED);
    assert_eq!(
        states(&st),
        s(&[
            ("m1", "v2", "Failed"),
            ("m2", "v1", "Pending"),
            ("m3", "v1", "Pending")
        ])
    );
    assert!(
        halted
            .notes
            .iter()
            .any(|n| n.warning && n.reason == reasons::HALTED)
    );
    // Halted stays halted.
    let again = step(&spec, &strategy, &st, &obs("v2", 100, &[], &["m1"]));
    assert_eq!(again.status.phase, PHASE_HALTED);
    assert!(again.notes.is_empty());
    spec.rollback_revision = "v2".into();
    let back = step(&spec, &strategy, &st, &obs("v2", 101, &[], &["m1"]));
    assert_eq!(back.status.phase, PHASE_ROLLED_BACK);
    assert!(back.status.clusters.iter().all(|c| c.revision == "v1"));
    assert!(back.notes.iter().any(|n| n.reason == reasons::ROLLED_BACK));
}

#[test]
fn an_approval_holds_the_next_stage() {
    let strategy = strategy(true);
    let mut spec = RolloutSpec::default();
    let st = started(&strategy, &spec);
    let st = step(&spec, &strategy, &st, &obs("v2", 2, &["m1"], &[])).status;
    let waiting = step(&spec, &strategy, &st, &obs("v2", 12, &["m1"], &[]));
    let st = waiting.status;
    assert_eq!(st.phase, PHASE_AWAITING_APPROVAL);
    assert_eq!(cluster(&st, "m2").state, RolloutState::Pending);
    assert!(
        waiting
            .notes
            .iter()
            .any(|n| n.reason == reasons::AWAITING_APPROVAL)
    );
    spec.approvals = vec![StageApproval {
        revision: "v2".into(),
        stage: "canary".into(),
    }];
    let st = step(&spec, &strategy, &st, &obs("v2", 13, &["m1"], &[])).status;
    assert_eq!(st.phase, PHASE_PROGRESSING);
    assert_eq!(cluster(&st, "m2").state, RolloutState::Progressing);
}

#[test]
fn membership_follows_the_binding_and_a_revert_completes() {
    let strategy = strategy(false);
    let spec = RolloutSpec::default();
    let st = started(&strategy, &spec);
    // m3 evicted mid-rollout: its entry goes, the rest carries on.
    let mut o = obs("v2", 2, &[], &[]);
    o.targets.retain(|c| c != "m3");
    let st = step(&spec, &strategy, &st, &o).status;
    assert_eq!(st.clusters.len(), 2);
    assert_eq!(st.stages[2].clusters, Vec::<String>::new());
    // The template goes back to v1: nothing to roll out.
    let back = step(&spec, &strategy, &st, &obs("v1", 3, &[], &[])).status;
    assert_eq!(back.phase, PHASE_COMPLETED);
    assert_eq!(back.target_revision, "v1");
    assert!(back.clusters.iter().all(|c| c.revision == "v1"));
}

#[test]
fn a_pause_holds_new_clusters_and_a_timed_wait_delays_the_next_stage() {
    let mut strategy = strategy(false);
    strategy.stages[0].after_stage_tasks = vec![AfterStageTask {
        type_: TASK_TIMED_WAIT.into(),
        wait_seconds: Some(30),
    }];
    let mut spec = RolloutSpec::default();
    let st = started(&strategy, &spec);
    // Paused: member1 (already updating) carries on, member2 is not admitted.
    spec.paused = true;
    let st = step(&spec, &strategy, &st, &obs("v2", 2, &["m1"], &[])).status;
    let st = step(&spec, &strategy, &st, &obs("v2", 12, &["m1"], &[])).status;
    assert_eq!(cluster(&st, "m1").state, RolloutState::Succeeded);
    // The canary stage succeeded at 12; its wait runs to 42 whether paused or not.
    spec.paused = false;
    let waiting = step(&spec, &strategy, &st, &obs("v2", 20, &["m1"], &[]));
    assert_eq!(cluster(&waiting.status, "m2").state, RolloutState::Pending);
    assert_eq!(waiting.status.stages[0].reason, TASK_TIMED_WAIT);
    assert_eq!(waiting.requeue, Some(Duration::from_secs(22)));
    let st = step(
        &spec,
        &strategy,
        &waiting.status,
        &obs("v2", 42, &["m1"], &[]),
    )
    .status;
    assert_eq!(cluster(&st, "m2").state, RolloutState::Progressing);
}
