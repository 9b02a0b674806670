//! Finding a binding's Works and deleting them: a Work of a cluster no longer targeted, and every
//! Work of a deleted binding before its finalizer is released.

use std::time::Duration;

use apimachinery::is_not_found;
use karmada_apis::Work;
use karmada_apis::well_known::{
    CLUSTER_RESOURCE_BINDING_ANNOTATION, RESOURCE_BINDING_NAME_ANNOTATION,
    RESOURCE_BINDING_NAMESPACE_ANNOTATION,
};
use karmada_controllers_common::binding::BindingObject;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

use super::error::{BindingError, api_err};
use super::{BindingController, WORKS_GONE_REQUEUE};

impl BindingController {
    /// The Works of a binding, from the API server (by permanent-id label) or, for a binding
    /// without one, from the Work cache by back-pointer annotations.
    pub(super) async fn works_of<B: BindingObject>(
        &self,
        b: &B,
    ) -> Result<Vec<Work>, BindingError> {
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

    pub(super) async fn delete_work(&self, w: &Work) -> Result<(), BindingError> {
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
    pub(super) async fn delete_binding<B: BindingObject>(
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
}

/// The finalizer the detector puts on bindings of kind `B`.
pub(super) fn finalizer_of<B: BindingObject>() -> &'static str {
    if B::kind(&()) == "ClusterResourceBinding" {
        karmada_apis::well_known::CLUSTER_RESOURCE_BINDING_CONTROLLER_FINALIZER
    } else {
        karmada_apis::well_known::BINDING_CONTROLLER_FINALIZER
    }
}
