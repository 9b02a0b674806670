//! The MultiClusterService's hold on its Service: the labels and annotations that keep the
//! resource detector off the Service, and the ResourceBinding that propagates it to the provider
//! and consumer clusters (Karmada's `claimMultiClusterServiceForService`, `buildResourceBinding`
//! and `retrieveService`).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karmada_apis::ResourceBinding;
use karmada_apis::networking::v1alpha1::{MULTI_CLUSTER_SERVICE_KIND, MultiClusterService};
use karmada_apis::well_known::{
    BINDING_CONTROLLER_FINALIZER, BINDING_MANAGED_BY_LABEL, CLUSTER_PROPAGATION_POLICY_ANNOTATION,
    CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL, MULTI_CLUSTER_SERVICE_NAME_ANNOTATION,
    MULTI_CLUSTER_SERVICE_NAMESPACE_ANNOTATION, MULTI_CLUSTER_SERVICE_PERMANENT_ID_LABEL,
    PROPAGATION_POLICY_NAME_ANNOTATION, PROPAGATION_POLICY_NAMESPACE_ANNOTATION,
    PROPAGATION_POLICY_PERMANENT_ID_LABEL, RESOURCE_BINDING_PERMANENT_ID_LABEL,
    RESOURCE_TEMPLATE_CLAIMED_BY_LABEL,
};
use kube::ResourceExt;
use serde_json::{Value, json};

/// The MultiClusterService's permanent id (its `multiclusterservice.karmada.io/permanent-id`).
pub fn permanent_id(mcs: &MultiClusterService) -> String {
    mcs.labels()
        .get(MULTI_CLUSTER_SERVICE_PERMANENT_ID_LABEL)
        .cloned()
        .unwrap_or_default()
}

/// Claims the Service for the MultiClusterService: drops any policy's claim, marks it claimed by
/// `MultiClusterService` with the MultiClusterService's permanent id, and names the
/// MultiClusterService in its annotations.
pub fn claim_service(meta: &mut ObjectMeta, mcs: &MultiClusterService) {
    let labels = meta.labels.get_or_insert_with(Default::default);
    labels.remove(PROPAGATION_POLICY_PERMANENT_ID_LABEL);
    labels.remove(CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL);
    labels.insert(
        RESOURCE_TEMPLATE_CLAIMED_BY_LABEL.to_owned(),
        MULTI_CLUSTER_SERVICE_KIND.to_owned(),
    );
    labels.insert(
        MULTI_CLUSTER_SERVICE_PERMANENT_ID_LABEL.to_owned(),
        permanent_id(mcs),
    );
    let annotations = meta.annotations.get_or_insert_with(Default::default);
    annotations.remove(PROPAGATION_POLICY_NAME_ANNOTATION);
    annotations.remove(PROPAGATION_POLICY_NAMESPACE_ANNOTATION);
    annotations.remove(CLUSTER_PROPAGATION_POLICY_ANNOTATION);
    annotations.insert(
        MULTI_CLUSTER_SERVICE_NAME_ANNOTATION.to_owned(),
        mcs.name_any(),
    );
    annotations.insert(
        MULTI_CLUSTER_SERVICE_NAMESPACE_ANNOTATION.to_owned(),
        mcs.namespace().unwrap_or_default(),
    );
}

/// Lets go of the Service: removes the claimed-by and permanent-id labels (Karmada keeps the
/// annotations).
pub fn release_service(meta: &mut ObjectMeta) {
    if let Some(labels) = meta.labels.as_mut() {
        labels.remove(RESOURCE_TEMPLATE_CLAIMED_BY_LABEL);
        labels.remove(MULTI_CLUSTER_SERVICE_PERMANENT_ID_LABEL);
    }
}

