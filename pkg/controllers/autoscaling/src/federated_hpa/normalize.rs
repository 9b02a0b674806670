//! From the metrics' proposal to the replicas actually set: the stabilization windows (the highest
//! recent recommendation bounds a scale-down, the lowest one a scale-up), the scaling policies of
//! `spec.behavior` (or, without one, the legacy limits: at most double, at least 4, and the
//! `--horizontal-pod-autoscaler-downscale-stabilization` window), and min/max replicas. The history
//! it needs (recommendations, scale events) lives in memory per FederatedHPA, as in Kubernetes.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::{HPAScalingRules, HorizontalPodAutoscalerBehavior};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// A condition to set on the FederatedHPA: `(type, status, reason, message)`.
pub type ConditionUpdate = (&'static str, &'static str, &'static str, &'static str);

#[derive(Debug, Clone, Copy)]
struct Recommendation {
    replicas: i32,
    at: Timestamp,
}

#[derive(Debug, Clone, Copy)]
struct ScaleEvent {
    change: i32,
    at: Timestamp,
    outdated: bool,
}

#[derive(Debug, Default)]
struct History {
    recommendations: Vec<Recommendation>,
    scale_up: Vec<ScaleEvent>,
    scale_down: Vec<ScaleEvent>,
}

/// The in-memory history of every FederatedHPA, by `namespace/name`.
#[derive(Debug, Default)]
pub struct Histories {
    by_key: HashMap<String, History>,
}

fn before(now: Timestamp, seconds: i64) -> Timestamp {
    now.checked_sub(SignedDuration::from_secs(seconds))
        .unwrap_or(Timestamp::MIN)
}

/// The inputs of one normalization.
#[derive(Debug, Clone, Copy)]
pub struct Proposal {
    /// The template's replicas now.
    pub current: i32,
    /// What the metrics ask for.
    pub desired: i32,
    /// `spec.minReplicas` (1 when unset).
    pub min: i32,
    /// `spec.maxReplicas`.
    pub max: i32,
}

impl Histories {
    /// Forgets a deleted FederatedHPA.
    pub fn forget(&mut self, key: &str) {
        self.by_key.remove(key);
    }

    /// Records the current replicas as the first recommendation of a FederatedHPA seen for the first
    /// time, so a scale-down right after a restart is still stabilized.
    pub fn record_initial(&mut self, key: &str, current: i32, now: Timestamp) {
        let h = self.by_key.entry(key.to_owned()).or_default();
        if h.recommendations.is_empty() {
            h.recommendations.push(Recommendation {
                replicas: current,
                at: now,
            });
        }
    }

    /// The legacy path (no `spec.behavior`): stabilize scale-downs over `window`, then limit a
    /// scale-up to max(2 × current, 4) and clamp to min/max. Returns the replicas and the conditions.
    // Over 80 lines: stabilization, the scale-up limit and min/max with the conditions each sets.
    pub fn normalize(
        &mut self,
        key: &str,
        p: Proposal,
        window: Duration,
        now: Timestamp,
    ) -> (i32, Vec<ConditionUpdate>) {
        let h = self.by_key.entry(key.to_owned()).or_default();
        let cutoff = now
            .checked_sub(SignedDuration::try_from(window).unwrap_or(SignedDuration::MAX))
            .unwrap_or(Timestamp::MIN);
        let mut stabilized = p.desired;
        let mut old = None;
        for (i, r) in h.recommendations.iter().enumerate() {
            if r.at < cutoff {
                old = Some(i);
            } else if r.replicas > stabilized {
                stabilized = r.replicas;
            }
        }
        let rec = Recommendation {
            replicas: p.desired,
            at: now,
        };
        match old {
            Some(i) => h.recommendations[i] = rec,
            None => h.recommendations.push(rec),
        }
        let mut conditions = Vec::new();
        if stabilized != p.desired {
            conditions.push((
                "AbleToScale",
                "True",
                "ScaleDownStabilized",
                "recent recommendations were higher than current one, applying the highest recent recommendation",
            ));
        } else {
            conditions.push((
                "AbleToScale",
                "True",
                "ReadyForNewScale",
                "recommended size matches current size",
            ));
        }
        let scale_up_limit = (2.0 * f64::from(p.current)).max(4.0) as i32;
        let (maximum, limit_reason, limit_message) = if p.max > scale_up_limit {
            (
                scale_up_limit,
                "ScaleUpLimit",
                "the desired replica count is increasing faster than the maximum scale rate",
            )
        } else {
            (
                p.max,
                "TooManyReplicas",
                "the desired replica count is more than the maximum replica count",
            )
        };
        let (desired, reason, message) = if stabilized < p.min {
            (
                p.min,
                "TooFewReplicas",
                "the desired replica count is less than the minimum replica count",
            )
        } else if stabilized > maximum {
            (maximum, limit_reason, limit_message)
        } else {
            (
                stabilized,
                "DesiredWithinRange",
                "the desired count is within the acceptable range",
            )
        };
        let limited = if desired == stabilized {
            "False"
        } else {
            "True"
        };
        conditions.push(("ScalingLimited", limited, reason, message));
        (desired, conditions)
    }

