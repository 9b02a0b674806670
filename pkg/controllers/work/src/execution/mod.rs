//! The execution controller (`--controllers` name `execution`): applies the manifests of Works in
//! `karmada-es-<cluster>` to the Push-mode member `<cluster>`, and deletes (or releases) them when
//! the Work is deleted, as Karmada's `execution-controller` does.
//!
//! # Create/update (PUT), not server-side apply
//!
//! Member objects are written with `create` when absent and a full `update` (PUT) when present,
//! after keeping what the member owns (resourceVersion, finalizers, ownerReferences, member-added
//! labels and annotations, and the interpreter's retain rules such as Service `clusterIP` or
//! retained replicas). We chose this over server-side apply with field manager `karmada` because:
//!
//! - **Ownership of fields.** Karmada's contract is "the template is the truth, except for the
//!   fields the member owns", and the member-owned fields are known per kind (the retain rules).
//!   Server-side apply would instead leave every field some other manager once set in place when
//!   the template drops it (SSA only removes fields *we* own), so a field removed from the
//!   template could linger on the member, and objects taken over with `overwrite` would keep the
//!   previous owner's fields. PUT-with-retain gives exactly Karmada's result, which users of a
//!   swapped-in binary expect.
//! - **Conflicts.** With SSA, another manager owning a field makes our apply fail (or, forced,
//!   silently steal the field); with PUT the only conflict is the optimistic-lock one
//!   (resourceVersion), which we retry on a fresh read. Taking over unmanaged objects stays an
//!   explicit decision (`karmada.io/managed=true` or `work.karmada.io/conflict-resolution=overwrite`).
//! - **Write volume.** Before any write the desired object is compared with the member object
//!   ([`karmada_interpreter::Interpreter::matches_member`]); equal means no request at all, so a
//!   restart over already-propagated objects writes nothing. SSA would need a request per object
//!   per resync (the server decides whether anything changed) and stores `managedFields` entries
//!   on every object.
//!
//! # Member reads
//!
//! Member objects are read from the member's shared, label-filtered caches
//! (`karmada.io/managed=true`, found by the manifest's GVK through the member's REST mapping), so
//! memory follows what we propagate. Objects outside that scope (a same-name object not managed by
//! Karmada) are found by a direct GET when a create reports that the object exists; a cache hit
//! that looks different is confirmed with a GET before writing (the cache strips fields such as
//! the last-applied annotation).
//!
//! # Conditions and Events
//!
//! `Dispatching` is True/`Dispatching` or False/`SuspendDispatching` (suspended Works are not
//! applied). `Applied` is True/`AppliedSuccessful` or False/`AppliedFailed` with
//! `Failed to apply all manifests (n/m): <member API error>`; conditions are written only when they
//! change. Warning `SyncFailed` Events are recorded on every failure, Normal `SyncSucceed` only
//! when a member object was written (Karmada records one per sync; we avoid a host write per
//! Work on every restart).
//!
//! A cluster that is not Ready is an error (per-key exponential backoff); when it becomes Ready
//! its Works are requeued at once.
//!
//! # One member cannot stall the others
//!
//! Member I/O runs on a queue per member ([`member_queues`]), not on the shared Work workers, and
//! every member request has a deadline ([`karmada_controllers_common::members::REQUEST_TIMEOUT`]). A member that hangs
//! holds only its own workers; the others keep their usual latency.

mod member_queues;
pub mod ownership;
mod written;

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Instant;

