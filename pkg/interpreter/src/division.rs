//! Dividing a number of seats (replicas, Job completions) among clusters by weight with the
//! Webster (Sainte-Laguë) method, the way Karmada's `helper.SpreadReplicasByTargetClusters` does,
//! and the binding controller's Job `completions` split built on it.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use karmada_apis::names::fnv32a;
use karmada_apis::policy::v1alpha1::{Placement, ReplicaSchedulingType};
use karmada_apis::work::v1alpha2::TargetCluster;
use serde_json::Value;

use crate::error::{AtObject, ObjectRef, Result};
use crate::object;

/// One party of an apportionment: a cluster, its weight and the seats it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Party {
    /// Cluster name.
    pub name: String,
    /// Weight.
    pub votes: i64,
    /// Seats held.
    pub seats: i32,
}

/// How ties of equal Webster priority are broken after "fewer seats first".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TieBreak {
    /// The lexicographically smaller name wins.
    NameAscending,
    /// The lexicographically larger name wins.
    NameDescending,
}

impl TieBreak {
    /// Karmada's tie-breaker for an object uid: ascending names for an empty uid or one whose
    /// FNV-32a hash is even, descending when it is odd (so ties do not always favour one cluster).
    pub fn for_uid(uid: &str) -> Self {
        if uid.is_empty() || fnv32a(uid.as_bytes()) & 1 == 0 {
            TieBreak::NameAscending
        } else {
            TieBreak::NameDescending
        }
    }
}

/// `Ordering::Less` when `a` should get the next seat before `b`.
fn priority_order(a: &Party, b: &Party, tie: TieBreak) -> Ordering {
    // Compare votes/(2*seats+1) exactly: a.votes * (2*b.seats+1) vs b.votes * (2*a.seats+1).
    let lhs = i128::from(a.votes) * (2 * i128::from(b.seats) + 1);
    let rhs = i128::from(b.votes) * (2 * i128::from(a.seats) + 1);
    rhs.cmp(&lhs)
        .then_with(|| a.seats.cmp(&b.seats))
        .then_with(|| match tie {
            TieBreak::NameAscending => a.name.cmp(&b.name),
            TieBreak::NameDescending => b.name.cmp(&a.name),
        })
}

/// Hands out `new_seats` one at a time to the party with the highest `votes / (2*seats + 1)`,
/// starting from `initial` seats (parties only in `initial` have no votes). Returns every party,
/// sorted by name.
pub fn allocate_webster_seats(
    new_seats: i32,
    votes: &BTreeMap<String, i64>,
    initial: &BTreeMap<String, i32>,
    tie: TieBreak,
) -> Vec<Party> {
    let mut parties: BTreeMap<&str, Party> = BTreeMap::new();
    for (name, &seats) in initial {
        parties.insert(
            name,
            Party {
                name: name.clone(),
                votes: 0,
                seats,
            },
        );
    }
    for (name, &v) in votes {
        parties
            .entry(name)
            .or_insert_with(|| Party {
                name: name.clone(),
                votes: 0,
                seats: 0,
            })
            .votes = v;
    }
    let mut parties: Vec<Party> = parties.into_values().collect();
    if parties.is_empty() {
        return parties;
    }
    for _ in 0..new_seats.max(0) {
        let winner =
            (0..parties.len()).min_by(|&i, &j| priority_order(&parties[i], &parties[j], tie));
        if let Some(i) = winner {
            parties[i].seats = parties[i].seats.saturating_add(1);
        }
    }
    parties
}

/// Divides `total` among the target clusters in proportion to their replicas (Karmada's
/// `SpreadReplicasByTargetClusters` with no previous result). Empty when every weight is zero.
pub fn spread_by_target_clusters(
    total: i32,
    targets: &[TargetCluster],
    uid: &str,
) -> Vec<TargetCluster> {
    let votes: BTreeMap<String, i64> = targets
        .iter()
        .map(|t| (t.name.clone(), i64::from(t.replicas)))
        .collect();
    if votes.values().sum::<i64>() == 0 {
        return Vec::new();
    }
    allocate_webster_seats(total, &votes, &BTreeMap::new(), TieBreak::for_uid(uid))
        .into_iter()
        .map(|p| TargetCluster {
            name: p.name,
            replicas: p.seats,
            components: Vec::new(),
        })
        .collect()
}

/// Whether the binding controller splits a Job's `completions` across clusters: the binding has
/// replicas and its placement divides them (Karmada's `needReviseJobCompletions`).
pub fn should_divide_job_completions(binding_replicas: i32, placement: Option<&Placement>) -> bool {
    binding_replicas > 0
        && placement.is_some_and(|p| p.replica_scheduling_type() == ReplicaSchedulingType::Divided)
}

/// Each target cluster's share of a Job's `spec.completions`, in proportion to the parallelism the
/// scheduler gave the cluster (Karmada's `divideReplicasByJobCompletions`; ties broken by the Job's
/// uid). `None` when the Job leaves `completions` unset (a work-queue Job) or every cluster got
/// zero replicas; then completions are left as they are.
pub fn job_completions_per_cluster(
    job: &Value,
    targets: &[TargetCluster],
) -> Result<Option<BTreeMap<String, i32>>> {
    let id = ObjectRef::of(job);
    let Some(completions) = object::opt_i32(job, &["spec", "completions"]).at(&id)? else {
        return Ok(None);
    };
    let uid = object::opt_str(job, &["metadata", "uid"])
        .at(&id)?
        .unwrap_or_default();
    let spread = spread_by_target_clusters(completions, targets, uid);
    if spread.is_empty() {
        return Ok(None);
    }
    Ok(Some(
        spread.into_iter().map(|t| (t.name, t.replicas)).collect(),
    ))
}