    /// The behavior path: stabilize within both windows, then apply the scaling policies' rate and
    /// min/max. `behavior` must be defaulted ([`default_behavior`]).
    #[allow(
        clippy::too_many_lines,
        reason = "stabilization, both rate limits and min/max in one pass, in the order of Kubernetes' normalizeDesiredReplicasWithBehaviors"
    )]
    pub fn normalize_with_behavior(
        &mut self,
        key: &str,
        p: Proposal,
        behavior: &HorizontalPodAutoscalerBehavior,
        now: Timestamp,
    ) -> (i32, Vec<ConditionUpdate>) {
        let up = behavior.scale_up.clone().unwrap_or_default();
        let down = behavior.scale_down.clone().unwrap_or_default();
        let h = self.by_key.entry(key.to_owned()).or_default();

        let up_cutoff = before(now, i64::from(up.stabilization_window_seconds.unwrap_or(0)));
        let down_cutoff = before(
            now,
            i64::from(down.stabilization_window_seconds.unwrap_or(0)),
        );
        let (mut up_rec, mut down_rec) = (p.desired, p.desired);
        let mut old = None;
        for (i, r) in h.recommendations.iter().enumerate() {
            if r.at > up_cutoff {
                up_rec = up_rec.min(r.replicas);
            }
            if r.at > down_cutoff {
                down_rec = down_rec.max(r.replicas);
            }
            if r.at < up_cutoff && r.at < down_cutoff {
                old = Some(i);
            }
        }
        let stabilized = p.current.max(up_rec).min(down_rec);
        let rec = Recommendation {
            replicas: p.desired,
            at: now,
        };
        match old {
            Some(i) => h.recommendations[i] = rec,
            None => h.recommendations.push(rec),
        }
        let mut conditions = Vec::new();
        if stabilized != p.desired {
            conditions.push(if p.desired >= p.current {
                (
                    "AbleToScale",
                    "True",
                    "ScaleUpStabilized",
                    "recent recommendations were lower than current one, applying the lowest recent recommendation",
                )
            } else {
                (
                    "AbleToScale",
                    "True",
                    "ScaleDownStabilized",
                    "recent recommendations were higher than current one, applying the highest recent recommendation",
                )
            });
        } else {
            conditions.push((
                "AbleToScale",
                "True",
                "ReadyForNewScale",
                "recommended size matches current size",
            ));
        }

        let (mut desired, mut reason, mut message) = (
            stabilized,
            "DesiredWithinRange",
            "the desired count is within the acceptable range",
        );
        if stabilized > p.current {
            let limit =
                scale_up_limit(p.current, &h.scale_up, &h.scale_down, &up, now).max(p.current);
            let (maximum, r, m) = if p.max > limit {
                (
                    limit,
                    "ScaleUpLimit",
                    "the desired replica count is increasing faster than the maximum scale rate",
                )
            } else {
                (
                    p.max,
                    "TooManyReplicas",
                    "the desired replica count is more than the maximum replica count",
                )
            };
            if stabilized > maximum {
                (desired, reason, message) = (maximum, r, m);
            }
        } else if stabilized < p.current {
            let limit =
                scale_down_limit(p.current, &h.scale_up, &h.scale_down, &down, now).min(p.current);
            let (minimum, r, m) = if p.min < limit {
                (
                    limit,
                    "ScaleDownLimit",
                    "the desired replica count is decreasing faster than the maximum scale rate",
                )
            } else {
                (
                    p.min,
                    "TooFewReplicas",
                    "the desired replica count is less than the minimum replica count",
                )
            };
            if stabilized < minimum {
                (desired, reason, message) = (minimum, r, m);
            }
        }
        let limited = if desired == stabilized {
            "False"
        } else {
            "True"
        };
        conditions.push(("ScalingLimited", limited, reason, message));
        (desired, conditions)
    }

    /// Remembers a rescale from `previous` to `new` for the rate policies (only with a behavior),
    /// reusing a slot whose event is older than the longest policy period.
    pub fn store_scale_event(
        &mut self,
        key: &str,
        behavior: Option<&HorizontalPodAutoscalerBehavior>,
        previous: i32,
        new: i32,
        now: Timestamp,
    ) {
        let Some(behavior) = behavior else {
            return;
        };
        let h = self.by_key.entry(key.to_owned()).or_default();
        let (events, rules, change) = if new > previous {
            (&mut h.scale_up, behavior.scale_up.as_ref(), new - previous)
        } else {
            (
                &mut h.scale_down,
                behavior.scale_down.as_ref(),
                previous - new,
            )
        };
        let longest = rules
            .and_then(|r| r.policies.as_ref())
            .into_iter()
            .flatten()
            .map(|p| p.period_seconds)
            .max()
            .unwrap_or(0);
        let cutoff = before(now, i64::from(longest));
        let mut slot = None;
        for (i, e) in events.iter_mut().enumerate() {
            if e.at < cutoff {
                e.outdated = true;
            }
            if e.outdated {
                slot = Some(i);
            }
        }
        let event = ScaleEvent {
            change,
            at: now,
            outdated: false,
        };
        match slot {
            Some(i) => events[i] = event,
            None => events.push(event),
        }
    }
}

