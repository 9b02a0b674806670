//! Works holding EndpointSlices collected from member clusters, shared by the two controllers that
//! collect them: `serviceExport` (for ServiceExports) and `endpointsliceCollect` (for
//! MultiClusterServices).
//!
//! Both write the same Work for the same member EndpointSlice (`karmada-es-<cluster>`, Karmada's
//! Work name of the slice), with `spec.suspendDispatching` set so that nothing is applied back to
//! the member. Which of them still wants the Work is recorded in the
//! `endpointslice.karmada.io/managed-by` label (the collector kinds joined with `.`, e.g.
//! `MultiClusterService.ServiceExport`); a collector that lets go removes its kind and its own
//! labels, and the last one deletes the Work. Label changes are merge patches guarded by the
//! resourceVersion read, so two collectors never overwrite each other.
//!
//! Who calls what: [`member_slices`] to watch a member's slices, [`report`] when a member
//! slice of a collected Service appears or changes, [`release`] when it, or the reason to collect
//! it, goes; [`is_managed_by_karmada`] keeps slices Karmada itself put into a member from being
//! collected again.

use std::collections::BTreeSet;

use apimachinery::{DEFAULT_RETRY, is_not_found, retry_on_conflict};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use karmada_apis::Work;
use karmada_apis::names::{execution_space_name, work_name};
use karmada_apis::well_known::{
    ENDPOINT_SLICE_CONTROLLER_FINALIZER, ENDPOINT_SLICE_CONTROLLER_LABEL_VALUE,
    ENDPOINT_SLICE_DISPATCH_CONTROLLER_LABEL_VALUE, ENDPOINT_SLICE_WORK_MANAGED_BY_LABEL,
    MCS_ENDPOINT_SLICE_DISPATCH_CONTROLLER_FINALIZER, MULTI_CLUSTER_SERVICE_NAME_LABEL,
    MULTI_CLUSTER_SERVICE_NAMESPACE_LABEL, SERVICE_NAME_LABEL, SERVICE_NAMESPACE_LABEL,
};
use karmada_interpreter::Interpreter;
use kube::api::{Api, DeleteParams};
use lariat::Store;
use serde_json::Value;

use crate::error::{FrameworkError, framework};
use crate::patch::patch_changes;
use crate::work::{WorkError, WorkOutcome, WorkTarget, create_or_update_work, meta_map_value};

/// The kind of an EndpointSlice, as Work names and manifests spell it.
pub const ENDPOINT_SLICE_KIND: &str = "EndpointSlice";
/// `discovery.k8s.io/v1`.
pub const ENDPOINT_SLICE_API_VERSION: &str = "discovery.k8s.io/v1";
/// The label tying an EndpointSlice to its Service (`kubernetes.io/service-name`).
pub const SERVICE_NAME_OF_SLICE_LABEL: &str = "kubernetes.io/service-name";
/// The label naming the controller that manages an EndpointSlice
/// (`endpointslice.kubernetes.io/managed-by`).
pub const SLICE_MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";

/// One of the two collectors of member EndpointSlices: its kind in the managed-by label, the labels
/// it puts on the Work naming the Service (or MultiClusterService), and its finalizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collector {
    /// The value it adds to `endpointslice.karmada.io/managed-by`.
    pub kind: &'static str,
    /// Its label holding the Service's namespace.
    pub namespace_label: &'static str,
    /// Its label holding the Service's name.
    pub name_label: &'static str,
    /// The finalizer it puts on the Work.
    pub finalizer: &'static str,
}

/// The `serviceExport` controller's collection (Karmada's `ServiceExport` manager).
pub const SERVICE_EXPORT: Collector = Collector {
    kind: "ServiceExport",
    namespace_label: SERVICE_NAMESPACE_LABEL,
    name_label: SERVICE_NAME_LABEL,
    finalizer: ENDPOINT_SLICE_CONTROLLER_FINALIZER,
};

/// The `endpointsliceCollect` controller's collection (Karmada's `MultiClusterService` manager).
pub const MULTI_CLUSTER_SERVICE: Collector = Collector {
    kind: "MultiClusterService",
    namespace_label: MULTI_CLUSTER_SERVICE_NAMESPACE_LABEL,
    name_label: MULTI_CLUSTER_SERVICE_NAME_LABEL,
    // Karmada's collector puts the dispatch controller's finalizer on the Work: that controller
    // removes it once the consumers' copies are gone.
    finalizer: MCS_ENDPOINT_SLICE_DISPATCH_CONTROLLER_FINALIZER,
};

