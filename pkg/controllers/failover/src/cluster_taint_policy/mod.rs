//! The `clustertaintpolicy` controller (Karmada's `cluster-taint-policy-controller`): puts the taints
//! of every ClusterTaintPolicy that targets a Cluster on it when the policy's `addOnConditions` match
//! the Cluster's conditions, and takes them off when its `removeOnConditions` match. Policies are
//! applied oldest first; adding is evaluated before removing. Deleting a policy removes no taint.
//!
//! Triggers: Cluster changes, and ClusterTaintPolicy changes (every Cluster the policy targets).
//! Runs only with the `Failover` feature gate, as in Karmada.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use karmada_apis::Cluster;
use karmada_apis::policy::v1alpha1::{ClusterTaintPolicy, MatchCondition, PolicyTaint};
use karmada_apis::well_known::event_reasons;
use kube::api::Api;
use lariat::{HandlerResult, ObjectKey, SharedController};
use tokio_util::sync::CancellationToken;

use karmada_controllers_common::conditions::now;
use karmada_controllers_common::handlers::start_fn_of;
use karmada_controllers_common::patch::patch_changes;
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use lariat::events::{EventRecorder, EventType, reference_of};

/// The controller's `--controllers` name.
pub const NAME: &str = "clustertaintpolicy";
/// Karmada's controller name (User-Agent suffix, Event source).
pub const CONTROLLER_NAME: &str = "cluster-taint-policy-controller";

/// A failed reconcile, naming the Cluster.
#[derive(Debug, thiserror::Error)]
pub enum TaintPolicyError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// Writing the Cluster's taints failed.
    #[error("cluster {cluster}: patching taints: {source}")]
    Patch {
        /// The Cluster.
        cluster: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

karmada_controllers_common::core_error_from!(TaintPolicyError);

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    events: EventRecorder,
    clusters: SharedController<Cluster>,
    policies: SharedController<ClusterTaintPolicy>,
    enabled: bool,
    cancel: CancellationToken,
}

/// The controller. Cheap to clone.
#[derive(Clone)]
pub struct ClusterTaintPolicyController {
    inner: Arc<Inner>,
}

/// The start function registered under `clustertaintpolicy`.
pub fn start_fn() -> StartFn {
    start_fn_of(
        ClusterTaintPolicyController::new,
        ClusterTaintPolicyController::run,
    )
}

/// Whether every condition in `matches` holds on `conditions` (Karmada's `conditionMatches`): an
/// empty list matches nothing, a condition type the cluster lacks fails.
pub fn conditions_match(conditions: &[Condition], matches: &[MatchCondition]) -> bool {
    !matches.is_empty()
        && matches.iter().all(|m| {
            conditions
                .iter()
                .rfind(|c| c.type_ == m.condition_type)
                .is_some_and(|c| m.status_matches(&c.status))
        })
}

fn same(t: &Taint, p: &PolicyTaint) -> bool {
    t.key == p.key && t.effect == p.effect
}

/// Adds the policy's taints missing from `taints` (by key and effect), stamped `now`.
pub fn add_taints(taints: &mut Vec<Taint>, policy: &[PolicyTaint], now: &Time) {
    for p in policy {
        if !taints.iter().any(|t| same(t, p)) {
            taints.push(Taint {
                key: p.key.clone(),
                value: (!p.value.is_empty()).then(|| p.value.clone()),
                effect: p.effect.clone(),
                time_added: Some(now.clone()),
            });
        }
    }
}

/// Removes the first taint matching each of the policy's taints (by key and effect).
pub fn remove_taints(taints: &mut Vec<Taint>, policy: &[PolicyTaint]) {
    for p in policy {
        if let Some(i) = taints.iter().position(|t| same(t, p)) {
            taints.remove(i);
        }
    }
}

/// The taints `cluster` should have after applying `policies` (sorted oldest first here).
pub fn desired_taints(cluster: &Cluster, policies: &[Arc<ClusterTaintPolicy>]) -> Vec<Taint> {
    let mut policies: Vec<&Arc<ClusterTaintPolicy>> = policies.iter().collect();
    policies.sort_by(|a, b| {
        let ts = |p: &ClusterTaintPolicy| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
        ts(a).cmp(&ts(b))
    });
    let conditions: &[Condition] = cluster
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let mut taints = cluster.spec.taints.clone();
    let stamp = now();
    for policy in policies {
        let spec = &policy.spec;
        if let Some(target) = &spec.target_clusters
            && !karmada_policy::selector::cluster_matches(cluster, target)
        {
            continue;
        }
        if conditions_match(conditions, &spec.add_on_conditions) {
            add_taints(&mut taints, &spec.taints, &stamp);
        }
        if conditions_match(conditions, &spec.remove_on_conditions) {
            remove_taints(&mut taints, &spec.taints);
        }
    }
    taints
}

impl ClusterTaintPolicyController {
    /// Builds the controller on the shared Cluster and ClusterTaintPolicy controllers.
    pub fn new(ctx: ControllerContext) -> Result<Self, TaintPolicyError> {
        let plane = &ctx.control_plane;
        let clusters = plane.controllers().for_kind::<Cluster>()?;
        let policies = plane.controllers().for_kind::<ClusterTaintPolicy>()?;
        let client = plane.clients().client_for_controller(CONTROLLER_NAME)?;
        let enabled = ctx.settings.feature_gates.enabled(crate::FEATURE_FAILOVER);
        Ok(Self {
            inner: Arc::new(Inner {
                events: ctx.events.recorder(CONTROLLER_NAME),
                client,
                clusters,
                policies,
                enabled,
                cancel: ctx.cancel.clone(),
                ctx,
            }),
        })
    }

