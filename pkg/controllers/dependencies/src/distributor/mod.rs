//! The dependencies distributor (Karmada's `pkg/dependenciesdistributor`): propagates what a
//! workload needs (its ConfigMaps, Secrets, ServiceAccounts, PersistentVolumeClaims, … as the
//! interpreter's `GetDependencies` names them) to the clusters the workload goes to.
//!
//! Karmada starts it next to the resource detector, without a `--controllers` name, when the
//! `PropagateDeps` feature gate is on (the default); the process does the same with [`start_fn`].
//!
//! For every ResourceBinding with `spec.propagateDeps` (a policy with `propagateDeps: true`) the
//! distributor
//! - asks the interpreter for the template's dependencies and records them in the binding's
//!   `resourcebinding.karmada.io/dependencies` annotation, holding the binding with the finalizer
//!   `karmada.io/binding-dependencies-distributor`;
//! - gives each dependency that exists an *attached* ResourceBinding (`<name>-<kind>`, owned by the
//!   dependency, labelled `resourcebinding.karmada.io/depended-by-<hash>` = the requirer's
//!   permanent id) whose `spec.requiredBy` lists the requiring bindings with their clusters; the
//!   binding controller sends it to the union of those clusters. An attached binding has no
//!   placement, so the scheduler leaves it alone; it takes `conflictResolution` (`Overwrite` if any
//!   requirer overwrites) and `preserveResourcesOnDeletion` (true if any requirer preserves) from
//!   its requirers, with a `DependencyPolicyConflict` Warning when they disagree;
//! - follows the requirer: a new scheduling result updates its snapshot in `requiredBy`, a
//!   dependency no longer referenced loses the requirer, and a deleted requirer (or one that turns
//!   `propagateDeps` off) is removed from every attached binding before its finalizer goes. An
//!   attached binding nothing requires keeps no cluster (its Works go); it is deleted with its
//!   dependency.
//!
//! A dependency that a policy claims itself has a binding with a placement: the distributor only
//! adds the requirers to its `requiredBy` (and its label), so it goes to the clusters its policy
//! chooses plus those of its requirers, and its own policy's conflict resolution stays, as in
//! Karmada.
//!
//! Each dependency kind seen gets a handler on its shared controller: a dependency created,
//! changed (labels included, for selected dependencies) or deleted re-queues the bindings that
//! depend on it, so a ConfigMap created after its Deployment still follows it and a changed one
//! reaches the members. The work runs on the distributor's own queue with
//! `--concurrent-dependent-resource-syncs` workers (Karmada uses that many for the dependency side
//! and one for bindings).

pub mod attached;
pub mod index;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use apimachinery::is_not_found;
use k8s_openapi::api::core::v1::ObjectReference as EventTarget;
use karmada_apis::ResourceBinding;
use karmada_apis::well_known::{
    BINDING_DEPENDENCIES_DISTRIBUTOR_FINALIZER, DEPENDENCIES_ANNOTATION, event_reasons,
};
use karmada_apis::work::v1alpha2::ObjectReference;
use karmada_interpreter::{DependentObjectReference, InterpretError, Interpreter};
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use lariat::{HandlerResult, ObjectKey, SharedController, Store, SyncWait, WorkQueue};
use parking_lot::Mutex;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use attached::{Candidate, Inherited};
use karmada_controllers_common::error::{ApiError, FrameworkError, framework};
use karmada_controllers_common::handlers::{shared_controller, start_fn_of};
use karmada_controllers_common::patch::guarded_merge_patch;
use karmada_controllers_common::template::with_type_meta;
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use lariat::events::{EventRecorder, EventType, reference_of};

/// Karmada's name of the distributor: its handler and queue name, User-Agent suffix and Event
/// source.
pub const NAME: &str = "dependencies-distributor";

/// Event reasons of the distributor that Karmada defines.
pub mod reasons {
    /// Attached bindings were brought up to date with a binding's scheduling result.
    pub const SYNC_SCHEDULE_RESULT_TO_DEPENDENCIES_SUCCEED: &str =
        "SyncScheduleResultToDependenciesSucceed";
    /// Bringing attached bindings up to date failed.
    pub const SYNC_SCHEDULE_RESULT_TO_DEPENDENCIES_FAILED: &str =
        "SyncScheduleResultToDependenciesFailed";
    /// The bindings requiring a dependency disagree on its conflict resolution or preservation.
    pub const DEPENDENCY_POLICY_CONFLICT: &str = "DependencyPolicyConflict";
}

