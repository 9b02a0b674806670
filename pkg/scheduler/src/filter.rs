//! The filter plugins of Karmada's scheduler (`pkg/scheduler/framework/plugins`): API enablement,
//! taint toleration, cluster affinity, spread-constraint properties, graceful eviction and the
//! workload (anti-)affinity groups, plus the "0/N clusters are available" diagnosis.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use karmada_apis::Cluster;
use karmada_apis::policy::v1alpha1::{ClusterAffinity, Placement, SpreadFieldValue};
use karmada_apis::well_known::CLUSTER_CONDITION_COMPLETE_API_ENABLEMENTS;
use karmada_apis::work::v1alpha2::ResourceBindingSpec;
use karmada_policy::selector::{cluster_matches, cluster_name};

use crate::observe::{Code, ExtensionPoint, Observer};
use crate::plugins::{Plugin, PluginSet};

/// Reason: the cluster does not serve the resource's API.
pub const REASON_API_MISSING: &str = "cluster(s) did not have the API resource";
/// Reason: the cluster is not selected by the placement's cluster affinity.
pub const REASON_AFFINITY: &str =
    "cluster(s) did not match the placement cluster affinity constraint";
/// Reason: a spread constraint needs the cluster's provider, which is unset.
pub const REASON_NO_PROVIDER: &str = "cluster(s) did not have provider property";
/// Reason: a spread constraint needs the cluster's region, which is unset.
pub const REASON_NO_REGION: &str = "cluster(s) did not have region property";
/// Reason: a spread constraint needs the cluster's zones, which are unset.
pub const REASON_NO_ZONES: &str = "cluster(s) did not have zones property";
/// Reason: the binding is being evicted from the cluster.
pub const REASON_EVICTING: &str = "cluster(s) is in the process of eviction";
/// Reason: another binding of the workload affinity group is placed, and not on the cluster.
pub const REASON_AFFINITY_GROUP: &str =
    "ResourceBinding with the same affinity group does not target this cluster";
/// Reason: another binding of the workload anti-affinity group is on the cluster.
pub const REASON_ANTI_AFFINITY_GROUP: &str =
    "cluster already has workload with the same anti-affinity group";

/// Where the other bindings of a binding's workload affinity groups are (Karmada's
/// `WorkloadAffinity` gate): the input of the `WorkloadAffinity` and `WorkloadAntiAffinity`
/// filters, which the caller gathers from the bindings of the same namespace (not counting the
/// binding itself). Empty: nothing to keep together or apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkloadGroupPeers {
    /// For each other binding of the affinity group that is placed: its clusters. A cluster the
    /// binding is not on yet passes only when it is in every one.
    pub affinity: Vec<BTreeSet<String>>,
    /// The clusters of the other bindings of the anti-affinity group. A cluster the binding is
    /// not on yet passes only when it is not among them.
    pub anti_affinity: BTreeSet<String>,
}

/// Whether an API is served by a cluster, as Karmada's `Cluster.APIEnablement` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiEnablement {
    /// Listed in `status.apiEnablements`.
    Enabled,
    /// Not listed, and the list is complete (`CompleteAPIEnablements=True`).
    Disabled,
    /// Not listed, but the list may be incomplete.
    Unknown,
}

/// The group-version string of an `apiVersion` as apimachinery normalizes it (`v1`, `apps/v1`);
/// malformed values yield the empty string.
fn group_version(api_version: &str) -> String {
    match api_version.split('/').collect::<Vec<_>>().as_slice() {
        [version] | ["", version] => (*version).to_owned(),
        [group, version] => format!("{group}/{version}"),
        _ => String::new(),
    }
}

/// Karmada's `Cluster.APIEnablement(gvk)`: whether the cluster serves `kind` in `api_version`.
pub fn api_enablement(cluster: &Cluster, api_version: &str, kind: &str) -> ApiEnablement {
    let target = group_version(api_version);
    let Some(status) = cluster.status.as_ref() else {
        return ApiEnablement::Unknown;
    };
    let listed = status
        .api_enablements
        .iter()
        .filter(|e| e.group_version == target)
        .any(|e| e.resources.iter().any(|r| r.kind == kind));
    if listed {
        return ApiEnablement::Enabled;
    }
    let complete = status
        .conditions
        .iter()
        .any(|c| c.type_ == CLUSTER_CONDITION_COMPLETE_API_ENABLEMENTS && c.status == "True");
    if complete {
        ApiEnablement::Disabled
    } else {
        ApiEnablement::Unknown
    }
}

