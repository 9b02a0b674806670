//! What the MultiClusterService controllers (`multiclusterservice`, `endpointsliceDispatch`) share:
//! which clusters a MultiClusterService names (an empty list means every cluster), whether a
//! cluster can take part (known, Ready, serving EndpointSlices), and writing one of the
//! MultiClusterService's status conditions without overwriting the other controller's.

use std::collections::BTreeSet;

use apimachinery::{DEFAULT_RETRY, RetryError, is_conflict};
use k8s_openapi::api::core::v1::ServiceStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use karmada_apis::Cluster;
use karmada_apis::networking::v1alpha1::MultiClusterService;
use karmada_apis::well_known::CLUSTER_CONDITION_COMPLETE_API_ENABLEMENTS;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use lariat::Store;
use serde_json::json;

use crate::conditions::set_condition;
use crate::error::ApiError;

/// The feature gate the three MultiClusterService controllers need, as in Karmada (alpha, off by
/// default): without it they run idle.
pub const FEATURE_GATE: &str = "MultiClusterService";

/// Whether the `MultiClusterService` gate is on; when it is off, logs that `controller` stays
/// idle.
pub fn gate_enabled(settings: &crate::Settings, controller: &str) -> bool {
    let on = settings.feature_gates.enabled(FEATURE_GATE);
    if !on {
        tracing::info!(
            controller,
            "the MultiClusterService feature gate is off: MultiClusterServices are not served"
        );
    }
    on
}

/// `discovery.k8s.io/v1`, the group version of EndpointSlices in `status.apiEnablements`.
const ENDPOINT_SLICE_GROUP_VERSION: &str = "discovery.k8s.io/v1";

/// The clusters `named`, or every known cluster when `named` is empty (Karmada's
/// `GetProviderClusters`/`GetConsumerClusters`).
pub fn clusters_or_all(named: Vec<String>, clusters: &Store<Cluster>) -> BTreeSet<String> {
    if named.is_empty() {
        clusters.list().iter().map(|c| c.name_any()).collect()
    } else {
        named.into_iter().collect()
    }
}

/// Whether a cluster can provide or consume a MultiClusterService's endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fitness {
    /// No Cluster of that name exists.
    NotFound,
    /// The Cluster is not Ready.
    NotReady,
    /// The Cluster's complete API list has no EndpointSlices.
    NoEndpointSlices,
    /// The cluster can take part.
    Fit,
}

/// Judges cluster `name` from the Cluster cache, as Karmada does before writing a provider's or a
/// consumer's Work: known, Ready, and not known to lack `discovery.k8s.io/v1` EndpointSlices.
pub fn fitness(clusters: &Store<Cluster>, name: &str) -> Fitness {
    let Some(cluster) = clusters.get_named(None, name) else {
        return Fitness::NotFound;
    };
    if !cluster.is_ready() {
        return Fitness::NotReady;
    }
    if endpoint_slices_disabled(&cluster) {
        return Fitness::NoEndpointSlices;
    }
    Fitness::Fit
}

/// Karmada's `APIEnablement(EndpointSlice) == APIDisabled`: absent from `status.apiEnablements`
/// while the list is known to be complete.
fn endpoint_slices_disabled(cluster: &Cluster) -> bool {
    let Some(status) = cluster.status.as_ref() else {
        return false;
    };
    let listed = status.api_enablements.iter().any(|e| {
        e.group_version == ENDPOINT_SLICE_GROUP_VERSION
            && e.resources.iter().any(|r| r.kind == "EndpointSlice")
    });
    let complete = status
        .conditions
        .iter()
        .any(|c| c.type_ == CLUSTER_CONDITION_COMPLETE_API_ENABLEMENTS && c.status == "True");
    !listed && complete
}

