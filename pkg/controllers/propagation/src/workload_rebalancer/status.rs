//! The WorkloadRebalancer status arithmetic, without I/O: which workloads still need rescheduling
//! after a spec change, whether a binding still needs its trigger, and when a finished rebalancer
//! expires.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karmada_apis::apps::v1alpha1::{
    ObjectReference, ObservedWorkload, REBALANCE_SUCCESSFUL, WorkloadRebalancer,
    WorkloadRebalancerStatus,
};

/// The observed workloads for the current spec, carried over from the last status (Karmada's
/// rules): a workload still listed keeps its result; one no longer listed is kept only if it was
/// rebalanced successfully (that already happened); a newly listed one starts pending. A changed
/// entry counts as one removed and one added. Sorted by API version, kind, namespace and name;
/// `finishTime` is left for the caller.
pub fn observed_for_spec(rebalancer: &WorkloadRebalancer) -> WorkloadRebalancerStatus {
    let mut wanted: BTreeSet<&ObjectReference> = rebalancer.spec.workloads.iter().collect();
    let previous = rebalancer
        .status
        .as_ref()
        .map(|s| s.observed_workloads.as_slice())
        .unwrap_or_default();
    let mut observed: Vec<ObservedWorkload> = Vec::new();
    for item in previous {
        if wanted.remove(&item.workload) || item.result == REBALANCE_SUCCESSFUL {
            observed.push(item.clone());
        }
    }
    observed.extend(wanted.into_iter().map(|w| ObservedWorkload {
        workload: w.clone(),
        ..Default::default()
    }));
    observed.sort_by_cached_key(|o| o.workload.sort_key());
    WorkloadRebalancerStatus {
        observed_workloads: observed,
        observed_generation: rebalancer.metadata.generation.unwrap_or_default(),
        finish_time: None,
    }
}

/// Whether a binding whose `spec.rescheduleTriggeredAt` is `triggered_at` still needs this
/// rebalancer's trigger: never triggered, or triggered before the rebalancer was created (a newer
/// trigger already covers it).
pub fn needs_trigger(created: Option<&Time>, triggered_at: Option<&Time>) -> bool {
    match (created, triggered_at) {
        (_, None) => true,
        (Some(created), Some(at)) => created.0 > at.0,
        (None, Some(_)) => false,
    }
}

/// How long a finished rebalancer with `ttlSecondsAfterFinished` still lives (zero once it is due);
/// `None` when it has no TTL or has not finished.
pub fn time_left(rebalancer: &WorkloadRebalancer, now: &Time) -> Option<Duration> {
    let ttl = rebalancer.spec.ttl_seconds_after_finished?;
    let finished = rebalancer.status.as_ref()?.finish_time.as_ref()?;
    let expires = finished.0.as_millisecond() + i64::from(ttl) * 1000;
    let left = expires - now.0.as_millisecond();
    Some(Duration::from_millis(u64::try_from(left).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use karmada_apis::apps::v1alpha1::{
        REBALANCE_FAILED, REBALANCE_OBJECT_NOT_FOUND, WorkloadRebalancerSpec,
    };

    fn deploy(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: name.into(),
            namespace: "default".into(),
        }
    }

    fn observed(name: &str, result: &str) -> ObservedWorkload {
        ObservedWorkload {
            workload: deploy(name),
            result: result.into(),
            reason: if result == REBALANCE_FAILED {
                REBALANCE_OBJECT_NOT_FOUND.into()
            } else {
                String::new()
            },
        }
    }

    fn rebalancer(spec: &[&str], status: Vec<ObservedWorkload>) -> WorkloadRebalancer {
        let mut r = WorkloadRebalancer::new(
            "r",
            WorkloadRebalancerSpec {
                workloads: spec.iter().map(|n| deploy(n)).collect(),
                ttl_seconds_after_finished: None,
            },
        );
        r.metadata.generation = Some(3);
        r.status = Some(WorkloadRebalancerStatus {
            observed_workloads: status,
            ..Default::default()
        });
        r
    }

    #[test]
    fn spec_changes_keep_done_work_and_add_new_work_sorted() {
        let r = rebalancer(
            &["c", "a"],
            vec![
                observed("a", REBALANCE_FAILED),
                observed("b", REBALANCE_SUCCESSFUL),
                observed("d", REBALANCE_FAILED),
            ],
        );
        let status = observed_for_spec(&r);
        assert_eq!(status.observed_generation, 3);
        assert_eq!(
            status.observed_workloads,
            vec![
                // still listed: kept as it was
                observed("a", REBALANCE_FAILED),
                // no longer listed but done: kept
                observed("b", REBALANCE_SUCCESSFUL),
                // new: pending
                observed("c", ""),
                // "d" (unlisted, failed) is dropped
            ]
        );
    }

    #[test]
    fn a_binding_is_triggered_once_per_newer_rebalancer() {
        let t = |s: i64| Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap_or_default());
        assert!(needs_trigger(Some(&t(10)), None));
        assert!(needs_trigger(Some(&t(10)), Some(&t(5))));
        assert!(!needs_trigger(Some(&t(10)), Some(&t(10))));
        assert!(!needs_trigger(Some(&t(10)), Some(&t(20))));
    }

    #[test]
    fn ttl_counts_from_the_finish_time() {
        let t = |s: i64| Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap_or_default());
        let mut r = rebalancer(&["a"], vec![]);
        assert_eq!(time_left(&r, &t(100)), None);
        r.spec.ttl_seconds_after_finished = Some(30);
        assert_eq!(time_left(&r, &t(100)), None, "not finished");
        if let Some(s) = r.status.as_mut() {
            s.finish_time = Some(t(100));
        }
        assert_eq!(time_left(&r, &t(110)), Some(Duration::from_secs(20)));
        assert_eq!(time_left(&r, &t(200)), Some(Duration::ZERO));
    }
}
