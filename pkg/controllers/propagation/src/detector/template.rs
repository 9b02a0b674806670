//! Template reconciliation: match a policy, claim the template, write its binding; delete the
//! binding when the template goes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karmada_apis::names::binding_name;
use karmada_apis::policy::v1alpha1::{ClusterOverridePolicy, OverridePolicy};
use karmada_apis::well_known::{
    RESOURCE_TEMPLATE_CLAIMED_BY_LABEL, RESOURCE_TEMPLATE_GENERATION_ANNOTATION, event_reasons,
};
use karmada_apis::{ClusterResourceBinding, PropagationSpec, ResourceBinding, ResourceBindingSpec};
use karmada_policy::matching::{
    Claim, best_cluster_propagation_policy, best_propagation_policy, defaulted_selectors,
    read_claim,
};
use karmada_policy::selector::{ResourceRef, resource_matches_selectors};
use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions, TypeMeta,
};
use lariat::cache::store::label_index_name;
use lariat::{HandlerResult, ObjectKey};

use super::binding::{
    BindingObject, BuildOptions, TemplateIdentity, build, controller_owner, kube_priority_class,
    merge_into,
};
use super::claim::{PolicyKind, PolicyRef, claim, claimed_by_id, is_claimed_by, remove_claim};
use super::error::{DetectorError, is_conflict};
use super::fingerprint::spec_fingerprint;
use super::metrics::{observe_apply, observe_match};
use super::policy_index;
use super::policy_object::PolicyObject;
use super::skip::is_ignored_object;
use super::{
    Detector, FEATURE_PRIORITY_BASED_SCHEDULING, FEATURE_WORKLOAD_AFFINITY, TemplateRef,
    WatchedKind, handler_result, template_reference,
};
use apimachinery::{
    ConflictRetry, DEFAULT_RETRY, is_already_exists, is_not_found, retry_on_conflict,
};
use karmada_controllers_common::priority::priority_class;
use karmada_controllers_common::work::MANIFEST_DECORATION_KEYS;
use lariat::events::EventType;

/// When a template that matched no policy is looked at once more.
const NO_MATCH_RETRY: std::time::Duration = std::time::Duration::from_millis(500);

fn labels_of(obj: &DynamicObject) -> BTreeMap<String, String> {
    obj.metadata.labels.clone().unwrap_or_default()
}

/// The guarded merge patch that turns a template's metadata `old` into `new` (claim labels and
/// annotations), so what the cache may have stripped from `old` (managedFields, kubectl's
/// last-applied annotation) is left alone on the API server. `None` when nothing changed.
pub(crate) fn template_patch(
    old: &ObjectMeta,
    new: &ObjectMeta,
    kind: &str,
    key: &str,
) -> Result<Option<serde_json::Value>, DetectorError> {
    karmada_controllers_common::patch::guarded_metadata_patch(old, new).map_err(|source| {
        DetectorError::Convert {
            what: format!("{kind} {key}"),
            source,
        }
    })
}

/// The dynamic API of a template's kind in its namespace.
pub(crate) fn template_api(
    client: &kube::Client,
    w: &WatchedKind,
    namespace: &str,
) -> Api<DynamicObject> {
    if w.namespaced {
        Api::namespaced_with(client.clone(), namespace, &w.ar)
    } else {
        Api::all_with(client.clone(), &w.ar)
    }
}

