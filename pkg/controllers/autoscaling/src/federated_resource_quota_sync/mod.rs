//! The FederatedResourceQuota sync controller (`--controllers` name `federatedResourceQuotaSync`,
//! Karmada's `federated-resource-quota-sync-controller`): each static assignment of a
//! FederatedResourceQuota becomes a ResourceQuota of the same namespace and name in that cluster,
//! through a Work named like Karmada's (`GenerateWorkName("ResourceQuota", name, namespace)` in
//! `karmada-es-<cluster>`), labelled `federatedresourcequota.karmada.io/namespace` and `/name` and
//! carrying finalizer `karmada.io/execution-controller`.
//!
//! A Work whose cluster is no longer assigned is deleted (the execution controller then removes the
//! member's ResourceQuota); all of them go when the FederatedResourceQuota goes. An assignment to a
//! cluster that does not exist yet is synced when the Cluster is created, as in Karmada, and is
//! reported with a Warning Event `AssignmentClusterNotFound`. Karmada's webhook refuses assignments
//! whose sum exceeds `overall` or that name a resource `overall` does not; CRD rules cannot sum, and
//! the API server's CEL cost budget rejects the other check over unbounded maps, so this controller
//! reports both with a Warning Event `InvalidStaticAssignments` (and syncs the assignments as
//! written).
//!
//! Triggers: FederatedResourceQuota changes and deletions, a new Cluster (the quotas assigning to it).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use apimachinery::is_not_found;
use apimachinery::resource_list::{ResourceList, add_into, exceeded};
use karmada_apis::names::{execution_space_name, work_name};
use karmada_apis::policy::v1alpha1::{FederatedResourceQuota, FederatedResourceQuotaSpec};
use karmada_apis::well_known::{
    EXECUTION_CONTROLLER_FINALIZER, FEDERATED_RESOURCE_QUOTA_NAME_LABEL,
    FEDERATED_RESOURCE_QUOTA_NAMESPACE_LABEL,
};
use karmada_apis::{Cluster, Work};
use karmada_controllers_common::error::framework;
use karmada_controllers_common::handlers::{shared_controller, start_fn_of};
use karmada_controllers_common::quota::quota_works;
use karmada_controllers_common::work::{WorkOutcome, WorkTarget, create_or_update_work};
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use karmada_interpreter::Interpreter;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use lariat::events::{EventRecorder, EventType, reference_of};
use lariat::{HandlerResult, ObjectKey, SharedController};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// The controller's `--controllers` name.
pub const NAME: &str = "federatedResourceQuotaSync";
/// Karmada's controller name (User-Agent suffix, Event source).
pub const CONTROLLER_NAME: &str = "federated-resource-quota-sync-controller";

/// Event reason: the member Works were written (Karmada's `SyncWorkSucceed`).
pub const REASON_SYNC_SUCCEED: &str = "SyncWorkSucceed";
/// Event reason: a member Work could not be written (Karmada's `SyncWorkFailed`).
pub const REASON_SYNC_FAILED: &str = "SyncWorkFailed";
/// Event reason (karmada-rs): an assignment names a cluster that does not exist.
pub const REASON_CLUSTER_NOT_FOUND: &str = "AssignmentClusterNotFound";
/// Event reason (karmada-rs): assignments Karmada's webhook refuses: a resource's assignments add
/// up to more than `overall`, or name a resource `overall` does not.
pub const REASON_INVALID_ASSIGNMENTS: &str = "InvalidStaticAssignments";

/// A sync-controller failure.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// Writing or deleting Works failed.
    #[error("sync works of FederatedResourceQuota({key}) failed: {message}")]
    Works {
        /// `namespace/name` of the quota.
        key: String,
        /// What failed, per Work.
        message: String,
    },
}

karmada_controllers_common::core_error_from!(SyncError);

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    interpreter: Interpreter,
    quotas: SharedController<FederatedResourceQuota>,
    clusters: SharedController<Cluster>,
    works: SharedController<Work>,
    known_clusters: Mutex<HashSet<String>>,
    /// `namespace/name` to the generation and cluster count its invalid input was last checked
    /// at, so a status change does not repeat the Warning Events.
    reported: Mutex<HashMap<String, (i64, usize)>>,
    events: EventRecorder,
    cancel: CancellationToken,
}

