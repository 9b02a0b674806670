//! The work-status controller (`--controllers` name `workStatus`, Karmada's
//! `pkg/controllers/status/work_status_controller.go`): brings the status of propagated objects
//! home from the member clusters into `Work.status.manifestStatuses`.
//!
//! How it is put together on `lariat`:
//! - a handler on the control plane's shared Work controller makes sure that, for every applied
//!   Work whose member cluster is connected, the member's shared controller of each manifest kind
//!   carries this controller's member handler. Those member caches are label-filtered to managed
//!   objects (`karmada.io/managed=true`) and shared with the execution controller: one watch per
//!   (cluster, kind);
//! - the member handler finds an object's Work through its `work.karmada.io/{namespace,name}`
//!   annotations, reflects its status and judges its health with the interpreter, and writes
//!   `status.manifestStatuses` through the status subresource only when it changed (retrying on
//!   conflicts with a fresh read);
//! - drift: when a member object no longer matches its Work's manifest (see
//!   [`karmada_controllers_common::drift`]), or was deleted while its Work still wants it, the Work
//!   is re-queued on the shared Work controller so the execution controller puts the object back
//!   (or, under a `ReportOnly` DriftPolicy, leaves it). Changes that keep the object matching its
//!   manifest (our own updates, member-side defaults, status) re-queue nothing. Drift is reported
//!   ([`report`], karmada-rs's own): a Warning Event and a counter per drifted object version, and
//!   the Work's `Drifted` condition.
//!
//! Deliberate differences from Karmada: a Work is served when its member is connected (the
//! clusterStatus and cluster controllers connect and disconnect members by the Cluster's health)
//! instead of re-reading the Cluster's Ready condition; a Work with several manifests keeps one entry per manifest (sorted by ordinal)
//! instead of only the latest one.

mod report;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::{ConflictRetry, DEFAULT_RETRY, is_conflict, is_not_found, split_api_version};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use karmada_apis::Work;
use karmada_apis::names;
use karmada_apis::well_known::{WORK_APPLIED, WORK_NAME_ANNOTATION, WORK_NAMESPACE_ANNOTATION};
use karmada_apis::work::v1alpha1::ManifestStatus;
use karmada_interpreter::Interpreter;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use lariat::events::EventRecorder;
use lariat::{HandlerResult, ObjectKey, SharedController};
use parking_lot::Mutex;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use karmada_controllers_common::drift;
use karmada_controllers_common::drift_policy::DriftPolicies;
use karmada_controllers_common::error::{ApiError, framework};
use karmada_controllers_common::handlers::{shared_controller, start_fn_of};
use karmada_controllers_common::manifest::{identity_gvk, manifest_index, manifest_status};
use karmada_controllers_common::work_index;
use karmada_controllers_common::{BoxError, ControllerContext, StartFn, members};

/// The controller's `--controllers` name.
pub const NAME: &str = "workStatus";

/// Name of the handler on the control plane's Work controller, and the User-Agent suffix
/// (Karmada's `WorkStatusControllerName`).
pub const CONTROLLER_NAME: &str = "work-status-controller";

/// Name of the handler on member-cluster controllers (Karmada's async worker `work-status`).
pub const MEMBER_HANDLER: &str = "work-status";

/// How often applied Works are checked for members that lost this controller's handler.
pub const MEMBER_RESYNC_PERIOD: Duration = Duration::from_secs(15);

/// A work-status failure; every variant names the object and the cause.
#[derive(Debug, thiserror::Error)]
pub enum WorkStatusError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// A member object's Work has no manifest for it.
    #[error("Work {work}: no manifest for {kind} {key} of cluster {cluster}")]
    NoManifest {
        /// `namespace/name` of the Work.
        work: String,
        /// Cluster of the member object.
        cluster: String,
        /// Kind of the member object.
        kind: String,
        /// `namespace/name` of the member object.
        key: String,
    },
    /// The member object's status could not be reflected.
    #[error("reflect status of {kind} {key} in cluster {cluster}: {source}")]
    Reflect {
        /// Cluster of the member object.
        cluster: String,
        /// Kind of the member object.
        kind: String,
        /// `namespace/name` of the member object.
        key: String,
        /// The interpreter's error.
        #[source]
        source: karmada_interpreter::InterpretError,
    },
    /// A status write kept conflicting.
    #[error("update status of Work {key}: still conflicting after {attempts} attempts")]
    Conflicts {
        /// `namespace/name` of the Work.
        key: String,
        /// Attempts made.
        attempts: u32,
    },
}