impl Detector {
    /// The template handler registered on every watched kind.
    pub(crate) async fn handle_template(
        &self,
        w: &WatchedKind,
        key: ObjectKey,
        obj: Option<Arc<DynamicObject>>,
    ) -> HandlerResult<DynamicObject> {
        let inner = &self.inner;
        let t = TemplateRef {
            group: w.ar.group.clone(),
            kind: w.ar.kind.clone(),
            namespace: key.namespace().unwrap_or_default().to_owned(),
            name: key.name().to_owned(),
        };
        if is_ignored_object(
            &inner.ctx.settings.skipped_propagating_namespaces,
            &t.kind,
            &t.namespace,
            &t.name,
        ) {
            return HandlerResult::Success;
        }
        let Some(obj) = obj else {
            inner.waiting.lock().remove(&t);
            inner.fingerprints.lock().remove(&t);
            inner.forced.lock().remove(&t);
            inner.lazy.forget(&t);
            return handler_result(self.delete_binding_of(w, &t).await);
        };
        let mut obj = (*obj).clone();
        obj.types = Some(TypeMeta {
            api_version: w.ar.api_version.clone(),
            kind: w.ar.kind.clone(),
        });
        let fingerprint = spec_fingerprint(&obj);
        let forced = inner.forced.lock().remove(&t);
        if !forced && inner.fingerprints.lock().get(&t) == Some(&fingerprint) {
            tracing::trace!(kind = %t.kind, namespace = %t.namespace, name = %t.name, "no specification change");
            return HandlerResult::Success;
        }
        tracing::debug!(kind = %t.kind, namespace = %t.namespace, name = %t.name, "reconciling template");
        inner.lazy.observe(&t, &obj);
        match self.propagate(w, &t, obj).await {
            Ok(()) => {
                inner.lazy.settled(&t);
                inner.fingerprints.lock().insert(t, fingerprint);
                HandlerResult::Success
            }
            Err(DetectorError::WorksNotListed { .. }) => {
                // Handled again once the Work cache has listed ([`Detector::defer_until_works_listed`]).
                inner.forced.lock().insert(t.clone());
                if self.defer_until_works_listed(&w.ctrl, key) {
                    HandlerResult::Success
                } else {
                    HandlerResult::RequeueAfter(std::time::Duration::ZERO)
                }
            }
            Err(DetectorError::NoMatchedPolicy { .. }) => {
                // Karmada retries once in case the template and its policy arrived together; a
                // plain requeue keeps that from being logged and counted as a failure.
                inner.forced.lock().insert(t);
                HandlerResult::RequeueAfter(NO_MATCH_RETRY)
            }
            Err(e) => {
                // The retry must not be filtered out as "unchanged".
                inner.forced.lock().insert(t);
                HandlerResult::Error(Box::new(e))
            }
        }
    }

