//! Reporting drift (karmada-rs's own; Karmada repairs silently): for each member object version
//! that differs from its manifest, a Warning `DriftDetected` Event on the Work naming the drifted
//! fields and who changed them (from the member object's `managedFields`, read once from the
//! member API server as the caches strip them) and the `karmada_rs_work_drift_total` counter; and
//! on the Work the additive `Drifted` condition, True while some member object of the Work
//! differs, False/`NoDrift` once they all match again (never written on a Work that never
//! drifted).

use apimachinery::{is_conflict, is_not_found, set_status_condition};
use karmada_apis::Work;
use karmada_controllers_common::conditions::new_condition;
use karmada_controllers_common::drift::{
    self, CONDITION_DRIFTED, FieldPath, MESSAGE_NO_DRIFT, REASON_DRIFT_DETECTED, REASON_NO_DRIFT,
};
use karmada_controllers_common::drift_policy::DriftDecision;
use karmada_controllers_common::error::ApiError;
use karmada_controllers_common::manifest::identity_gvk;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use lariat::ObjectKey;
use lariat::events::{EventType, reference_of};
use serde_json::{Value, json};

use super::{CONTROLLER_NAME, WorkStatusController, WorkStatusError, drift_key};

/// What is known about one drifted member object.
#[derive(Debug, Clone)]
pub(super) struct ObjectDrift {
    /// The member object's resourceVersion the report is about.
    pub(super) version: String,
    /// `<kind> <namespace>/<name>: <path> (changed by <manager> at <time>), ...; <action>`.
    pub(super) summary: String,
}

/// What happens to a drift, as said in the Event and the condition.
fn action(decision: Option<&DriftDecision>) -> String {
    match decision {
        Some(d) if d.report_only() => format!("left as edited (ReportOnly, {})", d.policy),
        _ => "repaired from the manifest".to_owned(),
    }
}

