//! The binding controller (`--controllers` name `binding`): turns each ResourceBinding and
//! ClusterResourceBinding into one Work per target cluster, in `karmada-es-<cluster>`, as
//! Karmada's `binding-controller` does.
//!
//! Per target cluster (`spec.clusters` plus the clusters of `spec.requiredBy`) the template is
//! read from the API server, copied, its replicas revised to the cluster's share (workload kinds
//! with a revise rule), a Job's `completions` divided when replicas are divided, then
//! ClusterOverridePolicies and OverridePolicies applied. The Work gets Karmada's name, labels,
//! annotations (binding back-pointers, conflict resolution, applied-overrides records), finalizer
//! `karmada.io/execution-controller` and a decorated manifest ([`work`]); it is written only when
//! it changed. Works of clusters no longer targeted are deleted (clusters with a graceful eviction
//! task keep theirs unless its purge mode is `Directly`).
//!
//! An override that cannot be applied leaves that cluster's Work as it was: the binding gets a
//! `SyncWorkFailed`/`ApplyOverridePolicyFailed` Warning Event and the condition
//! [`CONDITION_OVERRIDE_APPLIED`]`=False` naming the policy, rule, path and cause. The binding is
//! not retried on a timer for that (nothing would change); a change of an override policy, of the
//! binding or of the template brings it back.
//!
//! A Work the API server refuses for its size (`413`, or etcd's `request is too large`: the
//! template embedded in a Work exceeds etcd's 1.5 MiB request limit) gets the same treatment: a
//! `SyncWorkFailed` Warning Event on the binding and the template, the condition
//! [`CONDITION_WORKS_SYNCED`]`=False` with reason [`REASON_WORK_TOO_LARGE`], no retry on a timer;
//! other bindings are not held up.
//!
//! Deleting a binding deletes its Works; the binding's finalizer is released once they are gone
//! (their own finalizer is held by the execution controller until the member objects are gone).
//!
//! Only generation changes of bindings are synced (Karmada's `GenerationChangedPredicate`), plus
//! bindings an OverridePolicy/ClusterOverridePolicy change may affect and retries of failures.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use apimachinery::{
    ConflictRetry, DEFAULT_RETRY, find_status_condition, is_conflict, is_not_found,
};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use karmada_apis::names::{cluster_name, execution_space_name, work_name};
use karmada_apis::policy::v1alpha1::{ConflictResolution, PurgeMode, ResourceSelector};
use karmada_apis::well_known::{
    CLUSTER_RESOURCE_BINDING_ANNOTATION, CONFLICT_RESOLUTION_ABORT, CONFLICT_RESOLUTION_ANNOTATION,
    CONFLICT_RESOLUTION_OVERWRITE, EXECUTION_CONTROLLER_FINALIZER,
    RESOURCE_BINDING_NAME_ANNOTATION, RESOURCE_BINDING_NAMESPACE_ANNOTATION,
    RESOURCE_TEMPLATE_GENERATION_ANNOTATION, event_reasons,
};
use karmada_apis::work::v1alpha2::{
    ObjectReference as TemplateReference, ResourceBindingSpec, TargetCluster,
};
use karmada_apis::{
    Cluster, ClusterOverridePolicy, ClusterResourceBinding, OverridePolicy, ResourceBinding, Work,
};
use karmada_interpreter::{Interpreter, Operation};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Resource, ResourceExt};
use lariat::{HandlerResult, ObjectKey, SharedController, SyncWait};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use karmada_controllers_common::binding::BindingObject;
use karmada_controllers_common::error::{ApiError, FrameworkError, framework};
use karmada_controllers_common::events::{EventRecorder, EventType};
use karmada_controllers_common::failover::{FEATURE_STATEFUL_FAILOVER_INJECTION, labels_to_inject};
use karmada_controllers_common::handlers::{
    register, serve_until_cancelled, shared_controller, start_fn_of,
};
use karmada_controllers_common::metrics;
use karmada_controllers_common::template;
use karmada_controllers_common::work::{
    WorkError, WorkOutcome, WorkTarget, create_or_update_work, set_annotation, set_label,
};
use karmada_controllers_common::{ControllerContext, StartFn};

/// The controller's `--controllers` name.
pub const NAME: &str = "binding";
/// Karmada's controller name: the User-Agent suffix and the Events' `source.component`.
pub const CONTROLLER_NAME: &str = "binding-controller";
/// Condition on a binding telling whether the override policies could be applied for every
/// target cluster (karmada-rs addition; Karmada only reports this in Events).
pub const CONDITION_OVERRIDE_APPLIED: &str = "OverrideApplied";
/// Condition on a binding telling whether every Work could be stored; `False` with reason
/// [`REASON_WORK_TOO_LARGE`] when the API server refused a Work for its size (karmada-rs
/// addition; Karmada only reports this in a `SyncWorkFailed` Event and retries forever).
pub const CONDITION_WORKS_SYNCED: &str = "WorksSynced";
/// Reason of [`CONDITION_WORKS_SYNCED`]`=False`: a Work exceeds the API server's request size.
pub const REASON_WORK_TOO_LARGE: &str = "WorkTooLarge";
/// How long to wait before looking again at Works being purged `Directly` (Karmada's 5 s).
pub const DIRECT_PURGE_REQUEUE: Duration = Duration::from_secs(5);
/// How long to wait before checking again whether a deleted binding's Works are gone.
pub const WORKS_GONE_REQUEUE: Duration = Duration::from_secs(2);