use apimachinery::{ConflictRetry, DEFAULT_RETRY, is_conflict, is_not_found, set_status_condition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use karmada_apis::names::{cluster_name, execution_space_name};
use karmada_apis::well_known::{
    CLUSTER_PROPAGATION_POLICY_ANNOTATION, CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
    CLUSTER_RESOURCE_BINDING_ANNOTATION, CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL,
    CONFLICT_RESOLUTION_ANNOTATION, CONFLICT_RESOLUTION_OVERWRITE, EXECUTION_CONTROLLER_FINALIZER,
    MANAGED_BY_KARMADA_LABEL, MANAGED_BY_KARMADA_LABEL_VALUE, MANAGED_RESOURCE_ANNOTATIONS,
    MANAGED_RESOURCE_LABELS, PROPAGATION_POLICY_NAME_ANNOTATION,
    PROPAGATION_POLICY_NAMESPACE_ANNOTATION, PROPAGATION_POLICY_PERMANENT_ID_LABEL, WORK_APPLIED,
    WORK_DISPATCHING, WORK_MESSAGE_APPLIED_SUCCESSFUL, WORK_MESSAGE_DISPATCHING,
    WORK_MESSAGE_SUSPEND_DISPATCHING, WORK_REASON_APPLIED_FAILED, WORK_REASON_APPLIED_SUCCESSFUL,
    WORK_REASON_DISPATCHING, WORK_REASON_SUSPEND_DISPATCHING, event_reasons,
};
use karmada_apis::work::v1alpha1::{ManifestStatus, WorkStatus};
use karmada_apis::{Cluster, Work};
use karmada_interpreter::Interpreter;
use kube::ResourceExt;
use kube::api::{
    Api, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
    PropagationPolicy,
};
use lariat::cache::NAMESPACE_INDEX;
use lariat::{HandlerResult, ObjectKey, Priority, SharedController, SyncWait};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use karmada_controllers_common::events::{EventRecorder, EventType, reference_of};
use karmada_controllers_common::handlers::{register, start_fn_of};
use karmada_controllers_common::manifest::manifest_status;
use karmada_controllers_common::members::{self, MemberEvent};
use karmada_controllers_common::metrics::{
    self, OPERATION_NONE, OPERATION_UNCHANGED, OPERATION_UPDATED, count_create, count_delete,
    count_update,
};
use karmada_controllers_common::{ControllerContext, StartFn};
use member_queues::MemberQueues;
use ownership::{REASON_OWNED_BY_ANOTHER_WORK, WorkIdentity};
use written::WrittenStatuses;

/// The controller's `--controllers` name.
pub const NAME: &str = "execution";
/// Karmada's controller name: User-Agent suffix and Events' `source.component`.
pub const CONTROLLER_NAME: &str = "execution-controller";
/// Why one manifest could not be applied (or removed).
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The manifest is not a valid object.
    #[error("invalid manifest: {0}")]
    Manifest(String),
    /// The member API server rejected a request; the message is the API's.
    #[error("{}", .0.message)]
    Member(Box<kube::core::Status>),
    /// A request to the member failed before an answer.
    #[error("{0}")]
    Transport(kube::Error),
    /// The member's REST mapping or caches failed.
    #[error("{0}")]
    Framework(#[from] lariat::Error),
    /// The object exists in the member and is not managed by Karmada.
    #[error(
        "resource(kind={kind}, {namespace}/{name}) already exists in the cluster {cluster} and the {CONFLICT_RESOLUTION_ANNOTATION} strategy value is empty, Karmada will not manage this resource"
    )]
    NotManaged {
        /// Kind.
        kind: String,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Member cluster.
        cluster: String,
    },
    /// The object belongs to another Work (see [`ownership`]).
    #[error(
        "resource(kind={kind}, {namespace}/{name}) in the cluster {cluster} belongs to Work {owner}; Karmada will not update it"
    )]
    OwnedByAnotherWork {
        /// Kind.
        kind: String,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Member cluster.
        cluster: String,
        /// The other Work (`namespace/name`, or its permanent id).
        owner: String,
    },
    /// The interpreter failed on the objects.
    #[error("{0}")]
    Interpret(#[from] karmada_interpreter::InterpretError),
    /// Too many optimistic-lock conflicts.
    #[error("too many conflicts updating {0}")]
    Conflicts(String),
}

impl From<kube::Error> for ApplyError {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => ApplyError::Member(s),
            other => ApplyError::Transport(other),
        }
    }
}

/// An execution-controller failure (for the queue's logs).
#[derive(Debug, thiserror::Error)]
pub enum ExecutionError {
    /// The Work's cluster is not Ready.
    #[error("cluster({0}) not ready")]
    ClusterNotReady(String),
    /// The Work's Cluster does not exist.
    #[error("cluster {0} not found")]
    ClusterNotFound(String),
    /// The member is not connected.
    #[error("cluster {0} is not connected")]
    NotConnected(String),
    /// Applying failed.
    #[error("failed to sync work({namespace}/{name}) to cluster({cluster}): {message}")]
    Sync {
        /// Work namespace.
        namespace: String,
        /// Work name.
        name: String,
        /// Cluster.
        cluster: String,
        /// What failed.
        message: String,
    },
    /// A request to the control plane failed.
    #[error("{action} work {key}: {source}")]
    Api {
        /// What was attempted.
        action: &'static str,
        /// `namespace/name`.
        key: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The framework failed.
    #[error("{0}")]
    Framework(#[from] lariat::Error),
}

/// What applying one manifest did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Applied {
    Created,
    Updated,
    Unchanged,
}

/// One manifest applied: what happened and, after a create or update, the object's status entry
/// as the member's API server returned it.
struct Outcome {
    applied: Applied,
    status: Option<ManifestStatus>,
}

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    recorder: EventRecorder,
    interpreter: Interpreter,
    works: SharedController<Work>,
    clusters: SharedController<Cluster>,
    /// Ready state of each cluster as last seen.
    ready: Mutex<HashMap<String, bool>>,
    /// Where member I/O runs: one queue per member.
    queues: MemberQueues,
    /// Status writes the Work cache has not caught up with yet.
    written: WrittenStatuses,
    cancel: CancellationToken,
}

/// The execution controller. Cheap to clone.
#[derive(Clone)]
pub struct ExecutionController {
    inner: Arc<Inner>,
}

/// The identifying fields of a manifest.
struct Ident {
    api_version: String,
    kind: String,
    namespace: String,
    name: String,
}

impl Ident {
    fn of(manifest: &Value) -> Result<Ident, ApplyError> {
        let s = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
        let id = Ident {
            api_version: s(manifest.get("apiVersion")),
            kind: s(manifest.get("kind")),
            namespace: s(manifest.pointer("/metadata/namespace")),
            name: s(manifest.pointer("/metadata/name")),
        };
        if id.api_version.is_empty() || id.kind.is_empty() || id.name.is_empty() {
            return Err(ApplyError::Manifest(
                "apiVersion, kind and metadata.name are required".to_owned(),
            ));
        }
        Ok(id)
    }
}

fn is_managed(obj: &Value) -> bool {
    obj.pointer("/metadata/labels")
        .and_then(|l| l.get(MANAGED_BY_KARMADA_LABEL))
        .and_then(Value::as_str)
        == Some(MANAGED_BY_KARMADA_LABEL_VALUE)
}

