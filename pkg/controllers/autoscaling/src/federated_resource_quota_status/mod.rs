//! The FederatedResourceQuota status controller (`--controllers` name
//! `federatedResourceQuotaStatus`, Karmada's `federated-resource-quota-status-controller`): the
//! status of each member ResourceQuota the sync controller created, as the workStatus controller
//! reflected it into its Work, becomes one `status.aggregatedStatus` entry (cluster name, `hard`,
//! `used`; sorted by cluster). Works not yet `Applied` are left out. Unless the
//! `FederatedQuotaEnforcement` gate is on (then the enforcement controller owns them),
//! `status.overall` is `spec.overall` and `status.overallUsed` the sum of the clusters' `used`.
//!
//! The status is written with a merge patch guarded by the `resourceVersion` read, and only when
//! it changed; `AggregateStatusSucceed` is recorded when it was written (Karmada: every sync).
//!
//! Triggers: FederatedResourceQuota changes, status changes and deletions of its Works.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use apimachinery::find_status_condition;
use apimachinery::resource_list::{canonical, sum};
use k8s_openapi::api::core::v1::ResourceQuotaStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use karmada_apis::Work;
use karmada_apis::names::cluster_name;
use karmada_apis::policy::v1alpha1::{ClusterQuotaStatus, FederatedResourceQuota};
use karmada_apis::well_known::{
    FEDERATED_RESOURCE_QUOTA_NAME_LABEL, FEDERATED_RESOURCE_QUOTA_NAMESPACE_LABEL, WORK_APPLIED,
};
use karmada_controllers_common::error::framework;
use karmada_controllers_common::handlers::{shared_controller, start_fn_of};
use karmada_controllers_common::patch::guarded_merge_patch;
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use lariat::events::{EventRecorder, EventType, reference_of};
use lariat::{HandlerResult, ObjectKey, SharedController};
use tokio_util::sync::CancellationToken;

use karmada_controllers_common::quota::{FEDERATED_QUOTA_ENFORCEMENT, quota_works};

/// The controller's `--controllers` name.
pub const NAME: &str = "federatedResourceQuotaStatus";
/// Karmada's controller name (User-Agent suffix, Event source).
pub const CONTROLLER_NAME: &str = "federated-resource-quota-status-controller";

/// Event reason: the status was aggregated and written (Karmada's `AggregateStatusSucceed`).
pub const REASON_AGGREGATE_SUCCEED: &str = "AggregateStatusSucceed";
/// Event reason: the status could not be aggregated or written (Karmada's `AggregateStatusFailed`).
pub const REASON_AGGREGATE_FAILED: &str = "AggregateStatusFailed";

/// A status-controller failure.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// A Work's reflected status is not a ResourceQuota status.
    #[error("work {work}: status is not a ResourceQuota status: {source}")]
    Decode {
        /// `namespace/name` of the Work.
        work: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// A Work is outside any cluster's execution namespace.
    #[error("work {work}: {message}")]
    Namespace {
        /// `namespace/name` of the Work.
        work: String,
        /// Why.
        message: String,
    },
    /// The status patch could not be built or written.
    #[error("update status of FederatedResourceQuota({key}): {message}")]
    Write {
        /// `namespace/name` of the quota.
        key: String,
        /// Why.
        message: String,
    },
}

karmada_controllers_common::core_error_from!(StatusError);

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    quotas: SharedController<FederatedResourceQuota>,
    works: SharedController<Work>,
    /// Work key to the `(namespace, name)` of its quota, so a deleted Work (no labels left to
    /// read) still enqueues its quota.
    work_quotas: Mutex<HashMap<String, (String, String)>>,
    events: EventRecorder,
    enforcement: bool,
    cancel: CancellationToken,
}

/// The status controller. Cheap to clone.
#[derive(Clone)]
pub struct StatusController {
    inner: Arc<Inner>,
}