/// A member's shared controller of every EndpointSlice (not only Karmada-managed ones: a member's
/// slices are built by its own kube-controller-manager), indexed by Service name. The one way the
/// collectors ask for it, so they share a single watch per member.
pub fn member_slices(
    member: &lariat::Cluster,
) -> Result<lariat::SharedController<EndpointSlice>, FrameworkError> {
    let slices = member
        .controllers()
        .for_kind_in::<EndpointSlice>(lariat::CacheScope::all())
        .map_err(framework(format!(
            "EndpointSlice controller of cluster {}",
            member.name()
        )))?;
    slices.store().index_by_label(SERVICE_NAME_OF_SLICE_LABEL);
    Ok(slices)
}

/// The EndpointSlices of Service `namespace/name` in a [`member_slices`] store.
pub fn slices_of_service(
    store: &Store<EndpointSlice>,
    namespace: &str,
    name: &str,
) -> Vec<std::sync::Arc<EndpointSlice>> {
    store
        .list_by_label(SERVICE_NAME_OF_SLICE_LABEL, name)
        .into_iter()
        .filter(|s| s.metadata.namespace.as_deref() == Some(namespace))
        .collect()
}

/// Whether an EndpointSlice was put into its cluster by Karmada (its managed-by label names one
/// of Karmada's EndpointSlice controllers); such slices are never collected.
pub fn is_managed_by_karmada(labels: &std::collections::BTreeMap<String, String>) -> bool {
    matches!(
        labels.get(SLICE_MANAGED_BY_LABEL).map(String::as_str),
        Some(
            ENDPOINT_SLICE_CONTROLLER_LABEL_VALUE | ENDPOINT_SLICE_DISPATCH_CONTROLLER_LABEL_VALUE
        )
    )
}

/// The collectors named by a managed-by label value (`A.B`).
pub fn managers(value: &str) -> BTreeSet<&str> {
    value.split('.').filter(|s| !s.is_empty()).collect()
}

/// The collectors of a Work, from its managed-by label.
pub fn work_managers(work: &Work) -> BTreeSet<&str> {
    work.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(ENDPOINT_SLICE_WORK_MANAGED_BY_LABEL))
        .map(|v| managers(v))
        .unwrap_or_default()
}

/// Whether `collector` is among the Work's collectors.
pub fn is_collected_by(work: &Work, collector: Collector) -> bool {
    work_managers(work).contains(collector.kind)
}

/// The name of the Work holding member EndpointSlice `namespace/name`.
pub fn slice_work_name(namespace: &str, name: &str) -> String {
    work_name(ENDPOINT_SLICE_KIND, name, namespace)
}

/// Writes (or keeps) the Work holding `slice`, collected from `cluster` by `collector`: the slice
/// as its one manifest, dispatching suspended, the collector's labels (the Service's namespace and
/// name, from the slice) and finalizer, and the collector's kind added to the managed-by label.
pub async fn report(
    client: &kube::Client,
    works: Option<&Store<Work>>,
    interpreter: &Interpreter,
    collector: Collector,
    cluster: &str,
    slice: Value,
) -> Result<WorkOutcome, WorkError> {
    let namespace = crate::work::meta_str(&slice, "namespace")
        .unwrap_or_default()
        .to_owned();
    let name = crate::work::meta_str(&slice, "name")
        .unwrap_or_default()
        .to_owned();
    let service = meta_map_value(&slice, "labels", SERVICE_NAME_OF_SLICE_LABEL)
        .unwrap_or_default()
        .to_owned();
    let target_ns = execution_space_name(cluster);
    let target_name = slice_work_name(&namespace, &name);
    let existing = works.and_then(|s| s.get_named(Some(&target_ns), &target_name));
    let mut kinds: BTreeSet<&str> = existing.as_deref().map(work_managers).unwrap_or_default();
    kinds.insert(collector.kind);
    let target = WorkTarget {
        name: target_name,
        namespace: target_ns,
        labels: [
            (collector.namespace_label.to_owned(), namespace),
            (collector.name_label.to_owned(), service),
            (
                ENDPOINT_SLICE_WORK_MANAGED_BY_LABEL.to_owned(),
                kinds.into_iter().collect::<Vec<_>>().join("."),
            ),
        ]
        .into(),
        finalizers: vec![collector.finalizer.to_owned()],
        suspend_dispatching: Some(true),
        ..Default::default()
    };
    create_or_update_work(client, works, interpreter, &target, slice).await
}

