//! The control-plane EndpointSlice built from one collected member EndpointSlice, and the merge
//! patch that brings an existing one to it. Pure: no API calls.

use std::collections::BTreeMap;

use karmada_apis::names::{derived_service_name, endpoint_slice_name};
use karmada_apis::well_known::{
    ENDPOINT_SLICE_CONTROLLER_LABEL_VALUE, WORK_NAME_ANNOTATION, WORK_NAMESPACE_ANNOTATION,
    WORK_PERMANENT_ID_LABEL,
};
use karmada_controllers_common::collected_slices::{
    ENDPOINT_SLICE_API_VERSION, ENDPOINT_SLICE_KIND, SERVICE_NAME_OF_SLICE_LABEL,
    SLICE_MANAGED_BY_LABEL,
};
use karmada_controllers_common::patch::merge_diff;
use karmada_controllers_common::work::meta_str;
use serde_json::{Map, Value, json};

/// The fields of an EndpointSlice copied from the collected one.
const BODY_FIELDS: &[&str] = &["addressType", "endpoints", "ports"];

/// Where a collected slice came from: the Work holding it and its member cluster.
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    /// The member cluster.
    pub cluster: &'a str,
    /// The Work's namespace (`karmada-es-<cluster>`).
    pub work_namespace: &'a str,
    /// The Work's name.
    pub work_name: &'a str,
    /// The Work's permanent id, which every slice built from it carries as a label.
    pub work_id: &'a str,
    /// The exported Service's name (the Work's `endpointslice.karmada.io/name` label).
    pub service: &'a str,
}

/// The control-plane EndpointSlice for `collected` (a manifest of the Work `origin`):
/// `imported-<cluster>-<name>` in the slice's namespace, its address type, endpoints and ports,
/// labelled with the Work's permanent id, `kubernetes.io/service-name: derived-<service>` and
/// Karmada's EndpointSlice controller as manager, annotated with the Work's namespace and name.
/// `None` for a manifest without a name.
pub fn derive_slice(collected: &Value, origin: &Origin<'_>) -> Option<Value> {
    let name = meta_str(collected, "name").filter(|n| !n.is_empty())?;
    let namespace = meta_str(collected, "namespace").unwrap_or_default();
    let mut slice = json!({
        "apiVersion": ENDPOINT_SLICE_API_VERSION,
        "kind": ENDPOINT_SLICE_KIND,
        "metadata": {
            "namespace": namespace,
            "name": endpoint_slice_name(name, origin.cluster),
            "labels": {
                WORK_PERMANENT_ID_LABEL: origin.work_id,
                SERVICE_NAME_OF_SLICE_LABEL: derived_service_name(origin.service),
                SLICE_MANAGED_BY_LABEL: ENDPOINT_SLICE_CONTROLLER_LABEL_VALUE,
            },
            "annotations": {
                WORK_NAMESPACE_ANNOTATION: origin.work_namespace,
                WORK_NAME_ANNOTATION: origin.work_name,
            },
        },
    });
    if let (Some(out), Some(src)) = (slice.as_object_mut(), collected.as_object()) {
        for field in BODY_FIELDS {
            if let Some(v) = src.get(*field) {
                out.insert((*field).to_owned(), v.clone());
            }
        }
    }
    Some(slice)
}

/// The part of `current` that [`derive_slice`] sets: the labels and annotations it names and the
/// copied fields.
fn owned_part(current: &Value, desired: &Value) -> Value {
    let mut out = Map::new();
    let mut meta = Map::new();
    for map in ["labels", "annotations"] {
        let wanted = desired
            .pointer(&format!("/metadata/{map}"))
            .and_then(Value::as_object);
        let have = current
            .pointer(&format!("/metadata/{map}"))
            .and_then(Value::as_object);
        let kept: BTreeMap<&String, &Value> = wanted
            .into_iter()
            .flat_map(|w| w.keys())
            .filter_map(|k| have.and_then(|h| h.get(k)).map(|v| (k, v)))
            .collect();
        meta.insert(map.to_owned(), json!(kept));
    }
    out.insert("metadata".into(), Value::Object(meta));
    for field in BODY_FIELDS {
        if let Some(v) = current.get(*field) {
            out.insert((*field).to_owned(), v.clone());
        }
    }
    Value::Object(out)
}