/// A binding-controller failure.
#[derive(Debug, thiserror::Error)]
pub enum BindingError {
    /// An API request failed.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The framework could not provide a controller, cache or client.
    #[error(transparent)]
    Framework(#[from] FrameworkError),
    /// The interpreter rejected the template.
    #[error("{kind} {key} for cluster {cluster}: {source}")]
    Interpret {
        /// Template kind.
        kind: String,
        /// Template key.
        key: String,
        /// Target cluster.
        cluster: String,
        /// Why.
        #[source]
        source: karmada_interpreter::InterpretError,
    },
    /// Some clusters failed; the message lists each.
    #[error("{0}")]
    Clusters(String),
}

fn api_err(
    action: &'static str,
    kind: &str,
    key: &str,
) -> impl FnOnce(kube::Error) -> BindingError {
    let kind = kind.to_owned();
    let key = key.to_owned();
    move |source| ApiError::new(action, kind, key, source).into()
}

/// Result of one binding sync.
enum Synced {
    /// Done.
    Done,
    /// Look again later (Works being purged).
    Later(Duration),
    /// Only failures retrying cannot fix (overrides that do not apply, Works too large to
    /// store): recorded on the binding, not retried on a timer; a change of the binding, its
    /// template or an override policy brings it back.
    Refused(String),
}

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    recorder: EventRecorder,
    interpreter: Interpreter,
    rb: SharedController<ResourceBinding>,
    crb: SharedController<ClusterResourceBinding>,
    works: SharedController<Work>,
    clusters: SharedController<Cluster>,
    ops: SharedController<OverridePolicy>,
    cops: SharedController<ClusterOverridePolicy>,
    /// `(uid, generation)` of each binding when it was last synced (`Kind/key`).
    handled: Mutex<HashMap<String, (String, i64)>>,
    /// Bindings to sync even if their generation did not change.
    forced: Mutex<HashSet<String>>,
    /// The clusters this process has written a Work to, per binding (`Kind/key`): with the Work
    /// cache, a complete view of a binding's Works even before the cache has seen the newest.
    written: Mutex<HashMap<String, BTreeSet<String>>>,
    /// The resource selectors of each override policy as last seen (`Kind/key`), so a deleted
    /// policy still finds the bindings it affected.
    policy_selectors: Mutex<HashMap<String, Vec<ResourceSelector>>>,
    cancel: CancellationToken,
}

/// The binding controller. Cheap to clone.
#[derive(Clone)]
pub struct BindingController {
    inner: Arc<Inner>,
}

/// What [`BindingController::ensure_works`] did.
#[derive(Default)]
struct WorksSynced {
    /// Clusters whose overrides could not be applied (their Works were left alone).
    override_failures: Vec<String>,
    /// Works the API server refused for their size, one message each.
    too_large: Vec<String>,
    /// Works created or updated.
    written: usize,
}

/// What every Work of one binding shares (see `BindingController::work_plan`).
struct WorkPlan<'a> {
    /// The template.
    resource: &'a TemplateReference,
    /// The template's `namespace/name`.
    key: String,
    /// Revise the replicas to each cluster's share (a workload with the interpreter hook).
    revise: bool,
    /// A divided Job's completions per cluster.
    completions: Option<BTreeMap<String, i32>>,
    cops: Vec<ClusterOverridePolicy>,
    /// The OverridePolicies of the template's namespace.
    ops: Vec<OverridePolicy>,
    /// The binding's permanent-id label and its value.
    id_label: &'static str,
    id: String,
    binding_namespace: String,
    binding_name: String,
    /// The conflict resolution the member apply uses.
    conflict: &'static str,
    /// Whether `StatefulFailoverInjection` is on: the state an eviction preserved goes on the
    /// manifest of the cluster the workload moved to.
    inject_state: bool,
    /// How many clusters get a Work (the injection is for one only).
    targets: usize,
}

impl WorkPlan<'_> {
    /// The template as cluster `t` gets it before overrides: the replicas revised to the
    /// cluster's share and a divided Job's completions set.
    fn manifest_for(
        &self,
        interpreter: &Interpreter,
        template: &Value,
        t: &TargetCluster,
    ) -> Result<Value, BindingError> {
        let err = |e| interpret_error(&self.resource.kind, &self.key, &t.name, e);
        let mut w = template.clone();
        if self.revise {
            interpreter
                .revise_replica(&mut w, i64::from(t.replicas))
                .map_err(err)?;
        }
        if let Some(c) = self.completions.as_ref().and_then(|m| m.get(&t.name)) {
            karmada_interpreter::apply_job_completions(&mut w, *c).map_err(err)?;
        }
        Ok(w)
    }

    /// The Work for cluster `t` and its manifest: the overridden template labelled with the
    /// binding's permanent id and annotated with its binding and generation; the Work itself
    /// also records the conflict resolution and the overrides applied.
    fn work_for(
        &self,
        spec: &ResourceBindingSpec,
        t: &TargetCluster,
        overridden: &karmada_policy::OverrideResult,
    ) -> (WorkTarget, Value) {
        let r = self.resource;
        let mut w = overridden.manifest.clone();
        let mut labels = BTreeMap::new();
        set_label(&mut w, self.id_label, &self.id);
        labels.insert(self.id_label.to_owned(), self.id.clone());
        if self.inject_state
            && let Some(state) = labels_to_inject(spec, &t.name, self.targets)
        {
            for (key, value) in state {
                set_label(&mut w, key, value);
            }
        }
        let mut annotations = BTreeMap::new();
        let generation = w
            .get("metadata")
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if generation > 0 {
            set_annotation(
                &mut w,
                RESOURCE_TEMPLATE_GENERATION_ANNOTATION,
                &generation.to_string(),
            );
        }
        // The binding's reference goes on both the manifest and the Work.
        let binding_annotations = if self.binding_namespace.is_empty() {
            vec![(CLUSTER_RESOURCE_BINDING_ANNOTATION, &self.binding_name)]
        } else {
            vec![
                (
                    RESOURCE_BINDING_NAMESPACE_ANNOTATION,
                    &self.binding_namespace,
                ),
                (RESOURCE_BINDING_NAME_ANNOTATION, &self.binding_name),
            ]
        };
        for (key, value) in binding_annotations {
            set_annotation(&mut w, key, value);
            annotations.insert(key.to_owned(), value.clone());
        }
        annotations.insert(
            CONFLICT_RESOLUTION_ANNOTATION.to_owned(),
            self.conflict.to_owned(),
        );
        overridden.record_annotations(&mut annotations);
        let target = WorkTarget {
            name: work_name(&r.kind, &r.name, &r.namespace),
            namespace: execution_space_name(&t.name),
            labels,
            annotations,
            finalizers: vec![EXECUTION_CONTROLLER_FINALIZER.to_owned()],
            owner_references: Vec::new(),
            suspend_dispatching: Some(suspend_dispatching(spec, &t.name)),
            preserve_resources_on_deletion: Some(
                spec.preserve_resources_on_deletion.unwrap_or(false),
            ),
        };
        (target, w)
    }

    /// Counts the outcome of writing the Work for cluster `t`: a Work too large for the API
    /// server is reported on its own (it will not fit on a retry either); other failures fail
    /// the sync.
    fn count_write(
        &self,
        tally: &mut WorkTally,
        t: &TargetCluster,
        target: &WorkTarget,
        written: Result<WorkOutcome, WorkError>,
    ) {
        let r = self.resource;
        match written {
            Ok(outcome) => {
                tracing::debug!(cluster = %t.name, kind = %r.kind, namespace = %r.namespace, name = %r.name, work = %target.name, ?outcome, "work synced");
                if outcome != WorkOutcome::Unchanged {
                    tally.written += 1;
                }
            }
            Err(e) if e.is_too_large() => {
                tracing::warn!(cluster = %t.name, kind = %r.kind, namespace = %r.namespace, name = %r.name, work = %target.name, error = %e, "work too large to store");
                tally.too_large.push(format!(
                    "cluster {}: the Work embedding {} {} is too large for the API server \
                     (etcd stores at most 1.5 MiB per object by default): {e}",
                    t.name, r.kind, self.key
                ));
            }
            Err(e) => tally.errors.push(e.to_string()),
        }
    }
}

