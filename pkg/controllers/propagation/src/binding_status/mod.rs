//! The binding-status controller (`--controllers` name `bindingStatus`, Karmada's
//! `pkg/controllers/status/{rb,crb}_status_controller.go`, `common.go` and
//! `pkg/util/helper/workstatus.go`): folds the Works' status into the ResourceBinding /
//! ClusterResourceBinding (`status.aggregatedStatus` and the `FullyApplied` condition), then into
//! the resource template's `.status`.
//!
//! Triggers, as in Karmada: a scheduled binding when first seen (so every binding is handled once
//! after a restart) and whenever its template's resourceVersion changes (`spec.resource`) — here
//! also when its generation changes, so a re-scheduled binding's `FullyApplied` follows at once; a
//! Work whose status changed, or that was deleted, re-queues the binding named by its annotations.
//!
//! Writes go through the status subresource and only when something changed: the binding's status
//! is compared with the cached one (a conflict re-reads it from the API server), the template is
//! read from the API server (not the cache, Karmada issue #5285) and written only when the
//! interpreter's aggregation yields a new `.status`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use karmada_apis::policy::v1alpha1::PurgeMode;
use karmada_apis::well_known::{
    BINDING_FULLY_APPLIED, CLUSTER_RESOURCE_BINDING_ANNOTATION,
    CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL, FULLY_APPLIED_FAILED_MESSAGE,
    FULLY_APPLIED_FAILED_REASON, FULLY_APPLIED_SUCCESS_MESSAGE, FULLY_APPLIED_SUCCESS_REASON,
    RESOURCE_BINDING_NAME_ANNOTATION, RESOURCE_BINDING_NAMESPACE_ANNOTATION,
    RESOURCE_BINDING_PERMANENT_ID_LABEL, WORK_APPLIED, event_reasons,
};
use karmada_apis::work::v1alpha2::{
    AggregatedStatusItem, ObjectReference as TemplateReference, ResourceHealth,
};
use karmada_apis::{
    ClusterResourceBinding, ResourceBinding, ResourceBindingSpec, ResourceBindingStatus, Work,
    names,
};
use karmada_interpreter::{Interpreter, Operation};
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use lariat::cache::store::label_index_name;
use lariat::{HandlerResult, ObjectKey, SharedController, Store, SyncWait};
use parking_lot::Mutex;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use apimachinery::{
    ConflictRetry, DEFAULT_RETRY, find_status_condition, is_conflict, is_not_found,
    split_api_version,
};
use karmada_controllers_common::binding::BindingObject;
use karmada_controllers_common::error::{ApiError, FrameworkError, framework};
use karmada_controllers_common::events::{EventRecorder, EventType};
use karmada_controllers_common::handlers::{
    register, serve_until_cancelled, shared_controller, start_fn_of,
};
use karmada_controllers_common::manifest::manifest_index;
use karmada_controllers_common::patch::merge_diff;
use karmada_controllers_common::set_condition;
use karmada_controllers_common::template;
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};

/// How long a Work's status change waits before its binding is aggregated (see `handle_work`).
const WORK_COALESCE: std::time::Duration = std::time::Duration::from_millis(100);

/// The controller's `--controllers` name.
pub const NAME: &str = "bindingStatus";

/// Handler name on ResourceBindings and Works, User-Agent suffix and Event source (Karmada's
/// `RBStatusControllerName`).
pub const RB_HANDLER: &str = "resource-binding-status-controller";

/// Handler name on ClusterResourceBindings (Karmada's `CRBStatusControllerName`).
pub const CRB_HANDLER: &str = "cluster-resource-binding-status-controller";

