//! The resource detector (Karmada's `pkg/detector`): watches every propagatable kind on the control
//! plane, matches templates with PropagationPolicies and ClusterPropagationPolicies, claims them and
//! writes their ResourceBinding / ClusterResourceBinding.
//!
//! Karmada always runs the detector (it is not a `--controllers` name); [`start`] is meant to be
//! started by the process next to the enabled controllers, under leader election.
//!
//! How it is put together on `lariat`:
//! - every 30 s discovery lists the preferred version of every group; each kind that supports
//!   `list`, `watch` and `delete` and is not skipped ([`skip`]) gets the detector's handler on its
//!   shared dynamic controller, so new CRDs are picked up without a restart;
//! - the template handler skips reserved/skipped namespaces and updates that only touched status or
//!   server-maintained metadata ([`fingerprint`]);
//! - PropagationPolicy and ClusterPropagationPolicy handlers assign permanent ids and finalizers
//!   (Karmada's webhook does that), release templates that no longer match, re-queue the templates
//!   they claim or that wait for a policy ([`waiting`], indexed so a policy looks only at what its
//!   selectors could select), handle preemption and deletion;
//! - a matched template's replicas or components ([`replicas`]) go into the binding it writes.

pub mod binding;
pub mod claim;
pub mod error;
pub mod fingerprint;
mod lazy;
pub mod metrics;
mod policy;
mod policy_index;
mod policy_object;
mod replicas;
pub mod skip;
mod template;
mod waiting;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use karmada_apis::Work;
use karmada_apis::well_known::{
    CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL, RESOURCE_BINDING_PERMANENT_ID_LABEL,
};
use karmada_apis::{
    ClusterPropagationPolicy, ClusterResourceBinding, PropagationPolicy, ResourceBinding,
};
use karmada_interpreter::{Interpreter, InterpreterOptions};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery::{Discovery, Scope, verbs};
use lariat::{
    HandlerResult, ObjectKey, Priority, SharedController, Store, SyncWait, current_priority,
};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use apimachinery::split_api_version;
pub use error::DetectorError;
use events::EventRecorder;
use karmada_controllers_common::error::framework;
use karmada_controllers_common::handlers::{shared_controller, start_fn_of};
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use lariat::events;
use skip::SkippedResources;

/// The detector's name: its User-Agent suffix, Event source and log field.
pub const NAME: &str = "resource-detector";

/// How often discovery looks for new kinds (Karmada: 30 s).
pub const DISCOVERY_PERIOD: Duration = Duration::from_secs(30);

/// Feature gate: policies with `preemption: Always` take templates from lower-priority policies.
pub const FEATURE_POLICY_PREEMPTION: &str = "PropagationPolicyPreemption";
pub use karmada_controllers_common::binding::{
    FEATURE_MULTIPLE_POD_TEMPLATES_SCHEDULING, FEATURE_PRIORITY_BASED_SCHEDULING,
    FEATURE_WORKLOAD_AFFINITY,
};
/// Feature gate: replica requirements carry namespace and priorityClassName.
pub const FEATURE_RESOURCE_QUOTA_ESTIMATE: &str = "ResourceQuotaEstimate";

/// A template, by group, kind, namespace and name (version-independent).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TemplateRef {
    /// API group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace (empty for cluster-scoped kinds).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl TemplateRef {
    /// The queue key of the template.
    pub fn object_key(&self) -> ObjectKey {
        ObjectKey::new(Some(self.namespace.as_str()), &self.name)
    }

    /// `namespace/name` or `name`.
    pub fn key(&self) -> String {
        karmada_apis::names::namespaced_key(&self.namespace, &self.name)
    }
}

impl std::fmt::Display for TemplateRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.key())
    }
}

/// A kind the detector watches.
#[derive(Clone)]
pub(crate) struct WatchedKind {
    pub ar: ApiResource,
    pub namespaced: bool,
    pub ctrl: SharedController<DynamicObject>,
}

/// What the detector remembers of a policy it reconciled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HandledPolicy {
    /// `metadata.generation` reconciled.
    pub generation: i64,
    /// `spec.priority` (0 when unset) at that generation.
    pub priority: i32,
}