fn to_dynamic(v: &Value) -> Result<DynamicObject, ApplyError> {
    serde_json::from_value(v.clone()).map_err(|e| ApplyError::Manifest(e.to_string()))
}

fn to_value(o: &DynamicObject) -> Result<Value, ApplyError> {
    serde_json::to_value(o).map_err(|e| ApplyError::Manifest(e.to_string()))
}

/// A member object's API and cache for one manifest.
struct Target {
    api: Api<DynamicObject>,
    cache: lariat::Cache<DynamicObject>,
    id: Ident,
    gvk: GroupVersionKind,
}

impl Target {
    /// Counts a create of this object in `cluster` (Karmada's `CountCreateResourceToCluster`).
    fn count_create(&self, ok: bool, cluster: &str) {
        count_create(ok, &self.id.api_version, &self.id.kind, cluster, false);
    }

    /// Counts an update of this object in `cluster` (Karmada's `CountUpdateResourceToCluster`).
    fn count_update(&self, ok: bool, cluster: &str, operation: &str) {
        count_update(ok, &self.id.api_version, &self.id.kind, cluster, operation);
    }

    /// The object as the member's API server has it now (not the cache), as JSON.
    async fn read(&self) -> Result<Option<Value>, ApplyError> {
        self.api
            .get_opt(&self.id.name)
            .await?
            .map(|o| to_value(&o))
            .transpose()
    }

    /// The error of a write that kept conflicting, naming the object.
    fn conflicts(&self) -> ApplyError {
        ApplyError::Conflicts(format!(
            "{} {}/{}",
            self.id.kind, self.id.namespace, self.id.name
        ))
    }

    /// The object with the manifest's `apiVersion` and `kind` (list and watch items from the cache
    /// come without them).
    fn typed(&self, mut v: Value) -> Value {
        if let Some(o) = v.as_object_mut() {
            o.insert(
                "apiVersion".to_owned(),
                Value::String(self.id.api_version.clone()),
            );
            o.insert("kind".to_owned(), Value::String(self.id.kind.clone()));
        }
        v
    }
}

/// Sets a condition like apimachinery's `meta.SetStatusCondition`; returns whether it changed
/// (status, reason or message).
fn condition(type_: &str, ok: bool, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: if ok { "True" } else { "False" }.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        last_transition_time: Time(Timestamp::now()),
        observed_generation: None,
    }
}

impl ExecutionController {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, ExecutionError> {
        let interpreter = karmada_controllers_common::interpreter::interpreter(
            &ctx.control_plane,
            &ctx.events,
            karmada_interpreter::InterpreterOptions::default(),
        );
        let cp = &ctx.control_plane;
        let client = cp.clients().client_for_controller(CONTROLLER_NAME)?;
        let works = cp.controllers().for_kind::<Work>()?;
        let clusters = cp.controllers().for_kind::<Cluster>()?;
        let recorder = ctx.events.recorder(CONTROLLER_NAME);
        let cancel = ctx.cancel.child_token();
        let workers = ctx.settings.concurrent_work_syncs;
        let rate_limiter = ctx.settings.rate_limiter.clone();
        let inner = Arc::new_cyclic(|me: &Weak<Inner>| {
            let me = me.clone();
            let queues = MemberQueues::new(
                CONTROLLER_NAME,
                workers,
                rate_limiter,
                move |cluster: String, key: ObjectKey| {
                    let me = me.clone();
                    async move {
                        match me.upgrade() {
                            Some(inner) => {
                                ExecutionController { inner }
                                    .reconcile_key(&cluster, &key)
                                    .await
                            }
                            None => true,
                        }
                    }
                },
            );
            Inner {
                ctx,
                client,
                recorder,
                interpreter,
                works,
                clusters,
                ready: Mutex::new(HashMap::new()),
                queues,
                written: WrittenStatuses::default(),
                cancel,
            }
        });
        Ok(ExecutionController { inner })
    }

    /// Registers the handlers and runs until the context is cancelled.
    pub async fn run(self) -> Result<(), karmada_controllers_common::BoxError> {
        let inner = &self.inner;
        let timeout = inner.ctx.settings.cluster_cache_sync_timeout;
        let SyncWait::Synced = inner.clusters.wait_synced(&inner.cancel, timeout).await? else {
            return Ok(());
        };
        // Subscribed before the first Work is handled: a member connecting while the first list
        // comes in re-queues the Works that found it not connected yet, instead of leaving them
        // to their backoff.
        let mut events = inner.ctx.members.subscribe();
        register(
            &inner.clusters,
            NAME,
            &inner.cancel,
            &self,
            |this: Self, k, o: Option<Arc<Cluster>>| async move {
                this.cluster_changed(&k, o.as_deref());
                HandlerResult::Success
            },
        );
        register(
            &inner.works,
            NAME,
            &inner.cancel,
            &self,
            |this: Self, k, o: Option<Arc<Work>>| async move { this.handle_work(k, o).await },
        );
        let works_synced = inner.works.wait_synced(&inner.cancel, timeout);
        tokio::pin!(works_synced);
        let synced = loop {
            tokio::select! {
                synced = &mut works_synced => break synced?,
                e = events.recv() => if !self.member_event(e) {
                    break (&mut works_synced).await?;
                },
            }
        };
        let SyncWait::Synced = synced else {
            return Ok(());
        };
        inner.ctx.synced.synced();
        tracing::info!("execution controller synced");
        loop {
            tokio::select! {
                _ = inner.cancel.cancelled() => break,
                e = events.recv() => if !self.member_event(e) {
                    inner.cancel.cancelled().await;
                    break;
                },
            }
        }
        tracing::info!("execution controller stopped");
        Ok(())
    }