/// A binding-status failure; every variant names the object and the cause.
#[derive(Debug, thiserror::Error)]
pub enum BindingStatusError {
    /// An API request failed.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The framework could not provide a controller, cache or client.
    #[error(transparent)]
    Framework(#[from] FrameworkError),
    /// A Work of the binding has no manifest for the binding's template.
    #[error("Work {work} of {binding}: no manifest for {template}")]
    NoManifest {
        /// `namespace/name` of the Work.
        work: String,
        /// Kind and key of the binding.
        binding: String,
        /// Kind and key of the template.
        template: String,
    },
    /// A Work of the binding lives outside an execution namespace.
    #[error("Work {work} of {binding}: {source}")]
    NotExecutionSpace {
        /// `namespace/name` of the Work.
        work: String,
        /// Kind and key of the binding.
        binding: String,
        /// Why the namespace names no cluster.
        #[source]
        source: names::NameError,
    },
    /// The interpreter could not aggregate the template's status.
    #[error("aggregate status of {template}: {source}")]
    Aggregate {
        /// Kind and key of the template.
        template: String,
        /// The interpreter's error.
        #[source]
        source: karmada_interpreter::InterpretError,
    },
    /// A status write kept conflicting.
    #[error("update status of {kind} {key}: still conflicting after {attempts} attempts")]
    Conflicts {
        /// Kind of the object.
        kind: String,
        /// `namespace/name` or `name`.
        key: String,
        /// Attempts made.
        attempts: u32,
    },
}

/// A binding's status controllers can handle: the binding kinds plus their status and names.
trait StatusBinding: BindingObject {
    /// Status, mutably (created empty if missing).
    fn status_mut(&mut self) -> &mut ResourceBindingStatus;
    /// Queue-key prefix (`rb` / `crb`).
    const PREFIX: &'static str;
}

impl StatusBinding for ResourceBinding {
    const PREFIX: &'static str = "rb";
    fn status_mut(&mut self) -> &mut ResourceBindingStatus {
        self.status.get_or_insert_with(Default::default)
    }
}

impl StatusBinding for ClusterResourceBinding {
    const PREFIX: &'static str = "crb";
    fn status_mut(&mut self) -> &mut ResourceBindingStatus {
        self.status.get_or_insert_with(Default::default)
    }
}

/// The clusters a binding's Works should be in (Karmada's `ObtainBindingSpecExistingClusters`):
/// scheduled clusters, clusters of bindings that require it, and clusters being evicted from
/// gracefully (not those purged directly).
pub fn binding_clusters(spec: &ResourceBindingSpec) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = spec.clusters.iter().map(|c| c.name.clone()).collect();
    for required in &spec.required_by {
        out.extend(required.clusters.iter().map(|c| c.name.clone()));
    }
    for task in &spec.graceful_eviction_tasks {
        if task.purge_mode != Some(PurgeMode::Directly) {
            out.insert(task.from_cluster.clone());
        }
    }
    out
}

/// Whether every target cluster has an applied item and nothing else (Karmada's
/// `worksFullyApplied`).
pub fn fully_applied(items: &[AggregatedStatusItem], targets: &BTreeSet<String>) -> bool {
    !targets.is_empty()
        && targets.len() == items.len()
        && items
            .iter()
            .all(|i| i.applied && targets.contains(&i.cluster_name))
}

/// The `FullyApplied` condition for `items` (transition time filled in by the caller).
pub fn fully_applied_condition(
    spec: &ResourceBindingSpec,
    items: &[AggregatedStatusItem],
    now: Time,
) -> Condition {
    let (status, reason, message) = if fully_applied(items, &binding_clusters(spec)) {
        (
            "True",
            FULLY_APPLIED_SUCCESS_REASON,
            FULLY_APPLIED_SUCCESS_MESSAGE,
        )
    } else {
        (
            "False",
            FULLY_APPLIED_FAILED_REASON,
            FULLY_APPLIED_FAILED_MESSAGE,
        )
    };
    Condition {
        type_: BINDING_FULLY_APPLIED.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: None,
        last_transition_time: now,
    }
}

