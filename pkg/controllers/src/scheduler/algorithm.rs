//! Adapter between the scheduler controller and the placement algorithm.
//!
//! `karmada-scheduler` (the pure algorithm crate) was still a placeholder when this controller was
//! written, so this module carries a thin built-in algorithm with Karmada's filter semantics and
//! replica division, behind the one function the controller calls ([`schedule`]). When the crate
//! exposes its algorithm, [`schedule`] should delegate to it.
//!
//! Covered: deleting clusters, API enablement, taints vs `clusterTolerations` (NoSchedule and
//! NoExecute; clusters already scheduled are kept, as in Karmada), graceful-eviction clusters,
//! `clusterAffinity` and ordered `clusterAffinities` with fallback; `Duplicated`, non-workloads,
//! `Divided` with static weights (Webster apportionment with Karmada's uid tie-break), and
//! `Aggregated` / dynamic weights by available replicas from `resourceSummary`.
//! Not covered here: spread constraints and scoring.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karmada_apis::Cluster;
use karmada_apis::policy::v1alpha1::{
    ClusterAffinity, Placement, ReplicaDivisionPreference, ReplicaSchedulingType,
};
use karmada_apis::work::v1alpha2::{ResourceBindingSpec, ResourceBindingStatus, TargetCluster};
use karmada_interpreter::division::{TieBreak, allocate_webster_seats};
use karmada_policy::selector::cluster_matches;

/// Why scheduling failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// No cluster passed the filters (Karmada's `FitError`; condition reason `NoClusterFit`).
    #[error("0/{total} clusters are available: {reasons}.")]
    NoClusterFit {
        /// Number of clusters considered.
        total: usize,
        /// Sorted histogram of the reasons, e.g. `2 cluster(s) had untolerated taint {…}`.
        reasons: String,
    },
    /// Clusters fit but cannot take the replicas (condition reason `Unschedulable`).
    #[error("{0}")]
    Unschedulable(String),
    /// The binding has no placement.
    #[error("failed to get placement from binding")]
    NoPlacement,
}

/// A successful scheduling decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The target clusters and their replicas, sorted by name.
    pub clusters: Vec<TargetCluster>,
    /// The `clusterAffinities` term used (empty with `clusterAffinity`).
    pub affinity_name: String,
    /// The clusters that passed the filters.
    pub feasible: BTreeSet<String>,
}

const REASON_AFFINITY: &str = "cluster(s) did not match the placement cluster affinity constraint";
const REASON_API: &str = "cluster(s) did not have the API resource";
const REASON_EVICTION: &str = "cluster(s) is in the process of eviction";

/// `key=value:Effect` (Kubernetes' `Taint.ToString`).
fn taint_string(t: &Taint) -> String {
    match t.value.as_deref() {
        Some(v) if !v.is_empty() => format!("{}={v}:{}", t.key, t.effect),
        _ => format!("{}:{}", t.key, t.effect),
    }
}

/// Kubernetes' `Toleration.ToleratesTaint` (without the comparison operators).
fn tolerates(tol: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = tol.effect.as_deref()
        && !effect.is_empty()
        && effect != taint.effect
    {
        return false;
    }
    let key = tol.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match tol.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "" | "Equal" => {
            tol.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

/// The first NoSchedule/NoExecute taint of `cluster` that `tolerations` do not tolerate.
pub fn untolerated_taint<'a>(
    cluster: &'a Cluster,
    tolerations: &[Toleration],
) -> Option<&'a Taint> {
    cluster
        .spec
        .taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
}

/// Whether the cluster serves `apiVersion`/`kind` according to `status.apiEnablements`.
pub fn api_enabled(cluster: &Cluster, api_version: &str, kind: &str) -> bool {
    cluster.status.as_ref().is_some_and(|s| {
        s.api_enablements
            .iter()
            .any(|e| e.group_version == api_version && e.resources.iter().any(|r| r.kind == kind))
    })
}