/// The sync controller. Cheap to clone.
#[derive(Clone)]
pub struct SyncController {
    inner: Arc<Inner>,
}

impl SyncController {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, SyncError> {
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("federatedResourceQuotaSync client"))?;
        let quotas = shared_controller::<FederatedResourceQuota>(cp)?;
        let clusters = shared_controller::<Cluster>(cp)?;
        let works = shared_controller::<Work>(cp)?;
        works
            .store()
            .index_by_label(FEDERATED_RESOURCE_QUOTA_NAME_LABEL);
        let cancel = ctx.cancel.child_token();
        let events = ctx.events.recorder(CONTROLLER_NAME);
        Ok(SyncController {
            inner: Arc::new(Inner {
                ctx,
                client,
                interpreter: Interpreter::default(),
                quotas,
                clusters,
                works,
                known_clusters: Mutex::new(HashSet::new()),
                reported: Mutex::new(HashMap::new()),
                events,
                cancel,
            }),
        })
    }

    /// Registers the handlers and runs until the context is cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        inner
            .ctx
            .wiring("federatedResourceQuotaSync", &self)
            .cancelled_by(&inner.cancel)
            .waits_for(&inner.clusters)
            .waits_for(&inner.works)
            .then(|this: &Self| {
                if let Ok(mut known) = this.inner.known_clusters.lock() {
                    known.extend(
                        this.inner
                            .clusters
                            .store()
                            .keys()
                            .iter()
                            .map(|k| k.name().to_owned()),
                    );
                }
            })
            .handles(
                &inner.quotas,
                NAME,
                |this: Self, k, o: Option<Arc<FederatedResourceQuota>>| async move {
                    this.handle(k, o).await
                },
            )
            .handles(
                &inner.clusters,
                NAME,
                |this: Self, k, o: Option<Arc<Cluster>>| async move {
                    this.cluster_changed(&k, o.is_some());
                    HandlerResult::Success
                },
            )
            .run()
            .await?;
        Ok(())
    }

    /// A new Cluster: the quotas that assign to it are synced (Karmada reacts to creations only).
    fn cluster_changed(&self, key: &ObjectKey, exists: bool) {
        let name = key.name().to_owned();
        let added = match self.inner.known_clusters.lock() {
            Ok(mut known) if exists => known.insert(name.clone()),
            Ok(mut known) => {
                known.remove(&name);
                false
            }
            Err(_) => exists,
        };
        if !added {
            return;
        }
        for quota in self.inner.quotas.store().list() {
            if hard_for(&quota.spec, &name).is_some() {
                self.inner
                    .quotas
                    .enqueue(quota.namespace().as_deref(), &quota.name_any());
            }
        }
    }

    async fn handle(
        &self,
        key: ObjectKey,
        obj: Option<Arc<FederatedResourceQuota>>,
    ) -> HandlerResult<FederatedResourceQuota> {
        let namespace = key.namespace().unwrap_or_default().to_owned();
        let name = key.name().to_owned();
        let result = match obj {
            None => {
                if let Ok(mut reported) = self.inner.reported.lock() {
                    reported.remove(key.as_str());
                }
                self.delete_works(&namespace, &name, |_| true).await
            }
            Some(quota) => self.sync(&quota).await,
        };
        match result {
            Ok(()) => HandlerResult::Success,
            Err(e) => {
                tracing::warn!(namespace, name, error = %e, "FederatedResourceQuota not synced");
                HandlerResult::error(e)
            }
        }
    }

    /// Deletes the quota's Works for which `orphan` holds.
    async fn delete_works(
        &self,
        namespace: &str,
        name: &str,
        orphan: impl Fn(&Work) -> bool,
    ) -> Result<(), SyncError> {
        let mut errors = Vec::new();
        for work in quota_works(&self.inner.works.store(), namespace, name) {
            if !orphan(&work) || work.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let work_ns = work.namespace().unwrap_or_default();
            let api: Api<Work> = Api::namespaced(self.inner.client.clone(), &work_ns);
            match api.delete(&work.name_any(), &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => errors.push(format!("delete work {work_ns}/{}: {e}", work.name_any())),
            }
        }
        if errors.is_empty() {
            return Ok(());
        }
        Err(SyncError::Works {
            key: format!("{namespace}/{name}"),
            message: errors.join("; "),
        })
    }

    async fn sync(&self, quota: &FederatedResourceQuota) -> Result<(), SyncError> {
        let inner = &self.inner;
        let namespace = quota.namespace().unwrap_or_default();
        let name = quota.name_any();
        let assigned: HashSet<String> = quota
            .spec
            .static_assignments
            .iter()
            .map(|a| execution_space_name(&a.cluster_name))
            .collect();
        self.delete_works(&namespace, &name, |w| {
            !assigned.contains(&w.namespace().unwrap_or_default())
        })
        .await?;
        self.report_invalid(quota).await;

        let works = inner.works.store();
        let mut errors = Vec::new();
        let mut written = false;
        for cluster in inner.clusters.store().list() {
            let cluster = cluster.name_any();
            let Some(hard) = hard_for(&quota.spec, &cluster) else {
                continue;
            };
            let manifest = json!({
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"namespace": namespace, "name": name},
                "spec": {"hard": hard},
            });
            let target = WorkTarget {
                name: work_name("ResourceQuota", &name, &namespace),
                namespace: execution_space_name(&cluster),
                labels: [
                    (
                        FEDERATED_RESOURCE_QUOTA_NAMESPACE_LABEL.to_owned(),
                        namespace.clone(),
                    ),
                    (FEDERATED_RESOURCE_QUOTA_NAME_LABEL.to_owned(), name.clone()),
                ]
                .into(),
                finalizers: vec![EXECUTION_CONTROLLER_FINALIZER.to_owned()],
                ..Default::default()
            };
            match create_or_update_work(
                &inner.client,
                Some(&works),
                &inner.interpreter,
                &target,
                manifest,
            )
            .await
            {
                Ok(WorkOutcome::Unchanged) => {}
                Ok(WorkOutcome::Created | WorkOutcome::Updated) => written = true,
                Err(e) => errors.push(e.to_string()),
            }
        }
        let reference = reference_of(quota);
        if !errors.is_empty() {
            let message = errors.join("; ");
            inner
                .events
                .record(
                    &reference,
                    EventType::Warning,
                    REASON_SYNC_FAILED,
                    message.clone(),
                )
                .await;
            return Err(SyncError::Works {
                key: format!("{namespace}/{name}"),
                message,
            });
        }
        if written {
            inner
                .events
                .record(
                    &reference,
                    EventType::Normal,
                    REASON_SYNC_SUCCEED,
                    format!("Sync works for FederatedResourceQuota({namespace}/{name}) succeed."),
                )
                .await;
        }
        Ok(())
    }

    /// Warning Events for what Karmada's webhook would have refused and the CRD cannot: assignments
    /// adding up to more than `overall`; and for assignments to clusters that do not exist.
    async fn report_invalid(&self, quota: &FederatedResourceQuota) {
        let key = format!(
            "{}/{}",
            quota.namespace().unwrap_or_default(),
            quota.name_any()
        );
        let generation = quota.metadata.generation.unwrap_or_default();
        let clusters = self.inner.known_clusters.lock().map_or(0, |k| k.len());
        let stamp = (generation, clusters);
        match self.inner.reported.lock() {
            Ok(reported) if reported.get(&key) == Some(&stamp) => return,
            Ok(mut reported) => {
                reported.insert(key, stamp);
            }
            Err(_) => {}
        }
        let reference = reference_of(quota);
        let over = invalid_assignments(&quota.spec);
        if !over.is_empty() {
            self.inner
                .events
                .record(
                    &reference,
                    EventType::Warning,
                    REASON_INVALID_ASSIGNMENTS,
                    format!("spec.staticAssignments: {}", over.join("; ")),
                )
                .await;
        }
        let clusters = self.inner.clusters.store();
        let unknown: BTreeSet<&str> = quota
            .spec
            .static_assignments
            .iter()
            .map(|a| a.cluster_name.as_str())
            .filter(|c| clusters.get_named(None, c).is_none())
            .collect();
        if !unknown.is_empty() {
            let unknown: Vec<&str> = unknown.into_iter().collect();
            self.inner
                .events
                .record(
                    &reference,
                    EventType::Warning,
                    REASON_CLUSTER_NOT_FOUND,
                    format!(
                        "spec.staticAssignments name clusters that do not exist: {}; their \
                         ResourceQuotas are created when they join",
                        unknown.join(", ")
                    ),
                )
                .await;
        }
    }
}