/// What can go wrong distributing the dependencies of one binding.
#[derive(Debug, thiserror::Error)]
pub enum DistributorError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// The interpreter could not read the template's dependencies.
    #[error("get dependencies of {0}")]
    Interpret(#[source] InterpretError),
    /// A binding could not be serialized (not expected).
    #[error("serialize ResourceBinding {key}: {source}")]
    Serialize {
        /// The binding.
        key: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// The distributor stopped while waiting for the cache of a kind.
    #[error("stopped before the cache of {0} synced")]
    Stopped(String),
    /// The binding's template is not in the cache (not seen yet, or deleted and the binding about
    /// to go); retried, as Karmada retries a template it cannot fetch.
    #[error("template {kind} {template} of ResourceBinding {binding} is not in the cache")]
    TemplateNotCached {
        /// The binding.
        binding: String,
        /// Kind of the template.
        kind: String,
        /// `namespace/name` of the template.
        template: String,
    },
    /// The binding a dependency would get belongs to another object of that name (the old one is
    /// being garbage collected); retried.
    #[error("ResourceBinding {key} is owned by another {kind} (uid {owner}); waiting for it to go")]
    OwnedByAnother {
        /// The attached binding.
        key: String,
        /// Kind of the dependency.
        kind: String,
        /// UID of the current owner.
        owner: String,
    },
    /// Several dependencies failed; each is named.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Several(Vec<DistributorError>),
}

karmada_controllers_common::core_error_from!(DistributorError);

impl DistributorError {
    fn several(mut errors: Vec<DistributorError>) -> Result<(), DistributorError> {
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(DistributorError::Several(errors)),
        }
    }
}

type Result<T, E = DistributorError> = std::result::Result<T, E>;

/// The distributor's [`StartFn`].
pub fn start_fn() -> StartFn {
    start_fn_of(DependenciesDistributor::new, DependenciesDistributor::run)
}

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    interpreter: Interpreter,
    recorder: EventRecorder,
    rb: SharedController<ResourceBinding>,
    queue: WorkQueue<ObjectKey>,
    /// Generation of each binding last distributed (the binding handler skips other changes).
    handled: Mutex<HashMap<ObjectKey, i64>>,
    /// Dependency kinds (`apiVersion`, kind) whose shared controller has our handler.
    watched: Mutex<HashSet<(String, String)>>,
    cancel: CancellationToken,
}

/// The dependencies distributor. Cheap to clone.
#[derive(Clone)]
pub struct DependenciesDistributor {
    inner: Arc<Inner>,
}

impl DependenciesDistributor {
    /// Builds the distributor on the context's control plane (nothing is watched until
    /// [`DependenciesDistributor::run`]).
    pub fn new(ctx: ControllerContext) -> Result<Self, FrameworkError> {
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(NAME)
            .map_err(framework("dependencies-distributor client"))?;
        let rb = shared_controller::<ResourceBinding>(cp)?;
        let recorder = ctx.events.recorder(NAME);
        let queue = WorkQueue::new(
            NAME,
            ctx.settings.rate_limiter.build(),
            cp.metrics().queue(NAME),
        );
        let cancel = ctx.cancel.child_token();
        // Customizations' `dependencyInterpretation` comes before the native rules.
        let interpreter = karmada_controllers_common::interpreter::interpreter(
            cp,
            &ctx.events,
            karmada_interpreter::InterpreterOptions::default(),
        );
        Ok(DependenciesDistributor {
            inner: Arc::new(Inner {
                ctx,
                client,
                interpreter,
                recorder,
                rb,
                queue,
                handled: Mutex::new(HashMap::new()),
                watched: Mutex::new(HashSet::new()),
                cancel,
            }),
        })
    }

