//! The detector's event filter: a template is worth processing only when something other than its
//! status and server-maintained metadata changed (Karmada's `eventfilter.SpecificationChanged`).

use std::hash::{DefaultHasher, Hash, Hasher};

use kube::api::DynamicObject;
use serde_json::Value;

/// A hash of everything in `obj` except `status`, `metadata.managedFields` and
/// `metadata.resourceVersion`. Two versions of an object with the same fingerprint differ only in
/// fields the detector ignores.
pub fn spec_fingerprint(obj: &DynamicObject) -> u64 {
    let Ok(mut value) = serde_json::to_value(obj) else {
        // Serializing a DynamicObject cannot fail; fall back to "always changed".
        return 0;
    };
    fingerprint_value(&mut value)
}

/// Fingerprint of an unstructured object (see [`spec_fingerprint`]); `value` is edited in place.
pub fn fingerprint_value(value: &mut Value) -> u64 {
    if let Some(map) = value.as_object_mut() {
        map.remove("status");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
            meta.remove("resourceVersion");
        }
    }
    let mut hasher = DefaultHasher::new();
    hash_value(value, &mut hasher);
    hasher.finish()
}

/// Hashes a JSON value independently of object key order.
fn hash_value(value: &Value, h: &mut DefaultHasher) {
    match value {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => (1u8, b).hash(h),
        Value::Number(n) => (2u8, n.to_string()).hash(h),
        Value::String(s) => (3u8, s).hash(h),
        Value::Array(items) => {
            (4u8, items.len()).hash(h);
            for item in items {
                hash_value(item, h);
            }
        }
        Value::Object(map) => {
            (5u8, map.len()).hash(h);
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for k in keys {
                k.hash(h);
                if let Some(v) = map.get(k) {
                    hash_value(v, h);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fp(v: Value) -> u64 {
        let mut v = v;
        fingerprint_value(&mut v)
    }

    #[test]
    fn status_resource_version_and_managed_fields_are_noise() {
        let base = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "a", "resourceVersion": "1", "managedFields": [{"manager": "x"}]},
            "spec": {"replicas": 2}, "status": {"readyReplicas": 0}});
        let noise = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "a", "resourceVersion": "7"},
            "spec": {"replicas": 2}, "status": {"readyReplicas": 2}});
        assert_eq!(fp(base.clone()), fp(noise));
        let scaled = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "a", "resourceVersion": "8"}, "spec": {"replicas": 3}});
        assert_ne!(fp(base.clone()), fp(scaled));
        let labelled = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "a", "labels": {"x": "y"}}, "spec": {"replicas": 2}});
        assert_ne!(fp(base), fp(labelled));
    }

    #[test]
    fn key_order_does_not_matter() {
        assert_eq!(
            fp(json!({"a": 1, "b": {"c": 2, "d": 3}})),
            fp(json!({"b": {"d": 3, "c": 2}, "a": 1}))
        );
    }
}