/// Kubernetes' `Toleration.ToleratesTaint` with the comparison operators (`Lt`, `Gt`) disabled, as
/// Karmada uses it.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        "Exists" => true,
        _ => false,
    }
}

/// The first `NoSchedule`/`NoExecute` taint of the cluster that no toleration tolerates.
pub fn untolerated_taint<'c>(
    cluster: &'c Cluster,
    tolerations: &[Toleration],
) -> Option<&'c Taint> {
    cluster.spec.taints.iter().find(|taint| {
        matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !tolerations.iter().any(|t| tolerates(t, taint))
    })
}

/// Kubernetes' `Taint.ToString`: `key=value:effect`, or `key:effect` without a value.
pub fn taint_to_string(taint: &Taint) -> String {
    match taint.value.as_deref() {
        Some(value) if !value.is_empty() => format!("{}={value}:{}", taint.key, taint.effect),
        _ => format!("{}:{}", taint.key, taint.effect),
    }
}

/// The cluster affinities a cluster must match one of, for the affinity term in effect: the
/// placement's `clusterAffinity`, or the `clusterAffinities` term named `observed_affinity` (plus
/// its overflow groups for workloads). `None` means every cluster matches.
pub fn effective_affinities<'p>(
    placement: &'p Placement,
    observed_affinity: &str,
    is_workload: bool,
) -> Option<Vec<&'p ClusterAffinity>> {
    if let Some(affinity) = &placement.cluster_affinity {
        return Some(vec![affinity]);
    }
    let term = placement
        .cluster_affinities
        .iter()
        .find(|t| t.affinity_name == observed_affinity)?;
    let mut affinities = vec![&term.cluster_affinity];
    if is_workload {
        affinities.extend(term.overflow_affinities.iter().map(|o| &o.cluster_affinity));
    }
    Some(affinities)
}

/// Runs one filter plugin on one cluster; `Err` carries its reason. Plugins without a filter pass.
pub fn run_filter(
    plugin: Plugin,
    spec: &ResourceBindingSpec,
    placement: &Placement,
    affinities: Option<&[&ClusterAffinity]>,
    groups: Option<&WorkloadGroupPeers>,
    cluster: &Cluster,
) -> Result<(), String> {
    let name = cluster_name(cluster);
    match plugin {
        // Clusters already scheduled always pass.
        Plugin::ApiEnablement => {
            if !spec.target_contains(name)
                && api_enablement(cluster, &spec.resource.api_version, &spec.resource.kind)
                    != ApiEnablement::Enabled
            {
                return Err(REASON_API_MISSING.to_owned());
            }
        }
        // Clusters already scheduled always pass (the taint manager evicts).
        Plugin::TaintToleration => {
            if !spec.target_contains(name)
                && let Some(taint) = untolerated_taint(cluster, &placement.cluster_tolerations)
            {
                return Err(format!(
                    "cluster(s) had untolerated taint {{{}}}",
                    taint_to_string(taint)
                ));
            }
        }
        Plugin::ClusterAffinity => {
            if let Some(affinities) = affinities
                && !affinities.iter().any(|a| cluster_matches(cluster, a))
            {
                return Err(REASON_AFFINITY.to_owned());
            }
        }
        // The grouping property must be set.
        Plugin::SpreadConstraint => {
            for constraint in &placement.spread_constraints {
                match constraint.spread_by_field {
                    Some(SpreadFieldValue::Provider) if cluster.spec.provider.is_empty() => {
                        return Err(REASON_NO_PROVIDER.to_owned());
                    }
                    Some(SpreadFieldValue::Region) if cluster.spec.region.is_empty() => {
                        return Err(REASON_NO_REGION.to_owned());
                    }
                    Some(SpreadFieldValue::Zone) if cluster.spec.zones.is_empty() => {
                        return Err(REASON_NO_ZONES.to_owned());
                    }
                    _ => {}
                }
            }
        }
        Plugin::ClusterEviction => {
            if spec.cluster_in_graceful_eviction_tasks(name) {
                return Err(REASON_EVICTING.to_owned());
            }
        }
        // Clusters already scheduled always pass: these filters never take a workload away.
        Plugin::WorkloadAntiAffinity => {
            if let Some(groups) = groups
                && !spec.target_contains(name)
                && groups.anti_affinity.contains(name)
            {
                return Err(REASON_ANTI_AFFINITY_GROUP.to_owned());
            }
        }
        Plugin::WorkloadAffinity => {
            if let Some(groups) = groups
                && !spec.target_contains(name)
                && groups.affinity.iter().any(|peer| !peer.contains(name))
            {
                return Err(REASON_AFFINITY_GROUP.to_owned());
            }
        }
        Plugin::ClusterLocality => {}
    }
    Ok(())
}