    /// Karmada's `propagateResource`.
    #[allow(
        clippy::too_many_lines,
        reason = "Karmada's propagateResource step for step: skip checks, policy match, claim or wait"
    )]
    async fn propagate(
        &self,
        w: &WatchedKind,
        t: &TemplateRef,
        obj: DynamicObject,
    ) -> Result<(), DetectorError> {
        let inner = &self.inner;
        let labels = labels_of(&obj);
        if labels
            .get(RESOURCE_TEMPLATE_CLAIMED_BY_LABEL)
            .is_some_and(|v| !v.is_empty())
        {
            inner.waiting.lock().remove(t);
            return Ok(());
        }
        let annotations = obj.metadata.annotations.clone().unwrap_or_default();
        let resource = ResourceRef {
            api_version: &w.ar.api_version,
            kind: &w.ar.kind,
            namespace: &t.namespace,
            name: &t.name,
            labels: &labels,
        };
        match read_claim(&labels, &annotations) {
            Some(Claim::PropagationPolicy {
                namespace,
                name,
                id,
            }) => {
                let policy = inner.pp.store().get_named(Some(&namespace), &name);
                let pref = PolicyRef {
                    kind: PolicyKind::PropagationPolicy,
                    namespace,
                    name,
                    id,
                };
                let Some(policy) = policy else {
                    tracing::info!(kind = %t.kind, namespace = %t.namespace, name = %t.name, policy = %pref, "claiming policy is gone; releasing the template");
                    return self
                        .release(w, &obj, PolicyKind::PropagationPolicy, &pref.id)
                        .await;
                };
                if policy.metadata.deletion_timestamp.is_some() {
                    return Err(DetectorError::PolicyDeleting {
                        policy: pref.to_string(),
                    });
                }
                let selectors =
                    defaulted_selectors(&policy.spec.resource_selectors, &pref.namespace);
                if !resource_matches_selectors(resource, &selectors) {
                    return Ok(());
                }
                self.check_dependent_overrides(&pref, &policy.spec).await?;
                let pref = self.policy_ref(policy.as_ref()).await?;
                self.apply_policy(w, obj, &pref, &policy.spec).await
            }
            Some(Claim::ClusterPropagationPolicy { name, id }) => {
                let policy = inner.cpp.store().get_named(None, &name);
                let Some(policy) = policy else {
                    tracing::info!(kind = %t.kind, namespace = %t.namespace, name = %t.name, policy = %name, "claiming cluster policy is gone; releasing the template");
                    return self
                        .release(w, &obj, PolicyKind::ClusterPropagationPolicy, &id)
                        .await;
                };
                let pref = self.policy_ref(policy.as_ref()).await?;
                if policy.metadata.deletion_timestamp.is_some() {
                    return Err(DetectorError::PolicyDeleting {
                        policy: pref.to_string(),
                    });
                }
                if !resource_matches_selectors(resource, &policy.spec.resource_selectors) {
                    return Ok(());
                }
                self.check_dependent_overrides(&pref, &policy.spec).await?;
                self.apply_policy(w, obj, &pref, &policy.spec).await
            }
            None => {
                let started = Instant::now();
                // Only the policies whose selectors could select it (indexed), compared in place;
                // one listed under both values is compared twice, which picks the same best.
                let pps = if t.namespace.is_empty() {
                    Vec::new()
                } else {
                    let store = inner.pp.store();
                    policy_index::candidate_values(&t.namespace, &t.kind, &t.name)
                        .iter()
                        .flat_map(|v| store.by_index(policy_index::SELECTS_INDEX, v))
                        .collect()
                };
                if let Some(policy) =
                    best_propagation_policy(resource, pps.iter().map(AsRef::as_ref))
                {
                    return self.adopt(w, t, obj, policy, started).await;
                }
                let cpps = inner.cpp.store().list();
                if let Some(policy) =
                    best_cluster_propagation_policy(resource, cpps.iter().map(AsRef::as_ref))
                {
                    return self.adopt(w, t, obj, policy, started).await;
                }
                let mut waiting = inner.waiting.lock();
                if waiting.contains(t) {
                    tracing::debug!(kind = %t.kind, namespace = %t.namespace, name = %t.name, "no matched policy; waiting");
                    return Ok(());
                }
                // Retry once in case the template and its policy arrived together (Karmada #1195).
                waiting.insert(t.clone());
                Err(DetectorError::NoMatchedPolicy {
                    kind: t.kind.clone(),
                    key: t.key(),
                })
            }
        }
    }

    /// Propagates an unclaimed template by `policy`, the best match found for it (`started`: when
    /// matching began, for the match-duration metric).
    async fn adopt<P: PolicyObject>(
        &self,
        w: &WatchedKind,
        t: &TemplateRef,
        obj: DynamicObject,
        policy: &P,
        started: Instant,
    ) -> Result<(), DetectorError> {
        let pref = self.policy_ref(policy).await?;
        self.check_dependent_overrides(&pref, policy.spec()).await?;
        self.inner.waiting.lock().remove(t);
        observe_match(started);
        self.apply_policy(w, obj, &pref, policy.spec()).await
    }

    /// Waits (by failing) until every override policy the policy depends on exists.
    pub(crate) async fn check_dependent_overrides(
        &self,
        policy: &PolicyRef,
        spec: &PropagationSpec,
    ) -> Result<(), DetectorError> {
        for name in &spec.dependent_overrides {
            let found = match policy.kind {
                PolicyKind::PropagationPolicy => {
                    Api::<OverridePolicy>::namespaced(self.inner.client.clone(), &policy.namespace)
                        .get_opt(name)
                        .await
                        .map(|o| o.is_some())
                }
                PolicyKind::ClusterPropagationPolicy => {
                    Api::<ClusterOverridePolicy>::all(self.inner.client.clone())
                        .get_opt(name)
                        .await
                        .map(|o| o.is_some())
                }
            }
            .map_err(|e| DetectorError::api("get", "OverridePolicy", name.clone(), e))?;
            if !found {
                return Err(DetectorError::DependentOverrides {
                    policy: policy.to_string(),
                    missing: name.clone(),
                });
            }
        }
        Ok(())
    }

    /// Applies a policy to a template, with Karmada's metrics and Events.
    async fn apply_policy(
        &self,
        w: &WatchedKind,
        obj: DynamicObject,
        policy: &PolicyRef,
        spec: &PropagationSpec,
    ) -> Result<(), DetectorError> {
        let started = Instant::now();
        let reference = template_reference(&obj, &w.ar);
        tracing::info!(kind = %w.ar.kind, namespace = obj.metadata.namespace.as_deref().unwrap_or_default(),
            name = obj.metadata.name.as_deref().unwrap_or_default(), policy = %policy, "applying policy");
        let result = self.apply_policy_inner(w, obj, policy, spec).await;
        observe_apply(&result, started);
        let recorder = &self.inner.recorder;
        match &result {
            Err(e) => {
                recorder
                    .record(
                        &reference,
                        EventType::Warning,
                        event_reasons::APPLY_POLICY_FAILED,
                        format!("Apply {policy} failed: {e}"),
                    )
                    .await;
            }
            Ok(true) => {
                recorder
                    .record(
                        &reference,
                        EventType::Normal,
                        event_reasons::APPLY_POLICY_SUCCEED,
                        format!("Apply {policy} succeed"),
                    )
                    .await;
            }
            Ok(false) => {}
        }
        result.map(|_| ())
    }

    /// Claims the template and creates or updates its binding. Returns true if the binding changed.
    #[allow(
        clippy::too_many_lines,
        reason = "claim, binding build and write of one template, in Karmada's order"
    )]
    async fn apply_policy_inner(
        &self,
        w: &WatchedKind,
        mut obj: DynamicObject,
        policy: &PolicyRef,
        spec: &PropagationSpec,
    ) -> Result<bool, DetectorError> {
        let inner = &self.inner;
        let namespace = obj.metadata.namespace.clone().unwrap_or_default();
        let name = obj.metadata.name.clone().unwrap_or_default();
        let key = karmada_apis::names::namespaced_key(&namespace, &name);
        // Only a template not yet claimed is copied and written.
        if !is_claimed_by(&obj.metadata, policy) {
            let read = obj.metadata.clone();
            claim(&mut obj.metadata, policy);
            if let Some(patch) = template_patch(&read, &obj.metadata, &w.ar.kind, &key)? {
                let types = obj.types.clone();
                obj = template_api(&inner.client, w, &namespace)
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|e| DetectorError::api("claim", w.ar.kind.clone(), key.clone(), e))?;
                obj.types = types;
            }
        }
        let t = TemplateRef {
            group: w.ar.group.clone(),
            kind: w.ar.kind.clone(),
            namespace: namespace.clone(),
            name: name.clone(),
        };
        if super::lazy::is_lazy(spec) && !inner.lazy.user_change_pending(&t) {
            tracing::info!(template = %t, policy = %policy, "lazy activation: the binding waits for the template's next change");
            return Ok(false);
        }
        let value = serde_json::to_value(&obj).map_err(|source| DetectorError::Convert {
            what: format!("{} {key}", w.ar.kind),
            source,
        })?;
        let replicas = self.interpret_replicas(w, &obj, &value, &namespace).await?;
        let gates = &inner.ctx.settings.feature_gates;
        let mut options = BuildOptions {
            workload_affinity: gates.enabled(FEATURE_WORKLOAD_AFFINITY),
            schedule_priority: None,
        };
        if gates.enabled(FEATURE_PRIORITY_BASED_SCHEDULING)
            && let Some(class) = kube_priority_class(spec)
        {
            let pc = priority_class(&inner.client, class)
                .await
                .map_err(|e| DetectorError::api("get", "PriorityClass", class, e))?;
            options.schedule_priority = pc.value;
        }
        let identity = TemplateIdentity::of(&obj);
        let desired = build(
            &identity,
            &labels_of(&obj),
            policy,
            spec,
            replicas,
            &options,
        );
        let bname = desired.meta.name.clone().unwrap_or_default();
        if namespace.is_empty() {
            let cached = cached_binding(&self.inner.crb, None, &bname);
            // Boxed: the binding's copies would make every caller's future large.
            Box::pin(self.create_or_update_binding::<ClusterResourceBinding>(
                &identity,
                &obj.metadata,
                desired,
                policy,
                cached,
            ))
            .await
        } else {
            let cached = cached_binding(&self.inner.rb, Some(&namespace), &bname);
            Box::pin(self.create_or_update_binding::<ResourceBinding>(
                &identity,
                &obj.metadata,
                desired,
                policy,
                cached,
            ))
            .await
        }
    }

    /// Whether the binding (by its permanent id) has Works and every one of them was built from
    /// template generation `generation` (`resourcetemplate.karmada.io/generation` on the manifest). False for kinds
    /// without a generation, and while the Work cache has not synced.
    /// A label or annotation change moves no generation, so the manifests must also carry the
    /// template's labels and annotations ([`metadata_reflected`]).
    fn works_carry_generation<B: BindingObject>(
        &self,
        meta: &ObjectMeta,
        generation: i64,
        template_meta: &ObjectMeta,
    ) -> bool {
        let Some(id) = meta.labels.as_ref().and_then(|l| l.get(B::ID_LABEL)) else {
            return false;
        };
        if generation <= 0 || !self.inner.works.has_synced() {
            return false;
        }
        let works = self
            .inner
            .works
            .by_index(&label_index_name(B::ID_LABEL), id);
        let wanted = generation.to_string();
        // The binding controller records the generation on the manifest it puts in the Work.
        !works.is_empty()
            && works.iter().all(|w| {
                w.spec.workload.manifests.iter().all(|m| {
                    // Only the metadata is decoded; the rest of the manifest is skipped.
                    m.decode::<MetadataOnly>().is_ok_and(|m| {
                        m.metadata
                            .pointer("/annotations")
                            .and_then(|a| a.get(RESOURCE_TEMPLATE_GENERATION_ANNOTATION))
                            .and_then(serde_json::Value::as_str)
                            == Some(wanted.as_str())
                            && metadata_reflected(&m.metadata, template_meta)
                    })
                })
            })
    }

    /// Karmada's `CreateOrUpdate` of the binding. Returns true if it was created or changed.
    ///
    /// The first look is at `cached` ([`cached_binding`], as Karmada's cached client reads it):
    /// absent, the binding is created without a read; present and already as desired, nothing
    /// is read or written. Only a binding that needs a write is read from the API server, and the
    /// write is built from that fresh copy, never from the cached one.
    #[allow(
        clippy::too_many_lines,
        reason = "read-free create, no-op check and fresh-read update of one binding kept together"
    )]
    async fn create_or_update_binding<B: BindingObject>(
        &self,
        template: &TemplateIdentity,
        template_meta: &ObjectMeta,
        desired: super::binding::DesiredBinding,
        policy: &PolicyRef,
        cached: CachedBinding<B>,
    ) -> Result<bool, DetectorError> {
        let inner = &self.inner;
        let name = desired.meta.name.clone().unwrap_or_default();
        let namespace = desired.meta.namespace.clone().unwrap_or_default();
        let key = karmada_apis::names::namespaced_key(&namespace, &name);
        let kind = B::kind(&()).into_owned();
        let api = B::api(inner.client.clone(), &namespace);
        let mut last_err = None;
        let mut retry = ConflictRetry::new(DEFAULT_RETRY);
        // The cached copy, for a first look that costs no retry.
        let mut first = match cached {
            CachedBinding::Unknown => None,
            CachedBinding::Absent => Some(None),
            CachedBinding::Present(b) => Some(Some((*b).clone())),
        };
        loop {
            let from_cache = first.is_some();
            if !from_cache && !retry.next().await {
                break;
            }
            let existing = match first.take() {
                Some(cached) => cached,
                None => api
                    .get_opt(&name)
                    .await
                    .map_err(|e| DetectorError::api("get", kind.clone(), key.clone(), e))?,
            };
            let result = match existing {
                None => {
                    let mut meta = desired.meta.clone();
                    meta.labels
                        .get_or_insert_with(Default::default)
                        .insert(B::ID_LABEL.to_owned(), uuid::Uuid::new_v4().to_string());
                    let obj = B::from_parts(meta, desired.spec.clone());
                    api.create(&PostParams::default(), &obj).await.map(|_| {
                        tracing::info!(kind = %kind, namespace = %namespace, name = %name, "created binding");
                        true
                    })
                }
                Some(mut existing) => {
                    if let Some(owner) = controller_owner(existing.meta())
                        && owner.uid != template.uid
                    {
                        return Err(DetectorError::OwnerMismatch {
                            kind: if namespace.is_empty() {
                                "ClusterResourceBinding"
                            } else {
                                "ResourceBinding"
                            },
                            key,
                            owner: owner.uid.clone(),
                            template: template.uid.clone(),
                        });
                    }
                    let update = |meta: &mut ObjectMeta, spec: &mut ResourceBindingSpec| {
                        let mut changed = merge_into(meta, spec, &desired);
                        if policy.kind == PolicyKind::PropagationPolicy {
                            changed |= remove_claim(meta, PolicyKind::ClusterPropagationPolicy);
                        }
                        let labels = meta.labels.get_or_insert_with(Default::default);
                        if labels.get(B::ID_LABEL).is_none_or(String::is_empty) {
                            labels.insert(B::ID_LABEL.to_owned(), uuid::Uuid::new_v4().to_string());
                            changed = true;
                        }
                        changed
                    };
                    // Would anything but `spec.resource.resourceVersion` change?
                    let (mut probe_meta, mut probe_spec) = {
                        let (m, s) = existing.parts_mut();
                        (m.clone(), s.clone())
                    };
                    probe_spec.resource.resource_version =
                        desired.spec.resource.resource_version.clone();
                    let more_than_version = update(&mut probe_meta, &mut probe_spec);
                    let (meta, spec) = existing.parts_mut();
                    let changed = update(meta, spec);
                    if !changed {
                        tracing::debug!(kind = %kind, namespace = %namespace, name = %name, "binding is up to date");
                        return Ok(false);
                    }
                    if !more_than_version && !inner.works.has_synced() && self.deferring() {
                        return Err(DetectorError::WorksNotListed { kind, key });
                    }
                    if from_cache {
                        // Writes start from the API server's copy.
                        continue;
                    }
                    if !more_than_version
                        && self.works_carry_generation::<B>(
                            meta,
                            template.generation,
                            template_meta,
                        )
                    {
                        // The template moved only by status or metadata writes since the binding was
                        // written (status changes do not reach the binding, as in Karmada), and its
                        // Works already hold the template's generation: rewriting the binding would
                        // change nothing downstream. This keeps a restart free of binding writes.
                        tracing::debug!(kind = %kind, namespace = %namespace, name = %name, "binding differs only in the template's resourceVersion; Works are current");
                        return Ok(false);
                    }
                    api.replace(&name, &PostParams::default(), &existing).await.map(|_| {
                        tracing::info!(kind = %kind, namespace = %namespace, name = %name, "updated binding");
                        true
                    })
                }
            };
            match result {
                Ok(changed) => return Ok(changed),
                // Created meanwhile (the cache had not seen it yet): read it and compare.
                Err(e) if from_cache && is_already_exists(&e) => {}
                Err(e) if is_conflict(&e) => {
                    last_err = Some(DetectorError::api("write", kind.clone(), key.clone(), e));
                }
                Err(e) => return Err(DetectorError::api("write", kind.clone(), key.clone(), e)),
            }
        }
        Err(last_err.unwrap_or(DetectorError::ConflictRetries { kind, key }))
    }

    /// Removes a vanished policy's claim from the template's binding, then from the template
    /// (Karmada's `handleResourceTemplateAndBindingCleanup`).
    pub(crate) async fn release(
        &self,
        w: &WatchedKind,
        obj: &DynamicObject,
        kind: PolicyKind,
        id: &str,
    ) -> Result<(), DetectorError> {
        let identity = TemplateIdentity::of(obj);
        let bname = binding_name(&w.ar.kind, &identity.name);
        if identity.namespace.is_empty() {
            self.release_binding::<ClusterResourceBinding>("", &bname, kind, id)
                .await?;
        } else {
            self.release_binding::<ResourceBinding>(&identity.namespace, &bname, kind, id)
                .await?;
        }
        self.release_template(w, obj, kind, id).await
    }

    /// Removes the claim of policy `id` from a binding, if it still carries it.
    pub(crate) async fn release_binding<B: BindingObject>(
        &self,
        namespace: &str,
        name: &str,
        kind: PolicyKind,
        id: &str,
    ) -> Result<(), DetectorError> {
        let api = B::api(self.inner.client.clone(), namespace);
        let key = karmada_apis::names::namespaced_key(namespace, name);
        let bkind = B::kind(&()).into_owned();
        let (api, key, bkind) = (&api, &key, &bkind);
        // Each attempt reads the binding afresh, so the attempt is a closure.
        retry_on_conflict(DEFAULT_RETRY, DetectorError::is_conflict, |_| async move {
            let Some(mut b) = api
                .get_opt(name)
                .await
                .map_err(|e| DetectorError::api("get", bkind.clone(), key.clone(), e))?
            else {
                return Ok(());
            };
            if !claimed_by_id(b.meta(), kind, id) {
                return Ok(());
            }
            remove_claim(b.meta_mut(), kind);
            match api.replace(name, &PostParams::default(), &b).await {
                Ok(_) => Ok(()),
                Err(e) if is_not_found(&e) => Ok(()),
                Err(e) => Err(DetectorError::api("release", bkind.clone(), key.clone(), e)),
            }
        })
        .await
        .map_err(|e| {
            e.or_conflicts(|_| DetectorError::ConflictRetries {
                kind: bkind.clone(),
                key: key.clone(),
            })
        })
    }

    /// Removes the claim of policy `id` from a template, if it still carries it.
    pub(crate) async fn release_template(
        &self,
        w: &WatchedKind,
        obj: &DynamicObject,
        kind: PolicyKind,
        id: &str,
    ) -> Result<(), DetectorError> {
        let namespace = obj.metadata.namespace.clone().unwrap_or_default();
        let name = obj.metadata.name.clone().unwrap_or_default();
        let key = karmada_apis::names::namespaced_key(&namespace, &name);
        let api = template_api(&self.inner.client, w, &namespace);
        let mut current = obj.clone();
        let mut retry = ConflictRetry::new(DEFAULT_RETRY);
        while retry.next().await {
            if !claimed_by_id(&current.metadata, kind, id) {
                return Ok(());
            }
            let mut released = current.metadata.clone();
            remove_claim(&mut released, kind);
            let Some(patch) = template_patch(&current.metadata, &released, &w.ar.kind, &key)?
            else {
                return Ok(());
            };
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if is_conflict(&e) => {
                    current = match api.get_opt(&name).await {
                        Ok(Some(o)) => o,
                        Ok(None) => return Ok(()),
                        Err(e) => return Err(DetectorError::api("get", w.ar.kind.clone(), key, e)),
                    };
                }
                Err(e) if is_not_found(&e) => return Ok(()),
                Err(e) => return Err(DetectorError::api("release", w.ar.kind.clone(), key, e)),
            }
        }
        Ok(())
    }

    /// Deletes the binding of a deleted template, so bindings go even without the garbage
    /// collector. Only a binding whose controller is this template (by kind and name) is deleted,
    /// and only once the API server confirms the template with that uid is gone.
    async fn delete_binding_of(
        &self,
        w: &WatchedKind,
        t: &TemplateRef,
    ) -> Result<(), DetectorError> {
        let bname = binding_name(&t.kind, &t.name);
        if t.namespace.is_empty() {
            self.delete_binding::<ClusterResourceBinding>(w, t, &bname)
                .await
        } else {
            self.delete_binding::<ResourceBinding>(w, t, &bname).await
        }
    }

    async fn delete_binding<B: BindingObject>(
        &self,
        w: &WatchedKind,
        t: &TemplateRef,
        bname: &str,
    ) -> Result<(), DetectorError> {
        let inner = &self.inner;
        let api = B::api(inner.client.clone(), &t.namespace);
        let bkind = B::kind(&()).into_owned();
        let bkey = karmada_apis::names::namespaced_key(&t.namespace, bname);
        let Some(binding) = api
            .get_opt(bname)
            .await
            .map_err(|e| DetectorError::api("get", bkind.clone(), bkey.clone(), e))?
        else {
            return Ok(());
        };
        let Some(owner) = controller_owner(binding.meta()).cloned() else {
            return Ok(());
        };
        if owner.kind != t.kind
            || owner.name != t.name
            || binding.meta().deletion_timestamp.is_some()
        {
            return Ok(());
        }
        let template = template_api(&inner.client, w, &t.namespace)
            .get_opt(&t.name)
            .await
            .map_err(|e| DetectorError::api("get", t.kind.clone(), t.key(), e))?;
        if template.is_some_and(|o| o.metadata.uid.as_deref() == Some(owner.uid.as_str())) {
            return Ok(());
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: binding.meta().uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        match api.delete(bname, &params).await {
            Ok(_) => {
                tracing::info!(kind = %bkind, namespace = %t.namespace, name = %bname, template = %t, "deleted binding of deleted template");
                Ok(())
            }
            Err(e) if is_not_found(&e) || is_conflict(&e) => Ok(()),
            Err(e) => Err(DetectorError::api("delete", bkind, bkey, e)),
        }
    }
}