/// The filter result of one cluster: `None` when it fits, else the reason.
fn filter(
    spec: &ResourceBindingSpec,
    placement: &Placement,
    affinity: Option<&ClusterAffinity>,
    cluster: &Cluster,
) -> Option<String> {
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    let scheduled = spec.target_contains(name);
    if !scheduled && !api_enabled(cluster, &spec.resource.api_version, &spec.resource.kind) {
        return Some(REASON_API.to_owned());
    }
    if !scheduled && let Some(t) = untolerated_taint(cluster, &placement.cluster_tolerations) {
        return Some(format!(
            "cluster(s) had untolerated taint {{{}}}",
            taint_string(t)
        ));
    }
    if let Some(a) = affinity
        && !cluster_matches(cluster, a)
    {
        return Some(REASON_AFFINITY.to_owned());
    }
    if spec.cluster_in_graceful_eviction_tasks(name) {
        return Some(REASON_EVICTION.to_owned());
    }
    None
}

/// The clusters that pass the filters under one affinity, or the fit error.
fn feasible<'a>(
    spec: &ResourceBindingSpec,
    placement: &Placement,
    affinity: Option<&ClusterAffinity>,
    clusters: &'a [Cluster],
) -> Result<Vec<&'a Cluster>, ScheduleError> {
    let mut out = Vec::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for c in clusters {
        if c.metadata.deletion_timestamp.is_some() {
            continue;
        }
        match filter(spec, placement, affinity, c) {
            None => out.push(c),
            Some(reason) => *reasons.entry(reason).or_default() += 1,
        }
    }
    if out.is_empty() {
        let mut hist: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
        hist.sort();
        let reasons = if clusters.is_empty() || hist.is_empty() {
            "no cluster exists".to_owned()
        } else {
            hist.join(", ")
        };
        return Err(ScheduleError::NoClusterFit {
            total: clusters.len(),
            reasons,
        });
    }
    Ok(out)
}

/// Index of the affinity term named `observed` (0 when unknown), Karmada's `getAffinityIndex`.
pub fn affinity_index(placement: &Placement, observed: &str) -> usize {
    if observed.is_empty() {
        return 0;
    }
    placement
        .cluster_affinities
        .iter()
        .position(|t| t.affinity_name == observed)
        .unwrap_or(0)
}

fn quantity_value(q: Option<&Quantity>) -> i64 {
    q.and_then(|q| q.0.trim().parse::<i64>().ok()).unwrap_or(0)
}

/// Replicas a cluster can still run, estimated from its pod capacity in `resourceSummary`.
fn available_replicas(cluster: &Cluster) -> i64 {
    let Some(summary) = cluster
        .status
        .as_ref()
        .and_then(|s| s.resource_summary.as_ref())
    else {
        return 0;
    };
    let allocatable = quantity_value(summary.allocatable.get("pods"));
    let used = quantity_value(summary.allocated.get("pods"))
        + quantity_value(summary.allocating.get("pods"));
    (allocatable - used).max(0)
}

/// Divides `replicas` by `votes` with Webster's method; zero-replica clusters are dropped.
fn divide(replicas: i32, votes: &BTreeMap<String, i64>, uid: &str) -> Vec<TargetCluster> {
    allocate_webster_seats(replicas, votes, &BTreeMap::new(), TieBreak::for_uid(uid))
        .into_iter()
        .filter(|p| p.seats > 0)
        .map(|p| TargetCluster {
            name: p.name,
            replicas: p.seats,
            components: Vec::new(),
        })
        .collect()
}