/// The per-cluster outcomes of one [`BindingController::ensure_works`].
#[derive(Default)]
struct WorkTally {
    /// Failures that fail the sync (a missing cluster, a failed write).
    errors: Vec<String>,
    override_failures: Vec<String>,
    too_large: Vec<String>,
    written: usize,
}

impl WorkTally {
    /// The sync's result: an error listing every failure when any write failed, otherwise what
    /// was written and what was left out.
    fn finish(mut self) -> Result<WorksSynced, BindingError> {
        if !self.errors.is_empty() {
            self.errors.extend(self.override_failures);
            self.errors.extend(self.too_large);
            return Err(BindingError::Clusters(self.errors.join("; ")));
        }
        Ok(WorksSynced {
            override_failures: self.override_failures,
            too_large: self.too_large,
            written: self.written,
        })
    }
}

/// The interpreter rejected template `kind key` for `cluster` (empty: for every cluster).
fn interpret_error(
    kind: &str,
    key: &str,
    cluster: &str,
    source: karmada_interpreter::InterpretError,
) -> BindingError {
    BindingError::Interpret {
        kind: kind.to_owned(),
        key: key.to_owned(),
        cluster: cluster.to_owned(),
        source,
    }
}

fn memo_key<B: Resource<DynamicType = ()>>(key: &ObjectKey) -> String {
    format!("{}/{key}", B::kind(&()))
}

/// The clusters whose Works a binding keeps (Karmada's `ObtainBindingSpecExistingClusters`).
pub fn existing_clusters(spec: &ResourceBindingSpec) -> BTreeSet<String> {
    let mut set: BTreeSet<String> = spec.clusters.iter().map(|c| c.name.clone()).collect();
    for r in &spec.required_by {
        set.extend(r.clusters.iter().map(|c| c.name.clone()));
    }
    for t in &spec.graceful_eviction_tasks {
        if t.purge_mode != Some(PurgeMode::Directly) {
            set.insert(t.from_cluster.clone());
        }
    }
    set
}

/// Clusters evicted with purge mode `Directly`.
fn directly_purged_clusters(spec: &ResourceBindingSpec) -> BTreeSet<String> {
    spec.graceful_eviction_tasks
        .iter()
        .filter(|t| t.purge_mode == Some(PurgeMode::Directly))
        .map(|t| t.from_cluster.clone())
        .collect()
}

/// Scheduled clusters plus those of `requiredBy` (Karmada's `mergeTargetClusters`).
pub fn target_clusters(spec: &ResourceBindingSpec) -> Vec<TargetCluster> {
    let mut out = spec.clusters.clone();
    let mut seen: HashSet<String> = out.iter().map(|c| c.name.clone()).collect();
    for r in &spec.required_by {
        for c in &r.clusters {
            if seen.insert(c.name.clone()) {
                out.push(c.clone());
            }
        }
    }
    out
}

/// Karmada's `shouldSuspendDispatching`.
pub fn suspend_dispatching(spec: &ResourceBindingSpec, cluster: &str) -> bool {
    let Some(s) = spec.suspension.as_ref() else {
        return false;
    };
    s.dispatching.dispatching.unwrap_or(false)
        || s.dispatching
            .dispatching_on_clusters
            .as_ref()
            .is_some_and(|c| c.cluster_names.iter().any(|n| n == cluster))
}

/// The Work's conflict-resolution value (Karmada's `mergeConflictResolution`): the template's
/// annotation when it is `overwrite` or `abort`, else the binding's `conflictResolution`.
pub fn conflict_resolution(template: &Value, spec: &ResourceBindingSpec) -> &'static str {
    match karmada_controllers_common::work::meta_map_value(
        template,
        "annotations",
        CONFLICT_RESOLUTION_ANNOTATION,
    ) {
        Some(CONFLICT_RESOLUTION_OVERWRITE) => return CONFLICT_RESOLUTION_OVERWRITE,
        Some(CONFLICT_RESOLUTION_ABORT) => return CONFLICT_RESOLUTION_ABORT,
        Some(other) => {
            tracing::warn!(
                value = other,
                "ignoring invalid conflict-resolution annotation on template"
            );
        }
        None => {}
    }
    if spec.conflict_resolution == ConflictResolution::Overwrite {
        CONFLICT_RESOLUTION_OVERWRITE
    } else {
        CONFLICT_RESOLUTION_ABORT
    }
}

