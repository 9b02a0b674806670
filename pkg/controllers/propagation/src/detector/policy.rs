//! PropagationPolicy and ClusterPropagationPolicy reconciliation: identity (what Karmada's webhook
//! adds), release of templates that no longer match, re-queueing of claimed and waiting templates,
//! preemption and deletion.

use std::collections::BTreeSet;
use std::sync::Arc;

use karmada_apis::policy::v1alpha1::{PreemptionBehavior, ResourceSelector};
use karmada_apis::well_known::{
    CLUSTER_PROPAGATION_POLICY_CONTROLLER_FINALIZER, PROPAGATION_POLICY_CONTROLLER_FINALIZER,
    event_reasons,
};
use karmada_apis::{
    ClusterPropagationPolicy, ClusterResourceBinding, PropagationPolicy, ResourceBinding,
};
use karmada_policy::matching::{
    Claim, cluster_propagation_policy_preempts, preemption_enabled, propagation_policy_preempts,
    read_claim,
};
use karmada_policy::selector::{ResourceRef, resource_matches_selectors};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use lariat::{HandlerResult, ObjectKey};
use serde_json::json;

use super::binding::BindingObject;
use super::claim::{PolicyKind, PolicyRef, claim};
use super::error::{DetectorError, aggregate};
use super::metrics::count_preemption;
use super::policy_object::PolicyObject;
use super::template::{template_api, template_patch};
use super::{
    Detector, FEATURE_POLICY_PREEMPTION, HandledPolicy, NAME, TemplateRef, WatchedKind,
    handler_result, template_reference,
};
use apimachinery::{is_not_found, split_api_version};
use karmada_controllers_common::error::FrameworkError;
use lariat::events::EventType;

/// The policy fields policy reconciliation needs, for both kinds.
struct PolicyView<'a> {
    policy: PolicyRef,
    selectors: Vec<ResourceSelector>,
    preemption: &'a PreemptionBehavior,
    priority: i32,
}

impl PolicyView<'_> {
    /// Whether the policy's selectors select template `t` (`obj` carries its labels).
    fn selects(&self, api_version: &str, t: &TemplateRef, obj: &DynamicObject) -> bool {
        let labels = obj.metadata.labels.clone().unwrap_or_default();
        let resource = ResourceRef {
            api_version,
            kind: &t.kind,
            namespace: &t.namespace,
            name: &t.name,
            labels: &labels,
        };
        resource_matches_selectors(resource, &self.selectors)
    }
}

impl Detector {
    /// Registers the PropagationPolicy and ClusterPropagationPolicy handlers. Not a wiring: the
    /// detector reports synced after its first discovery, not when the policy caches are listed.
    pub(crate) fn register_policy_handlers(&self) {
        let inner = &self.inner;
        let this = self.clone();
        inner.pp.register_handler(
            NAME,
            inner.cancel.clone(),
            move |k, o: Option<Arc<PropagationPolicy>>| {
                let this = this.clone();
                async move { this.handle_policy(k, o).await }
            },
        );
        let this = self.clone();
        inner.cpp.register_handler(
            NAME,
            inner.cancel.clone(),
            move |k, o: Option<Arc<ClusterPropagationPolicy>>| {
                let this = this.clone();
                async move { this.handle_policy(k, o).await }
            },
        );
    }