    /// Registers the binding handler, reports synced once the binding cache has synced, and runs
    /// the queue's workers until the context is cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        // Requirers by what they depend on, attached bindings by their requirers (see `index`).
        let store = inner.rb.cache().peek_store();
        store.add_index(
            index::DEPENDENCIES_INDEX,
            Arc::new(index::dependency_values),
        );
        store.add_index(
            index::DEPENDED_BY_INDEX,
            Arc::new(index::depended_by_values),
        );
        // Its own serving: the queue's workers start once synced and are shut down at the end.
        let Some(synced) = inner
            .ctx
            .wiring("dependencies distributor", &self)
            .cancelled_by(&inner.cancel)
            .handles(
                &inner.rb,
                NAME,
                |this: Self, k, o: Option<Arc<ResourceBinding>>| async move {
                    this.handle_binding(k, o.as_deref())
                },
            )
            .sync()
            .await?
        else {
            return Ok(());
        };
        let mut workers = JoinSet::new();
        for _ in 0..inner
            .ctx
            .settings
            .concurrent_dependent_resource_syncs
            .max(1)
        {
            let this = self.clone();
            workers.spawn(async move { this.work().await });
        }
        synced.serve().await;
        inner.queue.shut_down();
        while workers.join_next().await.is_some() {}
        Ok(())
    }

    async fn work(&self) {
        let queue = &self.inner.queue;
        while let Some(key) = queue.get().await {
            match self.reconcile(&key).await {
                Ok(()) => queue.forget(&key),
                Err(e) => {
                    tracing::warn!(binding = %key.as_str(), error = %e, "distributing dependencies failed");
                    queue.add_rate_limited(key.clone());
                }
            }
            queue.done(&key);
        }
    }

    fn rb_store(&self) -> Store<ResourceBinding> {
        self.inner.rb.cache().peek_store().clone()
    }

    /// A binding changed: queue it when it propagates dependencies (or did) and its generation
    /// moved on, or it is being deleted (Karmada's event filter).
    fn handle_binding(
        &self,
        key: ObjectKey,
        binding: Option<&ResourceBinding>,
    ) -> HandlerResult<ResourceBinding> {
        let Some(b) = binding else {
            self.inner.handled.lock().remove(&key);
            return HandlerResult::Success;
        };
        let ours = b.spec.propagate_deps
            || has_finalizer(b)
            || b.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(DEPENDENCIES_ANNOTATION));
        let generation = b.metadata.generation.unwrap_or_default();
        if !ours
            || (b.metadata.deletion_timestamp.is_none()
                && self.inner.handled.lock().get(&key) == Some(&generation))
        {
            return HandlerResult::Success;
        }
        self.inner.queue.add(key);
        HandlerResult::Success
    }

    /// A dependency object changed: queue the bindings that depend on it.
    fn handle_dependent(
        &self,
        api_version: &str,
        kind: &str,
        key: &ObjectKey,
        object: Option<&DynamicObject>,
    ) -> HandlerResult<DynamicObject> {
        let namespace = key.namespace().unwrap_or_default();
        let candidate = Candidate {
            api_version,
            kind,
            namespace,
            name: key.name(),
            labels: object.and_then(|o| o.metadata.labels.as_ref()),
        };
        let store = self.rb_store();
        for value in index::candidate_values(&candidate) {
            for b in store.by_index(index::DEPENDENCIES_INDEX, &value) {
                if b.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                if attached::recorded_dependencies(&b)
                    .iter()
                    .any(|d| attached::satisfies(d, &candidate))
                    && let Some(k) = ObjectKey::from_object(b.as_ref())
                {
                    self.inner.queue.add(k);
                }
            }
        }
        HandlerResult::Success
    }

    async fn reconcile(&self, key: &ObjectKey) -> Result<()> {
        let Some(binding) = self.rb_store().get(key) else {
            return Ok(());
        };
        let generation = binding.metadata.generation.unwrap_or_default();
        if !binding.spec.propagate_deps || binding.metadata.deletion_timestamp.is_some() {
            self.release_all(&binding).await?;
            self.update_independent(&binding, None).await?;
        } else {
            self.distribute(&binding).await?;
        }
        self.inner.handled.lock().insert(key.clone(), generation);
        Ok(())
    }

    async fn distribute(&self, binding: &Arc<ResourceBinding>) -> Result<()> {
        let resource = &binding.spec.resource;
        let Some(workload) = self.fetch(resource, false).await? else {
            // Not seen yet, or gone (its binding then goes next and is released). Either way the
            // binding is retried rather than marked handled: one marked handled at this generation
            // would never get its dependencies.
            return Err(DistributorError::TemplateNotCached {
                binding: key_of(binding),
                kind: resource.kind.clone(),
                template: karmada_apis::names::namespaced_key(&resource.namespace, &resource.name),
            });
        };
        let workload_ref = event_target(&workload, resource);
        let value = serde_json::to_value(workload.as_ref()).map_err(|source| {
            DistributorError::Serialize {
                key: key_of(binding),
                source,
            }
        })?;
        let dependencies = match self.inner.interpreter.get_dependencies(&value) {
            Ok(None) => return Ok(()),
            Ok(Some(d)) => d,
            Err(e) => {
                self.event(
                    &workload_ref,
                    EventType::Warning,
                    event_reasons::GET_DEPENDENCIES_FAILED,
                    e.to_string(),
                )
                .await;
                return Err(DistributorError::Interpret(e));
            }
        };
        self.event(
            &workload_ref,
            EventType::Normal,
            event_reasons::GET_DEPENDENCIES_SUCCEED,
            format!("Get dependencies({}) succeed.", go_format(&dependencies)),
        )
        .await;
        self.update_independent(binding, Some(&dependencies))
            .await?;
        let result = self.sync_attached(binding, &dependencies).await;
        let target = reference_of(binding.as_ref());
        match &result {
            Ok(()) => {
                self.event(
                    &target,
                    EventType::Normal,
                    reasons::SYNC_SCHEDULE_RESULT_TO_DEPENDENCIES_SUCCEED,
                    "Sync schedule results to dependencies succeed.",
                )
                .await;
            }
            Err(e) => {
                self.event(
                    &target,
                    EventType::Warning,
                    reasons::SYNC_SCHEDULE_RESULT_TO_DEPENDENCIES_FAILED,
                    e.to_string(),
                )
                .await;
            }
        }
        result
    }

    async fn event(
        &self,
        target: &EventTarget,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        self.inner
            .recorder
            .record(target, type_, reason, message)
            .await;
    }

    /// Writes the requirer's finalizer and dependencies annotation (`Some`), or removes the
    /// finalizer (`None`), in one guarded patch when something changes.
    async fn update_independent(
        &self,
        binding: &ResourceBinding,
        dependencies: Option<&[DependentObjectReference]>,
    ) -> Result<()> {
        let mut new = binding.clone();
        let finalizers = new.metadata.finalizers.get_or_insert_with(Vec::new);
        match dependencies {
            Some(deps) => {
                if !finalizers
                    .iter()
                    .any(|f| f == BINDING_DEPENDENCIES_DISTRIBUTOR_FINALIZER)
                {
                    finalizers.push(BINDING_DEPENDENCIES_DISTRIBUTOR_FINALIZER.to_owned());
                }
                let value = attached::dependencies_annotation(deps).map_err(|source| {
                    DistributorError::Serialize {
                        key: key_of(binding),
                        source,
                    }
                })?;
                new.metadata
                    .annotations
                    .get_or_insert_with(BTreeMap::new)
                    .insert(DEPENDENCIES_ANNOTATION.to_owned(), value);
            }
            None => finalizers.retain(|f| f != BINDING_DEPENDENCIES_DISTRIBUTOR_FINALIZER),
        }
        if new.metadata.finalizers.as_ref().is_some_and(Vec::is_empty)
            && binding.metadata.finalizers.is_none()
        {
            new.metadata.finalizers = None;
        }
        self.patch(binding, &new).await
    }

    /// The guarded merge patch turning `old` into `new`, if they differ. Gone: nothing to do.
    async fn patch(&self, old: &ResourceBinding, new: &ResourceBinding) -> Result<()> {
        let key = key_of(old);
        let Some(patch) =
            guarded_merge_patch(old, new).map_err(|source| DistributorError::Serialize {
                key: key.clone(),
                source,
            })?
        else {
            return Ok(());
        };
        let api: Api<ResourceBinding> = Api::namespaced(
            self.inner.client.clone(),
            old.metadata.namespace.as_deref().unwrap_or_default(),
        );
        let name = old.metadata.name.as_deref().unwrap_or_default();
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(ApiError::new("patch", "ResourceBinding", key, e).into()),
        }
    }

    /// The attached bindings `binding` is recorded in (by its depended-by label and id).
    fn attached_of(&self, binding: &ResourceBinding) -> Vec<Arc<ResourceBinding>> {
        let namespace = binding.metadata.namespace.as_deref().unwrap_or_default();
        let name = binding.metadata.name.as_deref().unwrap_or_default();
        let label = attached::depended_by_label(namespace, name);
        let id = attached::permanent_id(binding);
        self.rb_store()
            .by_index(index::DEPENDED_BY_INDEX, &label)
            .into_iter()
            .filter(|b| {
                b.metadata.namespace.as_deref() == Some(namespace)
                    && b.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(&label))
                        .is_some_and(|v| *v == id)
            })
            .collect()
    }

    /// Removes `binding` from every attached binding (Karmada's
    /// `handleIndependentBindingDeletion`).
    async fn release_all(&self, binding: &ResourceBinding) -> Result<()> {
        let mut errors = Vec::new();
        for a in self.attached_of(binding) {
            if let Err(e) = self.release(binding, &a).await {
                errors.push(e);
            }
        }
        DistributorError::several(errors)
    }

    /// Removes the requirer `binding` from the attached binding `a`: its label and snapshot go,
    /// and an attached binding without a placement takes its policy fields from the requirers left
    /// (none left: the defaults).
    async fn release(&self, binding: &ResourceBinding, a: &ResourceBinding) -> Result<()> {
        let namespace = binding.metadata.namespace.as_deref().unwrap_or_default();
        let name = binding.metadata.name.as_deref().unwrap_or_default();
        let mut new = a.clone();
        if let Some(labels) = new.metadata.labels.as_mut() {
            labels.remove(&attached::depended_by_label(namespace, name));
        }
        new.spec.required_by = attached::remove_snapshot(new.spec.required_by, namespace, name);
        if new.spec.placement.is_none() {
            if new.spec.required_by.is_empty() {
                new.spec.conflict_resolution = Default::default();
                new.spec.preserve_resources_on_deletion = None;
            } else {
                let requirers = self.requirers(&new, None);
                let inherited = Inherited::of(requirers.iter().map(|r| &r.spec));
                new.spec.conflict_resolution = inherited.conflict_resolution;
                new.spec.preserve_resources_on_deletion =
                    Some(inherited.preserve_resources_on_deletion);
            }
        }
        self.patch(a, &new).await
    }

    /// The bindings `a.spec.requiredBy` names, from the cache (`fresh` replaces its own entry).
    fn requirers(
        &self,
        a: &ResourceBinding,
        fresh: Option<&Arc<ResourceBinding>>,
    ) -> Vec<Arc<ResourceBinding>> {
        let store = self.rb_store();
        a.spec
            .required_by
            .iter()
            .filter_map(|s| {
                if let Some(f) = fresh
                    && f.metadata.namespace.as_deref() == Some(s.namespace.as_str())
                    && f.metadata.name.as_deref() == Some(s.name.as_str())
                {
                    return Some(f.clone());
                }
                store.get_named(Some(&s.namespace), &s.name)
            })
            .collect()
    }

    /// Karmada's `syncScheduleResultToAttachedBindings` after the annotation: releases attached
    /// bindings no dependency names any more, then creates or updates one per dependency object.
    async fn sync_attached(
        &self,
        binding: &Arc<ResourceBinding>,
        dependencies: &[DependentObjectReference],
    ) -> Result<()> {
        let mut errors = Vec::new();
        for a in self.attached_of(binding) {
            let r = &a.spec.resource;
            let labels = BTreeMap::new();
            let labels = match self.fetch(r, true).await {
                Ok(Some(o)) => o.metadata.labels.clone().unwrap_or(labels),
                Ok(None) => labels,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            let candidate = Candidate {
                api_version: &r.api_version,
                kind: &r.kind,
                namespace: &r.namespace,
                name: &r.name,
                labels: Some(&labels),
            };
            if !dependencies
                .iter()
                .any(|d| attached::satisfies(d, &candidate))
                && let Err(e) = self.release(binding, &a).await
            {
                errors.push(e);
            }
        }
        for dependency in dependencies {
            if let Err(e) = self.sync_dependency(binding, dependency).await {
                errors.push(e);
            }
        }
        DistributorError::several(errors)
    }

    async fn sync_dependency(
        &self,
        binding: &Arc<ResourceBinding>,
        dependency: &DependentObjectReference,
    ) -> Result<()> {
        let store = self
            .watch_kind(&dependency.api_version, &dependency.kind, true)
            .await?;
        let objects: Vec<Arc<DynamicObject>> = if !dependency.name.is_empty() {
            store
                .get_named(
                    Some(dependency.namespace.as_str()).filter(|n| !n.is_empty()),
                    &dependency.name,
                )
                .into_iter()
                .collect()
        } else if let Some(selector) = &dependency.label_selector {
            let empty = BTreeMap::new();
            store
                .list_namespace(&dependency.namespace)
                .into_iter()
                .filter(|o| {
                    karmada_policy::selector::label_selector_matches(
                        selector,
                        o.metadata.labels.as_ref().unwrap_or(&empty),
                    )
                })
                .collect()
        } else {
            return Ok(()); // neither a name nor a selector: nothing to propagate
        };
        let mut errors = Vec::new();
        for object in objects {
            let reference = ObjectReference {
                api_version: dependency.api_version.clone(),
                kind: dependency.kind.clone(),
                namespace: object.metadata.namespace.clone().unwrap_or_default(),
                name: object.metadata.name.clone().unwrap_or_default(),
                uid: object.metadata.uid.clone().unwrap_or_default(),
                resource_version: object.metadata.resource_version.clone().unwrap_or_default(),
            };
            if let Err(e) = self.create_or_update_attached(binding, &reference).await {
                errors.push(e);
            }
        }
        DistributorError::several(errors)
    }

    /// Karmada's `createOrUpdateAttachedBinding`.
    async fn create_or_update_attached(
        &self,
        binding: &Arc<ResourceBinding>,
        object: &ObjectReference,
    ) -> Result<()> {
        let desired = attached::build(binding, object, uuid::Uuid::new_v4().to_string());
        let namespace = desired.metadata.namespace.clone().unwrap_or_default();
        let name = desired.metadata.name.clone().unwrap_or_default();
        let key = karmada_apis::names::namespaced_key(&namespace, &name);
        let Some(existing) = self.rb_store().get_named(Some(&namespace), &name) else {
            let api: Api<ResourceBinding> = Api::namespaced(self.inner.client.clone(), &namespace);
            // A binding created meanwhile (not in the cache yet) is a conflict: retried.
            return match api.create(&PostParams::default(), &desired).await {
                Ok(_) => Ok(()),
                Err(e) => Err(ApiError::new("create", "ResourceBinding", key, e).into()),
            };
        };
        if let Some(owner) = existing
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            && owner.uid != object.uid
        {
            return Err(DistributorError::OwnedByAnother {
                key,
                kind: object.kind.clone(),
                owner: owner.uid.clone(),
            });
        }
        let mut new = existing.as_ref().clone();
        new.spec.required_by =
            attached::merge_snapshots(new.spec.required_by, &desired.spec.required_by);
        if new.spec.placement.is_none() {
            let requirers = self.requirers(&new, Some(binding));
            let inherited = Inherited::of(requirers.iter().map(|r| &r.spec));
            if let Some(message) = inherited.conflict_message() {
                self.event(
                    &reference_of(existing.as_ref()),
                    EventType::Warning,
                    reasons::DEPENDENCY_POLICY_CONFLICT,
                    message,
                )
                .await;
            }
            new.spec.conflict_resolution = inherited.conflict_resolution;
            // Unset reads as false: writing an explicit false over it would rewrite every attached
            // binding on each restart and change nothing.
            if new.spec.preserve_resources_on_deletion.unwrap_or(false)
                != inherited.preserve_resources_on_deletion
            {
                new.spec.preserve_resources_on_deletion =
                    Some(inherited.preserve_resources_on_deletion);
            }
        }
        let labels = new.metadata.labels.get_or_insert_with(BTreeMap::new);
        for (k, v) in desired.metadata.labels.iter().flatten() {
            // The permanent id of an existing binding stays.
            if k != karmada_apis::well_known::RESOURCE_BINDING_PERMANENT_ID_LABEL
                || !labels.contains_key(k)
            {
                labels.insert(k.clone(), v.clone());
            }
        }
        new.spec.resource = object.clone();
        self.patch(&existing, &new).await
    }

    /// The object `r` names, from the shared cache of its kind (`None`: it does not exist);
    /// `dependency`: the kind is a dependency kind (see [`Self::watch_kind`]).
    async fn fetch(
        &self,
        r: &ObjectReference,
        dependency: bool,
    ) -> Result<Option<Arc<DynamicObject>>> {
        let store = self.watch_kind(&r.api_version, &r.kind, dependency).await?;
        Ok(store
            .get_named(
                Some(r.namespace.as_str()).filter(|n| !n.is_empty()),
                &r.name,
            )
            .map(|o| with_type_meta(o, &r.api_version, &r.kind)))
    }

    /// The synced store of a kind; for a dependency kind, with the dependency handler registered
    /// on its shared controller the first time (Karmada's `InformerManager.ForResource` with its
    /// handler).
    async fn watch_kind(
        &self,
        api_version: &str,
        kind: &str,
        dependency: bool,
    ) -> Result<Store<DynamicObject>> {
        let (group, version) = apimachinery::split_api_version(api_version);
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let what = format!("{kind} ({api_version})");
        let cp = &self.inner.ctx.control_plane;
        // Resolve first so an unknown kind is an error here, not a watch waiting for its timeout.
        cp.clients()
            .resolve(&gvk)
            .await
            .map_err(framework(format!("mapping of {what}")))?;
        let ctrl = cp
            .controllers()
            .for_gvk(&gvk)
            .map_err(framework(format!("{what} controller")))?;
        let first = dependency
            && self
                .inner
                .watched
                .lock()
                .insert((api_version.to_owned(), kind.to_owned()));
        if first {
            let (av, k) = (api_version.to_owned(), kind.to_owned());
            let this = self.clone();
            ctrl.register_handler(
                NAME,
                self.inner.cancel.clone(),
                move |key, o: Option<Arc<DynamicObject>>| {
                    let (this, av, k) = (this.clone(), av.clone(), k.clone());
                    async move { this.handle_dependent(&av, &k, &key, o.as_deref()) }
                },
            );
        }
        // Selected dependencies are looked up per namespace (idempotent).
        ctrl.cache().peek_store().index_by_namespace();
        let timeout = self.inner.ctx.settings.cluster_cache_sync_timeout;
        match ctrl
            .wait_synced(&self.inner.cancel, timeout)
            .await
            .map_err(framework(format!("{what} cache")))?
        {
            SyncWait::Synced => Ok(ctrl.store()),
            SyncWait::Cancelled => Err(DistributorError::Stopped(what)),
        }
    }
}