/// Sets `condition` among the MultiClusterService's status conditions (apimachinery's
/// `SetStatusCondition`): nothing is written when it is already so. The write is a merge patch of
/// `status.conditions` guarded by the resourceVersion read, re-read and retried on conflicts, so
/// the two controllers writing different conditions never drop each other's. Returns whether
/// something was written.
pub async fn set_mcs_condition(
    client: &kube::Client,
    mcs: &MultiClusterService,
    condition: Condition,
) -> Result<bool, ApiError> {
    let namespace = mcs.namespace().unwrap_or_default();
    let name = mcs.name_any();
    let api: Api<MultiClusterService> = Api::namespaced(client.clone(), &namespace);
    let result = retry_on_conflict_mcs(&api, mcs, &name, condition).await;
    result.map_err(|e| {
        let source = match e {
            RetryError::Conflicts { last, .. } | RetryError::Failed(last) => last,
        };
        ApiError::new(
            "patch status of",
            "MultiClusterService",
            format!("{namespace}/{name}"),
            source,
        )
    })
}

async fn retry_on_conflict_mcs(
    api: &Api<MultiClusterService>,
    cached: &MultiClusterService,
    name: &str,
    condition: Condition,
) -> Result<bool, RetryError<kube::Error>> {
    apimachinery::retry_on_conflict(DEFAULT_RETRY, is_conflict, |attempt| {
        let api = api.clone();
        let first = (attempt == 0).then(|| cached.clone());
        let condition = condition.clone();
        let name = name.to_owned();
        async move {
            let read = match first {
                Some(m) => m,
                None => match api.get_opt(&name).await? {
                    Some(m) => m,
                    None => return Ok(false),
                },
            };
            let mut conditions = read
                .status
                .clone()
                .unwrap_or_else(ServiceStatus::default)
                .conditions
                .unwrap_or_default();
            if !set_condition(&mut conditions, condition) {
                return Ok(false);
            }
            let patch = json!({
                "metadata": {"resourceVersion": read.resource_version()},
                "status": {"conditions": conditions},
            });
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            Ok(true)
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use karmada_apis::cluster::v1alpha1::{ApiEnablement, ApiResource};
    use karmada_apis::{ClusterSpec, ClusterStatus};

    fn cluster(name: &str, ready: bool, slices: bool, complete: bool) -> Cluster {
        let cond = |t: &str, s: bool| Condition {
            type_: t.to_owned(),
            status: if s { "True" } else { "False" }.to_owned(),
            reason: "R".to_owned(),
            message: String::new(),
            last_transition_time: crate::conditions::now(),
            observed_generation: None,
        };
        let mut c = Cluster::new(name, ClusterSpec::default());
        c.status = Some(ClusterStatus {
            conditions: vec![
                cond("Ready", ready),
                cond(CLUSTER_CONDITION_COMPLETE_API_ENABLEMENTS, complete),
            ],
            api_enablements: if slices {
                vec![ApiEnablement {
                    group_version: ENDPOINT_SLICE_GROUP_VERSION.to_owned(),
                    resources: vec![ApiResource {
                        name: "endpointslices".to_owned(),
                        kind: "EndpointSlice".to_owned(),
                    }],
                }]
            } else {
                vec![]
            },
            ..Default::default()
        });
        c
    }

    #[test]
    fn fitness_follows_karmada() {
        let store = Store::<Cluster>::new(None);
        store.apply(cluster("ok", true, true, true));
        store.apply(cluster("down", false, true, true));
        store.apply(cluster("old", true, false, true));
        store.apply(cluster("partial", true, false, false));
        assert_eq!(fitness(&store, "ok"), Fitness::Fit);
        assert_eq!(fitness(&store, "down"), Fitness::NotReady);
        assert_eq!(fitness(&store, "old"), Fitness::NoEndpointSlices);
        assert_eq!(fitness(&store, "partial"), Fitness::Fit);
        assert_eq!(fitness(&store, "gone"), Fitness::NotFound);
    }

    #[test]
    fn empty_names_mean_every_cluster() {
        let store = Store::<Cluster>::new(None);
        store.apply(cluster("a", true, true, true));
        store.apply(cluster("b", true, true, true));
        assert_eq!(
            clusters_or_all(vec![], &store)
                .into_iter()
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(
            clusters_or_all(vec!["x".to_owned()], &store)
                .into_iter()
                .collect::<Vec<_>>(),
            ["x"]
        );
    }
}
