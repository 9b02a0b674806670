//! Dividing a number of seats (replicas, Job completions) among clusters by weight, the way
//! Karmada's `helper.SpreadReplicasByTargetClusters` does (the division is the scheduler's,
//! [`karmada_scheduler::divide_by_weight`]), and the binding controller's Job `completions`
//! split built on it.

use std::collections::BTreeMap;

use karmada_apis::policy::v1alpha1::{Placement, ReplicaSchedulingType};
use karmada_apis::work::v1alpha2::TargetCluster;
use karmada_scheduler::{TieBreak, divide_by_weight};
use serde_json::Value;

use crate::error::{AtObject, ObjectRef, Result};
use crate::object;

/// Divides `total` among the target clusters in proportion to their replicas (Karmada's
/// `SpreadReplicasByTargetClusters` with no previous result). Empty when every weight is zero.
pub fn spread_by_target_clusters(
    total: i32,
    targets: &[TargetCluster],
    uid: &str,
) -> Vec<TargetCluster> {
    let weights: Vec<(String, i64)> = targets
        .iter()
        .map(|t| (t.name.clone(), i64::from(t.replicas)))
        .collect();
    divide_by_weight(total, &weights, TieBreak::for_uid(uid))
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