/// Whether a selector may select the template `spec.resource` names (label selectors are assumed
/// to match: the template's labels are not at hand, and an extra sync writes nothing).
fn selector_may_match(sel: &ResourceSelector, spec: &ResourceBindingSpec) -> bool {
    let r = &spec.resource;
    sel.api_version == r.api_version
        && sel.kind == r.kind
        && (sel.namespace.is_empty() || sel.namespace == r.namespace)
        && (sel.name.is_empty() || sel.name == r.name)
}

fn template_reference(spec: &ResourceBindingSpec) -> ObjectReference {
    let r = &spec.resource;
    ObjectReference {
        api_version: Some(r.api_version.clone()),
        kind: Some(r.kind.clone()),
        namespace: (!r.namespace.is_empty()).then(|| r.namespace.clone()),
        name: Some(r.name.clone()),
        uid: (!r.uid.is_empty()).then(|| r.uid.clone()),
        resource_version: None,
        field_path: None,
    }
}

fn binding_reference<B: BindingObject>(b: &B) -> ObjectReference {
    karmada_controllers_common::events::reference_of(b)
}

impl BindingController {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, BindingError> {
        let interpreter = karmada_controllers_common::interpreter::interpreter(
            &ctx.control_plane,
            &ctx.events,
            karmada_interpreter::InterpreterOptions::default(),
        );
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("binding client"))?;
        let rb = shared_controller::<ResourceBinding>(cp)?;
        let crb = shared_controller::<ClusterResourceBinding>(cp)?;
        let works = shared_controller::<Work>(cp)?;
        works.store().index_by_label(ResourceBinding::ID_LABEL);
        works
            .store()
            .index_by_label(ClusterResourceBinding::ID_LABEL);
        let clusters = shared_controller::<Cluster>(cp)?;
        let ops = shared_controller::<OverridePolicy>(cp)?;
        let cops = shared_controller::<ClusterOverridePolicy>(cp)?;
        let recorder = ctx.events.recorder(CONTROLLER_NAME);
        let cancel = ctx.cancel.child_token();
        Ok(BindingController {
            inner: Arc::new(Inner {
                ctx,
                client,
                recorder,
                interpreter,
                rb,
                crb,
                works,
                clusters,
                ops,
                cops,
                handled: Mutex::new(HashMap::new()),
                forced: Mutex::new(HashSet::new()),
                written: Mutex::new(HashMap::new()),
                policy_selectors: Mutex::new(HashMap::new()),
                cancel,
            }),
        })
    }

    /// Registers the handlers and runs until the context is cancelled.
    pub async fn run(self) -> Result<(), karmada_controllers_common::BoxError> {
        let inner = &self.inner;
        let timeout = inner.ctx.settings.cluster_cache_sync_timeout;
        // Caches read while syncing: wait for them first so no Work is built from a partial view.
        let SyncWait::Synced = inner.works.wait_synced(&inner.cancel, timeout).await? else {
            return Ok(());
        };
        let SyncWait::Synced = inner.clusters.wait_synced(&inner.cancel, timeout).await? else {
            return Ok(());
        };
        let SyncWait::Synced = inner.ops.wait_synced(&inner.cancel, timeout).await? else {
            return Ok(());
        };
        let SyncWait::Synced = inner.cops.wait_synced(&inner.cancel, timeout).await? else {
            return Ok(());
        };
        register(
            &inner.rb,
            NAME,
            &inner.cancel,
            &self,
            |this: Self, k, o: Option<Arc<ResourceBinding>>| async move {
                this.handle_binding(k, o).await
            },
        );
        register(
            &inner.crb,
            NAME,
            &inner.cancel,
            &self,
            |this: Self, k, o: Option<Arc<ClusterResourceBinding>>| async move {
                this.handle_binding(k, o).await
            },
        );
        register(
            &inner.ops,
            NAME,
            &inner.cancel,
            &self,
            |this: Self, k, o: Option<Arc<OverridePolicy>>| async move {
                let selectors = o.map(|p| p.spec.resource_selectors.clone());
                this.policy_changed("OverridePolicy", &k, selectors);
                HandlerResult::Success
            },
        );
        register(
            &inner.cops,
            NAME,
            &inner.cancel,
            &self,
            |this: Self, k, o: Option<Arc<ClusterOverridePolicy>>| async move {
                let selectors = o.map(|p| p.spec.resource_selectors.clone());
                this.policy_changed("ClusterOverridePolicy", &k, selectors);
                HandlerResult::Success
            },
        );
        let SyncWait::Synced = inner.rb.wait_synced(&inner.cancel, timeout).await? else {
            return Ok(());
        };
        let SyncWait::Synced = inner.crb.wait_synced(&inner.cancel, timeout).await? else {
            return Ok(());
        };
        serve_until_cancelled(&inner.ctx.synced, &inner.cancel, "binding controller").await;
        Ok(())
    }

    /// Requeues the bindings an override policy (old or new selectors) may affect.
    fn policy_changed(
        &self,
        kind: &str,
        key: &ObjectKey,
        selectors: Option<Vec<ResourceSelector>>,
    ) {
        let inner = &self.inner;
        let pkey = format!("{kind}/{key}");
        let previous = {
            let mut map = inner.policy_selectors.lock();
            match &selectors {
                Some(s) => map.insert(pkey, s.clone()),
                None => map.remove(&pkey),
            }
        };
        let mut all: Vec<Vec<ResourceSelector>> = Vec::new();
        all.extend(selectors);
        all.extend(previous);
        if all.is_empty() {
            return;
        }
        let affects = |spec: &ResourceBindingSpec| {
            all.iter()
                .any(|sels| sels.is_empty() || sels.iter().any(|s| selector_may_match(s, spec)))
        };
        let namespace = key.namespace();
        let mut n = 0usize;
        for b in inner.rb.store().list() {
            if namespace.is_some_and(|ns| b.metadata.namespace.as_deref() != Some(ns)) {
                continue;
            }
            if affects(&b.spec)
                && let Some(k) = ObjectKey::from_object(b.as_ref())
            {
                inner.forced.lock().insert(memo_key::<ResourceBinding>(&k));
                inner.rb.enqueue_key(k);
                n += 1;
            }
        }
        if namespace.is_none() {
            for b in inner.crb.store().list() {
                if affects(&b.spec)
                    && let Some(k) = ObjectKey::from_object(b.as_ref())
                {
                    inner
                        .forced
                        .lock()
                        .insert(memo_key::<ClusterResourceBinding>(&k));
                    inner.crb.enqueue_key(k);
                    n += 1;
                }
            }
        }
        tracing::debug!(policy_kind = kind, policy = %key, bindings = n, "override policy changed; requeued bindings");
    }

    async fn handle_binding<B: BindingObject>(
        &self,
        key: ObjectKey,
        obj: Option<Arc<B>>,
    ) -> HandlerResult<B> {
        let inner = &self.inner;
        let mkey = memo_key::<B>(&key);
        let Some(b) = obj else {
            inner.handled.lock().remove(&mkey);
            inner.forced.lock().remove(&mkey);
            inner.written.lock().remove(&mkey);
            return HandlerResult::Success;
        };
        let kind = B::kind(&()).into_owned();
        if b.meta().deletion_timestamp.is_some() {
            inner.handled.lock().remove(&mkey);
            return match self.delete_binding(b.as_ref()).await {
                Ok(None) => HandlerResult::Success,
                Ok(Some(d)) => HandlerResult::RequeueAfter(d),
                Err(e) => {
                    tracing::warn!(kind = %kind, binding = %key, error = %e, "failed to clean up works of deleted binding");
                    HandlerResult::error(e)
                }
            };
        }
        let stamp = (
            b.meta().uid.clone().unwrap_or_default(),
            b.meta().generation.unwrap_or_default(),
        );
        let forced = inner.forced.lock().remove(&mkey);
        if !forced && inner.handled.lock().get(&mkey) == Some(&stamp) {
            return HandlerResult::Success;
        }
        match self.sync(b.as_ref(), &mkey).await {
            Ok(Synced::Done) => {
                inner.handled.lock().insert(mkey, stamp);
                HandlerResult::Success
            }
            Ok(Synced::Later(d)) => {
                inner.handled.lock().remove(&mkey);
                HandlerResult::RequeueAfter(d)
            }
            Ok(Synced::Refused(msg)) => {
                inner.handled.lock().insert(mkey, stamp);
                HandlerResult::ignore(BindingError::Clusters(msg))
            }
            Err(e) => {
                inner.handled.lock().remove(&mkey);
                tracing::warn!(kind = %kind, binding = %key, error = %e, "failed to sync works");
                HandlerResult::error(e)
            }
        }
    }

    /// The Works of a binding for a sync that keeps the Works of `keep` and waits for those of
    /// `purged` to go: from the Work cache when neither it nor the clusters this process wrote to
    /// show a Work outside `keep` or in `purged` (nothing to act on), else from the API server, so
    /// a deletion or a purge wait never acts on a stale view.
    async fn works_to_reconcile<B: BindingObject>(
        &self,
        b: &B,
        mkey: &str,
        keep: &BTreeSet<String>,
        purged: &BTreeSet<String>,
    ) -> Result<Vec<Work>, BindingError> {
        let inner = &self.inner;
        let id = b.labels().get(B::ID_LABEL).cloned().unwrap_or_default();
        if id.is_empty() {
            return self.works_of(b).await;
        }
        let cached = inner.works.store().list_by_label(B::ID_LABEL, &id);
        let written = inner.written.lock().get(mkey).cloned().unwrap_or_default();
        let acts = |cluster: &str| !keep.contains(cluster) || purged.contains(cluster);
        let cached_clusters = cached
            .iter()
            .filter_map(|w| cluster_name(w.metadata.namespace.as_deref().unwrap_or_default()).ok());
        if cached_clusters
            .chain(written.iter().map(String::as_str))
            .any(acts)
        {
            return self.works_of(b).await;
        }
        Ok(cached.iter().map(|w| (**w).clone()).collect())
    }

    /// The Works of a binding, from the API server (by permanent-id label) or, for a binding
    /// without one, from the Work cache by back-pointer annotations.
    async fn works_of<B: BindingObject>(&self, b: &B) -> Result<Vec<Work>, BindingError> {
        let inner = &self.inner;
        let id = b.labels().get(B::ID_LABEL).cloned().unwrap_or_default();
        if !id.is_empty() {
            let api: Api<Work> = Api::all(inner.client.clone());
            let list = api
                .list(&ListParams::default().labels(&format!("{}={id}", B::ID_LABEL)))
                .await
                .map_err(api_err("list", "Work", &format!("{}={id}", B::ID_LABEL)))?;
            return Ok(list.items);
        }
        let namespace = b.namespace().unwrap_or_default();
        let name = b.name_any();
        Ok(inner
            .works
            .store()
            .list()
            .into_iter()
            .filter(|w| {
                let a = w.annotations();
                if namespace.is_empty() {
                    a.get(CLUSTER_RESOURCE_BINDING_ANNOTATION) == Some(&name)
                } else {
                    a.get(RESOURCE_BINDING_NAMESPACE_ANNOTATION) == Some(&namespace)
                        && a.get(RESOURCE_BINDING_NAME_ANNOTATION) == Some(&name)
                }
            })
            .map(|w| (*w).clone())
            .collect())
    }

    async fn delete_work(&self, w: &Work) -> Result<(), BindingError> {
        if w.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let ns = w.namespace().unwrap_or_default();
        let name = w.name_any();
        let api: Api<Work> = Api::namespaced(self.inner.client.clone(), &ns);
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(api_err("delete", "Work", &format!("{ns}/{name}"))(e)),
        }
    }

    /// Deletes a deleted binding's Works; releases its finalizer once none is left. Returns the
    /// delay after which to look again while Works remain.
    async fn delete_binding<B: BindingObject>(
        &self,
        b: &B,
    ) -> Result<Option<Duration>, BindingError> {
        let finalizer = finalizer_of::<B>();
        if !b.finalizers().iter().any(|f| f == finalizer) {
            return Ok(None);
        }
        let works = self.works_of(b).await?;
        for w in &works {
            self.delete_work(w).await?;
        }
        if !works.is_empty() {
            tracing::debug!(kind = %B::kind(&()), namespace = b.namespace().unwrap_or_default(), name = %b.name_any(), works = works.len(), "waiting for works of deleted binding to go");
            return Ok(Some(WORKS_GONE_REQUEUE));
        }
        let remaining: Vec<String> = b
            .finalizers()
            .iter()
            .filter(|f| *f != finalizer)
            .cloned()
            .collect();
        let patch = json!({"metadata": {
            "finalizers": remaining,
            "resourceVersion": b.resource_version(),
        }});
        let ns = b.namespace().unwrap_or_default();
        let key = karmada_apis::names::namespaced_key(&ns, &b.name_any());
        match B::api(self.inner.client.clone(), &ns)
            .patch(
                &b.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => Ok(None),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(api_err("remove finalizer from", &B::kind(&()), &key)(e)),
        }
    }

    /// Reads the template (`None` when it is gone): from the control plane's cache of its kind
    /// when that cache is watching and synced and holds it (the detector's, for every kind a
    /// policy selects), as Karmada reads its informers; else from the API server.
    async fn fetch_template(
        &self,
        spec: &ResourceBindingSpec,
    ) -> Result<Option<Value>, BindingError> {
        let r = &spec.resource;
        let gvk = apimachinery::gvk_of(&r.api_version, &r.kind);
        let key = karmada_apis::names::namespaced_key(&r.namespace, &r.name);
        let cp = &self.inner.ctx.control_plane;
        let (ar, caps): (ApiResource, _) = cp
            .clients()
            .resolve(&gvk)
            .await
            .map_err(framework(format!("map {} {}", r.api_version, r.kind)))?;
        let api: Api<DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
            Api::namespaced_with(self.inner.client.clone(), &r.namespace, &ar)
        } else {
            Api::all_with(self.inner.client.clone(), &ar)
        };
        let encode = |obj: &DynamicObject| {
            serde_json::to_value(obj).map_err(|e| {
                BindingError::Clusters(format!("{} {key}: cannot encode template: {e}", r.kind))
            })
        };
        if let Some(obj) = template::cached(cp, &ar, &r.namespace, &r.name) {
            return encode(&obj).map(Some);
        }
        match api.get_opt(&r.name).await {
            Ok(Some(obj)) => encode(&obj).map(Some),
            Ok(None) => Ok(None),
            Err(e) => Err(api_err("get", &r.kind, &key)(e)),
        }
    }

    /// Syncs the Works of binding `b` (memo key `mkey`).
    async fn sync<B: BindingObject>(&self, b: &B, mkey: &str) -> Result<Synced, BindingError> {
        let spec = b.binding_spec();
        let keep = existing_clusters(spec);
        let purged = directly_purged_clusters(spec);
        let works = self.works_to_reconcile(b, mkey, &keep, &purged).await?;
        for w in &works {
            let cluster = cluster_name(w.metadata.namespace.as_deref().unwrap_or_default())
                .unwrap_or_default();
            if !keep.contains(cluster) {
                tracing::info!(kind = %B::kind(&()), namespace = b.namespace().unwrap_or_default(), name = %b.name_any(), cluster, work = %w.name_any(), "deleting work of a cluster no longer targeted");
                if let Err(e) = self.delete_work(w).await {
                    self.event_binding(
                        b,
                        EventType::Warning,
                        event_reasons::CLEANUP_WORK_FAILED,
                        e.to_string(),
                    )
                    .await;
                    return Err(e);
                }
            }
        }
        if works.iter().any(|w| {
            cluster_name(w.metadata.namespace.as_deref().unwrap_or_default())
                .is_ok_and(|c| purged.contains(c))
        }) {
            return Ok(Synced::Later(DIRECT_PURGE_REQUEUE));
        }
        let started = Instant::now();
        // A binding not scheduled yet (or placed nowhere) has no Work to write: its template is
        // not read.
        let result = if target_clusters(spec).is_empty() {
            Ok(WorksSynced::default())
        } else {
            let Some(template) = self.fetch_template(spec).await? else {
                // The template is gone; the binding follows it (garbage collector or detector).
                return Ok(Synced::Done);
            };
            self.ensure_works(b, mkey, &template).await
        };
        let ok =
            matches!(result, Ok(ref s) if s.override_failures.is_empty() && s.too_large.is_empty());
        metrics::observe_sync_work(ok, started);
        let ns = b.namespace().unwrap_or_default();
        let synced = match result {
            Ok(synced) => synced,
            Err(e) => {
                self.event_both(
                    b,
                    EventType::Warning,
                    event_reasons::SYNC_WORK_FAILED,
                    e.to_string(),
                )
                .await;
                return Err(e);
            }
        };
        if ok {
            // Announced when a Work was written: a sync that found every Work up to date (a
            // restart, a status-only change) leaves no Event behind, so it costs no write.
            if synced.written > 0 {
                let msg = format!(
                    "Sync work of {}({}) successful.",
                    B::kind(&()),
                    karmada_apis::names::namespaced_key(&ns, &b.name_any())
                );
                self.event_both(b, EventType::Normal, event_reasons::SYNC_WORK_SUCCEED, msg)
                    .await;
            }
        }
        let mut refused = Vec::new();
        if synced.override_failures.is_empty() {
            self.set_failure_condition(b, &OVERRIDE_CONDITION, None)
                .await;
        } else {
            let msg = synced.override_failures.join("; ");
            self.event_both(
                b,
                EventType::Warning,
                event_reasons::SYNC_WORK_FAILED,
                msg.clone(),
            )
            .await;
            self.event_binding(
                b,
                EventType::Warning,
                event_reasons::APPLY_OVERRIDE_POLICY_FAILED,
                msg.clone(),
            )
            .await;
            self.set_failure_condition(b, &OVERRIDE_CONDITION, Some(&msg))
                .await;
            refused.push(msg);
        }
        if synced.too_large.is_empty() {
            self.set_failure_condition(b, &SIZE_CONDITION, None).await;
        } else {
            let msg = synced.too_large.join("; ");
            self.event_both(
                b,
                EventType::Warning,
                event_reasons::SYNC_WORK_FAILED,
                msg.clone(),
            )
            .await;
            self.set_failure_condition(b, &SIZE_CONDITION, Some(&msg))
                .await;
            refused.push(msg);
        }
        if refused.is_empty() {
            Ok(Synced::Done)
        } else {
            Ok(Synced::Refused(refused.join("; ")))
        }
    }

    /// Writes one Work per target cluster. Returns the override failures (their clusters' Works
    /// untouched); any other failure is an error (after trying every cluster).
    async fn ensure_works<B: BindingObject>(
        &self,
        b: &B,
        mkey: &str,
        template: &Value,
    ) -> Result<WorksSynced, BindingError> {
        let spec = b.binding_spec();
        let targets = target_clusters(spec);
        let plan = self.work_plan(b, template, &targets)?;
        let cluster_store = self.inner.clusters.store();
        let works = self.inner.works.store();
        let mut tally = WorkTally::default();
        for t in &targets {
            let manifest = plan.manifest_for(&self.inner.interpreter, template, t)?;
            let Some(cluster) = cluster_store.get_named(None, &t.name) else {
                tally.errors.push(format!("cluster {} not found", t.name));
                continue;
            };
            let overridden = match karmada_policy::apply_overrides(
                &manifest, &cluster, &plan.cops, &plan.ops,
            ) {
                Ok(o) => o,
                Err(e) => {
                    let r = plan.resource;
                    tracing::warn!(cluster = %t.name, kind = %r.kind, namespace = %r.namespace, name = %r.name, error = %e, "override failed; work left unchanged");
                    tally.override_failures.push(e.to_string());
                    continue;
                }
            };
            let (target, manifest) = plan.work_for(spec, t, &overridden);
            self.inner
                .written
                .lock()
                .entry(mkey.to_owned())
                .or_default()
                .insert(t.name.clone());
            let written = create_or_update_work(
                &self.inner.client,
                Some(&works),
                &self.inner.interpreter,
                &target,
                manifest,
            )
            .await;
            plan.count_write(&mut tally, t, &target, written);
        }
        tally.finish()
    }

    /// What every Work of the binding shares, read once before the per-cluster loop: whether the
    /// replicas are revised per cluster, a Job's completions per cluster, the override policies
    /// that may apply, and the labels and annotations that tie a Work to its binding.
    fn work_plan<'a, B: BindingObject>(
        &self,
        b: &'a B,
        template: &Value,
        targets: &[TargetCluster],
    ) -> Result<WorkPlan<'a>, BindingError> {
        let inner = &self.inner;
        let spec = b.binding_spec();
        let r = &spec.resource;
        let key = karmada_apis::names::namespaced_key(&r.namespace, &r.name);
        let (group, _) = apimachinery::split_api_version(&r.api_version);
        let revise = spec.is_workload()
            && inner.interpreter.hook_enabled_for(
                &r.api_version,
                &r.kind,
                Operation::ReviseReplica,
            );
        let completions = if group == "batch"
            && r.kind == "Job"
            && karmada_interpreter::should_divide_job_completions(
                spec.replicas,
                spec.placement.as_ref(),
            ) {
            karmada_interpreter::job_completions_per_cluster(template, targets)
                .map_err(|e| interpret_error(&r.kind, &key, "", e))?
        } else {
            None
        };
        let cops: Vec<ClusterOverridePolicy> = inner
            .cops
            .store()
            .list()
            .iter()
            .map(|p| (**p).clone())
            .collect();
        let ops: Vec<OverridePolicy> = if r.namespace.is_empty() {
            Vec::new()
        } else {
            inner
                .ops
                .store()
                .list()
                .iter()
                .filter(|p| p.metadata.namespace.as_deref() == Some(r.namespace.as_str()))
                .map(|p| (**p).clone())
                .collect()
        };
        Ok(WorkPlan {
            resource: r,
            key,
            revise,
            completions,
            cops,
            ops,
            id_label: B::ID_LABEL,
            id: b.labels().get(B::ID_LABEL).cloned().unwrap_or_default(),
            binding_namespace: b.namespace().unwrap_or_default(),
            binding_name: b.name_any(),
            conflict: conflict_resolution(template, spec),
            inject_state: inner
                .ctx
                .settings
                .feature_gates
                .enabled(FEATURE_STATEFUL_FAILOVER_INJECTION),
            targets: targets.len(),
        })
    }

    async fn event_binding<B: BindingObject>(
        &self,
        b: &B,
        t: EventType,
        reason: &str,
        msg: String,
    ) {
        self.inner
            .recorder
            .record(&binding_reference(b), t, reason, msg)
            .await;
    }

    /// An Event on the binding and one on its template (Karmada records both).
    async fn event_both<B: BindingObject>(&self, b: &B, t: EventType, reason: &str, msg: String) {
        self.inner
            .recorder
            .record(&binding_reference(b), t, reason, msg.clone())
            .await;
        self.inner
            .recorder
            .record(&template_reference(b.binding_spec()), t, reason, msg)
            .await;
    }

    /// Sets the condition `c` to False with `failure`, or to True when it exists and the failure
    /// is gone (a binding that never failed carries no such condition, so success costs no
    /// write). Failures to write are logged.
    async fn set_failure_condition<B: BindingObject>(
        &self,
        b: &B,
        c: &FailureCondition,
        failure: Option<&str>,
    ) {
        let existing = b
            .binding_status()
            .and_then(|s| find_status_condition(&s.conditions, c.type_));
        let (status, reason, message) = match failure {
            Some(m) => ("False", c.failed, m.to_owned()),
            None => {
                if existing.is_none_or(|x| x.status == "True") {
                    return;
                }
                ("True", c.recovered, c.recovered_message.to_owned())
            }
        };
        if existing
            .is_some_and(|x| x.status == status && x.reason == reason && x.message == message)
        {
            return;
        }
        let condition_type = c.type_;
        let ns = b.namespace().unwrap_or_default();
        let name = b.name_any();
        let api = B::api(self.inner.client.clone(), &ns);
        let mut retry = ConflictRetry::new(DEFAULT_RETRY);
        while retry.next().await {
            let current = match api.get(&name).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(namespace = %ns, name = %name, error = %e, "cannot read binding to set condition");
                    return;
                }
            };
            let Ok(mut v) = serde_json::to_value(&current) else {
                return;
            };
            let mut conditions: Vec<Condition> = v
                .pointer("/status/conditions")
                .and_then(|c| serde_json::from_value(c.clone()).ok())
                .unwrap_or_default();
            let now = Time(Timestamp::now());
            let new = Condition {
                type_: condition_type.to_owned(),
                status: status.to_owned(),
                reason: reason.to_owned(),
                message: message.clone(),
                last_transition_time: now,
                observed_generation: current.meta().generation,
            };
            karmada_controllers_common::set_condition(&mut conditions, new);
            let Ok(cv) = serde_json::to_value(&conditions) else {
                return;
            };
            if let Some(obj) = v.as_object_mut() {
                let status = obj.entry("status").or_insert_with(|| json!({}));
                if let Some(s) = status.as_object_mut() {
                    s.insert("conditions".to_owned(), cv);
                }
            }
            let Ok(updated) = serde_json::from_value::<B>(v) else {
                return;
            };
            match api
                .replace_status(&name, &PostParams::default(), &updated)
                .await
            {
                Ok(_) => return,
                Err(e) if is_conflict(&e) => continue,
                Err(e) => {
                    tracing::warn!(namespace = %ns, name = %name, error = %e, "cannot set binding condition");
                    return;
                }
            }
        }
    }
}

