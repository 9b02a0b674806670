//! Building and writing the Works of one binding: what they share ([`WorkPlan`]), each cluster's
//! manifest (replicas revised, Job completions divided, overrides applied) and the tally of what
//! was written, refused or failed.

use std::collections::BTreeMap;

use karmada_apis::names::{execution_space_name, work_name};
use karmada_apis::well_known::{
    CLUSTER_RESOURCE_BINDING_ANNOTATION, CONFLICT_RESOLUTION_ANNOTATION,
    EXECUTION_CONTROLLER_FINALIZER, RESOURCE_BINDING_NAME_ANNOTATION,
    RESOURCE_BINDING_NAMESPACE_ANNOTATION, RESOURCE_TEMPLATE_GENERATION_ANNOTATION,
};
use karmada_apis::work::v1alpha2::{
    ObjectReference as TemplateReference, ResourceBindingSpec, TargetCluster,
};
use karmada_apis::{ClusterOverridePolicy, OverridePolicy};
use karmada_controllers_common::binding::BindingObject;
use karmada_controllers_common::failover::{FEATURE_STATEFUL_FAILOVER_INJECTION, labels_to_inject};
use karmada_controllers_common::rollout::{self, Admission};
use karmada_controllers_common::work::{
    WorkError, WorkOutcome, WorkTarget, create_or_update_work, set_annotation, set_label,
};
use karmada_interpreter::{Interpreter, Operation};
use kube::ResourceExt;
use serde_json::Value;

use super::BindingController;
use super::clusters::{conflict_resolution, suspend_dispatching, target_clusters};
use super::error::{BindingError, interpret_error};

/// What [`BindingController::ensure_works`] did.
#[derive(Default)]
pub(super) struct WorksSynced {
    /// Clusters whose overrides could not be applied (their Works were left alone).
    pub(super) override_failures: Vec<String>,
    /// Works the API server refused for their size, one message each.
    pub(super) too_large: Vec<String>,
    /// Works created or updated.
    pub(super) written: usize,
}

/// What every Work of one binding shares (see `BindingController::work_plan`).
pub(super) struct WorkPlan<'a> {
    /// The template.
    pub(super) resource: &'a TemplateReference,
    /// The template's `namespace/name`.
    pub(super) key: String,
    /// Revise the replicas to each cluster's share (a workload with the interpreter hook).
    pub(super) revise: bool,
    /// A divided Job's completions per cluster.
    pub(super) completions: Option<BTreeMap<String, i32>>,
    pub(super) cops: Vec<ClusterOverridePolicy>,
    /// The OverridePolicies of the template's namespace.
    pub(super) ops: Vec<OverridePolicy>,
    /// The binding's permanent-id label and its value.
    pub(super) id_label: &'static str,
    pub(super) id: String,
    pub(super) binding_namespace: String,
    pub(super) binding_name: String,
    /// The conflict resolution the member apply uses.
    pub(super) conflict: &'static str,
    /// Whether `StatefulFailoverInjection` is on: the state an eviction preserved goes on the
    /// manifest of the cluster the workload moved to.
    pub(super) inject_state: bool,
    /// How many clusters get a Work (the injection is for one only).
    pub(super) targets: usize,
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
pub(super) struct WorkTally {
    /// Failures that fail the sync (a missing cluster, a failed write).
    pub(super) errors: Vec<String>,
    pub(super) override_failures: Vec<String>,
    pub(super) too_large: Vec<String>,
    pub(super) written: usize,
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

impl BindingController {
    /// Writes one Work per target cluster. Returns the override failures (their clusters' Works
    /// untouched); any other failure is an error (after trying every cluster).
    pub(super) async fn ensure_works<B: BindingObject>(
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
        let rollout = self.rollout_of(b);
        let revision = rollout
            .as_ref()
            .map(|_| rollout::template_revision(template));
        for t in &targets {
            let admitted = match &revision {
                Some(r) => rollout::admission(rollout.as_deref(), &t.name, r, template),
                None => Admission::Current,
            };
            let (source, rendered) = match &admitted {
                Admission::Current => (template, revision.clone()),
                Admission::Stable(stable) => (stable, Some(rollout::template_revision(stable))),
            };
            let manifest = plan.manifest_for(&self.inner.interpreter, source, t)?;
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
            let (mut target, manifest) = plan.work_for(spec, t, &overridden);
            if let Some(r) = rendered {
                target
                    .annotations
                    .insert(rollout::REVISION_ANNOTATION.to_owned(), r);
            }
            self.inner.written.lock().insert(mkey, &t.name);
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
    pub(super) fn work_plan<'a, B: BindingObject>(
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
        // Karmada's `needReviseReplicas`: only a binding with replicas (never one with components,
        // whose replicas are 0) has its manifests' replicas revised.
        let revise = spec.replicas > 0
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
}