/// Shared state of the detector.
pub(crate) struct Inner {
    pub ctx: ControllerContext,
    pub client: kube::Client,
    pub skipped: SkippedResources,
    pub interpreter: Interpreter,
    pub recorder: EventRecorder,
    pub pp: SharedController<PropagationPolicy>,
    pub cpp: SharedController<ClusterPropagationPolicy>,
    pub rb: Store<ResourceBinding>,
    pub crb: Store<ClusterResourceBinding>,
    /// Works, indexed by binding permanent id (to tell whether a binding's Works are current).
    pub works: Store<Work>,
    /// Watched kinds by (group, kind).
    pub kinds: Mutex<HashMap<(String, String), WatchedKind>>,
    /// Kinds the framework refused to watch for us (warned about once).
    pub unwatchable: Mutex<HashSet<(String, String)>>,
    /// Templates no policy matched (Karmada's waiting list, [`waiting`]).
    pub waiting: Mutex<waiting::Waiting>,
    /// Fingerprint of each template at its last successful reconcile.
    pub fingerprints: Mutex<HashMap<TemplateRef, u64>>,
    /// Templates to reconcile even if their fingerprint did not change (policy changes).
    pub forced: Mutex<HashSet<TemplateRef>>,
    /// Which templates have a user change pending, for Lazy policies ([`lazy`]).
    pub lazy: lazy::LazyActivation,
    /// Generation and priority of each policy at its last successful reconcile (`pp/ns/name`,
    /// `cpp/name`): a generation seen is not reconciled again, a lower priority lets others preempt.
    pub policy_generations: Mutex<HashMap<String, HandledPolicy>>,
    /// Templates put off until the Work cache's first list, with their queue and priority
    /// ([`Detector::defer_until_works_listed`]); `None` once that list is in.
    pub deferred: Mutex<Option<Vec<Deferred>>>,
    /// Cancelled when the detector stops; handlers are removed with it.
    pub cancel: CancellationToken,
}

/// A template key put off until the Work cache's first list, to be queued again on `ctrl`.
pub(crate) struct Deferred {
    ctrl: SharedController<DynamicObject>,
    key: ObjectKey,
    priority: Priority,
}

/// The resource detector. Cheap to clone.
#[derive(Clone)]
pub struct Detector {
    pub(crate) inner: Arc<Inner>,
}

impl Detector {
    /// Builds the detector on the context's control plane (nothing is watched until
    /// [`Detector::run`]).
    pub fn new(ctx: ControllerContext) -> Result<Self, DetectorError> {
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(NAME)
            .map_err(framework("detector client"))?;
        let skipped = SkippedResources::parse(&ctx.settings.skipped_propagating_apis).unwrap_or_else(|e| {
            tracing::error!(error = %e, "ignoring invalid --skipped-propagating-apis; using the defaults");
            SkippedResources::with_defaults()
        });
        let gates = &ctx.settings.feature_gates;
        let interpreter = karmada_controllers_common::interpreter::interpreter(
            cp,
            &ctx.events,
            InterpreterOptions {
                resource_quota_estimate: gates.enabled(FEATURE_RESOURCE_QUOTA_ESTIMATE),
            },
        );
        let pp = shared_controller::<PropagationPolicy>(cp)?;
        let cpp = shared_controller::<ClusterPropagationPolicy>(cp)?;
        // An unclaimed template is offered only the policies whose selectors could select it.
        pp.store()
            .add_index(policy_index::SELECTS_INDEX, Arc::new(policy_index::selects));
        let rb = cp
            .caches()
            .for_kind::<ResourceBinding>()
            .map_err(framework("ResourceBinding cache"))?
            .store();
        let crb = cp
            .caches()
            .for_kind::<ClusterResourceBinding>()
            .map_err(framework("ClusterResourceBinding cache"))?
            .store();
        let works = cp
            .caches()
            .for_kind::<Work>()
            .map_err(framework("Work cache"))?
            .store();
        works.index_by_label(RESOURCE_BINDING_PERMANENT_ID_LABEL);
        works.index_by_label(CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL);
        // A policy's reconcile finds the bindings it claims by its permanent id.
        for kind in [
            claim::PolicyKind::PropagationPolicy,
            claim::PolicyKind::ClusterPropagationPolicy,
        ] {
            rb.index_by_label(kind.id_label());
        }
        crb.index_by_label(claim::PolicyKind::ClusterPropagationPolicy.id_label());
        let recorder = ctx.events.recorder(NAME);
        let cancel = ctx.cancel.child_token();
        Ok(Detector {
            inner: Arc::new(Inner {
                ctx,
                client,
                skipped,
                interpreter,
                recorder,
                pp,
                cpp,
                rb,
                crb,
                works,
                kinds: Mutex::new(HashMap::new()),
                unwatchable: Mutex::new(HashSet::new()),
                waiting: Mutex::new(waiting::Waiting::default()),
                fingerprints: Mutex::new(HashMap::new()),
                forced: Mutex::new(HashSet::new()),
                lazy: lazy::LazyActivation::default(),
                policy_generations: Mutex::new(HashMap::new()),
                deferred: Mutex::new(Some(Vec::new())),
                cancel,
            }),
        })
    }