fn has_finalizer(b: &ResourceBinding) -> bool {
    b.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == BINDING_DEPENDENCIES_DISTRIBUTOR_FINALIZER)
}

fn key_of(b: &ResourceBinding) -> String {
    karmada_apis::names::namespaced_key(
        b.metadata.namespace.as_deref().unwrap_or_default(),
        b.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// The Event reference of a template.
fn event_target(o: &DynamicObject, r: &ObjectReference) -> EventTarget {
    EventTarget {
        api_version: Some(r.api_version.clone()),
        kind: Some(r.kind.clone()),
        namespace: o.metadata.namespace.clone(),
        name: o.metadata.name.clone(),
        uid: o.metadata.uid.clone(),
        resource_version: o.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// The dependencies as Go's `%+v` prints them in Karmada's Event (`LabelSelector` as JSON).
fn go_format(dependencies: &[DependentObjectReference]) -> String {
    let items: Vec<String> = dependencies
        .iter()
        .map(|d| {
            let selector = d
                .label_selector
                .as_ref()
                .and_then(|s| serde_json::to_string(s).ok())
                .unwrap_or_else(|| "nil".to_owned());
            format!(
                "{{APIVersion:{} Kind:{} Namespace:{} Name:{} LabelSelector:{selector}}}",
                d.api_version, d.kind, d.namespace, d.name
            )
        })
        .collect();
    format!("[{}]", items.join(" "))
}
