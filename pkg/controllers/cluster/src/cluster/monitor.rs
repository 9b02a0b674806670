//! Lease-based health of Pull clusters (Karmada's cluster health monitor): every
//! `--cluster-monitor-period` each Pull cluster's `Ready` condition and its Lease
//! (`karmada-cluster/<cluster>`, renewed by the agent) are looked at; when neither has moved for
//! `--cluster-monitor-grace-period` (`--cluster-startup-grace-period` while the agent never
//! reported), `Ready` becomes `Unknown` (`ClusterStatusUnknown`, or `ClusterStatusNeverUpdated`
//! when there was none). Push clusters are left to the clusterStatus controller, as in Karmada.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use karmada_apis::Cluster;
use karmada_apis::cluster::v1alpha1::ClusterSyncMode;
use karmada_apis::well_known::{CLUSTER_CONDITION_READY, NAMESPACE_KARMADA_CLUSTER};
use kube::api::{Api, Patch, PatchParams};
use tokio_util::sync::CancellationToken;

use karmada_controllers_common::Settings;
use karmada_controllers_common::conditions::now;
use karmada_controllers_common::patch::guarded_merge_patch;

/// Reason of a Ready condition the monitor set to Unknown.
pub const REASON_STATUS_UNKNOWN: &str = "ClusterStatusUnknown";
/// Reason of a Ready condition the monitor added because the agent never reported.
pub const REASON_NEVER_UPDATED: &str = "ClusterStatusNeverUpdated";

/// How long one request of the monitor may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// What the monitor last saw of a cluster.
struct Seen {
    ready: Option<Condition>,
    renew_time: Option<MicroTime>,
    /// When the cluster was last seen alive (its condition or its Lease moved).
    probe: Timestamp,
}

/// Runs the monitor over the Clusters in `clusters` until `cancel` fires.
pub async fn run(
    client: kube::Client,
    clusters: lariat::Store<Cluster>,
    settings: Arc<Settings>,
    cancel: CancellationToken,
) {
    let mut seen: HashMap<String, Seen> = HashMap::new();
    let mut tick = tokio::time::interval(
        settings
            .cluster_monitor_period
            .max(Duration::from_millis(100)),
    );
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        let all = clusters.list();
        seen.retain(|name, _| all.iter().any(|c| c.metadata.name.as_deref() == Some(name)));
        for cluster in all {
            if cluster.spec.sync_mode != ClusterSyncMode::Pull
                || cluster.metadata.deletion_timestamp.is_some()
            {
                continue;
            }
            if let Err(e) = check(&client, &cluster, &settings, &mut seen).await {
                let name = cluster.metadata.name.clone().unwrap_or_default();
                tracing::warn!(cluster = %name, error = %e, "cannot update the cluster's health");
            }
        }
    }
}

fn ready_of(cluster: &Cluster) -> Option<Condition> {
    cluster
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == CLUSTER_CONDITION_READY)
        .cloned()
}

async fn check(
    client: &kube::Client,
    cluster: &Cluster,
    settings: &Settings,
    seen: &mut HashMap<String, Seen>,
) -> Result<(), kube::Error> {
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let current = ready_of(cluster);
    let grace = if current.is_some() {
        settings.cluster_monitor_grace_period
    } else {
        settings.cluster_startup_grace_period
    };
    let now_ts = Timestamp::now();
    let created = cluster
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now_ts, |t| t.0);
    let entry = seen.entry(name.clone()).or_insert_with(|| Seen {
        ready: current.clone(),
        renew_time: None,
        probe: if current.is_none() { created } else { now_ts },
    });
    if entry.ready != current {
        entry.ready = current.clone();
        entry.probe = now_ts;
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE_KARMADA_CLUSTER);
    if let Ok(Ok(Some(lease))) = tokio::time::timeout(REQUEST_TIMEOUT, leases.get_opt(&name)).await
    {
        let renewed = lease.spec.and_then(|s| s.renew_time);
        let newer = match (&entry.renew_time, &renewed) {
            (None, Some(_)) => true,
            (Some(old), Some(new)) => old.0 < new.0,
            _ => false,
        };
        if newer {
            entry.renew_time = renewed;
            entry.probe = now_ts;
        }
    }
    let grace = SignedDuration::try_from(grace).unwrap_or(SignedDuration::MAX);
    let elapsed = now_ts.duration_since(entry.probe);
    if elapsed <= grace {
        return Ok(());
    }
    let mut updated = cluster.clone();
    let status = updated.status.get_or_insert_with(Default::default);
    match status
        .conditions
        .iter_mut()
        .find(|c| c.type_ == CLUSTER_CONDITION_READY)
    {
        None => status.conditions.push(Condition {
            type_: CLUSTER_CONDITION_READY.to_owned(),
            status: "Unknown".to_owned(),
            reason: REASON_NEVER_UPDATED.to_owned(),
            message: "Cluster status controller never posted cluster status.".to_owned(),
            last_transition_time: now(),
            observed_generation: None,
        }),
        Some(c) if c.status != "Unknown" => {
            c.status = "Unknown".to_owned();
            c.reason = REASON_STATUS_UNKNOWN.to_owned();
            c.message = "Cluster status controller stopped posting cluster status.".to_owned();
            c.last_transition_time = now();
        }
        Some(_) => return Ok(()),
    }
    let Some(patch) = guarded_merge_patch(cluster, &updated).map_err(kube::Error::SerdeError)?
    else {
        return Ok(());
    };
    tracing::info!(
        cluster = %name,
        since = ?elapsed,
        "cluster lease and status not renewed within the grace period; Ready is now Unknown"
    );
    let api: Api<Cluster> = Api::all(client.clone());
    match tokio::time::timeout(
        REQUEST_TIMEOUT,
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)),
    )
    .await
    {
        // A conflict is retried on the next period, from the fresher cache.
        Ok(r) => r.map(|_| ()),
        Err(_) => Err(kube::Error::Service(
            format!("updating the status of cluster {name} timed out").into(),
        )),
    }
}
