//! Releasing the leader lease against a real API server when the Lease moved on since the elector
//! last saw it (a renewal cut short by the stop can still reach the server): the release reads the
//! Lease again and gives it up if it is still ours, and leaves it alone if another candidate holds
//! it.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use lariat::runtime::leader_election::{LeaderElectionConfig, LeaderElector, Leadership};
use serde_json::json;
use support::namespace;
use testenv::{EnvOptions, TestEnv};
use tokio_util::sync::CancellationToken;

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions::default())
}

/// Leads `lease` in `ns` as `identity`. The retry period is longer than any test, so the renewal
/// loop never writes while a test runs: the Lease changes only when a test changes it.
async fn lead(client: &Client, ns: &str, identity: &str) -> Leadership {
    let config = LeaderElectionConfig {
        lease_name: "lease".to_owned(),
        namespace: ns.to_owned(),
        identity: identity.to_owned(),
        lease_duration: Duration::from_secs(600),
        renew_deadline: Duration::from_secs(400),
        retry_period: Duration::from_secs(300),
    };
    tokio::time::timeout(
        Duration::from_secs(30),
        LeaderElector::new(client.clone(), config).acquire(&CancellationToken::new()),
    )
    .await
    .expect("acquire within 30 s")
    .expect("acquired")
}

/// Moves the Lease on behind the elector's back: a merge patch of `spec` (and a new resourceVersion).
async fn move_on(leases: &Api<Lease>, spec: serde_json::Value) {
    leases
        .patch(
            "lease",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": spec })),
        )
        .await
        .unwrap();
}

/// Leads a Lease in a fresh namespace `ns` as `candidate-a`, lets `spec` move it on behind the
/// elector's back, releases, and returns the Lease's spec afterwards.
async fn release_after(ns: &str, spec: serde_json::Value) -> LeaseSpec {
    let client = env().host().client().await;
    namespace(&client, ns).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let leadership = lead(&client, ns, "candidate-a").await;
    move_on(&leases, spec).await;
    leadership.release().await.expect("release");
    leases.get("lease").await.unwrap().spec.unwrap()
}

#[tokio::test]
async fn a_lease_that_moved_on_is_released_if_still_ours() {
    // What a renewal that reached the server after the elector stopped watching would write.
    let spec = release_after(
        "le-release-ours",
        json!({ "renewTime": "2026-01-01T00:00:00.000000Z" }),
    )
    .await;
    assert_eq!(spec.holder_identity.as_deref(), Some(""), "{spec:?}");
    assert_eq!(spec.lease_duration_seconds, Some(1), "{spec:?}");
}

#[tokio::test]
async fn a_lease_another_candidate_took_is_left_alone() {
    let spec = release_after(
        "le-release-theirs",
        json!({ "holderIdentity": "candidate-b", "leaseDurationSeconds": 600 }),
    )
    .await;
    assert_eq!(
        (spec.holder_identity.as_deref(), spec.lease_duration_seconds),
        (Some("candidate-b"), Some(600)),
        "{spec:?}"
    );
}
