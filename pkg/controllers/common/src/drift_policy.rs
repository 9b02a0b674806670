//! DriftPolicy / ClusterDriftPolicy (`policy.karmada-rs.io`, karmada-rs's own): which one covers a
//! Work's manifest, and what it decides ([`DriftDecision`]).
//!
//! The policies are read from shared caches of the control plane, started only when the API
//! server serves the group (checked once, when the controller starts). Without the CRDs (a
//! Karmada control plane where they were not installed) no policy matches: drift is repaired and
//! pre-existing objects follow `conflictResolution`, as in Karmada. CRDs installed later are seen
//! after a restart.

use std::sync::Arc;
use std::time::Duration;

use karmada_apis::policy_rs::v1alpha1::{
    ClusterDriftPolicy, DriftAction, DriftPolicy, DriftPolicySpec, Takeover,
};
use karmada_policy::selector::{ImplicitPriority, ResourceIdentity, resource_selectors_priority};
use kube::ResourceExt;
use lariat::{ObjectKey, SharedController, SyncWait};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// The API group and version of the drift policies.
pub const GROUP_VERSION: &str = "policy.karmada-rs.io/v1alpha1";

/// Annotation on a member object of a workload with a drift policy: the hash of the manifest last
/// written ([`crate::drift::manifest_hash`]). Under `ReportOnly` a member object whose hash equals
/// its manifest's is left as it is, drift included; another hash means the manifest changed, and
/// it is written.
pub const MANIFEST_HASH_ANNOTATION: &str = "policy.karmada-rs.io/manifest-hash";

/// What the policy covering a manifest decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriftDecision {
    /// Repair or only report drift.
    pub drift: DriftAction,
    /// Whether pre-existing member objects are taken over (`None`: `conflictResolution` decides).
    pub takeover: Option<Takeover>,
    /// The policy: `DriftPolicy <namespace>/<name>` or `ClusterDriftPolicy <name>`.
    pub policy: String,
}

impl DriftDecision {
    /// Whether drift is only reported.
    pub fn report_only(&self) -> bool {
        self.drift == DriftAction::ReportOnly
    }
}

/// The drift policies of the control plane (none when the group is not served).
#[derive(Clone, Default)]
pub struct DriftPolicies {
    watched: Option<Arc<Watched>>,
}

struct Watched {
    namespaced: SharedController<DriftPolicy>,
    cluster: SharedController<ClusterDriftPolicy>,
}

impl DriftPolicies {
    /// Watches the drift policies when `control_plane` serves [`GROUP_VERSION`], and waits (up to
    /// `timeout`) for both caches; no policies otherwise, or when the check fails (logged).
    pub async fn start(
        control_plane: &lariat::Cluster,
        cancel: &CancellationToken,
        timeout: Duration,
    ) -> DriftPolicies {
        let client = control_plane.clients().client();
        let served = match lariat::client::resource_served(&client, GROUP_VERSION, "driftpolicies")
            .await
        {
            Ok(served) => served,
            Err(e) => {
                tracing::info!(error = %e, "{GROUP_VERSION} not served: no drift policies (drift is repaired, as in Karmada)");
                false
            }
        };
        if !served {
            return DriftPolicies::default();
        }
        let controllers = control_plane.controllers();
        let (Ok(namespaced), Ok(cluster)) = (
            controllers.for_kind::<DriftPolicy>(),
            controllers.for_kind::<ClusterDriftPolicy>(),
        ) else {
            tracing::warn!("drift policies could not be watched; drift is repaired");
            return DriftPolicies::default();
        };
        for synced in [
            namespaced.wait_synced(cancel, timeout).await,
            cluster.wait_synced(cancel, timeout).await,
        ] {
            if !matches!(synced, Ok(SyncWait::Synced)) {
                tracing::warn!(
                    "drift policy caches did not sync; drift policies are not applied until they do"
                );
            }
        }
        DriftPolicies {
            watched: Some(Arc::new(Watched {
                namespaced,
                cluster,
            })),
        }
    }

    /// Calls `changed` whenever a drift policy is created, changed or deleted (handler `name`).
    pub fn on_change<F>(&self, name: &str, cancel: &CancellationToken, changed: F)
    where
        F: Fn() + Send + Sync + Clone + 'static,
    {
        let Some(w) = &self.watched else {
            return;
        };
        let c = changed.clone();
        w.namespaced.register_handler(
            name,
            cancel.child_token(),
            move |_: ObjectKey, _: Option<Arc<DriftPolicy>>| {
                c();
                async { lariat::HandlerResult::Success }
            },
        );
        w.cluster.register_handler(
            name,
            cancel.child_token(),
            move |_: ObjectKey, _: Option<Arc<ClusterDriftPolicy>>| {
                changed();
                async { lariat::HandlerResult::Success }
            },
        );
    }

    /// The decision of the policy covering `manifest` (a Work's manifest), if any: a DriftPolicy
    /// of the manifest's namespace before a ClusterDriftPolicy, then the most precise selector
    /// match, then the first by name.
    pub fn decide(&self, manifest: &Value) -> Option<DriftDecision> {
        let w = self.watched.as_ref()?;
        let identity = ResourceIdentity::from_manifest(manifest);
        let resource = identity.as_ref();
        let best = |candidates: Vec<(String, &DriftPolicySpec)>| {
            candidates
                .into_iter()
                .map(|(name, spec)| {
                    (
                        resource_selectors_priority(resource, &spec.resource_selectors),
                        name,
                        spec.clone(),
                    )
                })
                .filter(|(p, _, _)| *p > ImplicitPriority::Mismatch)
                .min_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)))
        };
        let namespaced = w.namespaced.store().list();
        let in_namespace: Vec<_> = namespaced
            .iter()
            .filter(|p| {
                !identity.namespace.is_empty()
                    && p.namespace().as_deref() == Some(identity.namespace.as_str())
            })
            .map(|p| {
                (
                    format!("DriftPolicy {}/{}", identity.namespace, p.name_any()),
                    &p.spec,
                )
            })
            .collect();
        let chosen = best(in_namespace).or_else(|| {
            let cluster = w.cluster.store().list();
            best(
                cluster
                    .iter()
                    .map(|p| (format!("ClusterDriftPolicy {}", p.name_any()), &p.spec))
                    .collect(),
            )
        })?;
        let (_, policy, spec) = chosen;
        Some(DriftDecision {
            drift: spec.drift,
            takeover: spec.takeover,
            policy,
        })
    }
}
