//! Cluster API discovery against the real controller-manager binary and real API servers.
//!
//! member2 plays the Cluster API management cluster: it serves Cluster API's own Cluster CRD (copied
//! from the sigs.k8s.io/cluster-api module by `hack/build-test-binaries.sh`) and holds a Cluster API
//! Cluster `capi-workload` with its `capi-workload-kubeconfig` Secret, the kubeconfig of member1 (a
//! full member, so its token controller fills the ServiceAccount tokens join waits for). The
//! controller-manager runs with `--cluster-api-kubeconfig` pointing at member2. While the Cluster is
//! `Provisioning` nothing is joined; once `Provisioned`, a Push-mode Karmada Cluster `capi-workload`
//! for member1 appears and becomes Ready; deleting the Cluster API Cluster deletes it.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karmada_apis::Cluster;
use karmada_e2e::controller_manager::Kcm;
use karmada_e2e::in_process;
use karmada_e2e::quiet::{Watched, assert_holds_for, current_version};
use karmada_e2e::wait::eventually_showing;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(120);
const NAME: &str = "capi-workload";
const NS: &str = "default";

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 2,
        full_members: 1,
        kwok_nodes: 1,
        install_crds: true,
        ..Default::default()
    })
}

fn capi_clusters() -> ApiResource {
    ApiResource {
        group: "cluster.x-k8s.io".into(),
        version: "v1beta1".into(),
        api_version: "cluster.x-k8s.io/v1beta1".into(),
        kind: "Cluster".into(),
        plural: "clusters".into(),
    }
}

async fn eventually<T>(what: &str, kcm: &Kcm, check: impl AsyncFnMut() -> Result<T, String>) -> T {
    let every = Duration::from_millis(250);
    let log = || format!("controller-manager log (tail):\n{}", kcm.log_tail(40));
    eventually_showing(what, WAIT, every, log, check).await
}

async fn set_phase(api: &Api<DynamicObject>, phase: &str) {
    api.patch_status(
        NAME,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": phase}})),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn provisioned_cluster_api_clusters_are_joined_and_deleted_ones_unjoined() {
    in_process::init_tracing();
    let env = env();
    let host = env.host().client().await;
    let workload = &env.members()[0];
    let management = &env.members()[1];
    let mgmt = management.client().await;

    // The management cluster: Cluster API's CRD, a Cluster still provisioning, its kubeconfig.
    let crds = testenv::binaries::cluster_api_crds().unwrap_or_else(|e| panic!("{e}"));
    let dir = crds[0].parent().unwrap();
    testenv::install_crds_from(&mgmt, dir).await.unwrap();
    let kubeconfig = std::fs::read(workload.kubeconfig_path()).unwrap();
    Api::<Secret>::namespaced(mgmt.clone(), NS)
        .create(
            &PostParams::default(),
            &Secret {
                metadata: ObjectMeta {
                    name: Some(format!("{NAME}-kubeconfig")),
                    ..Default::default()
                },
                data: Some([("value".to_owned(), ByteString(kubeconfig))].into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let capi: Api<DynamicObject> = Api::namespaced_with(mgmt.clone(), NS, &capi_clusters());
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
        "metadata": {"name": NAME},
        "spec": {"paused": false},
    }))
    .unwrap();
    capi.create(&PostParams::default(), &object).await.unwrap();
    set_phase(&capi, "Provisioning").await;

    let kcm = Kcm::start(
        env.host().kubeconfig_path(),
        &[
            "--leader-elect=false",
            "--cluster-status-update-frequency=1s",
            &format!(
                "--cluster-api-kubeconfig={}",
                management.kubeconfig_path().display()
            ),
        ],
        &[],
    );
    let clusters: Api<Cluster> = Api::all(host.clone());

    // Provisioning: not joined (watched for a few seconds once the detector is serving).
    eventually("the detector serving", &kcm, async || {
        kcm.log()
            .contains("clusterAPIDetector synced")
            .then_some(())
            .ok_or("not yet".to_owned())
    })
    .await;
    let version = current_version(&clusters, Watched::All).await;
    assert_holds_for(
        &clusters,
        Watched::All,
        &version,
        Duration::from_secs(3),
        |c| {
            (c.metadata.name.as_deref() != Some(NAME))
                .then_some(())
                .ok_or("joined while Provisioning".to_owned())
        },
    )
    .await;
    assert!(clusters.get_opt(NAME).await.unwrap().is_none());

    // Provisioned: joined in Push mode, pointing at member1, and Ready.
    set_phase(&capi, "Provisioned").await;
    let joined = eventually("the Karmada Cluster Ready", &kcm, async || {
        let c = clusters
            .get_opt(NAME)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("not joined yet")?;
        let ready = c
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status.clone());
        (ready.as_deref() == Some("True"))
            .then_some(c)
            .ok_or(format!("Ready: {ready:?}"))
    })
    .await;
    assert_eq!(joined.spec.api_endpoint, workload.url());
    assert_eq!(
        joined.spec.sync_mode,
        karmada_apis::cluster::v1alpha1::ClusterSyncMode::Push
    );
    let secret_ref = joined.spec.secret_ref.clone().unwrap();
    assert_eq!(
        (secret_ref.namespace.as_str(), secret_ref.name.as_str()),
        ("karmada-cluster", NAME)
    );
    // A later change of the Cluster API Cluster joins nothing twice.
    capi.patch(
        NAME,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
    )
    .await
    .unwrap();
    let uid = joined.metadata.uid.clone();
    let version = current_version(&clusters, Watched::Name(NAME)).await;
    assert_holds_for(
        &clusters,
        Watched::Name(NAME),
        &version,
        Duration::from_secs(3),
        |c| {
            (c.metadata.uid == uid && c.metadata.deletion_timestamp.is_none())
                .then_some(())
                .ok_or("rejoined or deleted".to_owned())
        },
    )
    .await;

    // Deleted: unjoined.
    capi.delete(NAME, &DeleteParams::default()).await.unwrap();
    eventually("the Karmada Cluster gone", &kcm, async || {
        match clusters.get_opt(NAME).await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("still there".to_owned()),
        }
    })
    .await;
    assert!(
        kcm.log().contains("joined a Cluster API cluster"),
        "{}",
        kcm.log()
    );
}