fn change_in_period(period_seconds: i32, events: &[ScaleEvent], now: Timestamp) -> i32 {
    let cutoff = before(now, i64::from(period_seconds));
    events
        .iter()
        .filter(|e| e.at > cutoff)
        .map(|e| e.change)
        .sum()
}

fn select_policy(rules: &HPAScalingRules) -> &str {
    rules.select_policy.as_deref().unwrap_or("Max")
}

fn scale_up_limit(
    current: i32,
    up_events: &[ScaleEvent],
    down_events: &[ScaleEvent],
    rules: &HPAScalingRules,
    now: Timestamp,
) -> i32 {
    let select = select_policy(rules);
    if select == "Disabled" {
        return current;
    }
    let min_change = select == "Min";
    let mut result = if min_change { i32::MAX } else { i32::MIN };
    for policy in rules.policies.iter().flatten() {
        let start = current - change_in_period(policy.period_seconds, up_events, now)
            + change_in_period(policy.period_seconds, down_events, now);
        let proposed = match policy.type_.as_str() {
            "Pods" => start + policy.value,
            "Percent" => (f64::from(start) * (1.0 + f64::from(policy.value) / 100.0)).ceil() as i32,
            _ => continue,
        };
        result = if min_change {
            result.min(proposed)
        } else {
            result.max(proposed)
        };
    }
    result
}

fn scale_down_limit(
    current: i32,
    up_events: &[ScaleEvent],
    down_events: &[ScaleEvent],
    rules: &HPAScalingRules,
    now: Timestamp,
) -> i32 {
    let select = select_policy(rules);
    if select == "Disabled" {
        return current;
    }
    let min_change = select == "Min";
    let mut result = if min_change { i32::MIN } else { i32::MAX };
    for policy in rules.policies.iter().flatten() {
        let start = current - change_in_period(policy.period_seconds, up_events, now)
            + change_in_period(policy.period_seconds, down_events, now);
        let proposed = match policy.type_.as_str() {
            "Pods" => start - policy.value,
            "Percent" => (f64::from(start) * (1.0 - f64::from(policy.value) / 100.0)) as i32,
            _ => continue,
        };
        result = if min_change {
            result.max(proposed)
        } else {
            result.min(proposed)
        };
    }
    result
}

