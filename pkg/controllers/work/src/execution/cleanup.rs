//! A deleted Work: its member objects deleted (or released with `preserveResourcesOnDeletion`),
//! objects another Work owns left alone, then the finalizer removed.

use apimachinery::{ConflictRetry, DEFAULT_RETRY, is_conflict, is_not_found};
use karmada_apis::well_known::{
    CLUSTER_PROPAGATION_POLICY_ANNOTATION, CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
    CLUSTER_RESOURCE_BINDING_ANNOTATION, CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL,
    CONFLICT_RESOLUTION_ANNOTATION, EXECUTION_CONTROLLER_FINALIZER, MANAGED_RESOURCE_ANNOTATIONS,
    MANAGED_RESOURCE_LABELS, PROPAGATION_POLICY_NAME_ANNOTATION,
    PROPAGATION_POLICY_NAMESPACE_ANNOTATION, PROPAGATION_POLICY_PERMANENT_ID_LABEL,
};
use karmada_apis::{Cluster, Work};
use karmada_controllers_common::metrics::{OPERATION_NONE, OPERATION_UPDATED, count_delete};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use lariat::events::{EventType, reference_of};
use serde_json::{Value, json};

use super::ExecutionController;
use super::error::{ApplyError, ExecutionError};
use super::ownership::{REASON_OWNED_BY_ANOTHER_WORK, WorkIdentity};
use super::target::{Target, is_managed, to_value};

impl ExecutionController {
    /// Removes (or releases, with `preserveResourcesOnDeletion`) the Work's member objects.
    pub(super) async fn handle_delete(
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
    pub(super) async fn delete(
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
    pub(super) async fn release(
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
    pub(super) async fn owned_by_another(
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

    pub(super) async fn remove_finalizer(&self, work: &Work) -> Result<(), ExecutionError> {
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