    /// Handles a member registry event; false once the registry is gone.
    fn member_event(
        &self,
        event: Result<MemberEvent, tokio::sync::broadcast::error::RecvError>,
    ) -> bool {
        use tokio::sync::broadcast::error::RecvError;
        match event {
            // A (re)connected member has a fresh queue: requeue its Works so nothing that waited
            // on the old connection, or found none yet, is lost.
            Ok(MemberEvent::Connected(name)) => self.enqueue_cluster(&name),
            Ok(MemberEvent::Disconnected(_)) => {}
            Err(RecvError::Lagged(_)) => {
                for name in self.inner.ctx.members.registry().names() {
                    self.enqueue_cluster(&name);
                }
            }
            Err(RecvError::Closed) => return false,
        }
        true
    }

    /// Queues every Work of `cluster` on the shared Work queue, by key (nothing is decoded) and at
    /// low priority: a resync, which must not go ahead of live changes (a restart's fresh Works).
    fn enqueue_cluster(&self, cluster: &str) {
        let ns = execution_space_name(cluster);
        let store = self.inner.works.store();
        for key in store.keys_by_index(NAMESPACE_INDEX, &ns) {
            self.inner
                .works
                .enqueue_key_with_priority(key, Priority::Low);
        }
    }

    /// Requeues a cluster's Works when it becomes Ready.
    fn cluster_changed(&self, key: &ObjectKey, cluster: Option<&Cluster>) {
        let name = key.name().to_owned();
        let now = cluster.is_some_and(Cluster::is_ready);
        let before = self.inner.ready.lock().insert(name.clone(), now);
        if now && before != Some(true) {
            self.enqueue_cluster(&name);
        }
    }

    async fn handle_work(&self, key: ObjectKey, obj: Option<Arc<Work>>) -> HandlerResult<Work> {
        let Some(work) = obj else {
            return HandlerResult::Success;
        };
        let ns = key.namespace().unwrap_or_default();
        let Ok(cluster) = cluster_name(ns) else {
            return HandlerResult::Success;
        };
        let cluster = cluster.to_owned();
        // Every wake-up reconciles: besides spec changes, the work-status controller re-queues a Work
        // when its member object drifted or was deleted by hand. An up-to-date member object costs no
        // request (the comparison runs against the member cache).
        if let Some(member) = self.inner.ctx.members.get(&cluster) {
            // Member I/O runs on the member's own queue, so a hung member holds only its workers.
            self.inner.queues.add(&member, key);
            return HandlerResult::Success;
        }
        // Not connected: nothing below talks to the member, and errors back off here.
        match self.reconcile(&work, &cluster).await {
            Ok(()) => HandlerResult::Success,
            // Requeued when the member connects (the registry reports why it does not); the
            // periodic look is only a safety net, so it is neither an error nor backed off.
            Err(e @ ExecutionError::NotConnected(_)) => {
                tracing::debug!(cluster = %cluster, namespace = ns, name = key.name(), error = %e, "work waits for its member's connection");
                HandlerResult::RequeueAfter(members::MEMBER_NOT_CONNECTED_RETRY)
            }
            Err(e) => {
                tracing::warn!(cluster = %cluster, namespace = ns, name = key.name(), error = %e, "work not synced");
                HandlerResult::error(e)
            }
        }
    }