/// A binding condition that is only written once something failed: `False` with reason `failed`,
/// then `True` with `recovered` once the failure is gone.
struct FailureCondition {
    type_: &'static str,
    failed: &'static str,
    recovered: &'static str,
    recovered_message: &'static str,
}

const OVERRIDE_CONDITION: FailureCondition = FailureCondition {
    type_: CONDITION_OVERRIDE_APPLIED,
    failed: event_reasons::APPLY_OVERRIDE_POLICY_FAILED,
    recovered: event_reasons::APPLY_OVERRIDE_POLICY_SUCCEED,
    recovered_message: "Override policies have been applied to every target cluster.",
};

const SIZE_CONDITION: FailureCondition = FailureCondition {
    type_: CONDITION_WORKS_SYNCED,
    failed: REASON_WORK_TOO_LARGE,
    recovered: event_reasons::SYNC_WORK_SUCCEED,
    recovered_message: "Every Work has been stored.",
};

/// The finalizer the detector puts on bindings of kind `B`.
fn finalizer_of<B: BindingObject>() -> &'static str {
    if B::kind(&()) == "ClusterResourceBinding" {
        karmada_apis::well_known::CLUSTER_RESOURCE_BINDING_CONTROLLER_FINALIZER
    } else {
        karmada_apis::well_known::BINDING_CONTROLLER_FINALIZER
    }
}