/// Lets go of the Service's ResourceBinding: removes the MultiClusterService's annotations, the
/// managed-by and the permanent-id labels.
pub fn release_binding(meta: &mut ObjectMeta) {
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(MULTI_CLUSTER_SERVICE_NAME_ANNOTATION);
        annotations.remove(MULTI_CLUSTER_SERVICE_NAMESPACE_ANNOTATION);
    }
    if let Some(labels) = meta.labels.as_mut() {
        labels.remove(BINDING_MANAGED_BY_LABEL);
        labels.remove(MULTI_CLUSTER_SERVICE_PERMANENT_ID_LABEL);
    }
}

/// The ResourceBinding propagating `svc` to `clusters` (providers and consumers), as a JSON object
/// (metadata and spec only): owned by the Service, managed by `MultiClusterService`, conflicts
/// overwritten.
pub fn desired_binding(
    svc: &Service,
    mcs: &MultiClusterService,
    clusters: &BTreeSet<String>,
) -> Value {
    let namespace = svc.namespace().unwrap_or_default();
    let name = svc.name_any();
    let uid = svc.uid().unwrap_or_default();
    json!({
        "apiVersion": "work.karmada.io/v1alpha2",
        "kind": "ResourceBinding",
        "metadata": {
            "name": karmada_apis::names::binding_name("Service", &name),
            "namespace": namespace,
            "ownerReferences": [{
                "apiVersion": "v1",
                "kind": "Service",
                "name": name,
                "uid": uid,
            }],
            "annotations": {
                MULTI_CLUSTER_SERVICE_NAME_ANNOTATION: mcs.name_any(),
                MULTI_CLUSTER_SERVICE_NAMESPACE_ANNOTATION: mcs.namespace().unwrap_or_default(),
            },
            "labels": {
                BINDING_MANAGED_BY_LABEL: MULTI_CLUSTER_SERVICE_KIND,
                MULTI_CLUSTER_SERVICE_PERMANENT_ID_LABEL: permanent_id(mcs),
            },
            "finalizers": [BINDING_CONTROLLER_FINALIZER],
        },
        "spec": {
            "resource": {
                "apiVersion": "v1",
                "kind": "Service",
                "namespace": namespace,
                "name": name,
                "uid": uid,
                "resourceVersion": svc.resource_version().unwrap_or_default(),
            },
            "placement": {"clusterAffinity": {"clusterNames": clusters}},
            "conflictResolution": "Overwrite",
        },
    })
}

/// The binding to create from `desired`, with a new ResourceBinding permanent id.
pub fn new_binding(mut desired: Value) -> Value {
    if let Some(labels) = desired
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.insert(
            RESOURCE_BINDING_PERMANENT_ID_LABEL.to_owned(),
            Value::String(uuid::Uuid::new_v4().to_string()),
        );
    }
    desired
}

/// Whether `existing` is controlled by another object than the Service of uid `uid` (a binding
/// left from an earlier Service of the same name, waiting for garbage collection).
pub fn controlled_by_other(existing: &ResourceBinding, uid: &str) -> bool {
    existing
        .owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid != uid)
}

