//! The member side: the ServiceExport and EndpointSlice watches of one member, and what their
//! events collect or release.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use karmada_apis::multicluster::v1alpha1::ServiceExport;
use karmada_apis::names::execution_space_name;
use karmada_controllers_common::collected_slices::{
    self, SERVICE_EXPORT, SERVICE_NAME_OF_SLICE_LABEL, is_managed_by_karmada, member_slices,
    slice_work_name, slices_of_service,
};
use karmada_controllers_common::error::framework;
use kube::ResourceExt;
use lariat::{CacheScope, HandlerResult, ObjectKey, SharedController};

use super::{MEMBER_CACHE_RETRY, MEMBER_HANDLER, ServiceExportController, ServiceExportError};

/// One member's watches this controller uses.
pub(super) struct MemberWatches {
    /// Every ServiceExport of the member.
    pub exports: SharedController<ServiceExport>,
    /// Every EndpointSlice of the member, indexed by Service name.
    pub slices: SharedController<EndpointSlice>,
}

impl MemberWatches {
    fn of(member: &lariat::Cluster) -> Result<Self, ServiceExportError> {
        let exports = member
            .controllers()
            .for_kind_in::<ServiceExport>(CacheScope::all())
            .map_err(framework(format!(
                "ServiceExport controller of cluster {}",
                member.name()
            )))?;
        let slices = member_slices(member)?;
        Ok(Self { exports, slices })
    }

    /// Whether both caches have their first complete list.
    pub fn synced(&self) -> bool {
        self.exports.cache().has_synced() && self.slices.cache().has_synced()
    }

    /// Whether the member's watches carry this controller's handlers.
    pub fn has_handlers(member: &lariat::Cluster) -> bool {
        Self::of(member).is_ok_and(|w| {
            has_handler(&w.exports.handler_names()) && has_handler(&w.slices.handler_names())
        })
    }
}

fn has_handler(names: &[String]) -> bool {
    names.iter().any(|n| n == MEMBER_HANDLER)
}

impl ServiceExportController {
    /// The member's watches, with this controller's handlers on them.
    pub(super) fn ensure_member_watches(
        &self,
        member: &lariat::Cluster,
    ) -> Result<MemberWatches, ServiceExportError> {
        let watches = MemberWatches::of(member)?;
        let _guard = self.inner.registering.lock();
        let cluster = member.name().to_owned();
        if !has_handler(&watches.exports.handler_names()) {
            tracing::info!(
                cluster,
                "watching the member's ServiceExports and EndpointSlices"
            );
            let this = self.clone();
            let cluster = cluster.clone();
            watches.exports.register_handler(
                MEMBER_HANDLER,
                self.inner.cancel.child_token(),
                move |key: ObjectKey, obj: Option<Arc<ServiceExport>>| {
                    let this = this.clone();
                    let cluster = cluster.clone();
                    async move { this.handle_export(&cluster, key, obj).await }
                },
            );
        }
        if !has_handler(&watches.slices.handler_names()) {
            let this = self.clone();
            watches.slices.register_handler(
                MEMBER_HANDLER,
                self.inner.cancel.child_token(),
                move |key: ObjectKey, obj: Option<Arc<EndpointSlice>>| {
                    let this = this.clone();
                    let cluster = cluster.clone();
                    async move { this.handle_slice(&cluster, key, obj).await }
                },
            );
        }
        Ok(watches)
    }

    /// A member ServiceExport appeared, changed or went.
    async fn handle_export(
        &self,
        cluster: &str,
        key: ObjectKey,
        export: Option<Arc<ServiceExport>>,
    ) -> HandlerResult<ServiceExport> {
        let Some(member) = self.inner.ctx.members.get(cluster) else {
            return HandlerResult::Success;
        };
        let watches = match MemberWatches::of(&member) {
            Ok(w) => w,
            Err(e) => return HandlerResult::error(e),
        };
        if !watches.synced() {
            return HandlerResult::RequeueAfter(MEMBER_CACHE_RETRY);
        }
        let namespace = key.namespace().unwrap_or_default();
        let result = match export {
            Some(_) => {
                self.collect_service(cluster, namespace, key.name(), &watches)
                    .await
            }
            None => self.release_service(cluster, namespace, key.name()).await,
        };
        if let Err(e) = &result {
            tracing::warn!(cluster, service_export = %key, error = %e, "EndpointSlices not collected");
        }
        result.into()
    }