/// What [`release`] did with a Work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// The collector was not among the Work's collectors (or the Work was gone).
    NotCollected,
    /// Another collector still wants the Work: only this collector's labels were removed.
    Relabelled,
    /// The collector was the last one: the Work was deleted.
    Deleted,
}

/// Lets go of `work` for `collector`: removes its kind from the managed-by label and its labels
/// when another collector remains, deletes the Work otherwise. Re-reads and retries on conflicts.
pub async fn release(
    client: &kube::Client,
    work: &Work,
    collector: Collector,
) -> Result<Released, kube::Error> {
    let namespace = work.metadata.namespace.clone().unwrap_or_default();
    let name = work.metadata.name.clone().unwrap_or_default();
    let api: Api<Work> = Api::namespaced(client.clone(), &namespace);
    let result = retry_on_conflict(DEFAULT_RETRY, apimachinery::is_conflict, |attempt| {
        let api = api.clone();
        let name = name.clone();
        let cached = (attempt == 0).then(|| work.clone());
        async move {
            let read = match cached {
                Some(w) => w,
                None => match api.get_opt(&name).await? {
                    Some(w) => w,
                    None => return Ok(Released::NotCollected),
                },
            };
            let mut kinds = work_managers(&read);
            if !kinds.remove(collector.kind) {
                return Ok(Released::NotCollected);
            }
            if kinds.is_empty() {
                let params = DeleteParams {
                    preconditions: read.metadata.resource_version.clone().map(|rv| {
                        kube::api::Preconditions {
                            resource_version: Some(rv),
                            uid: None,
                        }
                    }),
                    ..Default::default()
                };
                return match api.delete(&name, &params).await {
                    Ok(_) => Ok(Released::Deleted),
                    Err(e) if is_not_found(&e) => Ok(Released::Deleted),
                    Err(e) => Err(e),
                };
            }
            let mut updated = read.clone();
            let labels = updated.metadata.labels.get_or_insert_with(Default::default);
            labels.remove(collector.namespace_label);
            labels.remove(collector.name_label);
            labels.insert(
                ENDPOINT_SLICE_WORK_MANAGED_BY_LABEL.to_owned(),
                kinds.into_iter().collect::<Vec<_>>().join("."),
            );
            patch_changes(&api, &read, &updated).await?;
            Ok(Released::Relabelled)
        }
    })
    .await;
    result.map_err(|e| match e {
        apimachinery::RetryError::Conflicts { last, .. }
        | apimachinery::RetryError::Failed(last) => last,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managers_split_on_dots() {
        assert_eq!(
            managers("MultiClusterService.ServiceExport")
                .into_iter()
                .collect::<Vec<_>>(),
            ["MultiClusterService", "ServiceExport"]
        );
        assert!(managers("").is_empty());
    }

    #[test]
    fn karmada_managed_slices_are_recognised() {
        let labels = |by: &str| [(SLICE_MANAGED_BY_LABEL.to_owned(), by.to_owned())].into();
        assert!(is_managed_by_karmada(&labels(
            ENDPOINT_SLICE_CONTROLLER_LABEL_VALUE
        )));
        assert!(is_managed_by_karmada(&labels(
            ENDPOINT_SLICE_DISPATCH_CONTROLLER_LABEL_VALUE
        )));
        assert!(!is_managed_by_karmada(&labels(
            "endpointslice-controller.k8s.io"
        )));
        assert!(!is_managed_by_karmada(&Default::default()));
    }

    #[test]
    fn slice_work_names_follow_karmada() {
        assert_eq!(
            slice_work_name("default", "web-abc12"),
            work_name("EndpointSlice", "web-abc12", "default")
        );
    }
}