/// A manifest's `metadata`, decoded without the rest of it.
#[derive(serde::Deserialize)]
struct MetadataOnly {
    #[serde(default)]
    metadata: serde_json::Value,
}

/// Whether a manifest's `metadata` carries exactly the template's labels and annotations, leaving
/// aside the keys the propagation path sets on every manifest ([`MANIFEST_DECORATION_KEYS`]).
/// Karmada's keys on the template count like any other: `resourcetemplate.karmada.io/retain-replicas`
/// (set and removed by `hpaScaleTargetMarker`) or the policy's claim must reach the members.
/// `kubectl apply`'s last-applied configuration counts too (the control plane's caches keep it, as
/// Karmada's do, and the binding controller copies it into the manifest). Anything else that
/// differs (an override, a pruned annotation, injected failover state) answers no: the binding is
/// then rewritten, which costs a write but never loses a change.
fn metadata_reflected(metadata: &serde_json::Value, template: &ObjectMeta) -> bool {
    let compared = |k: &String| !MANIFEST_DECORATION_KEYS.contains(&k.as_str());
    [
        ("labels", template.labels.as_ref()),
        ("annotations", template.annotations.as_ref()),
    ]
    .into_iter()
    .all(|(field, want)| {
        let have = metadata.get(field).and_then(serde_json::Value::as_object);
        let have_count = have.map_or(0, |h| h.keys().filter(|k| compared(k)).count());
        let want_count = want.map_or(0, |w| w.keys().filter(|k| compared(k)).count());
        have_count == want_count
            && want.is_none_or(|w| {
                w.iter().filter(|(k, _)| compared(k)).all(|(k, v)| {
                    have.and_then(|h| h.get(k))
                        .and_then(serde_json::Value::as_str)
                        == Some(v.as_str())
                })
            })
    })
}