/// The code a filter outcome is reported with.
fn code_of(r: &Result<(), String>) -> Code {
    if r.is_ok() {
        Code::Success
    } else {
        Code::Unschedulable
    }
}

/// Runs the enabled filter plugins on one cluster, reporting each run and the extension point to
/// `observer`; `Err` carries the first failing plugin's reason.
pub fn filter_cluster(
    spec: &ResourceBindingSpec,
    placement: &Placement,
    affinities: Option<&[&ClusterAffinity]>,
    groups: Option<&WorkloadGroupPeers>,
    cluster: &Cluster,
    plugins: PluginSet,
    observer: &mut dyn Observer,
) -> Result<(), String> {
    let started = Instant::now();
    let mut outcome = Ok(());
    for plugin in plugins.iter().filter(|p| p.filters()) {
        let ran = Instant::now();
        let r = run_filter(plugin, spec, placement, affinities, groups, cluster);
        observer.plugin(plugin, ExtensionPoint::Filter, code_of(&r), ran.elapsed());
        if r.is_err() {
            outcome = r;
            break;
        }
    }
    observer.extension_point(ExtensionPoint::Filter, code_of(&outcome), started.elapsed());
    outcome
}

/// Karmada's `FitError` message: `0/<all> clusters are available: <n reason>, ….` with the reason
/// histogram sorted, or `no cluster exists` when nothing was diagnosed.
pub fn fit_error_message(all_clusters: usize, diagnosis: &BTreeMap<String, String>) -> String {
    if all_clusters == 0 || diagnosis.is_empty() {
        return format!("0/{all_clusters} clusters are available: no cluster exists.");
    }
    let mut histogram: BTreeMap<&str, usize> = BTreeMap::new();
    for reason in diagnosis.values() {
        *histogram.entry(reason.as_str()).or_default() += 1;
    }
    let mut parts: Vec<String> = histogram
        .into_iter()
        .map(|(reason, count)| format!("{count} {reason}"))
        .collect();
    parts.sort();
    format!(
        "0/{all_clusters} clusters are available: {}.",
        parts.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use karmada_apis::ClusterStatus;
    use karmada_apis::cluster::v1alpha1::{ApiEnablement as Enablement, ApiResource};

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(Into::into),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn toleration(
        key: Option<&str>,
        op: Option<&str>,
        value: Option<&str>,
        effect: Option<&str>,
    ) -> Toleration {
        Toleration {
            key: key.map(Into::into),
            operator: op.map(Into::into),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
            toleration_seconds: None,
        }
    }

    #[test]
    fn toleration_rules() {
        let t = taint("cluster.karmada.io/not-ready", None, "NoSchedule");
        assert!(tolerates(
            &toleration(
                Some("cluster.karmada.io/not-ready"),
                Some("Exists"),
                None,
                None
            ),
            &t
        ));
        assert!(tolerates(&toleration(None, Some("Exists"), None, None), &t));
        assert!(tolerates(
            &toleration(
                Some("cluster.karmada.io/not-ready"),
                None,
                None,
                Some("NoSchedule")
            ),
            &t
        ));
        assert!(!tolerates(
            &toleration(
                Some("cluster.karmada.io/not-ready"),
                None,
                None,
                Some("NoExecute")
            ),
            &t
        ));
        assert!(!tolerates(
            &toleration(Some("other"), Some("Exists"), None, None),
            &t
        ));
        let v = taint("dedicated", Some("gpu"), "NoExecute");
        assert!(tolerates(
            &toleration(Some("dedicated"), Some("Equal"), Some("gpu"), None),
            &v
        ));
        assert!(!tolerates(
            &toleration(Some("dedicated"), Some("Equal"), Some("cpu"), None),
            &v
        ));
        assert!(!tolerates(
            &toleration(Some("dedicated"), Some("Gt"), Some("1"), None),
            &v
        ));
        assert_eq!(taint_to_string(&v), "dedicated=gpu:NoExecute");
        assert_eq!(
            taint_to_string(&t),
            "cluster.karmada.io/not-ready:NoSchedule"
        );
    }

    #[test]
    fn untolerated_ignores_prefer_no_schedule() {
        let mut c = Cluster::new("c", Default::default());
        c.spec.taints = vec![
            taint("soft", None, "PreferNoSchedule"),
            taint("hard", None, "NoExecute"),
        ];
        assert_eq!(
            untolerated_taint(&c, &[]).map(|t| t.key.as_str()),
            Some("hard")
        );
        let tol = [toleration(Some("hard"), Some("Exists"), None, None)];
        assert!(untolerated_taint(&c, &tol).is_none());
    }

    #[test]
    fn api_enablement_states() {
        let mut c = Cluster::new("c", Default::default());
        assert_eq!(
            api_enablement(&c, "apps/v1", "Deployment"),
            ApiEnablement::Unknown
        );
        c.status = Some(ClusterStatus {
            api_enablements: vec![
                Enablement {
                    group_version: "apps/v1".into(),
                    resources: vec![ApiResource {
                        name: "deployments".into(),
                        kind: "Deployment".into(),
                    }],
                },
                Enablement {
                    group_version: "v1".into(),
                    resources: vec![ApiResource {
                        name: "configmaps".into(),
                        kind: "ConfigMap".into(),
                    }],
                },
            ],
            ..Default::default()
        });
        assert_eq!(
            api_enablement(&c, "apps/v1", "Deployment"),
            ApiEnablement::Enabled
        );
        assert_eq!(
            api_enablement(&c, "v1", "ConfigMap"),
            ApiEnablement::Enabled
        );
        assert_eq!(
            api_enablement(&c, "apps/v1", "StatefulSet"),
            ApiEnablement::Unknown
        );
        if let Some(s) = c.status.as_mut() {
            s.conditions.push(Condition {
                type_: CLUSTER_CONDITION_COMPLETE_API_ENABLEMENTS.into(),
                status: "True".into(),
                reason: "Complete".into(),
                message: String::new(),
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
                observed_generation: None,
            });
        }
        assert_eq!(
            api_enablement(&c, "apps/v1", "StatefulSet"),
            ApiEnablement::Disabled
        );
        assert_eq!(group_version("a/b/c"), "");
    }

    #[test]
    fn fit_error_messages() {
        assert_eq!(
            fit_error_message(0, &BTreeMap::new()),
            "0/0 clusters are available: no cluster exists."
        );
        assert_eq!(
            fit_error_message(3, &BTreeMap::new()),
            "0/3 clusters are available: no cluster exists."
        );
        let d: BTreeMap<String, String> = [
            ("a".to_owned(), REASON_AFFINITY.to_owned()),
            ("b".to_owned(), REASON_AFFINITY.to_owned()),
            ("c".to_owned(), REASON_API_MISSING.to_owned()),
        ]
        .into();
        assert_eq!(
            fit_error_message(3, &d),
            "0/3 clusters are available: 1 cluster(s) did not have the API resource, 2 cluster(s) did not match the placement cluster affinity constraint."
        );
    }
}