    /// Runs the detector until the context is cancelled: registers the policy handlers, then
    /// discovers kinds every [`DISCOVERY_PERIOD`] while the Work cache lists. Reports synced after
    /// the first discovery once every cache it reads has synced.
    pub async fn run(self) -> Result<(), BoxError> {
        self.register_policy_handlers();
        // Customizations whose scripts do not load are reported when written (what Karmada's
        // webhook refuses at admission), once per controller-manager: the detector always runs.
        let inner = &self.inner;
        if let Err(e) = karmada_controllers_common::interpreter::check_customizations(
            &inner.ctx.control_plane,
            &inner.ctx.events,
            InterpreterOptions {
                resource_quota_estimate: inner
                    .ctx
                    .settings
                    .feature_gates
                    .enabled(FEATURE_RESOURCE_QUOTA_ESTIMATE),
            },
            &inner.cancel,
        ) {
            tracing::warn!(error = %e, "ResourceInterpreterCustomizations are not checked when written");
        }
        tokio::join!(self.release_deferred(), self.discover_periodically());
        tracing::info!("resource detector stopped");
        Ok(())
    }

    /// Waits for the Work cache's first list, then queues again the templates put off until it.
    ///
    /// A template whose binding differs only in the template's resourceVersion is compared with
    /// the binding's Works (`works_carry_generation`); without the Works listed, a restart would
    /// rewrite every such binding. Only those templates wait: discovery, the template lists and
    /// every other template (a fresh one created during a restart above all) go ahead meanwhile.
    async fn release_deferred(&self) {
        let inner = &self.inner;
        let timeout = inner.ctx.settings.cluster_cache_sync_timeout;
        match inner.ctx.control_plane.caches().for_kind::<Work>() {
            Ok(works) => match works.wait_synced(&inner.cancel, timeout).await {
                Ok(SyncWait::Synced) => {}
                Ok(SyncWait::Cancelled) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "Work cache did not sync; bindings are rewritten when the template moved");
                }
            },
            Err(e) => {
                tracing::warn!(error = %e, "no Work cache; bindings are rewritten when the template moved");
            }
        }
        let deferred = inner.deferred.lock().take().unwrap_or_default();
        for d in deferred {
            d.ctrl.enqueue_key_with_priority(d.key, d.priority);
        }
    }

    /// Puts `key` (of `ctrl`'s kind) off until the Work cache's first list. False when that list
    /// is already in: the caller handles the key again now.
    pub(crate) fn defer_until_works_listed(
        &self,
        ctrl: &SharedController<DynamicObject>,
        key: ObjectKey,
    ) -> bool {
        match self.inner.deferred.lock().as_mut() {
            Some(deferred) => {
                deferred.push(Deferred {
                    ctrl: ctrl.clone(),
                    key,
                    priority: current_priority(),
                });
                true
            }
            None => false,
        }
    }

    /// Whether templates are still put off until the Work cache's first list.
    pub(crate) fn deferring(&self) -> bool {
        self.inner.deferred.lock().is_some()
    }

    /// Discovers kinds every [`DISCOVERY_PERIOD`] until cancelled; reports the detector synced
    /// after the first discovery once its caches have synced.
    async fn discover_periodically(&self) {
        let inner = &self.inner;
        let timeout = inner.ctx.settings.cluster_cache_sync_timeout;
        let mut synced = false;
        let mut tick = tokio::time::interval(DISCOVERY_PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = inner.cancel.cancelled() => break,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.discover().await {
                tracing::warn!(error = %e, "resource discovery failed; retrying next period");
                continue;
            }
            if !synced {
                let caches = inner.ctx.control_plane.caches();
                if let Err(e) = caches.wait_for_sync(timeout).await {
                    tracing::warn!(error = %e, "detector caches did not sync yet");
                    continue;
                }
                inner.ctx.synced.synced();
                synced = true;
                tracing::info!("resource detector synced");
            }
        }
    }

    /// The templates currently waiting for a policy.
    pub fn waiting(&self) -> Vec<TemplateRef> {
        self.inner.waiting.lock().all()
    }

    /// Runs discovery once and starts watching every new propagatable kind.
    pub async fn discover(&self) -> Result<usize, DetectorError> {
        let inner = &self.inner;
        let discovery = Discovery::new(inner.client.clone())
            .run()
            .await
            .map_err(|e| DetectorError::api("discover", "APIGroups", "", e))?;
        let mut added = 0;
        for group in discovery.groups() {
            for (ar, caps) in group.recommended_resources() {
                if ![verbs::DELETE, verbs::LIST, verbs::WATCH]
                    .iter()
                    .all(|v| caps.supports_operation(v))
                {
                    continue;
                }
                if inner.skipped.is_skipped(&ar.group, &ar.version, &ar.kind) {
                    continue;
                }
                let key = (ar.group.clone(), ar.kind.clone());
                if inner.kinds.lock().contains_key(&key) {
                    continue;
                }
                let namespaced = matches!(caps.scope, Scope::Namespaced);
                let ctrl = match inner.ctx.control_plane.controllers().for_resource(&ar) {
                    Ok(ctrl) => ctrl,
                    Err(e) => {
                        // One kind that cannot be watched (e.g. another controller already caches it
                        // as a typed object) must not stop propagation of every other kind.
                        if inner.unwatchable.lock().insert(key.clone()) {
                            tracing::warn!(group = %ar.group, version = %ar.version, kind = %ar.kind, error = %e, "templates of this kind will not be propagated");
                        }
                        continue;
                    }
                };
                tracing::info!(group = %ar.group, version = %ar.version, kind = %ar.kind, "setting up detector handler");
                let watched = WatchedKind {
                    ar: ar.clone(),
                    namespaced,
                    ctrl: ctrl.clone(),
                };
                inner.kinds.lock().insert(key, watched.clone());
                let this = self.clone();
                ctrl.register_handler(
                    NAME,
                    inner.cancel.clone(),
                    move |k: ObjectKey, o: Option<Arc<DynamicObject>>| {
                        let this = this.clone();
                        let watched = watched.clone();
                        async move { this.handle_template(&watched, k, o).await }
                    },
                );
                added += 1;
            }
        }
        Ok(added)
    }

    /// The watched kind of `group`/`kind`.
    pub(crate) fn watched(&self, group: &str, kind: &str) -> Option<WatchedKind> {
        self.inner
            .kinds
            .lock()
            .get(&(group.to_owned(), kind.to_owned()))
            .cloned()
    }

    /// The ApiResource of a kind: the watched one, else through the REST mapping.
    pub(crate) async fn resolve(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<(ApiResource, bool), DetectorError> {
        let (group, version) = split_api_version(api_version);
        if let Some(w) = self.watched(group, kind) {
            return Ok((w.ar, w.namespaced));
        }
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (ar, caps) = self
            .inner
            .ctx
            .control_plane
            .clients()
            .resolve(&gvk)
            .await
            .map_err(framework(format!("resolve {kind}.{group}")))?;
        Ok((ar, matches!(caps.scope, Scope::Namespaced)))
    }

    /// Marks a template for reconciliation regardless of its fingerprint and queues it.
    pub(crate) fn force_enqueue(&self, t: &TemplateRef) {
        self.inner.forced.lock().insert(t.clone());
        if let Some(w) = self.watched(&t.group, &t.kind) {
            let ns = (!t.namespace.is_empty()).then_some(t.namespace.as_str());
            w.ctrl.enqueue(ns, &t.name);
        }
    }
}

/// The Event reference of a template.
pub(crate) fn template_reference(obj: &DynamicObject, ar: &ApiResource) -> ObjectReference {
    ObjectReference {
        api_version: Some(ar.api_version.clone()),
        kind: Some(ar.kind.clone()),
        namespace: obj.metadata.namespace.clone(),
        name: obj.metadata.name.clone(),
        uid: obj.metadata.uid.clone(),
        resource_version: obj.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// Turns a detector result into a handler result.
pub(crate) fn handler_result<K>(r: Result<(), DetectorError>) -> HandlerResult<K> {
    match r {
        Ok(()) => HandlerResult::Success,
        Err(e) => HandlerResult::Error(Box::new(e)),
    }
}

/// Starts the controller: the [`StartFn`] the registry holds.
pub fn start_fn() -> StartFn {
    start_fn_of(Detector::new, Detector::run)
}