    /// Reconciles a Work from the member's queue; `false` retries it with backoff.
    async fn reconcile_key(&self, cluster: &str, key: &ObjectKey) -> bool {
        let Some(work) = self.inner.works.cache().peek_store().get(key) else {
            // Deleted; its finalizer kept it until its member objects were handled.
            return true;
        };
        match self.reconcile(&work, cluster).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(cluster, namespace = key.namespace().unwrap_or_default(), name = key.name(), error = %e, "work not synced");
                false
            }
        }
    }

    async fn reconcile(&self, work: &Work, cluster: &str) -> Result<(), ExecutionError> {
        let inner = &self.inner;
        let deleting = work.metadata.deletion_timestamp.is_some();
        let cluster_obj = inner.clusters.store().get_named(None, cluster);
        let Some(cluster_obj) = cluster_obj else {
            if deleting {
                // The Cluster is gone: nothing can be removed from it any more.
                return self.remove_finalizer(work).await;
            }
            return Err(ExecutionError::ClusterNotFound(cluster.to_owned()));
        };
        // The controller-manager leaves Pull clusters' Works to their agents; an agent applies
        // only its own cluster's.
        if !inner.ctx.members.serves(&cluster_obj) {
            return Ok(());
        }
        if deleting {
            if !work
                .finalizers()
                .iter()
                .any(|f| f == EXECUTION_CONTROLLER_FINALIZER)
            {
                return Ok(());
            }
            self.handle_delete(work, &cluster_obj, cluster).await?;
            return self.remove_finalizer(work).await;
        }
        let suspended = work.spec.suspend_dispatching.unwrap_or(false);
        let dispatching = if suspended {
            condition(
                WORK_DISPATCHING,
                false,
                WORK_REASON_SUSPEND_DISPATCHING,
                WORK_MESSAGE_SUSPEND_DISPATCHING,
            )
        } else {
            condition(
                WORK_DISPATCHING,
                true,
                WORK_REASON_DISPATCHING,
                WORK_MESSAGE_DISPATCHING,
            )
        };
        let dispatch_changed = !inner.written.status(work).is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == WORK_DISPATCHING && c.status == dispatching.status)
        });
        if dispatch_changed {
            inner
                .recorder
                .record(
                    &reference_of(work),
                    EventType::Normal,
                    event_reasons::WORK_DISPATCHING,
                    dispatching.message.clone(),
                )
                .await;
        }
        // A changed Dispatching condition is written together with Applied when the Work is
        // applied now (one status write instead of two), and alone when it is not.
        let dispatching = dispatch_changed.then_some(dispatching);
        let member = match inner.ctx.members.get(cluster) {
            Some(m) if !suspended && cluster_obj.is_ready() => m,
            _ => {
                if let Some(c) = dispatching {
                    self.set_status(work, vec![c], None).await?;
                }
                return if suspended {
                    Ok(())
                } else if !cluster_obj.is_ready() {
                    Err(ExecutionError::ClusterNotReady(cluster.to_owned()))
                } else {
                    Err(ExecutionError::NotConnected(cluster.to_owned()))
                };
            }
        };
        let started = Instant::now();
        let result = self
            .sync_to_cluster(work, cluster, &member, dispatching)
            .await;
        metrics::observe_sync_workload(result.is_ok(), started);
        result
    }

    /// Applies every manifest of the Work and records `Applied` (with `dispatching`, when that
    /// condition changed too).
    async fn sync_to_cluster(
        &self,
        work: &Work,
        cluster: &str,
        member: &lariat::Cluster,
        dispatching: Option<Condition>,
    ) -> Result<(), ExecutionError> {
        let inner = &self.inner;
        let manifests = &work.spec.workload.manifests;
        let mut errors = Vec::new();
        let mut wrote = false;
        let mut owned_by_another = false;
        // The status entries of what this sync wrote; recorded with `Applied` when every manifest
        // has one, else left to the work-status controller.
        let mut statuses = Vec::with_capacity(manifests.len());
        let me = WorkIdentity::of(work);
        for (ordinal, m) in manifests.iter().enumerate() {
            let result = match m.to_value() {
                Ok(manifest) => self.apply(cluster, member, (ordinal, &manifest), &me).await,
                Err(e) => Err(ApplyError::Manifest(e.to_string())),
            };
            match result {
                Ok(outcome) => {
                    wrote |= outcome.applied != Applied::Unchanged;
                    statuses.extend(outcome.status);
                }
                Err(e) => {
                    owned_by_another |= matches!(e, ApplyError::OwnedByAnotherWork { .. });
                    let id = m.identity().unwrap_or_default();
                    let (kind, ns, name) = (&id.kind, &id.metadata.namespace, &id.metadata.name);
                    tracing::warn!(cluster, kind, namespace = ns, name, error = %e, "failed to apply manifest");
                    errors.push(e.to_string());
                }
            }
        }
        let key = format!(
            "{}/{}",
            work.namespace().unwrap_or_default(),
            work.name_any()
        );
        if errors.is_empty() {
            let applied = condition(
                WORK_APPLIED,
                true,
                WORK_REASON_APPLIED_SUCCESSFUL,
                WORK_MESSAGE_APPLIED_SUCCESSFUL,
            );
            let statuses = (statuses.len() == manifests.len()).then_some(statuses);
            self.set_status(
                work,
                dispatching.into_iter().chain([applied]).collect(),
                statuses,
            )
            .await?;
            if wrote {
                inner
                    .recorder
                    .record(
                        &reference_of(work),
                        EventType::Normal,
                        event_reasons::SYNC_WORKLOAD_SUCCEED,
                        format!("Sync work({key}) to cluster({cluster}) successful."),
                    )
                    .await;
            }
            return Ok(());
        }
        let message = format!(
            "Failed to apply all manifests ({}/{}): {}",
            manifests.len() - errors.len(),
            manifests.len(),
            errors.join(", ")
        );
        let reason = if owned_by_another {
            REASON_OWNED_BY_ANOTHER_WORK
        } else {
            WORK_REASON_APPLIED_FAILED
        };
        let failed = condition(WORK_APPLIED, false, reason, &message);
        self.set_status(
            work,
            dispatching.into_iter().chain([failed]).collect(),
            None,
        )
        .await?;
        let err = ExecutionError::Sync {
            namespace: work.namespace().unwrap_or_default(),
            name: work.name_any(),
            cluster: cluster.to_owned(),
            message,
        };
        inner
            .recorder
            .record(
                &reference_of(work),
                EventType::Warning,
                if owned_by_another {
                    REASON_OWNED_BY_ANOTHER_WORK
                } else {
                    event_reasons::SYNC_WORKLOAD_FAILED
                },
                err.to_string(),
            )
            .await;
        Err(err)
    }

    async fn target(
        &self,
        member: &lariat::Cluster,
        manifest: &Value,
    ) -> Result<Target, ApplyError> {
        let id = Ident::of(manifest)?;
        let gvk = apimachinery::gvk_of(&id.api_version, &id.kind);
        let (ar, caps) = member.clients().resolve(&gvk).await?;
        let client = member.clients().client_for_controller(CONTROLLER_NAME)?;
        let api = if caps.scope == kube::discovery::Scope::Namespaced {
            Api::namespaced_with(client, &id.namespace, &ar)
        } else {
            Api::all_with(client, &ar)
        };
        let cache = member.caches().for_resource(&ar)?;
        Ok(Target {
            api,
            cache,
            id,
            gvk,
        })
    }

    /// The member object, from the managed cache when it has synced (`None` = not managed or
    /// absent), else from the API server.
    async fn observed(&self, t: &Target) -> Result<(Option<Value>, bool), ApplyError> {
        let store = t.cache.store();
        if t.cache.has_synced() {
            let ns = (!t.id.namespace.is_empty()).then_some(t.id.namespace.as_str());
            return match store.get_named(ns, &t.id.name) {
                Some(o) => Ok((Some(t.typed(to_value(&o)?)), true)),
                None => Ok((None, true)),
            };
        }
        Ok((
            t.api
                .get_opt(&t.id.name)
                .await?
                .map(|o| to_value(&o))
                .transpose()?,
            false,
        ))
    }

    /// What applying the `ordinal`-th manifest as `t` did; `written` is the object the member's
    /// API server returned for a create or update. A status that cannot be interpreted is left to
    /// the work-status controller, which reports the error.
    fn outcome(
        &self,
        t: &Target,
        ordinal: usize,
        applied: Applied,
        written: Option<&DynamicObject>,
    ) -> Outcome {
        let status = written.and_then(|o| to_value(o).ok()).and_then(|v| {
            let observed = t.typed(v);
            manifest_status(&self.inner.interpreter, &observed, ordinal, &t.gvk).ok()
        });
        Outcome { applied, status }
    }

    /// Creates or updates the `ordinal`-th manifest of a Work in the member.
    async fn apply(
        &self,
        cluster: &str,
        member: &lariat::Cluster,
        (ordinal, manifest): (usize, &Value),
        me: &WorkIdentity,
    ) -> Result<Outcome, ApplyError> {
        let t = self.target(member, manifest).await?;
        let (mut observed, mut from_cache) = self.observed(&t).await?;
        if observed.is_none() {
            let result = t
                .api
                .create(&PostParams::default(), &to_dynamic(manifest)?)
                .await;
            match result {
                Ok(created) => {
                    t.count_create(true, cluster);
                    tracing::info!(cluster, kind = %t.id.kind, namespace = %t.id.namespace, name = %t.id.name, "created in member");
                    return Ok(self.outcome(&t, ordinal, Applied::Created, Some(&created)));
                }
                Err(kube::Error::Api(s)) if s.reason == "AlreadyExists" => {
                    // Not in the managed cache: an unmanaged object, or the cache lags.
                    observed = t.read().await?;
                    from_cache = false;
                    if observed.is_none() {
                        return Err(ApplyError::Member(s));
                    }
                }
                Err(e) => {
                    t.count_create(false, cluster);
                    return Err(e.into());
                }
            }
        }
        let mut retry = ConflictRetry::new(DEFAULT_RETRY);
        while retry.next().await {
            let Some(current) = observed.take() else {
                return Err(ApplyError::Conflicts(t.id.name.clone()));
            };
            let r = self
                .update(cluster, &t, manifest, &current, from_cache, me)
                .await;
            match r {
                Ok(Some((applied, written))) => {
                    return Ok(self.outcome(&t, ordinal, applied, written.as_ref()));
                }
                Ok(None) => {
                    // Needs a fresh read (cache hit that differs, or a conflict).
                    observed = t.read().await?;
                    from_cache = false;
                    if observed.is_none() {
                        // Deleted meanwhile: create it.
                        let created = t
                            .api
                            .create(&PostParams::default(), &to_dynamic(manifest)?)
                            .await
                            .inspect_err(|_| {
                                t.count_create(false, cluster);
                            })?;
                        t.count_create(true, cluster);
                        return Ok(self.outcome(&t, ordinal, Applied::Created, Some(&created)));
                    }
                }
                Err(e) => {
                    t.count_update(false, cluster, OPERATION_NONE);
                    return Err(e);
                }
            }
        }
        Err(t.conflicts())
    }

    /// One update attempt against `observed`: what it did and the object it wrote, if it wrote.
    /// `Ok(None)`: read again and retry.
    async fn update(
        &self,
        cluster: &str,
        t: &Target,
        manifest: &Value,
        observed: &Value,
        from_cache: bool,
        me: &WorkIdentity,
    ) -> Result<Option<(Applied, Option<DynamicObject>)>, ApplyError> {
        // Another Work's object is never touched, whatever the conflict resolution says.
        if let Some(owner) = me.other_owner(observed) {
            return Err(ApplyError::OwnedByAnotherWork {
                kind: t.id.kind.clone(),
                namespace: t.id.namespace.clone(),
                name: t.id.name.clone(),
                cluster: cluster.to_owned(),
                owner,
            });
        }
        let allowed = is_managed(observed)
            || manifest
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(CONFLICT_RESOLUTION_ANNOTATION))
                .and_then(Value::as_str)
                == Some(CONFLICT_RESOLUTION_OVERWRITE);
        if !allowed {
            return Err(ApplyError::NotManaged {
                kind: t.id.kind.clone(),
                namespace: t.id.namespace.clone(),
                name: t.id.name.clone(),
                cluster: cluster.to_owned(),
            });
        }
        let observed = &t.typed(observed.clone());
        let mut desired = t.typed(manifest.clone());
        self.inner.interpreter.retain(&mut desired, observed)?;
        if self.inner.interpreter.matches_member(&desired, observed)? {
            t.count_update(true, cluster, OPERATION_NONE);
            return Ok(Some((Applied::Unchanged, None)));
        }
        if from_cache {
            return Ok(None);
        }
        let before = observed
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match t
            .api
            .replace(&t.id.name, &PostParams::default(), &to_dynamic(&desired)?)
            .await
        {
            Ok(updated) => {
                let changed = updated.metadata.resource_version.as_deref() != Some(before.as_str());
                let op = if changed {
                    OPERATION_UPDATED
                } else {
                    OPERATION_UNCHANGED
                };
                t.count_update(true, cluster, op);
                tracing::info!(cluster, kind = %t.id.kind, namespace = %t.id.namespace, name = %t.id.name, changed, "updated in member");
                Ok(Some((Applied::Updated, Some(updated))))
            }
            Err(e) if is_conflict(&e) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes (or releases, with `preserveResourcesOnDeletion`) the Work's member objects.
    async fn handle_delete(
        &self,
        work: &Work,
        cluster_obj: &Cluster,
        cluster: &str,
    ) -> Result<(), ExecutionError> {
        let preserve = work.spec.preserve_resources_on_deletion.unwrap_or(false);
        let ready = cluster_obj.is_ready();
        if !preserve && !ready {
            if cluster_obj.metadata.deletion_timestamp.is_some() {
                return Ok(());
            }
            return Err(ExecutionError::ClusterNotReady(cluster.to_owned()));
        }
        let Some(member) = self.inner.ctx.members.get(cluster) else {
            return Err(ExecutionError::NotConnected(cluster.to_owned()));
        };
        let mut errors = Vec::new();
        for m in &work.spec.workload.manifests {
            let r = match m.to_value() {
                Ok(manifest) if preserve => self.release(cluster, &member, &manifest, work).await,
                Ok(manifest) => self.delete(cluster, &member, &manifest, work).await,
                Err(e) => Err(ApplyError::Manifest(e.to_string())),
            };
            if let Err(e) = r {
                errors.push(e.to_string());
            }
        }
        if errors.is_empty() {
            return Ok(());
        }
        Err(ExecutionError::Sync {
            namespace: work.namespace().unwrap_or_default(),
            name: work.name_any(),
            cluster: cluster.to_owned(),
            message: errors.join(", "),
        })
    }

    /// Deletes a member object if Karmada manages it (background propagation, so a Job's Pods go
    /// too).
    async fn delete(
        &self,
        cluster: &str,
        member: &lariat::Cluster,
        manifest: &Value,
        work: &Work,
    ) -> Result<(), ApplyError> {
        let t = self.target(member, manifest).await?;
        let Some(current) = t.api.get_opt(&t.id.name).await? else {
            return Ok(());
        };
        let current_value = to_value(&current)?;
        if !is_managed(&current_value) {
            tracing::info!(cluster, kind = %t.id.kind, namespace = %t.id.namespace, name = %t.id.name, "not deleting member object not managed by Karmada");
            return Ok(());
        }
        if self
            .owned_by_another(cluster, &t, &current_value, work)
            .await
        {
            return Ok(());
        }
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        let r = t.api.delete(&t.id.name, &dp).await;
        let r = match r {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(ApplyError::from(e)),
        };
        count_delete(r.is_ok(), &t.id.api_version, &t.id.kind, cluster);
        if r.is_ok() {
            tracing::info!(cluster, kind = %t.id.kind, namespace = %t.id.namespace, name = %t.id.name, "deleted from member");
        }
        r
    }

    /// Keeps a member object but strips Karmada's labels and annotations from it.
    async fn release(
        &self,
        cluster: &str,
        member: &lariat::Cluster,
        manifest: &Value,
        work: &Work,
    ) -> Result<(), ApplyError> {
        let t = self.target(member, manifest).await?;
        let mut retry = ConflictRetry::new(DEFAULT_RETRY);
        while retry.next().await {
            let Some(current) = t.api.get_opt(&t.id.name).await? else {
                return Ok(());
            };
            if self
                .owned_by_another(cluster, &t, &to_value(&current)?, work)
                .await
            {
                return Ok(());
            }
            let mut obj = current.clone();
            let labels = obj.metadata.labels.get_or_insert_with(Default::default);
            for l in MANAGED_RESOURCE_LABELS.iter().chain([
                &CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL,
                &PROPAGATION_POLICY_PERMANENT_ID_LABEL,
                &CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
            ]) {
                labels.remove(*l);
            }
            let annotations = obj
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            for a in MANAGED_RESOURCE_ANNOTATIONS.iter().chain([
                &CLUSTER_RESOURCE_BINDING_ANNOTATION,
                &PROPAGATION_POLICY_NAMESPACE_ANNOTATION,
                &PROPAGATION_POLICY_NAME_ANNOTATION,
                &CLUSTER_PROPAGATION_POLICY_ANNOTATION,
                &CONFLICT_RESOLUTION_ANNOTATION,
            ]) {
                annotations.remove(*a);
            }
            if obj.metadata.labels == current.metadata.labels
                && obj.metadata.annotations == current.metadata.annotations
            {
                t.count_update(true, cluster, OPERATION_NONE);
                return Ok(());
            }
            match t
                .api
                .replace(&t.id.name, &PostParams::default(), &obj)
                .await
            {
                Ok(_) => {
                    t.count_update(true, cluster, OPERATION_UPDATED);
                    tracing::info!(cluster, kind = %t.id.kind, namespace = %t.id.namespace, name = %t.id.name, "released member object (preserveResourcesOnDeletion)");
                    return Ok(());
                }
                Err(e) if is_conflict(&e) => continue,
                Err(e) => {
                    t.count_update(false, cluster, OPERATION_NONE);
                    return Err(e.into());
                }
            }
        }
        Err(t.conflicts())
    }

    /// Whether `current` belongs to another Work than `work` (the Work being deleted): then it is
    /// left alone, with a log line and a Warning Event on `work`.
    async fn owned_by_another(
        &self,
        cluster: &str,
        t: &Target,
        current: &Value,
        work: &Work,
    ) -> bool {
        let Some(owner) = WorkIdentity::of(work).other_owner(current) else {
            return false;
        };
        tracing::info!(cluster, kind = %t.id.kind, namespace = %t.id.namespace, name = %t.id.name, owner, "not removing member object owned by another Work");
        self.inner
            .recorder
            .record(
                &reference_of(work),
                EventType::Warning,
                REASON_OWNED_BY_ANOTHER_WORK,
                format!(
                    "Left {} {}/{} in cluster({cluster}) alone: it belongs to Work {owner}.",
                    t.id.kind, t.id.namespace, t.id.name
                ),
            )
            .await;
        true
    }

    /// Sets conditions on the Work's status, and with `statuses` its manifest statuses (written only
    /// if something changed, in one write).
    async fn set_status(
        &self,
        work: &Work,
        conditions: Vec<Condition>,
        statuses: Option<Vec<ManifestStatus>>,
    ) -> Result<(), ExecutionError> {
        let ns = work.namespace().unwrap_or_default();
        let name = work.name_any();
        let key = format!("{ns}/{name}");
        // The execution controller is the only writer of a Work's conditions, so a merge patch of
        // the whole list computed from the cached Work cannot lose anyone's update, and never
        // conflicts with the work-status controller's writes the way a resourceVersion-checked
        // update would. `manifestStatuses` has two writers: this one right after it wrote the
        // objects, and the work-status controller, which compares every Work update with the
        // member objects it caches and corrects an entry written from an older object.
        let current = self.inner.written.status(work);
        let current = current.as_deref();
        let mut merged = current.map(|s| s.conditions.clone()).unwrap_or_default();
        let mut changed = false;
        for c in conditions {
            changed |= set_status_condition(&mut merged, c);
        }
        let statuses = statuses.filter(|new| current.is_none_or(|s| s.manifest_statuses != *new));
        if !changed && statuses.is_none() {
            // The cached Work already says so.
            return Ok(());
        }
        let api: Api<Work> = Api::namespaced(self.inner.client.clone(), &ns);
        let patch = match &statuses {
            Some(statuses) => {
                json!({"status": {"conditions": merged, "manifestStatuses": statuses}})
            }
            None => json!({"status": {"conditions": merged}}),
        };
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                let manifest_statuses = statuses
                    .or_else(|| current.map(|s| s.manifest_statuses.clone()))
                    .unwrap_or_default();
                self.inner.written.wrote(
                    work,
                    WorkStatus {
                        conditions: merged,
                        manifest_statuses,
                    },
                );
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(source) => Err(ExecutionError::Api {
                action: "update status of",
                key,
                source,
            }),
        }
    }

    async fn remove_finalizer(&self, work: &Work) -> Result<(), ExecutionError> {
        if !work
            .finalizers()
            .iter()
            .any(|f| f == EXECUTION_CONTROLLER_FINALIZER)
        {
            return Ok(());
        }
        let ns = work.namespace().unwrap_or_default();
        let name = work.name_any();
        let remaining: Vec<&String> = work
            .finalizers()
            .iter()
            .filter(|f| *f != EXECUTION_CONTROLLER_FINALIZER)
            .collect();
        let patch = json!({"metadata": {"finalizers": remaining, "resourceVersion": work.resource_version()}});
        let api: Api<Work> = Api::namespaced(self.inner.client.clone(), &ns);
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                self.inner.written.forget(work);
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(source) => Err(ExecutionError::Api {
                action: "remove finalizer from",
                key: format!("{ns}/{name}"),
                source,
            }),
        }
    }
}

