//! The control-plane side: which Works make a member watched, and releasing collected Works whose
//! reason to exist went while nobody was watching.

use std::sync::Arc;

use karmada_apis::Work;
use karmada_apis::multicluster::v1alpha1::{API_VERSION, SERVICE_EXPORT_KIND};
use karmada_apis::names::cluster_name;
use karmada_apis::well_known::{SERVICE_NAME_LABEL, SERVICE_NAMESPACE_LABEL, WORK_APPLIED};
use karmada_controllers_common::collected_slices::{self, SERVICE_EXPORT};
use karmada_controllers_common::error::ApiError;
use karmada_controllers_common::work_index;
use kube::ResourceExt;
use lariat::{HandlerResult, ObjectKey};

use super::member::MemberWatches;
use super::{MEMBER_CACHE_RETRY, ServiceExportController, ServiceExportError};

/// Whether the Work holds a ServiceExport and has been applied to its member.
fn is_applied_export(work: &Work) -> bool {
    let applied = work.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == WORK_APPLIED && c.status == "True")
    });
    applied
        && work.spec.workload.manifests.iter().any(|m| {
            m.identity()
                .is_ok_and(|id| id.api_version == API_VERSION && id.kind == SERVICE_EXPORT_KIND)
        })
}

impl ServiceExportController {
    /// A Work changed: watch its member if it is an applied ServiceExport Work or a Work this
    /// controller collected, and release a collected Work whose ServiceExport or EndpointSlice the
    /// member no longer has.
    pub(super) async fn handle_work(
        &self,
        key: ObjectKey,
        work: Option<Arc<Work>>,
    ) -> HandlerResult<Work> {
        let Some(work) = work.filter(|w| w.metadata.deletion_timestamp.is_none()) else {
            return HandlerResult::Success;
        };
        let collected = collected_slices::is_collected_by(&work, SERVICE_EXPORT);
        if !collected && !is_applied_export(&work) {
            return HandlerResult::Success;
        }
        let namespace = work.namespace().unwrap_or_default();
        let Ok(cluster) = cluster_name(&namespace) else {
            return HandlerResult::Success;
        };
        let Some(member) = self.inner.ctx.members.get(cluster) else {
            // Watched once connected: the periodic resync brings the Work back.
            tracing::debug!(work = %key, cluster, "member cluster not connected");
            return HandlerResult::Success;
        };
        let watches = match self.ensure_member_watches(&member) {
            Ok(w) => w,
            Err(e) => return HandlerResult::error(e),
        };
        if !collected {
            return HandlerResult::Success;
        }
        match self.release_if_orphaned(cluster, &work, &watches).await {
            Ok(true) => HandlerResult::Success,
            Ok(false) => HandlerResult::RequeueAfter(MEMBER_CACHE_RETRY),
            Err(e) => HandlerResult::error(e),
        }
    }

    /// Releases the collected Work `work` if its Service is no longer exported or its
    /// EndpointSlice no longer exists in the member. `false` while the member caches have not
    /// synced (nothing can be judged yet).
    async fn release_if_orphaned(
        &self,
        cluster: &str,
        work: &Work,
        watches: &MemberWatches,
    ) -> Result<bool, ServiceExportError> {
        if !watches.synced() {
            return Ok(false);
        }
        let labels = work.labels();
        let service_ns = labels
            .get(SERVICE_NAMESPACE_LABEL)
            .map_or("", String::as_str);
        let service = labels.get(SERVICE_NAME_LABEL).map_or("", String::as_str);
        let exported = watches
            .exports
            .store()
            .get_named(Some(service_ns), service)
            .is_some();
        let slice_exists = work.spec.workload.manifests.iter().all(|m| {
            m.identity().is_ok_and(|id| {
                let (ns, name) = (&id.metadata.namespace, &id.metadata.name);
                watches.slices.store().get_named(Some(ns), name).is_some()
            })
        });
        if exported && slice_exists {
            return Ok(true);
        }
        tracing::info!(
            cluster, work = %work.name_any(), exported, slice_exists,
            "collected EndpointSlice no longer exported; releasing its Work"
        );
        self.release(work).await?;
        Ok(true)
    }

    /// Lets go of a collected Work for ServiceExport.
    pub(super) async fn release(&self, work: &Work) -> Result<(), ServiceExportError> {
        let key = format!(
            "{}/{}",
            work.namespace().unwrap_or_default(),
            work.name_any()
        );
        collected_slices::release(&self.inner.client, work, SERVICE_EXPORT)
            .await
            .map_err(|e| ApiError::new("release", "Work", key, e))?;
        Ok(())
    }

    /// The collected Works of Service `namespace/name` from `cluster`.
    pub(super) fn collected_works(
        &self,
        cluster: &str,
        namespace: &str,
        name: &str,
    ) -> Vec<Arc<Work>> {
        let execution_space = karmada_apis::names::execution_space_name(cluster);
        self.inner
            .works
            .store()
            .list_by_label(SERVICE_NAME_LABEL, name)
            .into_iter()
            .filter(|w| {
                w.namespace().as_deref() == Some(execution_space.as_str())
                    && w.labels().get(SERVICE_NAMESPACE_LABEL).map(String::as_str)
                        == Some(namespace)
                    && collected_slices::is_collected_by(w, SERVICE_EXPORT)
            })
            .collect()
    }

    /// Re-queues the Works that should make a connected member watched when that member's
    /// watches lack this controller's handlers (a member connected anew has fresh caches).
    pub(super) fn resync_members(&self) {
        let store = self.inner.works.cache().peek_store();
        let exports = work_index::holding(store, Some(API_VERSION), SERVICE_EXPORT_KIND)
            .into_iter()
            .filter(|w| is_applied_export(w));
        let collected = work_index::holding(store, None, collected_slices::ENDPOINT_SLICE_KIND)
            .into_iter()
            .filter(|w| collected_slices::is_collected_by(w, SERVICE_EXPORT));
        let mut seen = std::collections::BTreeSet::new();
        for work in exports.chain(collected) {
            if work.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let namespace = work.namespace().unwrap_or_default();
            let Ok(cluster) = cluster_name(&namespace) else {
                continue;
            };
            if !seen.insert(cluster.to_owned()) {
                continue;
            }
            let Some(member) = self.inner.ctx.members.get(cluster) else {
                continue;
            };
            if !MemberWatches::has_handlers(&member) {
                tracing::debug!(cluster, "member watches missing; re-queuing a Work");
                self.inner.works.enqueue(Some(&namespace), &work.name_any());
            }
        }
    }
}