/// `existing` updated to `desired`: labels and annotations merged (desired wins), owner references,
/// finalizers and `spec.{placement,resource,conflictResolution}` replaced (Karmada's
/// `CreateOrUpdate` mutation).
pub fn updated_binding(existing: &Value, desired: &Value) -> Value {
    let mut out = existing.clone();
    for map in ["labels", "annotations"] {
        let Some(want) = desired
            .pointer(&format!("/metadata/{map}"))
            .and_then(Value::as_object)
        else {
            continue;
        };
        let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) else {
            continue;
        };
        let entry = meta.entry(map).or_insert_with(|| json!({}));
        if !entry.is_object() {
            *entry = json!({});
        }
        if let Some(have) = entry.as_object_mut() {
            for (k, v) in want {
                have.insert(k.clone(), v.clone());
            }
        }
    }
    for (path, field) in [
        ("metadata", "ownerReferences"),
        ("metadata", "finalizers"),
        ("spec", "placement"),
        ("spec", "resource"),
        ("spec", "conflictResolution"),
    ] {
        let want = desired
            .get(path)
            .and_then(|p| p.get(field))
            .cloned()
            .unwrap_or(Value::Null);
        if let Some(section) = out.get_mut(path).and_then(Value::as_object_mut) {
            section.insert(field.to_owned(), want);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use karmada_apis::networking::v1alpha1::{ExposureType, MultiClusterServiceSpec};

    fn mcs() -> MultiClusterService {
        let mut m = MultiClusterService::new(
            "web",
            MultiClusterServiceSpec {
                types: vec![ExposureType::CrossCluster],
                ..Default::default()
            },
        );
        m.metadata.namespace = Some("default".to_owned());
        m.metadata.labels = Some(
            [(
                MULTI_CLUSTER_SERVICE_PERMANENT_ID_LABEL.to_owned(),
                "id-1".to_owned(),
            )]
            .into(),
        );
        m
    }

    #[test]
    fn claim_replaces_policy_claim() {
        let mut meta = ObjectMeta {
            labels: Some(
                [(
                    PROPAGATION_POLICY_PERMANENT_ID_LABEL.to_owned(),
                    "pp".to_owned(),
                )]
                .into(),
            ),
            annotations: Some(
                [(
                    PROPAGATION_POLICY_NAME_ANNOTATION.to_owned(),
                    "pp".to_owned(),
                )]
                .into(),
            ),
            ..Default::default()
        };
        claim_service(&mut meta, &mcs());
        let labels = meta.labels.clone().unwrap_or_default();
        assert_eq!(
            labels[RESOURCE_TEMPLATE_CLAIMED_BY_LABEL],
            "MultiClusterService"
        );
        assert_eq!(labels[MULTI_CLUSTER_SERVICE_PERMANENT_ID_LABEL], "id-1");
        assert!(!labels.contains_key(PROPAGATION_POLICY_PERMANENT_ID_LABEL));
        let annotations = meta.annotations.clone().unwrap_or_default();
        assert_eq!(annotations[MULTI_CLUSTER_SERVICE_NAME_ANNOTATION], "web");
        assert!(!annotations.contains_key(PROPAGATION_POLICY_NAME_ANNOTATION));
        release_service(&mut meta);
        assert!(
            !meta
                .labels
                .unwrap_or_default()
                .contains_key(RESOURCE_TEMPLATE_CLAIMED_BY_LABEL)
        );
    }

    #[test]
    fn binding_places_on_every_named_cluster() {
        let mut svc = Service::default();
        svc.metadata.name = Some("web".to_owned());
        svc.metadata.namespace = Some("default".to_owned());
        svc.metadata.uid = Some("u1".to_owned());
        let clusters: BTreeSet<String> = ["member1".to_owned(), "member2".to_owned()].into();
        let b = desired_binding(&svc, &mcs(), &clusters);
        assert_eq!(b["metadata"]["name"], "web-service");
        assert_eq!(
            b["spec"]["placement"]["clusterAffinity"]["clusterNames"],
            json!(["member1", "member2"])
        );
        assert_eq!(
            b["metadata"]["labels"][BINDING_MANAGED_BY_LABEL],
            "MultiClusterService"
        );
        let existing = json!({"metadata": {"name": "web-service", "labels": {"keep": "1"},
            "finalizers": ["x"]}, "spec": {"clusters": [{"name": "member1"}]}});
        let updated = updated_binding(&existing, &b);
        assert_eq!(updated["metadata"]["labels"]["keep"], "1");
        assert_eq!(
            updated["metadata"]["finalizers"],
            json!([BINDING_CONTROLLER_FINALIZER])
        );
        assert_eq!(updated["spec"]["clusters"], json!([{"name": "member1"}]));
        assert_eq!(updated["spec"]["conflictResolution"], "Overwrite");
        let created = new_binding(b);
        assert!(
            created["metadata"]["labels"][RESOURCE_BINDING_PERMANENT_ID_LABEL]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        );
    }
}