karmada_controllers_common::core_error_from!(WorkStatusError);

/// Whether the Work's `Applied` condition is True (Karmada's `IsResourceApplied`).
pub fn is_applied(work: &Work) -> bool {
    work.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c: &Condition| c.type_ == WORK_APPLIED && c.status == "True")
    })
}

/// Whether the Work has an `Applied` condition at all (True or False): until the execution
/// controller's first attempt records one, that controller writes the manifest statuses itself
/// together with it.
fn apply_attempted(work: &Work) -> bool {
    work.status
        .as_ref()
        .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == WORK_APPLIED))
}

/// Whether dispatching of the Work is suspended.
pub fn is_suspended(work: &Work) -> bool {
    work.spec.suspend_dispatching.unwrap_or(false)
}

/// Puts `new` into `statuses`: replaces the entry of the same manifest (by ordinal), drops
/// entries of manifests that no longer exist, keeps the result sorted by ordinal.
pub fn merge_manifest_status(
    statuses: &[ManifestStatus],
    new: ManifestStatus,
    manifests: usize,
) -> Vec<ManifestStatus> {
    let mut out: Vec<ManifestStatus> = statuses
        .iter()
        .filter(|s| s.identifier.ordinal != new.identifier.ordinal)
        .filter(|s| usize::try_from(s.identifier.ordinal).is_ok_and(|o| o < manifests))
        .cloned()
        .collect();
    out.push(new);
    out.sort_by_key(|s| s.identifier.ordinal);
    out
}

/// The key of a member object in `Inner::drift_requeued`.
fn drift_key(cluster: &str, gvk: &GroupVersionKind, key: &ObjectKey) -> String {
    format!("{cluster}/{}/{key}", gvk.kind)
}

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    interpreter: Interpreter,
    works: SharedController<Work>,
    /// Serialises "is the member handler registered? register it" per process.
    registering: Mutex<()>,
    /// Per drifted member object (cluster/kind/namespace/name), the resourceVersion whose drift
    /// was last reported and re-queued its Work, with the report. Each version re-queues once:
    /// execution compares with a fresh read when its cache differs, so a drift only the cache
    /// shows (a member watch that lags) must not bounce the Work between the two controllers at
    /// full speed.
    drifts: Mutex<HashMap<String, report::ObjectDrift>>,
    /// Works (`namespace/name`) this process reported a drift of, until they are deleted: a drift
    /// repaired before its True condition could be written still ends with `NoDrift`, and a
    /// condition another writer's stale merge patch dropped is written again.
    drifted_works: Mutex<std::collections::HashSet<String>>,
    /// The drift policies (set when the controller runs; none until then).
    policies: std::sync::OnceLock<DriftPolicies>,
    recorder: EventRecorder,
    cancel: CancellationToken,
}

/// The work-status controller. Cheap to clone.
#[derive(Clone)]
pub struct WorkStatusController {
    inner: Arc<Inner>,
}

