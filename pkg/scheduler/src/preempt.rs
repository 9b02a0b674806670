//! Preemption (karmada-rs's own; Karmada only orders its queue by priority): which placements of
//! lower-priority bindings to take away so that a binding that does not fit for lack of capacity
//! fits, and how the room they leave (or the room a preemptor was promised) shows in the Cluster
//! objects the algorithm reads.
//!
//! A placement of a binding on a cluster (an [`Occupant`]) frees its replicas × its replica
//! requirements (and one pod per replica) there. Victims are taken lowest priority first, then
//! newest first, until the preemptor fits on the clusters as they would be without them; then each
//! victim, highest priority first, is spared again if the preemptor still fits without taking it,
//! as kube-scheduler reprieves pods. Only placements on clusters that pass the preemptor's filters
//! count, so preemption never works around affinity, taints or API enablement.
//!
//! A cluster's room is adjusted in its `status.resourceSummary` (`allocated`); its resource models
//! are set aside for that attempt (which nodes free up is not known), and an accurate estimator's
//! answer for it no longer lowers the estimate.

use std::collections::{BTreeMap, BTreeSet};

use apimachinery::quantity::{Format, Quantity};
use karmada_apis::Cluster;
use karmada_apis::work::v1alpha2::{
    ReplicaRequirements, ResourceBindingSpec, ResourceBindingStatus,
};
use karmada_policy::selector::cluster_name;

use crate::{
    ScheduleOptions, ScheduleResult, UNAUTHENTIC_REPLICA, candidate_cluster_names, schedule,
};

/// Resource amounts by resource name (`cpu`, `memory`, `pods`, ...).
pub type Resources = BTreeMap<String, Quantity>;

/// A binding's replicas on one cluster: what preemption may take away.
#[derive(Debug, Clone, PartialEq)]
pub struct Occupant {
    /// The binding (`Kind/namespace/name`).
    pub binding: String,
    /// The cluster.
    pub cluster: String,
    /// The binding's `spec.schedulePriority.priority`.
    pub priority: i32,
    /// The binding's creation time in milliseconds since the epoch (newer ones go first).
    pub created: i64,
    /// Its replicas on the cluster.
    pub replicas: i32,
    /// What each replica requests.
    pub requirements: Option<ReplicaRequirements>,
}

impl Occupant {
    /// What its replicas use on the cluster.
    pub fn usage(&self) -> Resources {
        usage(self.replicas, self.requirements.as_ref())
    }
}

/// The victims chosen and the preemptor's result once they are gone.
#[derive(Debug, Clone, PartialEq)]
pub struct Preemption {
    /// The placements to take away, lowest priority first.
    pub victims: Vec<Occupant>,
    /// The preemptor's result counting the room they free.
    pub result: ScheduleResult,
}

/// What `replicas` replicas with `requirements` use: each request times `replicas`, and `pods`.
pub fn usage(replicas: i32, requirements: Option<&ReplicaRequirements>) -> Resources {
    let mut total = Resources::new();
    let replicas = i64::from(replicas.max(0));
    if let Some(requirements) = requirements {
        for (name, request) in &requirements.resource_request {
            let Ok(mut amount) = Quantity::from_k8s(request) else {
                continue;
            };
            amount.mul(replicas);
            total.insert(name.clone(), amount);
        }
    }
    total.insert(
        "pods".to_owned(),
        Quantity::from_value(i128::from(replicas), Format::DecimalSi),
    );
    total
}

/// Adds `more` to `into`.
pub fn add(into: &mut Resources, more: &Resources) {
    for (name, amount) in more {
        into.entry(name.clone())
            .and_modify(|a| a.add(amount))
            .or_insert(*amount);
    }
}

/// `cluster` with `delta` added to its allocated resources (a negative amount frees room; none
/// goes below zero), and its resource models set aside. Unchanged without a resource summary.
pub fn with_allocated(cluster: &Cluster, delta: &Resources) -> Cluster {
    let mut cluster = cluster.clone();
    let Some(summary) = cluster
        .status
        .as_mut()
        .and_then(|s| s.resource_summary.as_mut())
    else {
        return cluster;
    };
    for (name, amount) in delta {
        let mut allocated = summary
            .allocated
            .get(name)
            .and_then(|q| Quantity::from_k8s(q).ok())
            .unwrap_or_else(|| Quantity::zero(amount.format()));
        allocated.add(amount);
        if allocated
            .cmp_value(&Quantity::zero(Format::DecimalSi))
            .is_lt()
        {
            allocated = Quantity::zero(allocated.format());
        }
        summary.allocated.insert(name.clone(), allocated.to_k8s());
    }
    summary.allocatable_modelings.clear();
    cluster
}