    /// Registers the handlers and serves until cancelled (idle without the `Failover` gate).
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        let wiring = inner
            .ctx
            .wiring("clustertaintpolicy", &self)
            .cancelled_by(&inner.cancel);
        if !inner.enabled {
            tracing::info!(
                "the Failover feature gate is off: ClusterTaintPolicies are not applied"
            );
            return Ok(wiring.run().await?);
        }
        wiring
            .handles(&inner.clusters, CONTROLLER_NAME, |c, key, obj| async move {
                c.reconcile(key, obj).await
            })
            .handles(
                &inner.policies,
                CONTROLLER_NAME,
                |c, _key, obj: Option<Arc<ClusterTaintPolicy>>| async move {
                    c.policy_changed(obj.as_deref());
                    HandlerResult::Success
                },
            )
            .run()
            .await?;
        Ok(())
    }

    /// Queues every Cluster a created or changed policy targets (a deleted one changes nothing).
    fn policy_changed(&self, policy: Option<&ClusterTaintPolicy>) {
        let Some(policy) = policy else { return };
        for cluster in self.inner.clusters.store().list() {
            let targeted = policy
                .spec
                .target_clusters
                .as_ref()
                .is_none_or(|t| karmada_policy::selector::cluster_matches(&cluster, t));
            if targeted && let Some(key) = ObjectKey::from_object(&*cluster) {
                self.inner.clusters.enqueue_key(key);
            }
        }
    }

    async fn reconcile(&self, key: ObjectKey, obj: Option<Arc<Cluster>>) -> HandlerResult<Cluster> {
        let Some(cluster) = obj else {
            return HandlerResult::Success;
        };
        let policies = self.inner.policies.store().list();
        let taints = desired_taints(&cluster, &policies);
        if taints == cluster.spec.taints {
            return HandlerResult::Success;
        }
        let name = key.name().to_owned();
        let mut updated = (*cluster).clone();
        updated.spec.taints = taints;
        let target = reference_of(&*cluster);
        let api: Api<Cluster> = Api::all(self.inner.client.clone());
        match patch_changes(&api, &cluster, &updated).await {
            Ok(written) => {
                let msg = format!(
                    "Update Cluster({name}) with taints({}) succeed",
                    karmada_controllers_common::taints::taints_message(&written.spec.taints)
                );
                tracing::info!(cluster = %name, taints = ?written.spec.taints.iter().map(|t| format!("{}:{}", t.key, t.effect)).collect::<Vec<_>>(), "updated cluster taints");
                self.inner
                    .events
                    .record(
                        &target,
                        EventType::Normal,
                        event_reasons::TAINT_CLUSTER_SUCCEED,
                        msg,
                    )
                    .await;
                HandlerResult::Updated(Arc::new(written))
            }
            Err(source) => {
                let err = TaintPolicyError::Patch {
                    cluster: name,
                    source,
                };
                self.inner
                    .events
                    .record(
                        &target,
                        EventType::Warning,
                        event_reasons::TAINT_CLUSTER_FAILED,
                        err.to_string(),
                    )
                    .await;
                HandlerResult::error(err)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karmada_apis::policy::v1alpha1::MatchConditionOperator;
    use karmada_controllers_common::conditions::new_condition;

    fn cond(op: MatchConditionOperator, values: &[&str]) -> MatchCondition {
        MatchCondition {
            condition_type: "Ready".into(),
            operator: op,
            status_values: values.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn conditions_are_anded_and_empty_matches_nothing() {
        let ready_false = vec![new_condition("Ready", "False", "r", "m")];
        assert!(!conditions_match(&ready_false, &[]));
        assert!(conditions_match(
            &ready_false,
            &[cond(MatchConditionOperator::In, &["False", "Unknown"])]
        ));
        assert!(!conditions_match(
            &ready_false,
            &[cond(MatchConditionOperator::NotIn, &["False"])]
        ));
        assert!(conditions_match(
            &ready_false,
            &[cond(MatchConditionOperator::NotIn, &["True"])]
        ));
        // A condition the cluster does not have fails, whatever the operator.
        assert!(!conditions_match(
            &[],
            &[cond(MatchConditionOperator::NotIn, &["True"])]
        ));
        let other = MatchCondition {
            condition_type: "Other".into(),
            ..cond(MatchConditionOperator::In, &["False"])
        };
        assert!(!conditions_match(
            &ready_false,
            &[cond(MatchConditionOperator::In, &["False"]), other]
        ));
    }

    #[test]
    fn add_keeps_existing_and_remove_takes_first_match() {
        let p = vec![PolicyTaint {
            key: "k".into(),
            effect: "NoExecute".into(),
            value: "v".into(),
        }];
        let mut taints = vec![Taint {
            key: "other".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }];
        add_taints(&mut taints, &p, &now());
        add_taints(&mut taints, &p, &now());
        assert_eq!(taints.len(), 2);
        assert_eq!(taints[1].value.as_deref(), Some("v"));
        remove_taints(&mut taints, &p);
        assert_eq!(taints.len(), 1);
        assert_eq!(taints[0].key, "other");
    }
}