impl StatusController {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, StatusError> {
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("federatedResourceQuotaStatus client"))?;
        let quotas = shared_controller::<FederatedResourceQuota>(cp)?;
        let works = shared_controller::<Work>(cp)?;
        works
            .store()
            .index_by_label(FEDERATED_RESOURCE_QUOTA_NAME_LABEL);
        let cancel = ctx.cancel.child_token();
        let events = ctx.events.recorder(CONTROLLER_NAME);
        let enforcement = ctx
            .settings
            .feature_gates
            .enabled(FEDERATED_QUOTA_ENFORCEMENT);
        Ok(StatusController {
            inner: Arc::new(Inner {
                ctx,
                client,
                quotas,
                works,
                work_quotas: Mutex::new(HashMap::new()),
                events,
                enforcement,
                cancel,
            }),
        })
    }

    /// Registers the handlers and runs until the context is cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        inner
            .ctx
            .wiring("federatedResourceQuotaStatus", &self)
            .cancelled_by(&inner.cancel)
            .waits_for(&inner.works)
            .handles(
                &inner.quotas,
                NAME,
                |this: Self, k, o: Option<Arc<FederatedResourceQuota>>| async move {
                    this.handle(k, o).await
                },
            )
            .handles(
                &inner.works,
                NAME,
                |this: Self, k, o: Option<Arc<Work>>| async move {
                    this.work_changed(&k, o.as_deref());
                    HandlerResult::Success
                },
            )
            .run()
            .await?;
        Ok(())
    }

    /// A Work changed or went: its quota (from the labels, or remembered for a deleted Work) is
    /// aggregated again.
    fn work_changed(&self, key: &ObjectKey, work: Option<&Work>) {
        let quota = work.and_then(|w| {
            let labels = w.labels();
            Some((
                labels
                    .get(FEDERATED_RESOURCE_QUOTA_NAMESPACE_LABEL)?
                    .clone(),
                labels.get(FEDERATED_RESOURCE_QUOTA_NAME_LABEL)?.clone(),
            ))
        });
        let quota = match self.inner.work_quotas.lock() {
            Ok(mut map) => match quota {
                Some(q) => {
                    map.insert(key.to_string(), q.clone());
                    Some(q)
                }
                None => map.remove(key.as_str()),
            },
            Err(_) => quota,
        };
        if let Some((namespace, name)) = quota {
            self.inner.quotas.enqueue(Some(&namespace), &name);
        }
    }

    async fn handle(
        &self,
        key: ObjectKey,
        obj: Option<Arc<FederatedResourceQuota>>,
    ) -> HandlerResult<FederatedResourceQuota> {
        let Some(quota) = obj else {
            return HandlerResult::Success;
        };
        if quota.metadata.deletion_timestamp.is_some() {
            return HandlerResult::Success;
        }
        let reference = reference_of(&*quota);
        match self.collect(&quota).await {
            Ok(false) => HandlerResult::Success,
            Ok(true) => {
                self.inner
                    .events
                    .record(
                        &reference,
                        EventType::Normal,
                        REASON_AGGREGATE_SUCCEED,
                        format!("Collect status of FederatedResourceQuota({key}) succeed."),
                    )
                    .await;
                HandlerResult::Success
            }
            Err(e) => {
                tracing::warn!(quota = %key, error = %e, "FederatedResourceQuota status not collected");
                self.inner
                    .events
                    .record(
                        &reference,
                        EventType::Warning,
                        REASON_AGGREGATE_FAILED,
                        e.to_string(),
                    )
                    .await;
                HandlerResult::error(e)
            }
        }
    }

    /// Aggregates and writes the status; whether it was written.
    async fn collect(&self, quota: &FederatedResourceQuota) -> Result<bool, StatusError> {
        let namespace = quota.namespace().unwrap_or_default();
        let name = quota.name_any();
        let works = quota_works(&self.inner.works.store(), &namespace, &name);
        let aggregated = aggregated_status(works.iter().map(|w| &**w))?;
        let mut updated = quota.clone();
        if !self.inner.enforcement {
            updated.status.get_or_insert_default().overall = canonical(&quota.spec.overall);
            updated.status.get_or_insert_default().overall_used =
                sum(aggregated.iter().map(|s| &s.used));
        }
        updated.status.get_or_insert_default().aggregated_status = aggregated;
        if updated
            .status
            .as_ref()
            .is_some_and(|s| *s == Default::default())
            && quota.status.is_none()
        {
            return Ok(false);
        }
        let key = format!("{namespace}/{name}");
        let write_err = |message: String| StatusError::Write {
            key: key.clone(),
            message,
        };
        let Some(patch) =
            guarded_merge_patch(quota, &updated).map_err(|e| write_err(e.to_string()))?
        else {
            return Ok(false);
        };
        let api: Api<FederatedResourceQuota> =
            Api::namespaced(self.inner.client.clone(), &namespace);
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| write_err(e.to_string()))?;
        Ok(true)
    }
}