/// The negation of `resources`.
pub fn negated(resources: &Resources) -> Resources {
    resources.iter().map(|(k, v)| (k.clone(), -*v)).collect()
}

/// Chooses the fewest lower-priority placements whose room makes `spec` fit (see the module
/// documentation), or `None` when taking every one of them would not.
pub fn select_victims(
    spec: &ResourceBindingSpec,
    status: Option<&ResourceBindingStatus>,
    clusters: &[&Cluster],
    options: &ScheduleOptions,
    occupants: &[Occupant],
) -> Option<Preemption> {
    let priority = spec.schedule_priority_value();
    let candidates = candidate_cluster_names(spec, clusters, options);
    let mut pool: Vec<&Occupant> = occupants
        .iter()
        .filter(|o| o.priority < priority && o.replicas > 0 && candidates.contains(&o.cluster))
        .collect();
    pool.sort_by(|a, b| {
        a.priority
            .cmp(&b.priority)
            .then_with(|| b.created.cmp(&a.created))
            .then_with(|| a.binding.cmp(&b.binding))
            .then_with(|| a.cluster.cmp(&b.cluster))
    });
    let fits = |chosen: &[&Occupant]| -> Option<ScheduleResult> {
        let mut freed: BTreeMap<&str, Resources> = BTreeMap::new();
        for o in chosen {
            add(freed.entry(o.cluster.as_str()).or_default(), &o.usage());
        }
        let adjusted: Vec<Cluster> = clusters
            .iter()
            .map(|c| match freed.get(cluster_name(c)) {
                Some(f) => with_allocated(c, &negated(f)),
                None => (*c).clone(),
            })
            .collect();
        let mut options = options.clone();
        if let Some(answers) = options.accurate_estimates.as_mut() {
            for name in freed.keys() {
                if let Some(answer @ Some(_)) = answers.get_mut(*name) {
                    *answer = Some(UNAUTHENTIC_REPLICA);
                }
            }
        }
        schedule(spec, status, &adjusted, &options).ok()
    };
    let mut chosen: Vec<&Occupant> = Vec::new();
    let mut result = None;
    for o in pool {
        chosen.push(o);
        if let Some(r) = fits(&chosen) {
            result = Some(r);
            break;
        }
    }
    let mut result = result?;
    // Spare what is not needed, highest priority (last taken) first.
    for i in (0..chosen.len()).rev() {
        let mut without = chosen.clone();
        without.remove(i);
        if let Some(r) = fits(&without) {
            chosen = without;
            result = r;
        }
    }
    Some(Preemption {
        victims: chosen.into_iter().cloned().collect(),
        result,
    })
}

/// The clusters among `victims`.
pub fn victim_clusters(victims: &[Occupant]) -> BTreeSet<&str> {
    victims.iter().map(|v| v.cluster.as_str()).collect()
}

/// A preemptor's claim on a cluster until the cluster's summary shows its replicas (like
/// kube-scheduler's nominated node): `usage` is what the preemptor's replicas there use and
/// `baseline` the allocated resources the summary would show once the victims are gone and before
/// the preemptor's replicas run.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// What the preemptor's replicas on the cluster use.
    pub usage: Resources,
    /// The allocated resources expected once the victims left.
    pub baseline: Resources,
}

impl Claim {
    /// The claim of `usage` on `cluster` whose victims there use `freed`.
    pub fn new(cluster: &Cluster, usage: Resources, freed: &Resources) -> Claim {
        let mut baseline = allocated(cluster);
        add(&mut baseline, &negated(freed));
        Claim { usage, baseline }
    }

    /// The part of the claim `cluster`'s summary does not show yet: for each resource, the usage
    /// less what was allocated beyond the baseline since (never below zero nor above the usage).
    pub fn outstanding(&self, cluster: &Cluster) -> Resources {
        let now = allocated(cluster);
        let zero = Quantity::zero(Format::DecimalSi);
        let mut left = Resources::new();
        for (name, usage) in &self.usage {
            let mut shown = now.get(name).copied().unwrap_or(zero);
            if let Some(b) = self.baseline.get(name) {
                shown.sub(b);
            }
            let mut rest = *usage;
            if shown.cmp_value(&zero).is_gt() {
                rest.sub(&shown);
            }
            if rest.cmp_value(&zero).is_gt() {
                left.insert(name.clone(), rest);
            }
        }
        left
    }
}