/// Assigns replicas among the feasible clusters.
fn assign(
    spec: &ResourceBindingSpec,
    placement: &Placement,
    clusters: &[&Cluster],
) -> Result<Vec<TargetCluster>, ScheduleError> {
    let name = |c: &Cluster| c.metadata.name.clone().unwrap_or_default();
    let every = |replicas: i32| -> Vec<TargetCluster> {
        let mut v: Vec<TargetCluster> = clusters
            .iter()
            .map(|c| TargetCluster {
                name: name(c),
                replicas,
                components: Vec::new(),
            })
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    };
    if !spec.is_workload()
        || placement.replica_scheduling_type() == ReplicaSchedulingType::Duplicated
    {
        return Ok(every(spec.replicas));
    }
    let Some(strategy) = placement.replica_scheduling.as_ref() else {
        return Ok(every(spec.replicas));
    };
    if strategy.replica_scheduling_type != ReplicaSchedulingType::Divided {
        return Ok(every(spec.replicas));
    }
    let uid = spec.resource.uid.as_str();
    let dynamic = strategy
        .weight_preference
        .as_ref()
        .is_some_and(|w| w.dynamic_weight.is_some());
    let aggregated =
        strategy.replica_division_preference == Some(ReplicaDivisionPreference::Aggregated);
    if aggregated || dynamic {
        let mut avail: Vec<(String, i64)> = clusters
            .iter()
            .map(|c| (name(c), available_replicas(c)))
            .collect();
        let total: i64 = avail.iter().map(|(_, a)| a).sum();
        if total < i64::from(spec.replicas) {
            return Err(ScheduleError::Unschedulable(format!(
                "Clusters available replicas {total} are not enough to schedule."
            )));
        }
        if aggregated {
            avail.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            let mut sum = 0;
            let mut keep = avail.len();
            for (i, (_, a)) in avail.iter().enumerate() {
                sum += a;
                if sum >= i64::from(spec.replicas) {
                    keep = i + 1;
                    break;
                }
            }
            avail.truncate(keep);
        }
        let votes: BTreeMap<String, i64> = avail.into_iter().collect();
        return Ok(divide(spec.replicas, &votes, uid));
    }
    // Static weights; no weight preference or no matching weight weighs every cluster equally.
    let rules = strategy
        .weight_preference
        .as_ref()
        .map(|w| w.static_weight_list.as_slice())
        .unwrap_or_default();
    let mut votes: BTreeMap<String, i64> = BTreeMap::new();
    for c in clusters {
        let w = rules
            .iter()
            .filter(|r| cluster_matches(c, &r.target_cluster))
            .map(|r| r.weight)
            .max()
            .unwrap_or(0);
        if w > 0 {
            votes.insert(name(c), w);
        }
    }
    if votes.is_empty() {
        votes = clusters.iter().map(|c| (name(c), 1)).collect();
    }
    Ok(divide(spec.replicas, &votes, uid))
}