/// The merge patch bringing `current` to `desired` in the fields [`derive_slice`] sets, leaving
/// everything else alone; `None` when they already match.
pub fn slice_patch(current: &Value, desired: &Value) -> Option<Value> {
    let mut wanted = desired.clone();
    if let Some(o) = wanted.as_object_mut() {
        o.remove("apiVersion");
        o.remove("kind");
        if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("name");
            m.remove("namespace");
        }
        for field in BODY_FIELDS {
            o.entry(*field).or_insert(Value::Null);
        }
    }
    let have = owned_part(current, &wanted);
    let patch = merge_diff(&have, &wanted)?;
    // A field the desired slice lacks is `null` in `wanted`; it only needs writing if present.
    let cleaned = strip_null_noops(patch, &have)?;
    Some(cleaned)
}

/// Drops `null` members of `patch` that remove something `have` does not have.
fn strip_null_noops(patch: Value, have: &Value) -> Option<Value> {
    match patch {
        Value::Object(members) => {
            let mut out = Map::new();
            for (k, v) in members {
                let present = have.get(&k);
                match v {
                    Value::Null if present.is_none_or(Value::is_null) => {}
                    Value::Object(_) => {
                        if let Some(inner) = strip_null_noops(v, present.unwrap_or(&Value::Null)) {
                            out.insert(k, inner);
                        }
                    }
                    other => {
                        out.insert(k, other);
                    }
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        other => Some(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> Origin<'static> {
        Origin {
            cluster: "member1",
            work_namespace: "karmada-es-member1",
            work_name: "web-abc-12345",
            work_id: "id-1",
            service: "web",
        }
    }

    fn collected() -> Value {
        json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "namespace": "ns", "name": "web-abc",
                "labels": {"kubernetes.io/service-name": "web", "karmada.io/managed": "true",
                           "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
                "ownerReferences": [{"kind": "Service", "name": "web"}],
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": true}}],
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
        })
    }

    #[test]
    fn derives_karmadas_shape() {
        let slice = derive_slice(&collected(), &origin()).unwrap();
        assert_eq!(
            slice,
            json!({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "namespace": "ns", "name": "imported-member1-web-abc",
                    "labels": {
                        "work.karmada.io/permanent-id": "id-1",
                        "kubernetes.io/service-name": "derived-web",
                        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.karmada.io",
                    },
                    "annotations": {
                        "work.karmada.io/namespace": "karmada-es-member1",
                        "work.karmada.io/name": "web-abc-12345",
                    },
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": true}}],
                "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
            })
        );
        assert!(derive_slice(&json!({"metadata": {}}), &origin()).is_none());
    }

    #[test]
    fn patches_only_owned_fields_that_differ() {
        let desired = derive_slice(&collected(), &origin()).unwrap();
        let mut current = desired.clone();
        current["metadata"]["labels"]["team"] = json!("a");
        current["metadata"]["resourceVersion"] = json!("7");
        assert_eq!(slice_patch(&current, &desired), None);

        current["endpoints"] = json!([]);
        current["metadata"]["labels"]["kubernetes.io/service-name"] = json!("other");
        assert_eq!(
            slice_patch(&current, &desired),
            Some(json!({
                "metadata": {"labels": {"kubernetes.io/service-name": "derived-web"}},
                "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": true}}],
            }))
        );
    }

    #[test]
    fn removed_fields_are_removed() {
        let mut source = collected();
        source.as_object_mut().unwrap().remove("ports");
        let desired = derive_slice(&source, &origin()).unwrap();
        let current = derive_slice(&collected(), &origin()).unwrap();
        assert_eq!(
            slice_patch(&current, &desired),
            Some(json!({"ports": null}))
        );
    }
}