/// The start function registered as `execution`.
pub fn start_fn() -> StartFn {
    start_fn_of(ExecutionController::new, ExecutionController::run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_change_only_when_different() {
        let mut cs = vec![];
        assert!(set_status_condition(
            &mut cs,
            condition("Applied", true, "A", "m")
        ));
        assert!(!set_status_condition(
            &mut cs,
            condition("Applied", true, "A", "m")
        ));
        assert!(set_status_condition(
            &mut cs,
            condition("Applied", false, "B", "x")
        ));
        assert_eq!(cs.len(), 1);
        assert_eq!(cs[0].status, "False");
    }

    #[test]
    fn not_managed_message_names_object_and_cluster() {
        let e = ApplyError::NotManaged {
            kind: "Deployment".into(),
            namespace: "ns".into(),
            name: "nginx".into(),
            cluster: "member1".into(),
        };
        let m = e.to_string();
        assert!(m.contains("already exists in the cluster member1"), "{m}");
        assert!(m.contains("Karmada will not manage this resource"), "{m}");
    }

    #[test]
    fn managed_label_gate() {
        assert!(is_managed(
            &json!({"metadata": {"labels": {"karmada.io/managed": "true"}}})
        ));
        assert!(!is_managed(
            &json!({"metadata": {"labels": {"karmada.io/managed": "false"}}})
        ));
        assert!(!is_managed(&json!({"metadata": {}})));
    }
}