/// Sets a Job manifest's `spec.completions` to its cluster's share, only when the field is set
/// (Karmada's `applyJobCompletions`).
pub fn apply_job_completions(job: &mut Value, completions: i32) -> Result<()> {
    let id = ObjectRef::of(job);
    let path = ["spec", "completions"];
    if object::opt_i64(job, &path).at(&id)?.is_some() {
        object::set(job, &path, Value::from(completions)).at(&id)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn targets(list: &[(&str, i32)]) -> Vec<TargetCluster> {
        list.iter()
            .map(|(n, r)| TargetCluster {
                name: (*n).into(),
                replicas: *r,
                components: Vec::new(),
            })
            .collect()
    }

    fn seats(v: &[TargetCluster]) -> Vec<(String, i32)> {
        v.iter().map(|t| (t.name.clone(), t.replicas)).collect()
    }

    #[test]
    fn proportional_split() {
        let out = spread_by_target_clusters(10, &targets(&[("a", 2), ("b", 1), ("c", 2)]), "");
        assert_eq!(
            seats(&out),
            [("a".into(), 4), ("b".into(), 2), ("c".into(), 4)]
        );
    }

    #[test]
    fn ties_follow_the_uid_parity() {
        // One seat, equal weights: ascending picks "a", descending picks "b".
        let two = targets(&[("a", 1), ("b", 1)]);
        let asc = spread_by_target_clusters(1, &two, "");
        assert_eq!(seats(&asc), [("a".into(), 1), ("b".into(), 0)]);
        let odd_uid = (0..100)
            .map(|i| format!("uid-{i}"))
            .find(|u| TieBreak::for_uid(u) == TieBreak::NameDescending)
            .unwrap();
        let desc = spread_by_target_clusters(1, &two, &odd_uid);
        assert_eq!(seats(&desc), [("a".into(), 0), ("b".into(), 1)]);
    }

    #[test]
    fn zero_weights_give_nothing() {
        assert!(spread_by_target_clusters(5, &targets(&[("a", 0), ("b", 0)]), "x").is_empty());
        assert!(spread_by_target_clusters(5, &[], "x").is_empty());
    }

    #[test]
    fn property_sum_is_preserved_and_split_is_proportional() {
        // Deterministic pseudo-random cases.
        let mut seed = 0x2545_f491_u64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for _ in 0..300 {
            let n = 1 + next(6) as usize;
            let list: Vec<(String, i32)> =
                (0..n).map(|i| (format!("c{i}"), next(20) as i32)).collect();
            let ts: Vec<TargetCluster> = list
                .iter()
                .map(|(name, r)| TargetCluster {
                    name: name.clone(),
                    replicas: *r,
                    components: Vec::new(),
                })
                .collect();
            let total = next(200) as i32;
            let weight_sum: i64 = list.iter().map(|(_, r)| i64::from(*r)).sum();
            let out = spread_by_target_clusters(total, &ts, "uid");
            if weight_sum == 0 {
                assert!(out.is_empty());
                continue;
            }
            assert_eq!(out.iter().map(|t| t.replicas).sum::<i32>(), total);
            for t in &out {
                let w = list
                    .iter()
                    .find(|(n, _)| *n == t.name)
                    .map(|(_, r)| *r)
                    .unwrap();
                let exact = f64::from(total) * f64::from(w) / weight_sum as f64;
                assert!(
                    (f64::from(t.replicas) - exact).abs() < 1.0 + 1e-9,
                    "{t:?} vs {exact}"
                );
                if w == 0 {
                    assert_eq!(t.replicas, 0);
                }
            }
            // Stable under re-runs.
            assert_eq!(out, spread_by_target_clusters(total, &ts, "uid"));
        }
    }

    #[test]
    fn job_completions_follow_parallelism_shares() {
        let job = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "pi", "namespace": "d", "uid": ""},
            "spec": {"parallelism": 3, "completions": 9}});
        let split = job_completions_per_cluster(&job, &targets(&[("m1", 2), ("m2", 1)]))
            .unwrap()
            .unwrap();
        assert_eq!(split, BTreeMap::from([("m1".into(), 6), ("m2".into(), 3)]));

        let mut manifest = job.clone();
        apply_job_completions(&mut manifest, 6).unwrap();
        assert_eq!(manifest["spec"]["completions"], json!(6));
    }

    #[test]
    fn work_queue_jobs_keep_completions_unset() {
        let job = json!({"kind": "Job", "metadata": {"name": "q"}, "spec": {"parallelism": 3}});
        assert_eq!(
            job_completions_per_cluster(&job, &targets(&[("m1", 2)])).unwrap(),
            None
        );
        let mut manifest = job.clone();
        apply_job_completions(&mut manifest, 4).unwrap();
        assert_eq!(manifest, job);
        let bad = json!({"kind": "Job", "metadata": {"name": "q"}, "spec": {"completions": "x"}});
        assert!(job_completions_per_cluster(&bad, &[]).is_err());
    }

    #[test]
    fn divided_placements_split_completions() {
        let divided: Placement = serde_json::from_value(json!({
            "replicaScheduling": {"replicaSchedulingType": "Divided"}
        }))
        .unwrap();
        let duplicated: Placement = serde_json::from_value(json!({
            "replicaScheduling": {"replicaSchedulingType": "Duplicated"}
        }))
        .unwrap();
        assert!(should_divide_job_completions(3, Some(&divided)));
        assert!(!should_divide_job_completions(0, Some(&divided)));
        assert!(!should_divide_job_completions(3, Some(&duplicated)));
        assert!(!should_divide_job_completions(3, None));
    }
}