/// One Work's contribution to `aggregatedStatus` (Karmada's `assembleWorkStatus`), `None` for a
/// Work being deleted.
pub fn aggregated_item(
    work: &Work,
    template: &TemplateReference,
    binding: &str,
) -> Result<Option<AggregatedStatusItem>, BindingStatusError> {
    if work.metadata.deletion_timestamp.is_some() {
        return Ok(None);
    }
    let work_ns = work.namespace().unwrap_or_default();
    let work_key = names::namespaced_key(&work_ns, &work.name_any());
    let ordinal = manifest_index(
        work,
        &template.api_version,
        &template.kind,
        &template.namespace,
        &template.name,
    )
    .ok_or_else(|| BindingStatusError::NoManifest {
        work: work_key.clone(),
        binding: binding.to_owned(),
        template: format!(
            "{} {}",
            template.kind,
            names::namespaced_key(&template.namespace, &template.name)
        ),
    })?;
    let cluster =
        names::cluster_name(&work_ns).map_err(|source| BindingStatusError::NotExecutionSpace {
            work: work_key,
            binding: binding.to_owned(),
            source,
        })?;
    let status = work.status.as_ref();
    let (applied, applied_message) =
        match status.and_then(|s| find_status_condition(&s.conditions, WORK_APPLIED)) {
            Some(c) if c.status == "True" => (true, String::new()),
            Some(c) => (false, c.message.clone()),
            None => (false, String::new()),
        };
    let mut item = AggregatedStatusItem {
        cluster_name: cluster.to_owned(),
        status: None,
        applied,
        applied_message,
        health: Some(ResourceHealth::Unknown),
    };
    if !applied {
        return Ok(Some(item));
    }
    let (group, version) = split_api_version(&template.api_version);
    if let Some(ms) = status.and_then(|s| {
        s.manifest_statuses.iter().find(|m| {
            let id = &m.identifier;
            id.ordinal == ordinal as i64
                && id.group == group
                && id.version == version
                && id.kind == template.kind
                && id.namespace == template.namespace
                && id.name == template.name
        })
    }) {
        item.status = ms.status.clone();
        item.health = ms.health.clone();
    }
    Ok(Some(item))
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// What decides whether an update of a binding is handled: its template's resourceVersion and
/// its generation.
fn binding_fingerprint<B: BindingObject>(b: &B) -> u64 {
    let mut h = DefaultHasher::new();
    b.binding_spec().resource.resource_version.hash(&mut h);
    b.meta().generation.hash(&mut h);
    h.finish()
}

/// What decides whether a Work change concerns the binding: its status.
fn work_fingerprint(w: &Work) -> u64 {
    let mut h = DefaultHasher::new();
    serde_json::to_string(&w.status)
        .unwrap_or_default()
        .hash(&mut h);
    w.metadata.deletion_timestamp.is_some().hash(&mut h);
    h.finish()
}

/// The binding a Work belongs to, as a queue target.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Target {
    Rb { namespace: String, name: String },
    Crb { name: String },
}

impl Target {
    fn of(work: &Work) -> Option<Target> {
        let a = work.annotations();
        if let (Some(namespace), Some(name)) = (
            a.get(RESOURCE_BINDING_NAMESPACE_ANNOTATION),
            a.get(RESOURCE_BINDING_NAME_ANNOTATION),
        ) {
            return Some(Target::Rb {
                namespace: namespace.clone(),
                name: name.clone(),
            });
        }
        a.get(CLUSTER_RESOURCE_BINDING_ANNOTATION)
            .map(|name| Target::Crb { name: name.clone() })
    }
}

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    interpreter: Interpreter,
    recorder: EventRecorder,
    rb: SharedController<ResourceBinding>,
    crb: SharedController<ClusterResourceBinding>,
    works: SharedController<Work>,
    /// Fingerprint of each binding (`rb/ns/name`, `crb/name`) when it was last handled.
    handled: Mutex<HashMap<String, u64>>,
    /// Bindings to handle regardless of their fingerprint (a Work of theirs changed, a retry).
    forced: Mutex<HashSet<String>>,
    /// Each Work's binding and status fingerprint when last seen.
    seen_works: Mutex<HashMap<ObjectKey, (Option<Target>, u64)>>,
    cancel: CancellationToken,
}

/// The binding-status controller. Cheap to clone.
#[derive(Clone)]
pub struct BindingStatusController {
    inner: Arc<Inner>,
}

impl BindingStatusController {
    /// Builds the controller on the context's control plane (nothing is watched until
    /// [`BindingStatusController::run`]).
    pub fn new(ctx: ControllerContext) -> Result<Self, BindingStatusError> {
        let interpreter = karmada_controllers_common::interpreter::interpreter(
            &ctx.control_plane,
            &ctx.events,
            karmada_interpreter::InterpreterOptions::default(),
        );
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(RB_HANDLER)
            .map_err(framework("binding-status client"))?;
        let rb = shared_controller::<ResourceBinding>(cp)?;
        let crb = shared_controller::<ClusterResourceBinding>(cp)?;
        let works = shared_controller::<Work>(cp)?;
        let recorder = ctx.events.recorder(RB_HANDLER);
        let cancel = ctx.cancel.child_token();
        Ok(BindingStatusController {
            inner: Arc::new(Inner {
                ctx,
                client,
                interpreter,
                recorder,
                rb,
                crb,
                works,
                handled: Mutex::new(HashMap::new()),
                forced: Mutex::new(HashSet::new()),
                seen_works: Mutex::new(HashMap::new()),
                cancel,
            }),
        })
    }