/// `path (changed by m1 at t1, m2 at t2)` for each path.
fn describe_paths(object: Option<&Value>, paths: &[FieldPath]) -> String {
    paths
        .iter()
        .map(|p| {
            let owners = object
                .map(|o| drift::field_owners(o, p))
                .unwrap_or_default();
            if owners.is_empty() {
                return p.to_string();
            }
            let by: Vec<String> = owners
                .iter()
                .map(|o| {
                    if o.time.is_empty() {
                        o.manager.clone()
                    } else {
                        format!("{} at {}", o.manager, o.time)
                    }
                })
                .collect();
            format!("{p} (changed by {})", by.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl WorkStatusController {
    /// Records the drift of member object `key` at `version` (paths from
    /// [`drift::drifted_at`]) once per version: Event, metric and the summary the condition shows.
    /// Returns whether this version was new (the Work is then re-queued for repair).
    pub(super) async fn report_drift(
        &self,
        cluster: &str,
        gvk: &GroupVersionKind,
        (key, version): (&ObjectKey, &str),
        work: &Work,
        (paths, decision): (&[FieldPath], Option<&DriftDecision>),
    ) -> bool {
        let object = drift_key(cluster, gvk, key);
        if self
            .inner
            .drifts
            .lock()
            .get(&object)
            .is_some_and(|d| d.version == version)
        {
            return false;
        }
        let fresh = self.read_member_object(cluster, gvk, key).await;
        let fields = describe_paths(fresh.as_ref(), paths);
        let action = action(decision);
        let summary = format!("{} {key}: {fields}; {action}", gvk.kind);
        self.inner.drifts.lock().insert(
            object,
            ObjectDrift {
                version: version.to_owned(),
                summary,
            },
        );
        drift::count_drift(cluster, &gvk.kind);
        self.inner.drifted_works.lock().insert(format!(
            "{}/{}",
            work.namespace().unwrap_or_default(),
            work.name_any()
        ));
        let message = format!(
            "{} {key} in cluster {cluster} differs from its manifest at {fields}; {action}",
            gvk.kind
        );
        tracing::info!(cluster, kind = %gvk.kind, object = %key, work = %work.name_any(), %message, "drift detected");
        self.inner
            .recorder
            .record(
                &reference_of(work),
                EventType::Warning,
                REASON_DRIFT_DETECTED,
                message,
            )
            .await;
        true
    }

    /// The member object as its API server has it now, `managedFields` included; `None` when it
    /// cannot be read (logged: the report then names the fields without their managers).
    async fn read_member_object(
        &self,
        cluster: &str,
        gvk: &GroupVersionKind,
        key: &ObjectKey,
    ) -> Option<Value> {
        let member = self.inner.ctx.members.get(cluster)?;
        let read = async {
            let (ar, caps) = member.clients().resolve(gvk).await?;
            let client = member.clients().client_for_controller(CONTROLLER_NAME)?;
            let api: Api<DynamicObject> = match key.namespace() {
                Some(ns) if caps.scope == kube::discovery::Scope::Namespaced => {
                    Api::namespaced_with(client, ns, &ar)
                }
                _ => Api::all_with(client, &ar),
            };
            Ok::<_, karmada_controllers_common::BoxError>(api.get_opt(key.name()).await?)
        };
        match read.await {
            Ok(o) => o.and_then(|o| serde_json::to_value(o).ok()),
            Err(e) => {
                tracing::warn!(cluster, kind = %gvk.kind, object = %key, error = %e, "cannot read drifted member object for its managed fields");
                None
            }
        }
    }

    /// Forgets the drift of a member object (it matches again, or is gone).
    pub(super) fn forget_drift(&self, object: &str) {
        self.inner.drifts.lock().remove(object);
    }

    /// Forgets a deleted Work's drift history.
    pub(super) fn forget_work(&self, key: &ObjectKey) {
        let mut works = self.inner.drifted_works.lock();
        if !works.is_empty() {
            works.remove(&key.to_string());
        }
    }

    /// Writes the Work's `Drifted` condition when it differs from what the Work's member objects
    /// show: True with their summaries while one differs, False/`NoDrift` once none does (only on
    /// a Work that has the condition or drifted). Guarded by the cached Work's resourceVersion: on
    /// a conflict nothing is written, and the Work's newer version brings this back.
    pub(super) async fn sync_drifted_condition(
        &self,
        work: &Work,
        cluster: &str,
    ) -> Result<(), WorkStatusError> {
        let summaries: Vec<String> = {
            let drifts = self.inner.drifts.lock();
            work.spec
                .workload
                .manifests
                .iter()
                .filter_map(|m| {
                    let id = m.identity().ok()?;
                    let gvk = identity_gvk(&id)?;
                    let ns = (!id.metadata.namespace.is_empty())
                        .then_some(id.metadata.namespace.as_str());
                    let object = drift_key(cluster, &gvk, &ObjectKey::new(ns, &id.metadata.name));
                    drifts.get(&object).map(|d| d.summary.clone())
                })
                .collect()
        };
        let current = work
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        let namespace = work.namespace().unwrap_or_default();
        let name = work.name_any();
        let work_key = format!("{namespace}/{name}");
        let had = current.iter().any(|c| c.type_ == CONDITION_DRIFTED)
            || self.inner.drifted_works.lock().contains(&work_key);
        let wanted = if summaries.is_empty() {
            if !had {
                return Ok(());
            }
            new_condition(
                CONDITION_DRIFTED,
                "False",
                REASON_NO_DRIFT,
                MESSAGE_NO_DRIFT,
            )
        } else {
            new_condition(
                CONDITION_DRIFTED,
                "True",
                REASON_DRIFT_DETECTED,
                &summaries.join("; "),
            )
        };
        let mut conditions = current;
        if !set_status_condition(&mut conditions, wanted) {
            return Ok(());
        }
        let patch = json!({
            "metadata": {"resourceVersion": work.resource_version()},
            "status": {"conditions": conditions},
        });
        let api: Api<Work> = Api::namespaced(self.inner.client.clone(), &namespace);
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            // The Work stays remembered until it is deleted: the execution controller's condition
            // writes, computed from a cache that may not show this one yet, can drop the
            // condition even after the cache said False, and it is then written again.
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => {
                self.inner.drifted_works.lock().remove(&work_key);
                Ok(())
            }
            Err(e) if is_conflict(&e) => {
                tracing::debug!(work = %name, "Drifted condition not written: the Work changed");
                Ok(())
            }
            Err(source) => Err(ApiError::new("update status of", "Work", work_key, source).into()),
        }
    }
}
