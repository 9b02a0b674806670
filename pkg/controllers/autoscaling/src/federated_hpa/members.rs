//! Where the target runs: the template's ResourceBinding, the Ready clusters it is scheduled to,
//! and in each the workload's scale subresource and pods.

use std::sync::Arc;

use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use karmada_apis::ResourceBinding;
use karmada_apis::autoscaling::v1alpha1::FederatedHPA;
use karmada_apis::cluster::v1alpha1::ClusterSyncMode;
use karmada_apis::well_known::{
    CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL, PROPAGATION_POLICY_PERMANENT_ID_LABEL,
};
use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use lariat::events::EventType;

use super::status::set_condition;
use super::{CONTROLLER_NAME, FederatedHpaController};

/// One member cluster the target runs in, as seen this sync.
pub(super) struct MemberTarget {
    pub(super) cluster: String,
    pub(super) client: Client,
    pub(super) selector: String,
}

/// The scale of the target summed over the member clusters, and their pods.
pub(super) struct MultiClusterScale {
    pub(super) spec_replicas: i32,
    pub(super) status_replicas: i32,
    pub(super) members: Vec<MemberTarget>,
    pub(super) pods: Vec<Pod>,
    /// The target clusters left out of the sums, each with why (`member2 (Pull mode: …)`).
    pub(super) left_out: Vec<String>,
}

/// Why a Pull member's pods and metrics are left out: the controller-manager never connects to
/// Pull members (their agents do); its replicas come from its Work ([`super::reported`]). Karmada
/// reads them with the credentials its agent reports by default.
const PULL_MODE_LEFT_OUT: &str =
    "Pull mode: pods and metrics not read; replicas as its agent reported them";

/// Where one target cluster's scale came from.
enum Read {
    /// The member itself, whose pods can be listed too.
    Member(Client, Scale),
    /// A Pull member's Work: the scale only.
    Reported(Scale),
}

impl FederatedHpaController {
    /// The template's ResourceBinding: among the bindings carrying the template's policy
    /// permanent-id label, the one whose resource is the target.
    pub(super) fn binding_of(
        &self,
        template: &DynamicObject,
        target: &k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference,
        namespace: &str,
    ) -> Result<Arc<ResourceBinding>, String> {
        let labels = template.labels();
        if labels.is_empty() {
            return Err("target resource has no label".to_owned());
        }
        let (label, id) = if let Some(id) = labels.get(PROPAGATION_POLICY_PERMANENT_ID_LABEL) {
            (PROPAGATION_POLICY_PERMANENT_ID_LABEL, id)
        } else if let Some(id) = labels.get(CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL) {
            (CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL, id)
        } else {
            return Err("no label of policy permanent-id found".to_owned());
        };
        let bindings: Vec<_> = self
            .inner
            .bindings
            .store()
            .list()
            .into_iter()
            .filter(|b| b.labels().get(label) == Some(id))
            .collect();
        if bindings.is_empty() {
            return Err("length of binding list is zero".to_owned());
        }
        let api_version = target.api_version.as_deref().unwrap_or_default();
        bindings
            .into_iter()
            .find(|b| {
                let r = &b.spec.resource;
                r.name == target.name
                    && r.api_version == api_version
                    && r.kind == target.kind
                    && b.namespace().as_deref() == Some(namespace)
            })
            .ok_or_else(|| "no binding matches the target resource".to_owned())
    }

    /// The Ready clusters the binding schedules to.
    pub(super) fn target_clusters(&self, binding: &ResourceBinding) -> Result<Vec<String>, String> {
        if binding.spec.clusters.is_empty() {
            return Err("binding has no schedulable clusters".to_owned());
        }
        let store = self.inner.clusters.store();
        let mut out = Vec::new();
        for target in &binding.spec.clusters {
            let Some(cluster) = store.get_named(None, &target.name) else {
                return Err(format!(
                    "clusters.cluster.karmada.io \"{}\" not found",
                    target.name
                ));
            };
            if cluster.is_ready() {
                out.push(target.name.clone());
            }
        }
        Ok(out)
    }