/// What the binding cache knows of a binding.
enum CachedBinding<B> {
    /// The cache has not synced: a miss would prove nothing.
    Unknown,
    /// Not in the synced cache.
    Absent,
    /// The cached copy.
    Present(Arc<B>),
}

/// What `store` knows of the binding `namespace/name`.
fn cached_binding<B: lariat::cache::CacheObject>(
    store: &lariat::Store<B>,
    namespace: Option<&str>,
    name: &str,
) -> CachedBinding<B> {
    if !store.has_synced() {
        return CachedBinding::Unknown;
    }
    match store.get_named(namespace, name) {
        Some(b) => CachedBinding::Present(b),
        None => CachedBinding::Absent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> ObjectMeta {
        let map = |kv: &[(&str, &str)]| {
            Some(
                kv.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        };
        ObjectMeta {
            labels: map(labels),
            annotations: map(annotations),
            ..Default::default()
        }
    }

    #[test]
    fn a_label_or_annotation_change_is_not_reflected() {
        let manifest = json!({"metadata": {
            "labels": {"app": "a", "karmada.io/managed": "true",
                "propagationpolicy.karmada.io/permanent-id": "p"},
            "annotations": {"note": "x", "resourcetemplate.karmada.io/generation": "2",
                "kubectl.kubernetes.io/last-applied-configuration": "{}"}}});
        let template = meta(
            &[
                ("app", "a"),
                ("propagationpolicy.karmada.io/permanent-id", "p"),
            ],
            &[
                ("note", "x"),
                ("kubectl.kubernetes.io/last-applied-configuration", "{}"),
            ],
        );
        assert!(metadata_reflected(&manifest["metadata"], &template));
        // Karmada's own keys on the template count: hpaScaleTargetMarker's mark, added or removed.
        let mut marked = template.clone();
        marked.labels.as_mut().unwrap().insert(
            "resourcetemplate.karmada.io/retain-replicas".into(),
            "true".into(),
        );
        assert!(!metadata_reflected(&manifest["metadata"], &marked));
        let mut marked_manifest = manifest.clone();
        marked_manifest["metadata"]["labels"]["resourcetemplate.karmada.io/retain-replicas"] =
            json!("true");
        assert!(metadata_reflected(&marked_manifest["metadata"], &marked));
        assert!(!metadata_reflected(&marked_manifest["metadata"], &template));
        // A new `kubectl apply` moves the last-applied configuration.
        assert!(!metadata_reflected(
            &manifest["metadata"],
            &meta(
                &[("app", "a")],
                &[
                    ("note", "x"),
                    (
                        "kubectl.kubernetes.io/last-applied-configuration",
                        "{\"a\":1}"
                    )
                ]
            )
        ));
        // Changed, added and removed labels and annotations all count.
        assert!(!metadata_reflected(
            &manifest["metadata"],
            &meta(&[("app", "b")], &[("note", "x")])
        ));
        assert!(!metadata_reflected(
            &manifest["metadata"],
            &meta(&[("app", "a"), ("rev", "1")], &[("note", "x")])
        ));
        assert!(!metadata_reflected(
            &manifest["metadata"],
            &meta(&[], &[("note", "x")])
        ));
        assert!(!metadata_reflected(
            &manifest["metadata"],
            &meta(&[("app", "a")], &[])
        ));
    }
}