    fn work_store(&self) -> Store<Work> {
        self.inner.works.cache().peek_store().clone()
    }

    /// Registers the handlers, reports synced once the caches have synced, and runs until the
    /// context is cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        {
            let works = inner.works.cache();
            let store = works.peek_store();
            store.index_by_label(RESOURCE_BINDING_PERMANENT_ID_LABEL);
            store.index_by_label(CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL);
        }
        register(
            &inner.works,
            RB_HANDLER,
            &inner.cancel,
            &self,
            |this: Self, k, o: Option<Arc<Work>>| async move { this.handle_work(k, o) },
        );
        // Bindings are aggregated from the Work cache: their handlers start only once it has
        // synced, or a restart would write an empty aggregatedStatus (and FullyApplied=False) for
        // every binding before putting it back. Late registration replays every cached binding.
        let timeout = inner.ctx.settings.cluster_cache_sync_timeout;
        let SyncWait::Synced = inner.works.wait_synced(&inner.cancel, timeout).await? else {
            return Ok(());
        };
        register(
            &inner.rb,
            RB_HANDLER,
            &inner.cancel,
            &self,
            |this: Self, k, o: Option<Arc<ResourceBinding>>| async move {
                this.handle_binding(k, o).await
            },
        );
        register(
            &inner.crb,
            CRB_HANDLER,
            &inner.cancel,
            &self,
            |this: Self, k, o: Option<Arc<ClusterResourceBinding>>| async move {
                this.handle_binding(k, o).await
            },
        );
        let SyncWait::Synced = inner.rb.wait_synced(&inner.cancel, timeout).await? else {
            return Ok(());
        };
        let SyncWait::Synced = inner.crb.wait_synced(&inner.cancel, timeout).await? else {
            return Ok(());
        };
        serve_until_cancelled(
            &inner.ctx.synced,
            &inner.cancel,
            "binding-status controller",
        )
        .await;
        Ok(())
    }

    /// A Work changed: re-queue its binding when the Work's status changed or it went away. The
    /// binding is aggregated [`WORK_COALESCE`] later, so the Works of one binding that report at
    /// about the same time (each member applies, then reports health) cost one status write.
    fn handle_work(&self, key: ObjectKey, work: Option<Arc<Work>>) -> HandlerResult<Work> {
        let target = match work {
            Some(w) => {
                let t = Target::of(&w);
                let fp = work_fingerprint(&w);
                let previous = self.inner.seen_works.lock().insert(key, (t.clone(), fp));
                if previous.is_some_and(|(_, old)| old == fp) {
                    return HandlerResult::Success;
                }
                t
            }
            None => self
                .inner
                .seen_works
                .lock()
                .remove(&key)
                .and_then(|(t, _)| t),
        };
        match target {
            Some(Target::Rb { namespace, name }) => {
                self.inner
                    .forced
                    .lock()
                    .insert(format!("rb/{namespace}/{name}"));
                self.inner
                    .rb
                    .enqueue_after(Some(&namespace), &name, WORK_COALESCE);
            }
            Some(Target::Crb { name }) => {
                self.inner.forced.lock().insert(format!("crb/{name}"));
                self.inner.crb.enqueue_after(None, &name, WORK_COALESCE);
            }
            None => {}
        }
        HandlerResult::Success
    }

    /// A binding changed (or was queued by one of its Works).
    async fn handle_binding<B: StatusBinding>(
        &self,
        key: ObjectKey,
        obj: Option<Arc<B>>,
    ) -> HandlerResult<B> {
        let id = format!("{}/{}", B::PREFIX, key);
        let Some(binding) = obj else {
            self.inner.handled.lock().remove(&id);
            self.inner.forced.lock().remove(&id);
            return HandlerResult::Success;
        };
        if binding.meta().deletion_timestamp.is_some() {
            return HandlerResult::Success;
        }
        let fp = binding_fingerprint(binding.as_ref());
        let forced = self.inner.forced.lock().remove(&id);
        let scheduled = binding
            .binding_status()
            .is_some_and(|s| s.last_scheduled_time.is_some());
        let changed = self.inner.handled.lock().get(&id) != Some(&fp);
        if !(forced || scheduled && changed) {
            return HandlerResult::Success;
        }
        match self.sync(binding.as_ref()).await {
            Ok(()) => {
                self.inner.handled.lock().insert(id, fp);
                HandlerResult::Success
            }
            Err(e) => {
                // Retried with backoff; the retry must not be filtered out.
                self.inner.forced.lock().insert(id);
                HandlerResult::error(e)
            }
        }
    }

    fn binding_name<B: StatusBinding>(b: &B) -> String {
        format!(
            "{} {}",
            B::kind(&()),
            names::namespaced_key(&b.namespace().unwrap_or_default(), &b.name_any())
        )
    }

    /// Aggregates the Works into the binding's status, then the binding's status into the
    /// template's. A binding that has no Work yet and was never aggregated (just scheduled, its
    /// Works not written) is left alone: there is nothing to report, and, as in Karmada — whose
    /// aggregation runs on Work status changes — the first aggregation waits for a Work. (Written
    /// now, it would be an empty `aggregatedStatus`, `FullyApplied=False` and a template
    /// `observedGeneration` that no member has observed, each rewritten moments later.)
    async fn sync<B: StatusBinding>(&self, binding: &B) -> Result<(), BindingStatusError> {
        let items = self.aggregate_works(binding)?;
        if items.is_empty() && never_aggregated(binding) {
            return Ok(());
        }
        self.update_binding_status(binding, &items).await?;
        self.update_template_status(binding, &items).await
    }

    /// The `aggregatedStatus` items of the binding's Works, sorted by cluster.
    fn aggregate_works<B: StatusBinding>(
        &self,
        binding: &B,
    ) -> Result<Vec<AggregatedStatusItem>, BindingStatusError> {
        let name = Self::binding_name(binding);
        let id = binding
            .meta()
            .labels
            .as_ref()
            .and_then(|l| l.get(B::ID_LABEL))
            .cloned()
            .unwrap_or_default();
        let works = if id.is_empty() {
            Vec::new()
        } else {
            self.work_store()
                .by_index(&label_index_name(B::ID_LABEL), &id)
        };
        let template = &binding.binding_spec().resource;
        let mut items = Vec::with_capacity(works.len());
        for w in &works {
            if let Some(item) = aggregated_item(w, template, &name)? {
                items.push(item);
            }
        }
        items.sort_by(|a, b| a.cluster_name.cmp(&b.cluster_name));
        Ok(items)
    }

    /// Writes `aggregatedStatus` and `FullyApplied` when they changed.
    async fn update_binding_status<B: StatusBinding>(
        &self,
        cached: &B,
        items: &[AggregatedStatusItem],
    ) -> Result<(), BindingStatusError> {
        let namespace = cached.namespace().unwrap_or_default();
        let name = cached.name_any();
        let kind = B::kind(&()).into_owned();
        let key = names::namespaced_key(&namespace, &name);
        let api = B::api(self.inner.client.clone(), &namespace);
        let mut current = cached.clone();
        let mut retry = ConflictRetry::new(DEFAULT_RETRY);
        while retry.next().await {
            let old = current.binding_status().cloned().unwrap_or_default();
            let mut new = old.clone();
            new.aggregated_status = items.to_vec();
            let cond = fully_applied_condition(current.binding_spec(), items, now());
            set_condition(&mut new.conditions, cond);
            if new == old {
                tracing::debug!(binding = %key, kind, "aggregated status up to date");
                return Ok(());
            }
            *current.status_mut() = new;
            current.meta_mut().managed_fields = None;
            match api
                .replace_status(&name, &PostParams::default(), &current)
                .await
            {
                Ok(_) => {
                    tracing::info!(binding = %key, kind, "aggregated status updated");
                    let message = if namespace.is_empty() {
                        format!("Update {kind}({name}) with AggregatedStatus successfully.")
                    } else {
                        format!(
                            "Update {kind}({namespace}/{name}) with AggregatedStatus successfully."
                        )
                    };
                    self.inner
                        .recorder
                        .record(
                            &object_reference(cached, &kind),
                            EventType::Normal,
                            event_reasons::AGGREGATE_STATUS_SUCCEED,
                            message,
                        )
                        .await;
                    return Ok(());
                }
                Err(e) if is_conflict(&e) => {
                    current = match api.get(&name).await {
                        Ok(b) => b,
                        Err(e) if is_not_found(&e) => return Ok(()),
                        Err(source) => {
                            return Err(ApiError::new("get", kind, key, source).into());
                        }
                    };
                }
                Err(e) if is_not_found(&e) => return Ok(()),
                Err(source) => {
                    self.inner
                        .recorder
                        .record(
                            &object_reference(cached, &kind),
                            EventType::Warning,
                            event_reasons::AGGREGATE_STATUS_FAILED,
                            source.to_string(),
                        )
                        .await;
                    return Err(ApiError::new("update status of", kind, key, source).into());
                }
            }
        }
        Err(BindingStatusError::Conflicts {
            kind,
            key,
            attempts: retry.attempts(),
        })
    }

    /// Aggregates `items` into the template's `.status` (read from the cache, or the API server
    /// after a conflict) and writes it when it changed.
    async fn update_template_status<B: StatusBinding>(
        &self,
        binding: &B,
        items: &[AggregatedStatusItem],
    ) -> Result<(), BindingStatusError> {
        let r = &binding.binding_spec().resource;
        let Some((api, ar)) = self.template_api(r).await? else {
            return Ok(());
        };
        let mut retry = ConflictRetry::new(DEFAULT_RETRY);
        // The first attempt reads the detector's cache of the kind (as Karmada reads its informer's
        // lister); after a conflict the cached copy is known to be behind, so retries read the API
        // server.
        let mut cached =
            template::cached(&self.inner.ctx.control_plane, &ar, &r.namespace, &r.name);
        while retry.next().await {
            let template = match cached.take() {
                Some(t) => t,
                None => match api.get(&r.name).await {
                    Ok(t) => t,
                    // The template is gone and the binding waits for garbage collection.
                    Err(e) if is_not_found(&e) => return Ok(()),
                    Err(source) => {
                        let key = names::namespaced_key(&r.namespace, &r.name);
                        return Err(ApiError::new("get", r.kind.clone(), key, source).into());
                    }
                },
            };
            if let Attempt::Done = self
                .sync_template_status(&api, &template, &ar, r, items)
                .await?
            {
                return Ok(());
            }
        }
        Err(BindingStatusError::Conflicts {
            kind: r.kind.clone(),
            key: names::namespaced_key(&r.namespace, &r.name),
            attempts: retry.attempts(),
        })
    }

    /// The API of the template's kind in its scope, or `None` when the interpreter does not
    /// aggregate that kind's status (then the template is left alone).
    async fn template_api(
        &self,
        r: &TemplateReference,
    ) -> Result<Option<(Api<DynamicObject>, ApiResource)>, BindingStatusError> {
        let (group, version) = split_api_version(&r.api_version);
        if !self.inner.interpreter.hook_enabled_for(
            &r.api_version,
            &r.kind,
            Operation::AggregateStatus,
        ) {
            return Ok(None);
        }
        let gvk = GroupVersionKind::gvk(group, version, &r.kind);
        let (ar, caps) = self
            .inner
            .ctx
            .control_plane
            .clients()
            .resolve(&gvk)
            .await
            .map_err(framework(format!("resolve {}.{}", r.kind, group)))?;
        let api: Api<DynamicObject> = match caps.scope {
            kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(self.inner.client.clone(), &r.namespace, &ar)
            }
            kube::discovery::Scope::Cluster => Api::all_with(self.inner.client.clone(), &ar),
        };
        Ok(Some((api, ar)))
    }

    /// One round of aggregating the template's status and writing the change.
    /// [`Attempt::Conflict`] when the template changed between the read and the write.
    async fn sync_template_status(
        &self,
        api: &Api<DynamicObject>,
        template: &DynamicObject,
        ar: &ApiResource,
        r: &TemplateReference,
        items: &[AggregatedStatusItem],
    ) -> Result<Attempt, BindingStatusError> {
        match self.template_status_patch(template, ar, r, items).await? {
            Some(status_patch) => {
                self.patch_template_status(api, template, ar, r, status_patch)
                    .await
            }
            None => Ok(Attempt::Done),
        }
    }

    /// The merge patch that brings the template's status to the aggregate of `items`; `None`
    /// when there is nothing to write. A failed aggregation is also recorded as a Warning Event
    /// on the template.
    async fn template_status_patch(
        &self,
        template: &DynamicObject,
        ar: &ApiResource,
        r: &TemplateReference,
        items: &[AggregatedStatusItem],
    ) -> Result<Option<Value>, BindingStatusError> {
        let value = template_value(template, ar);
        let aggregated = self
            .inner
            .interpreter
            .aggregate_status(&value, items)
            .map_err(|source| BindingStatusError::Aggregate {
                template: template_name(r),
                source,
            });
        let new_status = match aggregated {
            Ok(Some(s)) => s,
            Ok(None) => return Ok(None),
            Err(e) => {
                self.record_template_event(template, ar, EventType::Warning, e.to_string())
                    .await;
                return Err(e);
            }
        };
        if value.get("status") == Some(&new_status) {
            return Ok(None);
        }
        let old_status = value.get("status").unwrap_or(&Value::Null);
        Ok(merge_diff(old_status, &new_status))
    }

    /// Writes `status_patch` as a merge patch of the status alone, guarded by the resourceVersion
    /// read: the rest of the template (the user's metadata, kubectl's annotation) is not ours to
    /// write. The outcome is recorded as an Event on the template.
    async fn patch_template_status(
        &self,
        api: &Api<DynamicObject>,
        template: &DynamicObject,
        ar: &ApiResource,
        r: &TemplateReference,
        status_patch: Value,
    ) -> Result<Attempt, BindingStatusError> {
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": template.metadata.resource_version},
            "status": status_patch,
        });
        match api
            .patch_status(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                tracing::info!(template = %template_name(r), "template status updated");
                self.record_template_event(
                    template,
                    ar,
                    EventType::Normal,
                    "Update Resource with AggregatedStatus successfully.".to_owned(),
                )
                .await;
                Ok(Attempt::Done)
            }
            Err(e) if is_conflict(&e) => Ok(Attempt::Conflict),
            Err(e) if is_not_found(&e) => Ok(Attempt::Done),
            Err(source) => {
                self.record_template_event(template, ar, EventType::Warning, source.to_string())
                    .await;
                let key = names::namespaced_key(&r.namespace, &r.name);
                Err(ApiError::new("update status of", r.kind.clone(), key, source).into())
            }
        }
    }

    async fn record_template_event(
        &self,
        template: &DynamicObject,
        ar: &ApiResource,
        type_: EventType,
        message: String,
    ) {
        let reason = match type_ {
            EventType::Normal => event_reasons::AGGREGATE_STATUS_SUCCEED,
            EventType::Warning => event_reasons::AGGREGATE_STATUS_FAILED,
        };
        let target = ObjectReference {
            api_version: Some(ar.api_version.clone()),
            kind: Some(ar.kind.clone()),
            namespace: template.metadata.namespace.clone(),
            name: template.metadata.name.clone(),
            uid: template.metadata.uid.clone(),
            resource_version: template.metadata.resource_version.clone(),
            field_path: None,
        };
        self.inner
            .recorder
            .record(&target, type_, reason, message)
            .await;
    }
}