    /// Reconciles a PropagationPolicy or ClusterPropagationPolicy: releases its claims when it is
    /// being deleted, otherwise gives it its identity and reconciles the templates it selects once
    /// per generation.
    async fn handle_policy<P: PolicyObject>(
        &self,
        key: ObjectKey,
        obj: Option<Arc<P>>,
    ) -> HandlerResult<P> {
        let gen_key = format!("{}/{key}", P::MEMO_PREFIX);
        let Some(p) = obj else {
            self.inner.policy_generations.lock().remove(&gen_key);
            return HandlerResult::Success;
        };
        if p.meta().deletion_timestamp.is_some() {
            let id = label(p.meta(), P::KIND);
            let r = self
                .handle_policy_deletion(P::KIND, &id, &p.selectors())
                .await;
            let r = match r {
                Ok(()) => self.remove_policy_finalizer(&*p).await,
                Err(e) => Err(e),
            };
            return handler_result(r);
        }
        let had_identity = has_identity(p.meta(), P::KIND);
        let policy = match self.policy_ref(&*p).await {
            Ok(p) => p,
            Err(e) => return HandlerResult::Error(Box::new(e)),
        };
        let spec = p.spec();
        let handled = HandledPolicy {
            generation: p.meta().generation.unwrap_or_default(),
            priority: spec.explicit_priority(),
        };
        let before = self.inner.policy_generations.lock().get(&gen_key).copied();
        if had_identity && before.map(|b| b.generation) == Some(handled.generation) {
            return HandlerResult::Success;
        }
        tracing::info!(namespace = %p.namespace().unwrap_or_default(), name = %p.name_any(), "{} added or updated", P::kind(&()));
        let view = PolicyView {
            policy,
            selectors: p.selectors(),
            preemption: &spec.preemption,
            priority: handled.priority,
        };
        let r = self
            .reconcile_policy(&view, &spec.dependent_overrides)
            .await;
        if r.is_ok() {
            self.inner
                .policy_generations
                .lock()
                .insert(gen_key, handled);
            if let Some(before) = before
                && handled.priority < before.priority
            {
                self.requeue_preemptors(&view.policy, before.priority, handled.priority);
            }
        }
        handler_result(r)
    }

    /// Karmada's `HandleDeprioritizedPropagationPolicy` / `…ClusterPropagationPolicy`: once a
    /// policy's priority fell from `old` to `new`, the policies of its scope (its namespace, or all
    /// ClusterPropagationPolicies) that preempt and whose priority lies strictly between the two
    /// may now take its templates; they are reconciled again, highest priority first. Policies
    /// above `old` could already preempt it, those at or below `new` still cannot.
    fn requeue_preemptors(&self, lowered: &PolicyRef, old: i32, new: i32) {
        if !self
            .inner
            .ctx
            .settings
            .feature_gates
            .enabled(FEATURE_POLICY_PREEMPTION)
        {
            return;
        }
        tracing::info!(policy = %lowered, old, new, "policy priority lowered");
        let can_take = |spec: &karmada_apis::PropagationSpec| {
            spec.preemption == PreemptionBehavior::Always
                && spec.priority.is_some_and(|p| p > new && p < old)
        };
        let mut found: Vec<(i32, Option<String>, String)> = match lowered.kind {
            PolicyKind::PropagationPolicy => self
                .inner
                .pp
                .store()
                .list()
                .into_iter()
                .filter(|p| p.metadata.namespace.as_deref() == Some(lowered.namespace.as_str()))
                .filter(|p| can_take(&p.spec))
                .map(|p| (p.spec.explicit_priority(), p.namespace(), p.name_any()))
                .collect(),
            PolicyKind::ClusterPropagationPolicy => self
                .inner
                .cpp
                .store()
                .list()
                .into_iter()
                .filter(|p| can_take(&p.spec))
                .map(|p| (p.spec.explicit_priority(), None, p.name_any()))
                .collect(),
        };
        found.sort_by_key(|f| std::cmp::Reverse(f.0));
        let memo_prefix = match lowered.kind {
            PolicyKind::PropagationPolicy => PropagationPolicy::MEMO_PREFIX,
            PolicyKind::ClusterPropagationPolicy => ClusterPropagationPolicy::MEMO_PREFIX,
        };
        for (priority, namespace, name) in found {
            tracing::info!(policy = %lowered, preemptor = %name, priority, "re-queueing a policy that may preempt the lowered one");
            let key = ObjectKey::new(namespace.as_deref(), &name);
            // Forget its handled generation, or its handler would find nothing new to do.
            self.inner
                .policy_generations
                .lock()
                .remove(&format!("{memo_prefix}/{key}"));
            match lowered.kind {
                PolicyKind::PropagationPolicy => self.inner.pp.enqueue_key(key),
                PolicyKind::ClusterPropagationPolicy => self.inner.cpp.enqueue_key(key),
            }
        }
    }