    /// The scale of the target `name` in member `cluster` and a client of the member, or of a Pull
    /// member the scale its Work reports, or why neither can be had (logged).
    async fn scale_in(
        &self,
        cluster: &str,
        gvk: &kube::api::GroupVersionKind,
        namespace: &str,
        name: &str,
    ) -> Result<Read, String> {
        let pull = self
            .inner
            .clusters
            .store()
            .get_named(None, cluster)
            .is_some_and(|c| c.spec.sync_mode == ClusterSyncMode::Pull);
        if pull {
            return self
                .reported_scale(cluster, gvk, namespace, name)
                .await
                .map(Read::Reported)
                .map_err(|e| {
                    tracing::warn!(cluster, resource = %name, error = %e, "Failed to get the scale of resource in Pull cluster from its Work");
                    format!("Pull mode: {e}")
                });
        }
        let Some(member) = self.inner.ctx.members.get(cluster) else {
            tracing::warn!(cluster, "Failed to get cluster client of cluster");
            return Err("not connected".to_owned());
        };
        let client = member
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(|e| {
                tracing::warn!(cluster, error = %e, "Failed to get cluster client of cluster");
                format!("no client: {e}")
            })?;
        let (ar, _) = member.clients().resolve(gvk).await.map_err(|e| {
            tracing::warn!(cluster, error = %e, "Failed to map the target's kind in cluster");
            format!("the target's kind is not served: {e}")
        })?;
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &ar);
        let scale = api.get_scale(name).await.map_err(|e| {
            tracing::warn!(cluster, resource = %name, error = %e, "Failed to get scale subResource of resource in cluster");
            format!("scale not read: {e}")
        })?;
        Ok(Read::Member(client, scale))
    }

    /// The target's scale summed over `clusters`, and the pods of each cluster's selector. A cluster
    /// that cannot be read is left out (logged, and named in `left_out`); none readable is an error.
    pub(super) async fn scale_of_members(
        &self,
        clusters: &[String],
        hpa: &mut FederatedHPA,
        gvk: &kube::api::GroupVersionKind,
        namespace: &str,
    ) -> Result<MultiClusterScale, String> {
        let name = hpa.spec.scale_target_ref.name.clone();
        let mut out = MultiClusterScale {
            spec_replicas: 0,
            status_replicas: 0,
            members: Vec::new(),
            pods: Vec::new(),
            left_out: Vec::new(),
        };
        for cluster in clusters {
            let (client, scale) = match self.scale_in(cluster, gvk, namespace, &name).await {
                Ok(Read::Member(client, scale)) => (Some(client), scale),
                Ok(Read::Reported(scale)) => (None, scale),
                Err(why) => {
                    out.left_out.push(format!("{cluster} ({why})"));
                    continue;
                }
            };
            out.spec_replicas = out
                .spec_replicas
                .saturating_add(scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0));
            let status = scale.status.unwrap_or_default();
            out.status_replicas = out.status_replicas.saturating_add(status.replicas);
            let selector = status.selector.unwrap_or_default();
            if selector.is_empty() {
                self.event(
                    hpa,
                    EventType::Warning,
                    "SelectorRequired",
                    "selector is required".to_owned(),
                )
                .await;
                set_condition(
                    hpa,
                    "ScalingActive",
                    "False",
                    "InvalidSelector",
                    "the HPA target's scale is missing a selector".to_owned(),
                );
                continue;
            }
            let Some(client) = client else {
                out.left_out
                    .push(format!("{cluster} ({PULL_MODE_LEFT_OUT})"));
                continue;
            };
            let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
            match pods.list(&ListParams::default().labels(&selector)).await {
                Ok(list) => out.pods.extend(list.items),
                Err(e) => {
                    if is_bad_selector(&e) {
                        let message = format!(
                            "couldn't convert selector into a corresponding internal selector object: {e}"
                        );
                        self.event(hpa, EventType::Warning, "InvalidSelector", message.clone())
                            .await;
                        set_condition(hpa, "ScalingActive", "False", "InvalidSelector", message);
                    } else {
                        tracing::warn!(cluster, error = %e, "Failed to get podList for cluster");
                        out.left_out
                            .push(format!("{cluster} (pods not listed: {e})"));
                    }
                    continue;
                }
            }
            out.members.push(MemberTarget {
                cluster: cluster.clone(),
                client,
                selector,
            });
        }
        if out.spec_replicas == 0 {
            let mut message = "failed to get replicas in any of clusters, possibly because all of clusters are not ready".to_owned();
            if !out.left_out.is_empty() {
                message = format!("{message}; left out: {}", out.left_out.join(", "));
            }
            return Err(message);
        }
        Ok(out)
    }
}

/// Whether the API server rejected a label selector.
pub(super) fn is_bad_selector(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 400)
}

/// A label selector in the query-string syntax (`a=b,c in (d,e),!f`); empty for none.
pub(super) fn selector_string(selector: Option<&LabelSelector>) -> String {
    let Some(s) = selector else {
        return String::new();
    };
    let mut parts: Vec<String> = s
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in s.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            _ => format!("!{}", e.key),
        });
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_render_as_query_strings() {
        let s: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                 {"key": "x", "operator": "DoesNotExist"}]
        }))
        .unwrap();
        assert_eq!(selector_string(Some(&s)), "app=web,tier in (a,b),!x");
        assert_eq!(selector_string(None), "");
    }
}
