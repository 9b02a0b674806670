//! The Works holding the MultiClusterService in its provider clusters' execution namespaces
//! (Karmada's `propagateMultiClusterService` and `retrieveMultiClusterService`): never dispatched
//! to the member, they tell `endpointsliceCollect` which clusters' EndpointSlices to collect.

use std::collections::BTreeSet;

use karmada_apis::Work;
use karmada_apis::names::{cluster_name, execution_space_name, work_name};
use karmada_apis::networking::v1alpha1::{MULTI_CLUSTER_SERVICE_KIND, MultiClusterService};
use karmada_apis::well_known::{
    ENDPOINT_SLICE_PROVISION_CLUSTER_ANNOTATION, MULTI_CLUSTER_SERVICE_NAME_LABEL,
    MULTI_CLUSTER_SERVICE_NAMESPACE_LABEL, MULTI_CLUSTER_SERVICE_PERMANENT_ID_LABEL, event_reasons,
};
use karmada_controllers_common::collected_slices::{self, ENDPOINT_SLICE_KIND};
use karmada_controllers_common::error::ApiError;
use karmada_controllers_common::multicluster_service::{Fitness, fitness};
use karmada_controllers_common::work::{WorkTarget, create_or_update_work};
use karmada_controllers_common::work_index;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use lariat::events::EventType;

use super::claim::permanent_id;
use super::{McsController, McsError};

impl McsController {
    /// Writes the MultiClusterService's Work into every fit provider cluster; unfit ones get an
    /// Event and are skipped.
    pub(super) async fn propagate_mcs(
        &self,
        mcs: &MultiClusterService,
        providers: &BTreeSet<String>,
    ) -> Result<(), McsError> {
        let clusters = self.inner.clusters.cache().peek_store();
        let works = self.inner.works.store();
        let namespace = mcs.namespace().unwrap_or_default();
        let name = mcs.name_any();
        let mut manifest = serde_json::to_value(mcs).map_err(|source| McsError::Json {
            key: format!("{namespace}/{name}"),
            source,
        })?;
        if let Some(obj) = manifest.as_object_mut() {
            obj.remove("status");
        }
        for cluster in providers {
            match fitness(clusters, cluster) {
                Fitness::Fit => {}
                Fitness::NotFound => {
                    self.event(
                        mcs,
                        EventType::Warning,
                        event_reasons::CLUSTER_NOT_FOUND,
                        format!("Provider cluster {cluster} is not found"),
                    );
                    continue;
                }
                Fitness::NotReady => {
                    self.event(
                        mcs,
                        EventType::Warning,
                        event_reasons::SYNC_SERVICE_FAILED,
                        format!(
                            "Provider cluster {cluster} is not ready, skip to propagate MultiClusterService"
                        ),
                    );
                    continue;
                }
                Fitness::NoEndpointSlices => {
                    self.event(
                        mcs,
                        EventType::Warning,
                        event_reasons::API_INCOMPATIBLE,
                        format!("Provider cluster {cluster} does not support EndpointSlice"),
                    );
                    continue;
                }
            }
            let target = WorkTarget {
                name: work_name(MULTI_CLUSTER_SERVICE_KIND, &name, &namespace),
                namespace: execution_space_name(cluster),
                labels: [
                    (
                        MULTI_CLUSTER_SERVICE_PERMANENT_ID_LABEL.to_owned(),
                        permanent_id(mcs),
                    ),
                    (
                        MULTI_CLUSTER_SERVICE_NAMESPACE_LABEL.to_owned(),
                        namespace.clone(),
                    ),
                    (MULTI_CLUSTER_SERVICE_NAME_LABEL.to_owned(), name.clone()),
                ]
                .into(),
                suspend_dispatching: Some(true),
                ..Default::default()
            };
            create_or_update_work(
                &self.inner.client,
                Some(&works),
                &self.inner.interpreter,
                &target,
                manifest.clone(),
            )
            .await
            .map_err(Box::new)?;
        }
        Ok(())
    }

    /// Removes the MultiClusterService's Works from clusters not in `providers`, then releases the
    /// EndpointSlices collected there for it. The Work goes first: once it is gone (or being
    /// deleted) `endpointsliceCollect` stops collecting there, and the release, keyed by the
    /// MultiClusterService's labels, still finds the collected Works when it is retried.
    pub(super) async fn remove_mcs_works(
        &self,
        mcs: &MultiClusterService,
        providers: &BTreeSet<String>,
    ) -> Result<(), McsError> {
        let id = permanent_id(mcs);
        let store = self.inner.works.cache().peek_store();
        let outside = |w: &Work| {
            cluster_name(&w.namespace().unwrap_or_default())
                .is_ok_and(|cluster| !providers.contains(cluster))
        };
        let mcs_works = work_index::holding(store, None, MULTI_CLUSTER_SERVICE_KIND);
        for work in mcs_works.iter().filter(|w| {
            !id.is_empty()
                && w.labels().get(MULTI_CLUSTER_SERVICE_PERMANENT_ID_LABEL) == Some(&id)
                && w.metadata.deletion_timestamp.is_none()
                && outside(w)
        }) {
            let work_ns = work.namespace().unwrap_or_default();
            let api: Api<Work> = Api::namespaced(self.inner.client.clone(), &work_ns);
            match api.delete(&work.name_any(), &DeleteParams::default()).await {
                Ok(_) => {
                    tracing::info!(namespace = %work_ns, work = %work.name_any(), "removed MultiClusterService Work of a former provider");
                }
                Err(e) if apimachinery::is_not_found(&e) => {}
                Err(e) => {
                    return Err(ApiError::new(
                        "delete",
                        "Work",
                        format!("{work_ns}/{}", work.name_any()),
                        e,
                    )
                    .into());
                }
            }
        }
        let namespace = mcs.namespace().unwrap_or_default();
        let name = mcs.name_any();
        let slice_works = work_index::holding(store, None, ENDPOINT_SLICE_KIND);
        for work in slice_works.iter().filter(|w| {
            w.labels().get(MULTI_CLUSTER_SERVICE_NAMESPACE_LABEL) == Some(&namespace)
                && w.labels().get(MULTI_CLUSTER_SERVICE_NAME_LABEL) == Some(&name)
                && !w
                    .annotations()
                    .contains_key(ENDPOINT_SLICE_PROVISION_CLUSTER_ANNOTATION)
                && outside(w)
        }) {
            collected_slices::release(
                &self.inner.client,
                work,
                collected_slices::MULTI_CLUSTER_SERVICE,
            )
            .await
            .map_err(|e| {
                ApiError::new(
                    "release",
                    "Work",
                    format!(
                        "{}/{}",
                        work.namespace().unwrap_or_default(),
                        work.name_any()
                    ),
                    e,
                )
            })?;
        }
        Ok(())
    }
}
