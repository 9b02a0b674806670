//! The cluster Lease of a Pull cluster, renewed by its agent (Karmada's agent runs Kubernetes'
//! node-lease controller for it): `karmada-cluster/<cluster>` on the Karmada API server, holder
//! the cluster's name, `leaseDurationSeconds` from `--cluster-lease-duration`, `renewTime` moved
//! every duration × `--cluster-lease-renew-interval-fraction`, owned by the Cluster (so it goes
//! with it). The control plane's cluster controller marks the cluster `Ready=Unknown` when the
//! Lease stops moving.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use apimachinery::{is_already_exists, is_not_found};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use karmada_apis::Cluster;
use karmada_apis::well_known::NAMESPACE_KARMADA_CLUSTER;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use karmada_controllers_common::Settings;

/// How long one Lease request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The running renewers, one per cluster; each stops with its token or when this set is dropped.
pub struct Renewers {
    client: kube::Client,
    duration: Duration,
    interval: Duration,
    parent: CancellationToken,
    running: Mutex<HashMap<String, (CancellationToken, JoinHandle<()>)>>,
}

impl Renewers {
    /// No renewers yet; they will stop when `parent` is cancelled.
    pub fn new(client: kube::Client, settings: &Settings, parent: &CancellationToken) -> Self {
        let duration = settings.cluster_lease_duration;
        let interval = duration.mul_f64(settings.cluster_lease_renew_interval_fraction.max(0.0));
        Renewers {
            client,
            duration,
            interval: interval.max(Duration::from_millis(100)),
            parent: parent.clone(),
            running: Mutex::new(HashMap::new()),
        }
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, (CancellationToken, JoinHandle<()>)>> {
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts renewing `cluster`'s Lease unless that already runs.
    pub fn ensure(&self, cluster: &Cluster) {
        let name = cluster.metadata.name.clone().unwrap_or_default();
        let mut running = self.lock();
        if running.get(&name).is_some_and(|(_, h)| !h.is_finished()) {
            return;
        }
        let token = self.parent.child_token();
        let renewer = Renewer {
            api: Api::namespaced(self.client.clone(), NAMESPACE_KARMADA_CLUSTER),
            name: name.clone(),
            uid: cluster.metadata.uid.clone().unwrap_or_default(),
            duration: self.duration,
        };
        let interval = self.interval;
        let stop = token.clone();
        tracing::info!(cluster = %name, "starting to renew the cluster lease");
        let handle = tokio::spawn(async move {
            loop {
                if let Err(e) = renewer.renew().await {
                    tracing::warn!(cluster = %renewer.name, error = %e, "cannot renew the cluster lease");
                }
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(interval) => {}
                }
            }
            tracing::info!(cluster = %renewer.name, "stopped renewing the cluster lease");
        });
        running.insert(name, (token, handle));
    }

    /// Stops renewing `name`'s Lease (the Cluster is gone).
    pub fn stop(&self, name: &str) {
        if let Some((token, _)) = self.lock().remove(name) {
            token.cancel();
        }
    }
}

impl Drop for Renewers {
    fn drop(&mut self) {
        for (_, (token, handle)) in self.lock().drain() {
            token.cancel();
            handle.abort();
        }
    }
}

/// One cluster's Lease.
struct Renewer {
    api: Api<Lease>,
    name: String,
    uid: String,
    duration: Duration,
}

impl Renewer {
    /// Creates the Lease, or moves its `renewTime` (and sets the owner when it has none).
    async fn renew(&self) -> Result<(), kube::Error> {
        let now = MicroTime(Timestamp::now());
        let owner = serde_json::json!([{
            "apiVersion": "cluster.karmada.io/v1alpha1",
            "kind": "Cluster",
            "name": self.name,
            "uid": self.uid,
        }]);
        let seconds = i32::try_from(self.duration.as_secs()).unwrap_or(i32::MAX);
        let existing =
            match tokio::time::timeout(REQUEST_TIMEOUT, self.api.get_opt(&self.name)).await {
                Ok(r) => r?,
                Err(_) => return Err(timed_out("get")),
            };
        let Some(existing) = existing else {
            let lease: Lease = serde_json::from_value(serde_json::json!({
                "metadata": {"name": self.name, "ownerReferences": owner},
                "spec": {
                    "holderIdentity": self.name,
                    "leaseDurationSeconds": seconds,
                    "renewTime": now,
                },
            }))
            .map_err(kube::Error::SerdeError)?;
            return match tokio::time::timeout(
                REQUEST_TIMEOUT,
                self.api.create(&PostParams::default(), &lease),
            )
            .await
            {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) if is_already_exists(&e) => Ok(()),
                Ok(Err(e)) => Err(e),
                Err(_) => Err(timed_out("create")),
            };
        };
        let mut patch = serde_json::json!({
            "spec": {
                "holderIdentity": self.name,
                "leaseDurationSeconds": seconds,
                "renewTime": now,
            },
        });
        if existing
            .metadata
            .owner_references
            .as_ref()
            .is_none_or(Vec::is_empty)
        {
            patch["metadata"] = serde_json::json!({"ownerReferences": owner});
        }
        match tokio::time::timeout(
            REQUEST_TIMEOUT,
            self.api
                .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .await
        {
            Ok(Ok(_)) => Ok(()),
            // Deleted meanwhile: created again on the next round.
            Ok(Err(e)) if is_not_found(&e) => Ok(()),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(timed_out("patch")),
        }
    }
}

fn timed_out(verb: &str) -> kube::Error {
    kube::Error::Service(
        format!("{verb} of the cluster lease timed out after {REQUEST_TIMEOUT:?}").into(),
    )
}
