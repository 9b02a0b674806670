//! Writing a Rollout: created owned by its binding, its status merge-patched when a step changed
//! it (the condition timestamps alone do not count), deleted when no strategy selects the
//! workload any more; and the step's Events recorded on it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use karmada_apis::ResourceBinding;
use karmada_apis::apps::v1alpha1::ObjectReference;
use karmada_apis::rollout::{Rollout, RolloutSpec, RolloutStatus};
use karmada_controllers_common::patch::merge_diff;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Resource, ResourceExt};
use lariat::events::{EventType, reference_of};
use serde_json::json;

use super::RolloutController;
use super::error::{RolloutError, api_err};
use super::progress::Step;

fn what(namespace: &str, name: &str) -> String {
    format!("Rollout {namespace}/{name}")
}

/// The status without condition timestamps, to tell a real change from a re-stamp.
fn comparable(status: &RolloutStatus) -> RolloutStatus {
    let mut s = status.clone();
    for c in &mut s.conditions {
        c.last_transition_time = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        );
    }
    s
}

impl RolloutController {
    /// Creates the Rollout of binding `b` (same namespace and name), owned by it.
    pub(super) async fn create_rollout(
        &self,
        b: &ResourceBinding,
        strategy: &str,
    ) -> Result<Rollout, RolloutError> {
        let namespace = b.namespace().unwrap_or_default();
        let name = b.name_any();
        let r = &b.spec.resource;
        let rollout = Rollout {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                owner_references: Some(vec![OwnerReference {
                    api_version: ResourceBinding::api_version(&()).into_owned(),
                    kind: ResourceBinding::kind(&()).into_owned(),
                    name: name.clone(),
                    uid: b.uid().unwrap_or_default(),
                    controller: Some(true),
                    block_owner_deletion: None,
                }]),
                ..Default::default()
            },
            spec: RolloutSpec {
                strategy: strategy.to_owned(),
                resource: ObjectReference {
                    api_version: r.api_version.clone(),
                    kind: r.kind.clone(),
                    name: r.name.clone(),
                    namespace: r.namespace.clone(),
                },
                ..Default::default()
            },
            status: None,
        };
        let api: Api<Rollout> = Api::namespaced(self.inner.client.clone(), &namespace);
        match api.create(&PostParams::default(), &rollout).await {
            Ok(created) => {
                tracing::info!(rollout = %what(&namespace, &name), strategy, "rollout created");
                Ok(created)
            }
            Err(e) if apimachinery::is_already_exists(&e) => api
                .get(&name)
                .await
                .map_err(api_err("get", what(&namespace, &name))),
            Err(e) => Err(api_err("create", what(&namespace, &name))(e)),
        }
    }

    /// Writes the step's status (and the strategy name) when they changed, then its Events.
    pub(super) async fn write_status(
        &self,
        rollout: &Rollout,
        strategy: &str,
        next: &Step,
    ) -> Result<(), RolloutError> {
        let namespace = rollout.namespace().unwrap_or_default();
        let name = rollout.name_any();
        let api: Api<Rollout> = Api::namespaced(self.inner.client.clone(), &namespace);
        if rollout.spec.strategy != strategy {
            let patch = json!({"spec": {"strategy": strategy}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(api_err("patch", what(&namespace, &name)))?;
        }
        let old = rollout.status_or_default();
        if comparable(&old) != comparable(&next.status)
            && let Some(patch) =
                merge_diff(&json!({"status": old}), &json!({"status": next.status}))
        {
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(api_err("patch status of", what(&namespace, &name)))?;
            tracing::info!(rollout = %what(&namespace, &name), phase = %next.status.phase, stage = %next.status.current_stage, "rollout status updated");
        }
        let reference = reference_of(rollout);
        for n in &next.notes {
            let t = if n.warning {
                EventType::Warning
            } else {
                EventType::Normal
            };
            self.inner
                .recorder
                .record(&reference, t, n.reason, n.message.clone())
                .await;
        }
        Ok(())
    }

    /// Deletes the Rollout of a workload no strategy selects (only one this binding owns).
    pub(super) async fn delete_rollout(
        &self,
        b: &ResourceBinding,
        rollout: &Rollout,
    ) -> Result<(), RolloutError> {
        let owned = rollout
            .owner_references()
            .iter()
            .any(|o| Some(&o.uid) == b.uid().as_ref());
        if !owned {
            return Ok(());
        }
        let namespace = rollout.namespace().unwrap_or_default();
        let name = rollout.name_any();
        let api: Api<Rollout> = Api::namespaced(self.inner.client.clone(), &namespace);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: rollout.uid(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(&name, &params).await {
            Ok(_) => {
                tracing::info!(rollout = %what(&namespace, &name), "no strategy selects the workload: rollout deleted");
                Ok(())
            }
            Err(e) if apimachinery::is_not_found(&e) => Ok(()),
            Err(e) => Err(api_err("delete", what(&namespace, &name))(e)),
        }
    }
}