    /// Collects every member EndpointSlice of the exported Service `namespace/name`, and releases
    /// the collected Works of slices that no longer exist.
    async fn collect_service(
        &self,
        cluster: &str,
        namespace: &str,
        name: &str,
        watches: &MemberWatches,
    ) -> Result<(), ServiceExportError> {
        let slices: Vec<Arc<EndpointSlice>> =
            slices_of_service(&watches.slices.store(), namespace, name)
                .into_iter()
                .filter(|s| !is_managed_by_karmada(s.labels()))
                .collect();
        let wanted: BTreeSet<String> = slices
            .iter()
            .map(|s| slice_work_name(namespace, &s.name_any()))
            .collect();
        let mut errors = Vec::new();
        for work in self.collected_works(cluster, namespace, name) {
            if !wanted.contains(&work.name_any())
                && let Err(e) = self.release(&work).await
            {
                errors.push(e);
            }
        }
        for slice in slices {
            if let Err(e) = self.report(cluster, &slice).await {
                errors.push(e);
            }
        }
        ServiceExportError::aggregate(errors)
    }

    /// Releases every Work collected for the Service `namespace/name` of `cluster`.
    async fn release_service(
        &self,
        cluster: &str,
        namespace: &str,
        name: &str,
    ) -> Result<(), ServiceExportError> {
        let mut errors = Vec::new();
        for work in self.collected_works(cluster, namespace, name) {
            if let Err(e) = self.release(&work).await {
                errors.push(e);
            }
        }
        ServiceExportError::aggregate(errors)
    }

    /// A member EndpointSlice appeared, changed or went.
    async fn handle_slice(
        &self,
        cluster: &str,
        key: ObjectKey,
        slice: Option<Arc<EndpointSlice>>,
    ) -> HandlerResult<EndpointSlice> {
        let namespace = key.namespace().unwrap_or_default();
        let result = match slice {
            None => {
                let work = self
                    .inner
                    .works
                    .store()
                    .get_named(
                        Some(&execution_space_name(cluster)),
                        &slice_work_name(namespace, key.name()),
                    )
                    .filter(|w| collected_slices::is_collected_by(w, SERVICE_EXPORT));
                match work {
                    Some(w) => self.release(&w).await,
                    None => Ok(()),
                }
            }
            Some(slice) => {
                if is_managed_by_karmada(slice.labels()) {
                    return HandlerResult::Success;
                }
                let Some(service) = slice.labels().get(SERVICE_NAME_OF_SLICE_LABEL) else {
                    return HandlerResult::Success;
                };
                let Some(member) = self.inner.ctx.members.get(cluster) else {
                    return HandlerResult::Success;
                };
                let watches = match MemberWatches::of(&member) {
                    Ok(w) => w,
                    Err(e) => return HandlerResult::error(e),
                };
                if !watches.exports.cache().has_synced() {
                    return HandlerResult::RequeueAfter(MEMBER_CACHE_RETRY);
                }
                if watches
                    .exports
                    .store()
                    .get_named(Some(namespace), service)
                    .is_none()
                {
                    return HandlerResult::Success;
                }
                self.report(cluster, &slice).await
            }
        };
        if let Err(e) = &result {
            tracing::warn!(cluster, endpoint_slice = %key, error = %e, "EndpointSlice not collected");
        }
        result.into()
    }

    /// Writes the Work holding the member slice `slice` of `cluster`.
    async fn report(&self, cluster: &str, slice: &EndpointSlice) -> Result<(), ServiceExportError> {
        let id = format!(
            "{}/{}",
            slice.namespace().unwrap_or_default(),
            slice.name_any()
        );
        let report_err = |source| ServiceExportError::Report {
            cluster: cluster.to_owned(),
            slice: id.clone(),
            source: Box::new(source),
        };
        let value = serde_json::to_value(slice).map_err(|source| ServiceExportError::Encode {
            cluster: cluster.to_owned(),
            slice: id.clone(),
            source,
        })?;
        let works = self.inner.works.store();
        let outcome = collected_slices::report(
            &self.inner.client,
            Some(&works),
            &self.inner.interpreter,
            SERVICE_EXPORT,
            cluster,
            value,
        )
        .await
        .map_err(report_err)?;
        tracing::debug!(cluster, endpoint_slice = %id, ?outcome, "EndpointSlice collected");
        Ok(())
    }
}