impl WorkStatusController {
    /// Builds the controller on the context's control plane (nothing is watched until
    /// [`WorkStatusController::run`]).
    pub fn new(ctx: ControllerContext) -> Result<Self, WorkStatusError> {
        let interpreter = karmada_controllers_common::interpreter::interpreter(
            &ctx.control_plane,
            &ctx.events,
            karmada_interpreter::InterpreterOptions::default(),
        );
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("work-status client"))?;
        let works = shared_controller::<Work>(cp)?;
        work_index::index_manifests(&works.store());
        let cancel = ctx.cancel.child_token();
        let recorder = ctx.events.recorder(CONTROLLER_NAME);
        Ok(WorkStatusController {
            inner: Arc::new(Inner {
                ctx,
                client,
                interpreter,
                works,
                registering: Mutex::new(()),
                drifts: Mutex::default(),
                drifted_works: Mutex::default(),
                policies: std::sync::OnceLock::new(),
                recorder,
                cancel,
            }),
        })
    }

    /// Registers the Work handler, reports synced once the Work cache has synced, and runs until
    /// the context is cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        let policies = DriftPolicies::start(
            &inner.ctx.control_plane,
            &inner.cancel,
            inner.ctx.settings.cluster_cache_sync_timeout,
        )
        .await;
        let _ = inner.policies.set(policies);
        inner
            .ctx
            .wiring("work-status controller", &self)
            .cancelled_by(&inner.cancel)
            .handles(
                &inner.works,
                CONTROLLER_NAME,
                |this: Self, k, o: Option<Arc<Work>>| async move { this.handle_work(k, o).await },
            )
            .resync_every(MEMBER_RESYNC_PERIOD, Self::resync_members)
            .run()
            .await?;
        Ok(())
    }

    /// Re-queues the applied Works of every (member, manifest kind) whose member controller lacks
    /// this controller's handler: a member that was connected again (new credentials, back after
    /// an outage) has new caches, and nothing else would bring the handler back. Goes through the
    /// Work index of kinds per execution namespace: a pass where every handler is in place
    /// decodes no Work.
    fn resync_members(&self) {
        let store = self.inner.works.cache().peek_store();
        for entry in work_index::entries(store) {
            let Ok(cluster) = names::cluster_name(&entry.namespace) else {
                continue;
            };
            let Some(member) = self.inner.ctx.members.get(cluster) else {
                continue;
            };
            let (group, version) = split_api_version(&entry.api_version);
            let gvk = GroupVersionKind::gvk(group, version, &entry.kind);
            let handled = member
                .controllers()
                .existing_gvk(&gvk)
                .is_some_and(|c| c.handler_names().iter().any(|n| n == MEMBER_HANDLER));
            if handled {
                continue;
            }
            for key in work_index::keys(store, &entry) {
                let Some(work) = store.get(&key) else {
                    continue;
                };
                if work.metadata.deletion_timestamp.is_some() || !is_applied(&work) {
                    continue;
                }
                tracing::debug!(cluster, work = %work.name_any(), kind = %entry.kind, "member handler missing; re-queuing Work");
                self.inner.works.enqueue_key(key);
            }
        }
    }

    /// A Work changed: make sure the member objects of an applied Work are watched, and compare the
    /// cached ones with the Work's status again (only a difference is written).
    async fn handle_work(&self, key: ObjectKey, work: Option<Arc<Work>>) -> HandlerResult<Work> {
        let Some(work) = work else {
            self.forget_work(&key);
            return HandlerResult::Success;
        };
        if work.metadata.deletion_timestamp.is_some() || !is_applied(&work) {
            return HandlerResult::Success;
        }
        let namespace = work.namespace().unwrap_or_default();
        let Ok(cluster) = names::cluster_name(&namespace) else {
            tracing::debug!(work = %key, "Work outside an execution namespace; ignoring");
            return HandlerResult::Success;
        };
        let Some(member) = self.inner.ctx.members.get(cluster) else {
            tracing::debug!(work = %key, cluster, "member cluster not connected; retrying later");
            return HandlerResult::RequeueAfter(members::MEMBER_NOT_CONNECTED_RETRY);
        };
        for (ordinal, manifest) in work.spec.workload.manifests.iter().enumerate() {
            let id = manifest.identity().unwrap_or_default();
            let Some(gvk) = identity_gvk(&id) else {
                tracing::warn!(work = %key, ordinal, "manifest without apiVersion/kind; skipping");
                continue;
            };
            let ctrl = match self.ensure_member_handler(&member, &gvk) {
                Ok(c) => c,
                Err(e) => return HandlerResult::error(e),
            };
            let (ns, name) = (id.metadata.namespace.as_str(), id.metadata.name.as_str());
            // The Work changed (its status included, by whoever wrote it): the cached object is
            // compared with it again, so a status recorded from an older version of the object
            // (e.g. by the execution controller racing a member update) is corrected; equal
            // statuses write nothing.
            let member_key = ObjectKey::new(Some(ns), name);
            if ctrl.cache().has_synced() && ctrl.cache().peek_store().contains(&member_key) {
                ctrl.enqueue_key(member_key);
            }
        }
        HandlerResult::Success
    }

    /// The member's shared controller of `gvk`, with this controller's member handler on it.
    fn ensure_member_handler(
        &self,
        member: &lariat::Cluster,
        gvk: &GroupVersionKind,
    ) -> Result<SharedController<DynamicObject>, WorkStatusError> {
        let ctrl = member
            .controllers()
            .for_gvk(gvk)
            .map_err(framework(format!(
                "controller for {}.{} in cluster {}",
                gvk.kind,
                gvk.group,
                member.name()
            )))?;
        let _guard = self.inner.registering.lock();
        if ctrl.handler_names().iter().any(|n| n == MEMBER_HANDLER) {
            return Ok(ctrl);
        }
        tracing::info!(
            cluster = member.name(),
            group = %gvk.group, version = %gvk.version, kind = %gvk.kind,
            "watching member objects for status"
        );
        let this = self.clone();
        let cluster = member.name().to_owned();
        let gvk2 = gvk.clone();
        ctrl.register_handler(
            MEMBER_HANDLER,
            self.inner.cancel.child_token(),
            move |k: ObjectKey, o: Option<Arc<DynamicObject>>| {
                let this = this.clone();
                let cluster = cluster.clone();
                let gvk = gvk2.clone();
                async move { this.handle_member(&cluster, &gvk, k, o).await }
            },
        );
        Ok(ctrl)
    }

    /// A member object changed or was deleted.
    async fn handle_member(
        &self,
        cluster: &str,
        gvk: &GroupVersionKind,
        key: ObjectKey,
        obj: Option<Arc<DynamicObject>>,
    ) -> HandlerResult<DynamicObject> {
        let result = match obj {
            Some(obj) => self.sync_status(cluster, gvk, &key, &obj).await,
            None => {
                self.handle_member_deleted(cluster, gvk, &key);
                Ok(())
            }
        };
        match result {
            Ok(()) => HandlerResult::Success,
            // A Work without a manifest for the object cannot be fixed by retrying; the next change
            // of the object or the Work brings it back.
            Err(e @ WorkStatusError::NoManifest { .. }) => HandlerResult::ignore(e),
            Err(e) => HandlerResult::error(e),
        }
    }

    /// The cached Work `namespace/name`.
    fn cached_work(&self, namespace: &str, name: &str) -> Option<Arc<Work>> {
        self.inner
            .works
            .cache()
            .peek_store()
            .get_named(Some(namespace), name)
    }

    /// A managed member object was deleted: if its Work still wants it, re-queue the Work so the
    /// execution controller creates it again. The Work is found by Karmada's naming rule, as the
    /// deleted object's annotations are gone with it.
    fn handle_member_deleted(&self, cluster: &str, gvk: &GroupVersionKind, key: &ObjectKey) {
        self.forget_drift(&drift_key(cluster, gvk, key));
        let ns = key.namespace().unwrap_or_default();
        let work_ns = names::execution_space_name(cluster);
        let work_name = names::work_name(&gvk.kind, key.name(), ns);
        let Some(work) = self.cached_work(&work_ns, &work_name) else {
            return;
        };
        if work.metadata.deletion_timestamp.is_some() || is_suspended(&work) {
            return;
        }
        let api_version = gvk.api_version();
        if manifest_index(&work, &api_version, &gvk.kind, ns, key.name()).is_none() {
            return;
        }
        tracing::info!(
            cluster, kind = %gvk.kind, object = %key, work = %names::namespaced_key(&work_ns, &work_name),
            "managed member object deleted; re-queuing its Work for recreation"
        );
        self.inner.works.enqueue(Some(&work_ns), &work_name);
    }

    /// Reflects the status and health of a member object into its Work.
    async fn sync_status(
        &self,
        cluster: &str,
        gvk: &GroupVersionKind,
        key: &ObjectKey,
        obj: &DynamicObject,
    ) -> Result<(), WorkStatusError> {
        let annotations = obj.annotations();
        let (Some(work_ns), Some(work_name)) = (
            annotations.get(WORK_NAMESPACE_ANNOTATION),
            annotations.get(WORK_NAME_ANNOTATION),
        ) else {
            tracing::debug!(cluster, kind = %gvk.kind, object = %key, "object not managed by a Work; ignoring");
            return Ok(());
        };
        let Some(work) = self.cached_work(work_ns, work_name) else {
            return Ok(());
        };
        if work.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        if !apply_attempted(&work) {
            // The execution controller has just created the object and will record its status with
            // `Applied` in one write; the Work's update brings it back here (`handle_work`) to
            // compare.
            return Ok(());
        }
        let mut observed = serde_json::to_value(obj).unwrap_or(Value::Null);
        if let Some(o) = observed.as_object_mut() {
            o.insert("apiVersion".into(), Value::String(gvk.api_version()));
            o.insert("kind".into(), Value::String(gvk.kind.clone()));
        }
        let ns = key.namespace().unwrap_or_default();
        let work_key = names::namespaced_key(work_ns, work_name);
        let Some(ordinal) = manifest_index(&work, &gvk.api_version(), &gvk.kind, ns, key.name())
        else {
            return Err(WorkStatusError::NoManifest {
                work: work_key,
                cluster: cluster.to_owned(),
                kind: gvk.kind.clone(),
                key: key.to_string(),
            });
        };

        let manifest = work
            .spec
            .workload
            .manifests
            .get(ordinal)
            .filter(|_| !is_suspended(&work))
            .and_then(|m| m.to_value().ok());
        let paths = manifest
            .as_ref()
            .map(|m| drift::drifted_at(&self.inner.interpreter, m, &observed))
            .unwrap_or_default();
        let version = obj.metadata.resource_version.as_deref().unwrap_or_default();
        if paths.is_empty() {
            self.forget_drift(&drift_key(cluster, gvk, key));
        } else {
            let decision = manifest
                .as_ref()
                .and_then(|m| self.inner.policies.get().and_then(|p| p.decide(m)));
            let first = self
                .report_drift(
                    cluster,
                    gvk,
                    (key, version),
                    &work,
                    (&paths, decision.as_ref()),
                )
                .await;
            if first {
                tracing::info!(
                    cluster, kind = %gvk.kind, object = %key, work = %work_key,
                    field = %paths[0],
                    "member object differs from its manifest; re-queuing its Work"
                );
                self.inner.works.enqueue(Some(work_ns), work_name);
            }
        }
        self.sync_drifted_condition(&work, cluster).await?;

        let new = manifest_status(&self.inner.interpreter, &observed, ordinal, gvk).map_err(
            |source| WorkStatusError::Reflect {
                cluster: cluster.to_owned(),
                kind: gvk.kind.clone(),
                key: key.to_string(),
                source,
            },
        )?;
        self.write_manifest_status(&work, new).await
    }

    /// Writes `new` into the Work's `status.manifestStatuses` when it differs, through the status
    /// subresource; on a conflict the Work is read again from the API server.
    async fn write_manifest_status(
        &self,
        cached: &Work,
        new: ManifestStatus,
    ) -> Result<(), WorkStatusError> {
        let namespace = cached.namespace().unwrap_or_default();
        let name = cached.name_any();
        let key = names::namespaced_key(&namespace, &name);
        let api: Api<Work> = Api::namespaced(self.inner.client.clone(), &namespace);
        if cached.spec.workload.manifests.len() == 1 {
            // One manifest, one status: this handler is its only writer, so a merge patch of
            // `manifestStatuses` needs no resourceVersion and never conflicts with the execution
            // controller's condition writes.
            let current = cached
                .status
                .as_ref()
                .map(|s| s.manifest_statuses.as_slice())
                .unwrap_or_default();
            if current.len() == 1 && current[0] == new {
                return Ok(());
            }
            let patch = serde_json::json!({"status": {"manifestStatuses": [new]}});
            return match api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    tracing::debug!(work = %key, "manifest status updated");
                    Ok(())
                }
                Err(e) if is_not_found(&e) => Ok(()),
                Err(source) => Err(ApiError::new("update status of", "Work", key, source).into()),
            };
        }
        let mut current = cached.clone();
        let mut retry = ConflictRetry::new(DEFAULT_RETRY);
        while retry.next().await {
            let mut status = current.status.clone().unwrap_or_default();
            let merged = merge_manifest_status(
                &status.manifest_statuses,
                new.clone(),
                current.spec.workload.manifests.len(),
            );
            if merged == status.manifest_statuses {
                return Ok(());
            }
            status.manifest_statuses = merged;
            current.status = Some(status);
            current.metadata.managed_fields = None;
            match api
                .replace_status(&name, &PostParams::default(), &current)
                .await
            {
                Ok(_) => {
                    tracing::debug!(work = %key, "manifest status updated");
                    return Ok(());
                }
                Err(e) if is_conflict(&e) => {
                    current = match api.get(&name).await {
                        Ok(w) => w,
                        Err(e) if is_not_found(&e) => return Ok(()),
                        Err(source) => {
                            return Err(ApiError::new("get", "Work", key, source).into());
                        }
                    };
                    if current.metadata.deletion_timestamp.is_some() {
                        return Ok(());
                    }
                }
                Err(e) if is_not_found(&e) => return Ok(()),
                Err(source) => {
                    return Err(ApiError::new("update status of", "Work", key, source).into());
                }
            }
        }
        Err(WorkStatusError::Conflicts {
            key,
            attempts: retry.attempts(),
        })
    }
}