    /// The reference of a PropagationPolicy or ClusterPropagationPolicy, giving it a permanent id
    /// and finalizer first if it has none (Karmada's mutating webhook does this on create).
    pub(crate) async fn policy_ref<P: PolicyObject>(
        &self,
        policy: &P,
    ) -> Result<PolicyRef, DetectorError> {
        let id = self.ensure_identity(policy, P::KIND).await?;
        Ok(PolicyRef {
            kind: P::KIND,
            namespace: policy.namespace().unwrap_or_default(),
            name: policy.name_any(),
            id,
        })
    }

    async fn ensure_identity<P>(
        &self,
        policy: &P,
        kind: PolicyKind,
    ) -> Result<String, DetectorError>
    where
        P: PolicyObject,
    {
        let meta = policy.meta();
        let existing = label(meta, kind);
        if has_identity(meta, kind) || meta.deletion_timestamp.is_some() {
            return Ok(existing);
        }
        let id = if existing.is_empty() {
            uuid::Uuid::new_v4().to_string()
        } else {
            existing
        };
        let mut finalizers = meta.finalizers.clone().unwrap_or_default();
        let finalizer = finalizer_of(kind);
        if !finalizers.iter().any(|f| f == finalizer) {
            finalizers.push(finalizer.to_owned());
        }
        let patch = json!({
            "metadata": {
                "resourceVersion": meta.resource_version,
                "labels": { kind.id_label(): id },
                "finalizers": finalizers,
            }
        });
        let name = policy.name_any();
        let key =
            karmada_apis::names::namespaced_key(&policy.namespace().unwrap_or_default(), &name);
        self.policy_api::<P>(&policy.namespace().unwrap_or_default())
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| DetectorError::api("label", P::kind(&()).into_owned(), key, e))?;
        tracing::info!(kind = %P::kind(&()), name = %name, id = %id, "assigned permanent id and finalizer to policy");
        Ok(id)
    }

    fn policy_api<P: PolicyObject>(&self, namespace: &str) -> Api<P> {
        P::api(self.inner.client.clone(), namespace)
    }

    async fn remove_policy_finalizer<P>(&self, policy: &P) -> Result<(), DetectorError>
    where
        P: PolicyObject,
    {
        let finalizer = if P::kind(&()) == "PropagationPolicy" {
            PROPAGATION_POLICY_CONTROLLER_FINALIZER
        } else {
            CLUSTER_PROPAGATION_POLICY_CONTROLLER_FINALIZER
        };
        let meta = policy.meta();
        let finalizers = meta.finalizers.clone().unwrap_or_default();
        if !finalizers.iter().any(|f| f == finalizer) {
            return Ok(());
        }
        let remaining: Vec<_> = finalizers.into_iter().filter(|f| f != finalizer).collect();
        let patch = json!({"metadata": {"resourceVersion": meta.resource_version, "finalizers": remaining}});
        let name = policy.name_any();
        let namespace = policy.namespace().unwrap_or_default();
        match self
            .policy_api::<P>(&namespace)
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(DetectorError::api(
                "remove finalizer of",
                P::kind(&()).into_owned(),
                karmada_apis::names::namespaced_key(&namespace, &name),
                e,
            )),
        }
    }

    /// Karmada's `HandlePropagationPolicyCreationOrUpdate` / `HandleClusterPropagationPolicyCreationOrUpdate`.
    #[allow(
        clippy::too_many_lines,
        reason = "Karmada's HandlePropagationPolicyCreationOrUpdate step for step: claimed, waiting, dependents"
    )]
    async fn reconcile_policy(
        &self,
        view: &PolicyView<'_>,
        dependent_overrides: &[String],
    ) -> Result<(), DetectorError> {
        let mut errors = Vec::new();
        // Bindings claimed by this policy: release those whose template no longer matches, refresh
        // the others.
        let policy = &view.policy;
        let mut claimed: Vec<(TemplateRef, bool)> = Vec::new();
        let label = policy.kind.id_label();
        // Both binding stores are indexed by the two claim labels (see `Detector::new`).
        for rb in self.inner.rb.list_by_label(label, &policy.id) {
            let in_scope = policy.kind == PolicyKind::ClusterPropagationPolicy
                || rb.metadata.namespace.as_deref() == Some(policy.namespace.as_str());
            if in_scope {
                claimed.push((template_of(rb.binding_spec()), true));
            }
        }
        if policy.kind == PolicyKind::ClusterPropagationPolicy {
            for crb in self.inner.crb.list_by_label(label, &policy.id) {
                claimed.push((template_of(crb.binding_spec()), false));
            }
        }
        for (t, namespaced) in claimed {
            match self.template_object(&t, false).await {
                Ok(Some((w, obj))) => {
                    if view.selects(&w.ar.api_version, &t, &obj) {
                        self.force_enqueue(&t);
                        continue;
                    }
                    tracing::info!(template = %t, policy = %policy, "template no longer matches the policy; releasing it");
                    let r = self
                        .release_template(&w, &obj, policy.kind, &policy.id)
                        .await;
                    let r = match r {
                        Ok(()) => {
                            let bname = karmada_apis::names::binding_name(&t.kind, &t.name);
                            if namespaced {
                                self.release_binding::<ResourceBinding>(
                                    &t.namespace,
                                    &bname,
                                    policy.kind,
                                    &policy.id,
                                )
                                .await
                            } else {
                                self.release_binding::<ClusterResourceBinding>(
                                    "",
                                    &bname,
                                    policy.kind,
                                    &policy.id,
                                )
                                .await
                            }
                        }
                        Err(e) => Err(e),
                    };
                    if let Err(e) = r {
                        errors.push(e);
                    }
                }
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        // Templates waiting for a policy that this one matches.
        let waiting = self.inner.waiting.lock().candidates(&view.selectors);
        let mut matched = Vec::new();
        for t in waiting {
            let Some(w) = self.watched(&t.group, &t.kind) else {
                continue;
            };
            let ns = (!t.namespace.is_empty()).then_some(t.namespace.as_str());
            let Some(obj) = w.ctrl.store().get_named(ns, &t.name) else {
                continue;
            };
            if view.selects(&w.ar.api_version, &t, &obj) {
                matched.push(t);
            }
        }
        tracing::info!(policy = %policy, matched = matched.len(), "matched waiting resources");
        if !matched.is_empty() && !dependent_overrides.is_empty() {
            let spec = karmada_apis::PropagationSpec {
                dependent_overrides: dependent_overrides.to_vec(),
                ..Default::default()
            };
            self.check_dependent_overrides(policy, &spec).await?;
        }
        for t in matched {
            self.inner.waiting.lock().remove(&t);
            self.force_enqueue(&t);
        }
        let gate = self
            .inner
            .ctx
            .settings
            .feature_gates
            .enabled(FEATURE_POLICY_PREEMPTION);
        if *view.preemption == PreemptionBehavior::Always && !gate {
            tracing::warn!(policy = %policy, "cannot preempt: feature gate {FEATURE_POLICY_PREEMPTION} is not enabled");
        }
        if preemption_enabled(view.preemption, gate)
            && let Err(e) = self.preempt(view).await
        {
            errors.push(e);
        }
        aggregate(errors)
    }

    /// Preemption: a PropagationPolicy takes named templates from lower-priority
    /// PropagationPolicies and from any ClusterPropagationPolicy; a ClusterPropagationPolicy only
    /// from lower-priority ClusterPropagationPolicies.
    #[allow(
        clippy::too_many_lines,
        reason = "both preemption directions (PropagationPolicy and ClusterPropagationPolicy) side by side"
    )]
    async fn preempt(&self, view: &PolicyView<'_>) -> Result<(), DetectorError> {
        let mut errors = Vec::new();
        for selector in &view.selectors {
            if selector.name.is_empty() {
                continue;
            }
            let (group, _) = split_api_version(&selector.api_version);
            let t = TemplateRef {
                group: group.to_owned(),
                kind: selector.kind.clone(),
                namespace: selector.namespace.clone(),
                name: selector.name.clone(),
            };
            let (w, obj) = match self.template_object(&t, true).await {
                Ok(Some(found)) => found,
                Ok(None) => {
                    tracing::debug!(template = %t, policy = %view.policy, "template not found; nothing to preempt");
                    continue;
                }
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            if obj.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let labels = obj.metadata.labels.clone().unwrap_or_default();
            let annotations = obj.metadata.annotations.clone().unwrap_or_default();
            let Some(current) = read_claim(&labels, &annotations) else {
                tracing::debug!(template = %t, policy = %view.policy, "template not claimed; nothing to preempt");
                continue;
            };
            let (preempts, from) = match (&view.policy.kind, &current) {
                (
                    PolicyKind::PropagationPolicy,
                    Claim::PropagationPolicy {
                        namespace, name, ..
                    },
                ) => {
                    let claimed = self.inner.pp.store().get_named(Some(namespace), name);
                    let Some(claimed) = claimed else {
                        tracing::debug!(template = %t, claimer = %name, "claiming policy not cached");
                        continue;
                    };
                    let Some(me) = self
                        .inner
                        .pp
                        .store()
                        .get_named(Some(&view.policy.namespace), &view.policy.name)
                    else {
                        tracing::debug!(template = %t, policy = %view.policy, "preempting policy not cached");
                        continue;
                    };
                    (
                        propagation_policy_preempts(
                            &me,
                            &current,
                            Some(claimed.spec.explicit_priority()),
                        ),
                        format!("propagation policy({namespace}/{name})"),
                    )
                }
                (PolicyKind::PropagationPolicy, Claim::ClusterPropagationPolicy { name, .. }) => {
                    (true, format!("cluster propagation policy({name})"))
                }
                (
                    PolicyKind::ClusterPropagationPolicy,
                    Claim::ClusterPropagationPolicy { name, .. },
                ) => {
                    let claimed = self.inner.cpp.store().get_named(None, name);
                    let Some(claimed) = claimed else { continue };
                    let Some(me) = self.inner.cpp.store().get_named(None, &view.policy.name) else {
                        continue;
                    };
                    (
                        cluster_propagation_policy_preempts(
                            &me,
                            &current,
                            claimed.spec.explicit_priority(),
                        ),
                        format!("cluster propagation policy({name})"),
                    )
                }
                (PolicyKind::ClusterPropagationPolicy, Claim::PropagationPolicy { .. }) => {
                    (false, String::new())
                }
            };
            let _ = view.priority;
            if !preempts {
                tracing::debug!(template = %t, policy = %view.policy, "cannot preempt: insufficient priority");
                continue;
            }
            let mut claimed_meta = obj.metadata.clone();
            claim(&mut claimed_meta, &view.policy);
            let result = match template_patch(&obj.metadata, &claimed_meta, &t.kind, &t.key()) {
                Ok(Some(patch)) => template_api(&self.inner.client, &w, &t.namespace)
                    .patch(&t.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| ())
                    .map_err(|e| DetectorError::api("preempt", t.kind.clone(), t.key(), e)),
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            };
            count_preemption(&result);
            let me = match view.policy.kind {
                PolicyKind::PropagationPolicy => {
                    format!(
                        "Propagation policy({}/{})",
                        view.policy.namespace, view.policy.name
                    )
                }
                PolicyKind::ClusterPropagationPolicy => {
                    format!("Cluster propagation policy({})", view.policy.name)
                }
            };
            let reference = template_reference(&obj, &w.ar);
            match result {
                Ok(_) => {
                    tracing::info!(template = %t, policy = %view.policy, from = %from, "preempted");
                    self.inner
                        .recorder
                        .record(
                            &reference,
                            EventType::Normal,
                            event_reasons::PREEMPT_POLICY_SUCCEED,
                            format!("{me} preempted {from} successfully"),
                        )
                        .await;
                    self.force_enqueue(&t);
                }
                Err(e) => {
                    self.inner
                        .recorder
                        .record(
                            &reference,
                            EventType::Warning,
                            event_reasons::PREEMPT_POLICY_FAILED,
                            format!("{me} failed to preempt {from}: {e}"),
                        )
                        .await;
                    errors.push(e);
                }
            }
        }
        aggregate(errors)
    }

    /// Karmada's `handlePolicyDeletion`: the claim is removed from every template (and its binding)
    /// the policy claimed; bindings and member objects stay until the template is deleted.
    async fn handle_policy_deletion(
        &self,
        kind: PolicyKind,
        id: &str,
        selectors: &[ResourceSelector],
    ) -> Result<(), DetectorError> {
        if id.is_empty() {
            return Ok(());
        }
        let mut errors = Vec::new();
        let unique: BTreeSet<(String, String, String)> = selectors
            .iter()
            .map(|s| (s.api_version.clone(), s.kind.clone(), s.namespace.clone()))
            .collect();
        for (api_version, k, namespace) in unique {
            let (ar, namespaced) = match self.resolve(&api_version, &k).await {
                Ok(found) => found,
                Err(e) => {
                    tracing::info!(api_version = %api_version, kind = %k, error = %e, "skipping cleanup: kind is not served");
                    continue;
                }
            };
            let (group, _) = split_api_version(&api_version);
            let w = match self.watched(group, &k) {
                Some(w) => w,
                None => match self.inner.ctx.control_plane.controllers().for_resource(&ar) {
                    Ok(ctrl) => WatchedKind {
                        ar: ar.clone(),
                        namespaced,
                        ctrl,
                    },
                    Err(source) => {
                        errors.push(
                            FrameworkError::new(format!("controller for {k}"), source).into(),
                        );
                        continue;
                    }
                },
            };
            let api: Api<DynamicObject> = if namespaced && !namespace.is_empty() {
                Api::namespaced_with(self.inner.client.clone(), &namespace, &ar)
            } else {
                Api::all_with(self.inner.client.clone(), &ar)
            };
            let list = match api
                .list(&ListParams::default().labels(&format!("{}={id}", kind.id_label())))
                .await
            {
                Ok(l) => l,
                Err(e) if is_not_found(&e) => continue,
                Err(e) => {
                    errors.push(DetectorError::api("list", k.clone(), namespace.clone(), e));
                    continue;
                }
            };
            for mut obj in list.items {
                obj.types = Some(kube::api::TypeMeta {
                    api_version: ar.api_version.clone(),
                    kind: ar.kind.clone(),
                });
                if let Err(e) = self.release(&w, &obj, kind, id).await {
                    errors.push(e);
                }
            }
        }
        aggregate(errors)
    }

    /// The watched kind and current object of a template (from the cache, else the API server).
    async fn template_object(
        &self,
        t: &TemplateRef,
        fresh: bool,
    ) -> Result<Option<(WatchedKind, DynamicObject)>, DetectorError> {
        let Some(w) = self.watched(&t.group, &t.kind) else {
            return Ok(None);
        };
        let ns = (!t.namespace.is_empty()).then_some(t.namespace.as_str());
        if !fresh && let Some(obj) = w.ctrl.store().get_named(ns, &t.name) {
            let mut obj = (*obj).clone();
            obj.types = Some(kube::api::TypeMeta {
                api_version: w.ar.api_version.clone(),
                kind: w.ar.kind.clone(),
            });
            return Ok(Some((w, obj)));
        }
        match template_api(&self.inner.client, &w, &t.namespace)
            .get_opt(&t.name)
            .await
        {
            Ok(Some(mut obj)) => {
                obj.types = Some(kube::api::TypeMeta {
                    api_version: w.ar.api_version.clone(),
                    kind: w.ar.kind.clone(),
                });
                Ok(Some((w, obj)))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(DetectorError::api("get", t.kind.clone(), t.key(), e)),
        }
    }
}

/// The template a binding refers to.
fn template_of(spec: &karmada_apis::ResourceBindingSpec) -> TemplateRef {
    let (group, _) = split_api_version(&spec.resource.api_version);
    TemplateRef {
        group: group.to_owned(),
        kind: spec.resource.kind.clone(),
        namespace: spec.resource.namespace.clone(),
        name: spec.resource.name.clone(),
    }
}

fn label(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    kind: PolicyKind,
) -> String {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(kind.id_label()))
        .cloned()
        .unwrap_or_default()
}

fn finalizer_of(kind: PolicyKind) -> &'static str {
    match kind {
        PolicyKind::PropagationPolicy => PROPAGATION_POLICY_CONTROLLER_FINALIZER,
        PolicyKind::ClusterPropagationPolicy => CLUSTER_PROPAGATION_POLICY_CONTROLLER_FINALIZER,
    }
}

/// Whether a policy already has its permanent id and finalizer.
fn has_identity(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    kind: PolicyKind,
) -> bool {
    !label(meta, kind).is_empty()
        && meta
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == finalizer_of(kind)))
}