/// The hard limits assigned to `cluster` (the first assignment naming it, as Karmada takes).
fn hard_for<'a>(spec: &'a FederatedResourceQuotaSpec, cluster: &str) -> Option<&'a ResourceList> {
    spec.static_assignments
        .iter()
        .find(|a| a.cluster_name == cluster)
        .map(|a| &a.hard)
}

/// What Karmada's webhook refuses in the assignments: each resource an assignment names that
/// `overall` does not, then each resource whose assignments add up to more than `overall`.
fn invalid_assignments(spec: &FederatedResourceQuotaSpec) -> Vec<String> {
    let mut assigned = ResourceList::new();
    let mut problems = Vec::new();
    for (i, a) in spec.static_assignments.iter().enumerate() {
        add_into(&mut assigned, &a.hard);
        for name in a.hard.keys().filter(|k| !spec.overall.contains_key(*k)) {
            problems.push(format!("[{i}].hard.{name}: not in spec.overall"));
        }
    }
    let overall: ResourceList = spec
        .overall
        .iter()
        .filter(|(k, _)| assigned.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    problems.extend(
        exceeded(&assigned, &overall)
            .into_iter()
            .map(|(name, sum, limit)| {
                format!(
                    "{name}: spec.overall ({}) is less than the assignments ({})",
                    limit.0, sum.0
                )
            }),
    );
    problems
}

/// The start function registered as `federatedResourceQuotaSync`.
pub fn start_fn() -> StartFn {
    start_fn_of(SyncController::new, SyncController::run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use karmada_apis::policy::v1alpha1::StaticClusterAssignment;

    fn list(pairs: &[(&str, &str)]) -> ResourceList {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
            .collect()
    }

    fn spec(
        overall: &[(&str, &str)],
        assignments: &[(&str, &[(&str, &str)])],
    ) -> FederatedResourceQuotaSpec {
        FederatedResourceQuotaSpec {
            overall: list(overall),
            static_assignments: assignments
                .iter()
                .map(|(c, hard)| StaticClusterAssignment {
                    cluster_name: (*c).to_owned(),
                    hard: list(hard),
                })
                .collect(),
        }
    }

    #[test]
    fn finds_the_first_assignment_of_a_cluster() {
        let s = spec(
            &[("cpu", "4")],
            &[
                ("m1", &[("cpu", "1")]),
                ("m1", &[("cpu", "2")]),
                ("m2", &[("cpu", "3")]),
            ],
        );
        assert_eq!(hard_for(&s, "m1"), Some(&list(&[("cpu", "1")])));
        assert_eq!(hard_for(&s, "m3"), None);
    }

    #[test]
    fn reports_resources_assigned_beyond_overall() {
        let fits = spec(
            &[("cpu", "2"), ("memory", "1Gi")],
            &[
                ("m1", &[("cpu", "1500m")]),
                ("m2", &[("cpu", "500m"), ("memory", "1Gi")]),
            ],
        );
        assert!(invalid_assignments(&fits).is_empty());
        let over = spec(
            &[("cpu", "2"), ("memory", "1Gi")],
            &[
                ("m1", &[("cpu", "1500m")]),
                ("m2", &[("cpu", "1"), ("memory", "512Mi")]),
            ],
        );
        assert_eq!(
            invalid_assignments(&over),
            vec!["cpu: spec.overall (2) is less than the assignments (2500m)"]
        );
        let unnamed = spec(
            &[("cpu", "2")],
            &[("m1", &[("cpu", "1"), ("memory", "1Gi")])],
        );
        assert_eq!(
            invalid_assignments(&unnamed),
            vec!["[0].hard.memory: not in spec.overall"]
        );
    }
}