/// One entry per applied Work with a reflected status, sorted by cluster (Karmada's
/// `aggregatedStatusFormWorks`). A Work whose reflected status is missing counts as an empty one.
fn aggregated_status<'a>(
    works: impl Iterator<Item = &'a Work>,
) -> Result<Vec<ClusterQuotaStatus>, StatusError> {
    let mut out = Vec::new();
    for work in works {
        let conditions: &[Condition] = work
            .status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default();
        let applied =
            find_status_condition(conditions, WORK_APPLIED).is_some_and(|c| c.status == "True");
        let Some(manifest) = work
            .status
            .as_ref()
            .and_then(|s| s.manifest_statuses.first())
            .filter(|_| applied)
        else {
            continue;
        };
        let work_ns = work.namespace().unwrap_or_default();
        let work_key = format!("{work_ns}/{}", work.name_any());
        let cluster = cluster_name(&work_ns).map_err(|e| StatusError::Namespace {
            work: work_key.clone(),
            message: e.to_string(),
        })?;
        let status: ResourceQuotaStatus = match &manifest.status {
            Some(s) => s.decode().map_err(|source| StatusError::Decode {
                work: work_key.clone(),
                source,
            })?,
            None => ResourceQuotaStatus::default(),
        };
        out.push(ClusterQuotaStatus {
            cluster_name: cluster.to_owned(),
            hard: canonical(&status.hard.unwrap_or_default()),
            used: canonical(&status.used.unwrap_or_default()),
        });
    }
    out.sort_by(|a, b| a.cluster_name.cmp(&b.cluster_name));
    Ok(out)
}

/// The start function registered as `federatedResourceQuotaStatus`.
pub fn start_fn() -> StartFn {
    start_fn_of(StatusController::new, StatusController::run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn work(cluster: &str, applied: &str, status: Option<serde_json::Value>) -> Work {
        serde_json::from_value(json!({
            "apiVersion": "work.karmada.io/v1alpha1",
            "kind": "Work",
            "metadata": {"namespace": format!("karmada-es-{cluster}"), "name": "w"},
            "spec": {},
            "status": {
                "conditions": [{"type": "Applied", "status": applied, "reason": "r", "message": "",
                                "lastTransitionTime": "2024-01-01T00:00:00Z"}],
                "manifestStatuses": status.map(|s| vec![json!({
                    "identifier": {"ordinal": 0, "version": "v1", "kind": "ResourceQuota",
                                   "namespace": "ns", "name": "q", "resource": ""},
                    "status": s,
                })]).unwrap_or_default(),
            }
        }))
        .unwrap()
    }

    #[test]
    fn aggregates_applied_works_sorted_by_cluster() {
        let works = [
            work(
                "m2",
                "True",
                Some(json!({"hard": {"cpu": "2"}, "used": {"cpu": "500m"}})),
            ),
            work(
                "m1",
                "True",
                Some(json!({"hard": {"cpu": "1000m"}, "used": {"cpu": "1"}})),
            ),
            work("m3", "False", Some(json!({"hard": {"cpu": "1"}}))),
            work("m4", "True", None),
        ];
        let got = aggregated_status(works.iter()).unwrap();
        let names: Vec<&str> = got.iter().map(|s| s.cluster_name.as_str()).collect();
        assert_eq!(names, ["m1", "m2"]);
        assert_eq!(got[0].hard["cpu"].0, "1");
        assert_eq!(sum(got.iter().map(|s| &s.used))["cpu"].0, "1500m");
    }

    #[test]
    fn a_work_outside_an_execution_namespace_is_an_error() {
        let mut w = work("m1", "True", Some(json!({})));
        w.metadata.namespace = Some("default".into());
        assert!(aggregated_status([&w].into_iter()).is_err());
    }
}