/// A cluster's allocated resources.
fn allocated(cluster: &Cluster) -> Resources {
    cluster
        .status
        .as_ref()
        .and_then(|s| s.resource_summary.as_ref())
        .map(|s| {
            s.allocated
                .iter()
                .filter_map(|(k, v)| Quantity::from_k8s(v).ok().map(|q| (k.clone(), q)))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(name: &str, allocated_cpu: &str) -> Cluster {
        serde_json::from_value(json!({
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name},
            "spec": {"apiEndpoint": "https://127.0.0.1:1", "syncMode": "Push"},
            "status": {
                "apiEnablements": [{"groupVersion": "apps/v1",
                    "resources": [{"name": "deployments", "kind": "Deployment"}]}],
                "resourceSummary": {
                    "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                    "allocated": {"cpu": allocated_cpu, "memory": "0", "pods": "4"},
                },
            },
        }))
        .unwrap()
    }

    fn spec(replicas: i32, priority: i32, clusters: &[&str]) -> ResourceBindingSpec {
        serde_json::from_value(json!({
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ns",
                "name": "high", "uid": "uid-high"},
            "replicas": replicas,
            "replicaRequirements": {"resourceRequest": {"cpu": "1"}},
            "schedulePriority": {"priority": priority},
            "placement": {
                "clusterAffinity": {"clusterNames": clusters},
                "replicaScheduling": {"replicaSchedulingType": "Divided",
                    "replicaDivisionPreference": "Aggregated"},
            },
        }))
        .unwrap()
    }

    fn occupant(
        binding: &str,
        cluster: &str,
        priority: i32,
        created: i64,
        replicas: i32,
    ) -> Occupant {
        Occupant {
            binding: binding.to_owned(),
            cluster: cluster.to_owned(),
            priority,
            created,
            replicas,
            requirements: serde_json::from_value(json!({"resourceRequest": {"cpu": "1"}})).unwrap(),
        }
    }

    #[test]
    fn fewest_lowest_priority_newest_first() {
        let m1 = cluster("m1", "4");
        let clusters = [&m1];
        let spec = spec(2, 100, &["m1"]);
        let options = ScheduleOptions::default();
        assert!(schedule(&spec, None, &clusters, &options).is_err());
        let occupants = [
            occupant("a-old-low", "m1", 1, 1, 1),
            occupant("b-new-low", "m1", 1, 2, 1),
            occupant("c-lowest-big", "m1", 0, 1, 2),
            occupant("d-equal", "m1", 100, 1, 4),
        ];
        let p = select_victims(&spec, None, &clusters, &options, &occupants).unwrap();
        // The lowest priority frees 2 CPUs on its own: the others are spared.
        let names: Vec<_> = p.victims.iter().map(|v| v.binding.as_str()).collect();
        assert_eq!(names, ["c-lowest-big"]);
        assert_eq!(p.result.clusters[0].replicas, 2);

        let spec3 = ResourceBindingSpec {
            replicas: 3,
            ..spec.clone()
        };
        let p = select_victims(&spec3, None, &clusters, &options, &occupants).unwrap();
        let names: Vec<_> = p.victims.iter().map(|v| v.binding.as_str()).collect();
        assert_eq!(names, ["c-lowest-big", "b-new-low"], "then the newest");

        let spec5 = ResourceBindingSpec {
            replicas: 5,
            ..spec
        };
        assert!(
            select_victims(&spec5, None, &clusters, &options, &occupants).is_none(),
            "equal priority is never preempted"
        );
    }

    #[test]
    fn only_clusters_that_pass_the_filters() {
        let m1 = cluster("m1", "4");
        let m2 = cluster("m2", "4");
        let clusters = [&m1, &m2];
        let spec = spec(1, 100, &["m1"]);
        let occupants = [occupant("low", "m2", 0, 1, 4)];
        let options = ScheduleOptions::default();
        assert!(select_victims(&spec, None, &clusters, &options, &occupants).is_none());
    }

    #[test]
    fn a_claim_fades_as_the_summary_catches_up() {
        let before = cluster("m1", "4");
        let claim = Claim::new(
            &before,
            usage(2, spec(2, 1, &[]).replica_requirements.as_ref()),
            &usage(2, spec(2, 1, &[]).replica_requirements.as_ref()),
        );
        let cpu = |r: &Resources| r.get("cpu").map(Quantity::value);
        // Victims still running: the room is theirs; nothing more is held beyond it.
        assert_eq!(cpu(&claim.outstanding(&before)), None);
        // Victims gone, preemptor not running yet: its 2 CPUs are held.
        let gone = cluster("m1", "2");
        assert_eq!(cpu(&claim.outstanding(&gone)), Some(2));
        let held = with_allocated(&gone, &claim.outstanding(&gone));
        assert_eq!(
            crate::estimate::max_available_replicas(
                &held,
                spec(1, 1, &[]).replica_requirements.as_ref()
            ),
            0
        );
        // Preemptor running: nothing is held.
        let running = cluster("m1", "4");
        assert_eq!(cpu(&claim.outstanding(&running)), None);
    }
}