/// Whether one read-and-write round finished or lost a race with another writer.
enum Attempt {
    /// Written, or nothing to write.
    Done,
    /// The object changed since it was read; read it again.
    Conflict,
}

/// `Kind namespace/name` of a template, for logs and errors.
/// Whether the binding's status holds no aggregation yet: no `aggregatedStatus` item and no
/// `FullyApplied` condition.
fn never_aggregated<B: StatusBinding>(binding: &B) -> bool {
    binding.binding_status().is_none_or(|s| {
        s.aggregated_status.is_empty()
            && find_status_condition(&s.conditions, BINDING_FULLY_APPLIED).is_none()
    })
}

fn template_name(r: &TemplateReference) -> String {
    format!(
        "{} {}",
        r.kind,
        names::namespaced_key(&r.namespace, &r.name)
    )
}

/// The unstructured form of a template with its `apiVersion` and `kind` set.
fn template_value(template: &DynamicObject, ar: &ApiResource) -> Value {
    let mut value = serde_json::to_value(template).unwrap_or(Value::Null);
    if let Some(o) = value.as_object_mut() {
        o.insert("apiVersion".into(), Value::String(ar.api_version.clone()));
        o.insert("kind".into(), Value::String(ar.kind.clone()));
    }
    value
}

fn object_reference<B: StatusBinding>(b: &B, kind: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some(B::api_version(&()).into_owned()),
        kind: Some(kind.to_owned()),
        namespace: b.namespace(),
        name: Some(b.name_any()),
        uid: b.meta().uid.clone(),
        resource_version: b.meta().resource_version.clone(),
        field_path: None,
    }
}

/// Starts the controller: the [`StartFn`] the registry holds.
pub fn start_fn() -> StartFn {
    start_fn_of(BindingStatusController::new, BindingStatusController::run)
}

#[cfg(test)]
mod tests;