/// Fills what a given `spec.behavior` leaves unset with Kubernetes' defaults (Karmada's webhook does
/// this on admission): scale-up without stabilization, at most +4 pods or +100% per 15 s; scale-down
/// at most -100% per 15 s within the `downscale_window` (the flag) unless a window is set.
pub fn default_behavior(
    behavior: &HorizontalPodAutoscalerBehavior,
    downscale_window: Duration,
) -> HorizontalPodAutoscalerBehavior {
    use k8s_openapi::api::autoscaling::v2::HPAScalingPolicy;
    let policy = |type_: &str, value, period_seconds| HPAScalingPolicy {
        type_: type_.to_owned(),
        value,
        period_seconds,
    };
    let fill = |given: Option<&HPAScalingRules>, default: HPAScalingRules| {
        let Some(given) = given else {
            return default;
        };
        HPAScalingRules {
            select_policy: given.select_policy.clone().or(default.select_policy),
            stabilization_window_seconds: given
                .stabilization_window_seconds
                .or(default.stabilization_window_seconds),
            policies: given.policies.clone().or(default.policies),
            tolerance: given.tolerance.clone(),
        }
    };
    let window = i32::try_from(downscale_window.as_secs()).unwrap_or(i32::MAX);
    HorizontalPodAutoscalerBehavior {
        scale_up: Some(fill(
            behavior.scale_up.as_ref(),
            HPAScalingRules {
                select_policy: Some("Max".to_owned()),
                stabilization_window_seconds: Some(0),
                policies: Some(vec![policy("Pods", 4, 15), policy("Percent", 100, 15)]),
                tolerance: None,
            },
        )),
        scale_down: Some(fill(
            behavior.scale_down.as_ref(),
            HPAScalingRules {
                select_policy: Some("Max".to_owned()),
                stabilization_window_seconds: Some(window),
                policies: Some(vec![policy("Percent", 100, 15)]),
                tolerance: None,
            },
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + seconds).unwrap()
    }

    fn p(current: i32, desired: i32) -> Proposal {
        Proposal {
            current,
            desired,
            min: 1,
            max: 10,
        }
    }

    #[test]
    fn legacy_scale_down_waits_for_the_window() {
        let mut h = Histories::default();
        let window = Duration::from_secs(60);
        h.record_initial("k", 6, at(0));
        assert_eq!(h.normalize("k", p(6, 2), window, at(10)).0, 6);
        assert_eq!(h.normalize("k", p(6, 2), window, at(50)).0, 6);
        // The initial 6 is older than the window now; the recent recommendations say 2.
        let (got, conditions) = h.normalize("k", p(6, 2), window, at(75));
        assert_eq!(got, 2);
        assert_eq!(conditions[0].2, "ReadyForNewScale");
    }

    #[test]
    fn legacy_scale_up_is_limited_to_double_or_four() {
        let mut h = Histories::default();
        let (got, conditions) = h.normalize("k", p(1, 9), Duration::ZERO, at(0));
        assert_eq!(got, 4);
        assert_eq!(
            conditions[1],
            (
                "ScalingLimited",
                "True",
                "ScaleUpLimit",
                "the desired replica count is increasing faster than the maximum scale rate"
            )
        );
    }

    #[test]
    fn behavior_windows_and_policies() {
        let mut h = Histories::default();
        let behavior = default_behavior(
            &HorizontalPodAutoscalerBehavior {
                scale_down: Some(HPAScalingRules {
                    stabilization_window_seconds: Some(20),
                    ..Default::default()
                }),
                ..Default::default()
            },
            Duration::from_secs(300),
        );
        h.record_initial("k", 2, at(0));
        // Up: +100% or +4 per 15 s, the larger: 2 → 6.
        let (got, _) = h.normalize_with_behavior("k", p(2, 9), &behavior, at(1));
        assert_eq!(got, 6);
        h.store_scale_event("k", Some(&behavior), 2, 6, at(1));
        // Down within the 20 s window: held by the recommendation of 9.
        let (got, conditions) = h.normalize_with_behavior("k", p(6, 1), &behavior, at(5));
        assert_eq!(got, 6);
        assert_eq!(conditions[0].2, "ScaleDownStabilized");
        // After the window: down to the minimum.
        let (got, _) = h.normalize_with_behavior("k", p(6, 1), &behavior, at(30));
        assert_eq!(got, 1);
    }

    #[test]
    fn disabled_policy_keeps_the_count() {
        let mut h = Histories::default();
        let behavior = default_behavior(
            &HorizontalPodAutoscalerBehavior {
                scale_up: Some(HPAScalingRules {
                    select_policy: Some("Disabled".into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            Duration::ZERO,
        );
        assert_eq!(
            h.normalize_with_behavior("k", p(3, 8), &behavior, at(0)).0,
            3
        );
    }
}