/// Starts the controller: the [`StartFn`] the registry holds.
pub fn start_fn() -> StartFn {
    start_fn_of(WorkStatusController::new, WorkStatusController::run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use karmada_apis::work::v1alpha1::{Manifest, ResourceHealth, ResourceIdentifier};
    use serde_json::json;

    fn work(manifests: Vec<Value>) -> Work {
        let mut w = Work::new(
            "nginx-687f7fb96f",
            karmada_apis::WorkSpec {
                workload: karmada_apis::work::v1alpha1::WorkloadTemplate {
                    manifests: manifests.into_iter().map(Into::into).collect(),
                },
                ..Default::default()
            },
        );
        w.metadata.namespace = Some("karmada-es-member1".into());
        w
    }

    fn status(ordinal: i64, replicas: i64) -> ManifestStatus {
        ManifestStatus {
            identifier: ResourceIdentifier {
                ordinal,
                group: "apps".into(),
                version: "v1".into(),
                kind: "Deployment".into(),
                resource: "deployments".into(),
                namespace: "default".into(),
                name: "nginx".into(),
            },
            status: Some(json!({"replicas": replicas}).into()),
            health: Some(ResourceHealth::Healthy),
        }
    }

    #[test]
    fn finds_the_manifest_of_an_object() {
        let w = work(vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default", "name": "nginx"}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"namespace": "default", "name": "nginx"}}),
        ]);
        assert_eq!(
            manifest_index(&w, "apps/v1", "Deployment", "default", "nginx"),
            Some(1)
        );
        assert_eq!(
            manifest_index(&w, "apps/v1beta1", "Deployment", "default", "nginx"),
            None
        );
        assert_eq!(
            manifest_index(&w, "v1", "ConfigMap", "default", "nginx"),
            Some(0)
        );
    }

    #[test]
    fn gvk_of_manifests() {
        let gvk_of =
            |v: Value| karmada_controllers_common::manifest::manifest_gvk(&Manifest::from(v));
        let gvk = gvk_of(json!({"apiVersion": "apps/v1", "kind": "Deployment"})).unwrap();
        assert_eq!((gvk.group.as_str(), gvk.version.as_str()), ("apps", "v1"));
        let gvk = gvk_of(json!({"apiVersion": "v1", "kind": "ConfigMap"})).unwrap();
        assert_eq!((gvk.group.as_str(), gvk.version.as_str()), ("", "v1"));
        assert!(gvk_of(json!({"kind": "ConfigMap"})).is_none());
        assert!(gvk_of(json!({"apiVersion": "v1", "kind": ""})).is_none());
    }

    #[test]
    fn merge_replaces_same_ordinal_and_drops_stale_entries() {
        let merged = merge_manifest_status(&[status(0, 1), status(3, 1)], status(0, 2), 2);
        assert_eq!(merged, vec![status(0, 2)]);
        let merged = merge_manifest_status(&[status(1, 1)], status(0, 2), 2);
        assert_eq!(merged, vec![status(0, 2), status(1, 1)]);
        // unchanged input gives an equal list, so no write happens
        let merged = merge_manifest_status(&[status(0, 2)], status(0, 2), 1);
        assert_eq!(merged, vec![status(0, 2)]);
    }

    #[test]
    fn applied_and_suspended() {
        let mut w = work(vec![]);
        assert!(!is_applied(&w));
        w.status = Some(karmada_apis::WorkStatus {
            conditions: vec![Condition {
                type_: WORK_APPLIED.into(),
                status: "True".into(),
                reason: "AppliedSuccessful".into(),
                message: String::new(),
                observed_generation: None,
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
            }],
            manifest_statuses: vec![],
        });
        assert!(is_applied(&w));
        assert!(!is_suspended(&w));
        w.spec.suspend_dispatching = Some(true);
        assert!(is_suspended(&w));
    }
}
