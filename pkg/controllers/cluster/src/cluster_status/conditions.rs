//! Karmada's flap suppression of the Ready condition (`cluster_condition_cache.go`): a change
//! between True and not-True is published only after it persisted for the success (recovery) or
//! failure threshold.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use karmada_apis::Cluster;
use karmada_apis::well_known::CLUSTER_CONDITION_READY;

#[derive(Debug, Clone)]
struct Observed {
    status: String,
    since: Instant,
}

/// Per-cluster memory of the last observed Ready status and since when it was observed.
#[derive(Debug)]
pub struct ConditionCache {
    success_threshold: Duration,
    failure_threshold: Duration,
    data: Mutex<HashMap<String, Observed>>,
}

impl ConditionCache {
    /// A cache with the recovery (`success`) and failure thresholds.
    pub fn new(success_threshold: Duration, failure_threshold: Duration) -> Self {
        ConditionCache {
            success_threshold,
            failure_threshold,
            data: Mutex::new(HashMap::new()),
        }
    }

    /// Forgets a cluster.
    pub fn delete(&self, cluster: &str) {
        self.data
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(cluster);
    }

    /// The Ready condition to publish given the `observed` one: the current condition is kept while
    /// a True↔not-True change has not lasted for its threshold yet.
    pub fn threshold_adjusted(&self, cluster: &Cluster, observed: Condition) -> Condition {
        self.threshold_adjusted_at(cluster, observed, Instant::now())
    }

    /// [`ConditionCache::threshold_adjusted`] for a status observed at `observed_at`: a probe
    /// that timed out saw the failure from when it was sent, so the threshold counts from then.
    pub fn threshold_adjusted_at(
        &self,
        cluster: &Cluster,
        observed: Condition,
        observed_at: Instant,
    ) -> Condition {
        let name = cluster.metadata.name.clone().unwrap_or_default();
        let now = Instant::now();
        let observed_at = observed_at.min(now);
        let mut data = self
            .data
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(saved) = data.get_mut(&name) else {
            // Just joined: publish what we see.
            data.insert(
                name,
                Observed {
                    status: observed.status.clone(),
                    since: observed_at,
                },
            );
            return observed;
        };
        let current = cluster.status.as_ref().and_then(|s| {
            apimachinery::find_status_condition(&s.conditions, CLUSTER_CONDITION_READY)
        });
        let Some(current) = current else {
            return observed;
        };
        if saved.status != observed.status {
            saved.status = observed.status.clone();
            saved.since = observed_at;
        }
        let threshold = if observed.status == "True" {
            self.success_threshold
        } else {
            self.failure_threshold
        };
        let flips = (observed.status == "True") != (current.status == "True");
        if flips && now < saved.since + threshold {
            return current.clone();
        }
        observed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karmada_apis::ClusterStatus;
    use karmada_controllers_common::conditions::{new_condition, set_condition};

    fn cluster_with(status: &str) -> Cluster {
        let mut c = Cluster::new("c", Default::default());
        let mut conds = vec![];
        set_condition(&mut conds, new_condition("Ready", status, "R", "m"));
        c.status = Some(ClusterStatus {
            conditions: conds,
            ..Default::default()
        });
        c
    }

    #[test]
    fn set_condition_keeps_transition_time_when_status_unchanged() {
        let mut conds = vec![];
        set_condition(&mut conds, new_condition("Ready", "True", "A", "a"));
        let t = conds[0].last_transition_time.clone();
        set_condition(&mut conds, new_condition("Ready", "True", "B", "b"));
        assert_eq!(conds[0].last_transition_time, t);
        assert_eq!(conds[0].reason, "B");
        assert_eq!(conds.len(), 1);
    }

    #[test]
    fn flaps_are_suppressed_until_threshold() {
        let cache = ConditionCache::new(Duration::from_millis(200), Duration::from_millis(200));
        let c = cluster_with("True");
        let ok = new_condition("Ready", "True", "ClusterReady", "");
        let bad = new_condition("Ready", "False", "ClusterNotReachable", "");
        assert_eq!(cache.threshold_adjusted(&c, ok.clone()).status, "True");
        // A failure is hidden at first.
        assert_eq!(cache.threshold_adjusted(&c, bad.clone()).status, "True");
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(cache.threshold_adjusted(&c, bad.clone()).status, "False");
        // Unknown -> False style changes (both not True) pass at once.
        let c = cluster_with("False");
        assert_eq!(
            cache.threshold_adjusted(&c, bad).reason,
            "ClusterNotReachable"
        );
        // Recovery is hidden until the success threshold.
        assert_eq!(cache.threshold_adjusted(&c, ok.clone()).status, "False");
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(cache.threshold_adjusted(&c, ok).status, "True");
    }

    #[test]
    fn the_threshold_counts_from_when_the_failing_probe_was_sent() {
        let cache = ConditionCache::new(Duration::from_millis(200), Duration::from_millis(200));
        let c = cluster_with("True");
        let ok = new_condition("Ready", "True", "ClusterReady", "");
        let bad = new_condition("Ready", "False", "ClusterNotReachable", "");
        assert_eq!(cache.threshold_adjusted(&c, ok.clone()).status, "True");
        // A probe sent just now: the failure is hidden.
        assert_eq!(cache.threshold_adjusted(&c, bad.clone()).status, "True");
        // Recovered; then a probe sent 300 ms ago times out: the failure lasted past the threshold.
        assert_eq!(cache.threshold_adjusted(&c, ok).status, "True");
        let sent = Instant::now()
            .checked_sub(Duration::from_millis(300))
            .unwrap();
        assert_eq!(cache.threshold_adjusted_at(&c, bad, sent).status, "False");
    }
}