/// The start function registered as `binding`.
pub fn start_fn() -> StartFn {
    start_fn_of(BindingController::new, BindingController::run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use karmada_apis::work::v1alpha2::{BindingSnapshot, GracefulEvictionTask, ObjectReference};

    fn tc(name: &str, replicas: i32) -> TargetCluster {
        TargetCluster {
            name: name.into(),
            replicas,
            components: vec![],
        }
    }

    #[test]
    fn targets_and_existing_clusters() {
        let spec = ResourceBindingSpec {
            clusters: vec![tc("a", 1)],
            required_by: vec![BindingSnapshot {
                namespace: "ns".into(),
                name: "x".into(),
                clusters: vec![tc("a", 2), tc("b", 0)],
            }],
            graceful_eviction_tasks: vec![
                GracefulEvictionTask {
                    from_cluster: "c".into(),
                    purge_mode: Some(PurgeMode::Gracefully),
                    ..Default::default()
                },
                GracefulEvictionTask {
                    from_cluster: "d".into(),
                    purge_mode: Some(PurgeMode::Directly),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let names: Vec<_> = target_clusters(&spec).into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(
            existing_clusters(&spec).into_iter().collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert_eq!(directly_purged_clusters(&spec).len(), 1);
    }

    #[test]
    fn conflict_resolution_prefers_template() {
        let mut spec = ResourceBindingSpec::default();
        let plain = json!({"metadata": {}});
        assert_eq!(conflict_resolution(&plain, &spec), "abort");
        spec.conflict_resolution = ConflictResolution::Overwrite;
        assert_eq!(conflict_resolution(&plain, &spec), "overwrite");
        let t =
            json!({"metadata": {"annotations": {"work.karmada.io/conflict-resolution": "abort"}}});
        assert_eq!(conflict_resolution(&t, &spec), "abort");
        let bad =
            json!({"metadata": {"annotations": {"work.karmada.io/conflict-resolution": "x"}}});
        assert_eq!(conflict_resolution(&bad, &spec), "overwrite");
    }

    #[test]
    fn selector_matching_by_identity() {
        let spec = ResourceBindingSpec {
            resource: ObjectReference {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                namespace: "ns".into(),
                name: "nginx".into(),
                ..Default::default()
            },
            ..Default::default()
        };
        let sel = |name: &str| ResourceSelector {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: name.into(),
            ..Default::default()
        };
        assert!(selector_may_match(&sel("nginx"), &spec));
        assert!(selector_may_match(&sel(""), &spec));
        assert!(!selector_may_match(&sel("other"), &spec));
    }
}