/// Schedules a binding over `clusters`: with `clusterAffinities`, terms are tried in order starting
/// from the observed one (from the first when `from_first`), and the first that fits wins.
pub fn schedule(
    spec: &ResourceBindingSpec,
    status: Option<&ResourceBindingStatus>,
    clusters: &[Cluster],
    from_first: bool,
) -> Result<Outcome, ScheduleError> {
    let placement = spec.placement.as_ref().ok_or(ScheduleError::NoPlacement)?;
    if placement.cluster_affinities.is_empty() {
        let fit = feasible(
            spec,
            placement,
            placement.cluster_affinity.as_ref(),
            clusters,
        )?;
        let assigned = assign(spec, placement, &fit)?;
        return Ok(Outcome {
            clusters: assigned,
            affinity_name: String::new(),
            feasible: fit.iter().filter_map(|c| c.metadata.name.clone()).collect(),
        });
    }
    let observed = status
        .map(|s| s.scheduler_observed_affinity_name.as_str())
        .unwrap_or_default();
    let start = if from_first {
        0
    } else {
        affinity_index(placement, observed)
    };
    let mut first_err = None;
    for term in placement.cluster_affinities.iter().skip(start) {
        let result = feasible(spec, placement, Some(&term.cluster_affinity), clusters)
            .and_then(|fit| Ok((assign(spec, placement, &fit)?, fit)));
        match result {
            Ok((assigned, fit)) => {
                return Ok(Outcome {
                    clusters: assigned,
                    affinity_name: term.affinity_name.clone(),
                    feasible: fit.iter().filter_map(|c| c.metadata.name.clone()).collect(),
                });
            }
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    Err(first_err.unwrap_or(ScheduleError::NoClusterFit {
        total: clusters.len(),
        reasons: "no cluster exists".to_owned(),
    }))
}

/// The names of the clusters that currently pass the filters for this binding (empty on a fit
/// error): what the controller compares to notice clusters joining or leaving.
pub fn feasible_names(
    spec: &ResourceBindingSpec,
    status: Option<&ResourceBindingStatus>,
    clusters: &[Cluster],
) -> BTreeSet<String> {
    let Some(placement) = spec.placement.as_ref() else {
        return BTreeSet::new();
    };
    let affinity = if placement.cluster_affinities.is_empty() {
        placement.cluster_affinity.as_ref()
    } else {
        let observed = status
            .map(|s| s.scheduler_observed_affinity_name.as_str())
            .unwrap_or_default();
        placement
            .cluster_affinities
            .get(affinity_index(placement, observed))
            .map(|t| &t.cluster_affinity)
    };
    feasible(spec, placement, affinity, clusters)
        .map(|fit| fit.iter().filter_map(|c| c.metadata.name.clone()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use karmada_apis::ClusterSpec;
    use karmada_apis::cluster::v1alpha1::{ApiEnablement, ApiResource, ClusterStatus};
    use karmada_apis::policy::v1alpha1::{
        ClusterAffinityTerm, ClusterPreferences, ReplicaSchedulingStrategy, StaticClusterWeight,
    };
    use karmada_apis::work::v1alpha2::ObjectReference;

    fn cluster(name: &str, labels: &[(&str, &str)], taints: Vec<Taint>) -> Cluster {
        let mut c = Cluster::new(
            name,
            ClusterSpec {
                taints,
                ..Default::default()
            },
        );
        c.metadata = ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
            ..Default::default()
        };
        c.status = Some(ClusterStatus {
            api_enablements: vec![ApiEnablement {
                group_version: "apps/v1".into(),
                resources: vec![ApiResource {
                    name: "deployments".into(),
                    kind: "Deployment".into(),
                }],
            }],
            ..Default::default()
        });
        c
    }

    fn not_ready() -> Taint {
        Taint {
            key: "cluster.karmada.io/not-ready".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }
    }

    fn spec(replicas: i32, placement: Placement) -> ResourceBindingSpec {
        ResourceBindingSpec {
            resource: ObjectReference {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                namespace: "default".into(),
                name: "nginx".into(),
                uid: "uid".into(),
                resource_version: "1".into(),
            },
            replicas,
            placement: Some(placement),
            ..Default::default()
        }
    }

    fn names(names: &[&str]) -> ClusterAffinity {
        ClusterAffinity {
            cluster_names: names.iter().map(|s| (*s).to_owned()).collect(),
            ..Default::default()
        }
    }

    fn weighted(weights: &[(&str, i64)]) -> Placement {
        Placement {
            replica_scheduling: Some(ReplicaSchedulingStrategy {
                replica_scheduling_type: ReplicaSchedulingType::Divided,
                replica_division_preference: Some(ReplicaDivisionPreference::Weighted),
                weight_preference: Some(ClusterPreferences {
                    static_weight_list: weights
                        .iter()
                        .map(|(n, w)| StaticClusterWeight {
                            target_cluster: names(&[n]),
                            weight: *w,
                        })
                        .collect(),
                    dynamic_weight: None,
                }),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn duplicated_goes_to_every_fitting_cluster() {
        let clusters = vec![
            cluster("m1", &[], vec![]),
            cluster("m2", &[], vec![]),
            cluster("m3", &[], vec![not_ready()]),
        ];
        let out = schedule(&spec(2, Placement::default()), None, &clusters, false).unwrap();
        assert_eq!(
            out.clusters
                .iter()
                .map(|t| (t.name.as_str(), t.replicas))
                .collect::<Vec<_>>(),
            vec![("m1", 2), ("m2", 2)]
        );
        assert_eq!(out.feasible.len(), 2);
    }

    #[test]
    fn weighted_division_sums_to_replicas_and_is_stable() {
        let clusters = vec![cluster("m1", &[], vec![]), cluster("m2", &[], vec![])];
        for replicas in 0..20 {
            let s = spec(replicas, weighted(&[("m1", 1), ("m2", 2)]));
            let a = schedule(&s, None, &clusters, false).unwrap();
            let b = schedule(&s, None, &clusters, false).unwrap();
            assert_eq!(a, b);
            assert_eq!(a.clusters.iter().map(|t| t.replicas).sum::<i32>(), replicas);
        }
        let out = schedule(
            &spec(9, weighted(&[("m1", 1), ("m2", 2)])),
            None,
            &clusters,
            false,
        )
        .unwrap();
        assert_eq!(
            out.clusters
                .iter()
                .map(|t| (t.name.as_str(), t.replicas))
                .collect::<Vec<_>>(),
            vec![("m1", 3), ("m2", 6)]
        );
    }

    #[test]
    fn taints_tolerations_and_scheduled_clusters() {
        let clusters = vec![cluster("m1", &[], vec![not_ready()])];
        let err = schedule(&spec(1, Placement::default()), None, &clusters, false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "0/1 clusters are available: 1 cluster(s) had untolerated taint {cluster.karmada.io/not-ready:NoSchedule}."
        );
        let tolerant = Placement {
            cluster_tolerations: vec![Toleration {
                key: Some("cluster.karmada.io/not-ready".into()),
                operator: Some("Exists".into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(schedule(&spec(1, tolerant), None, &clusters, false).is_ok());
        // a cluster already scheduled is kept (the taint manager evicts, not the scheduler)
        let mut s = spec(1, Placement::default());
        s.clusters = vec![TargetCluster {
            name: "m1".into(),
            replicas: 1,
            components: vec![],
        }];
        assert!(schedule(&s, None, &clusters, false).is_ok());
    }

    #[test]
    fn affinity_and_affinities_fallback() {
        let clusters = vec![
            cluster("m1", &[("env", "prod")], vec![]),
            cluster("m2", &[], vec![]),
        ];
        let p = Placement {
            cluster_affinity: Some(names(&["m2"])),
            ..Default::default()
        };
        let out = schedule(&spec(1, p), None, &clusters, false).unwrap();
        assert_eq!(out.clusters[0].name, "m2");
        let p = Placement {
            cluster_affinities: vec![
                ClusterAffinityTerm {
                    affinity_name: "a".into(),
                    cluster_affinity: names(&["nope"]),
                    ..Default::default()
                },
                ClusterAffinityTerm {
                    affinity_name: "b".into(),
                    cluster_affinity: names(&["m1"]),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let out = schedule(&spec(1, p.clone()), None, &clusters, false).unwrap();
        assert_eq!(
            (out.affinity_name.as_str(), out.clusters[0].name.as_str()),
            ("b", "m1")
        );
        let none = vec![];
        let err = schedule(&spec(1, p), None, &none, false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "0/0 clusters are available: no cluster exists."
        );
    }

    #[test]
    fn missing_api_is_filtered() {
        let mut c = cluster("m1", &[], vec![]);
        c.status = None;
        let err = schedule(&spec(1, Placement::default()), None, &[c], false).unwrap_err();
        assert!(matches!(err, ScheduleError::NoClusterFit { .. }));
        assert!(err.to_string().contains(REASON_API));
    }
}
