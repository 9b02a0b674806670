//! Transforms applied to every object before it enters a cache.

use std::sync::Arc;

use kube::Resource;

/// The kubectl annotation holding the last applied configuration (often as large as the object).
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A function that edits an object in place before it is stored.
pub type Transform<K> = Arc<dyn Fn(&mut K) + Send + Sync>;

/// What a cache drops from every object before storing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Strip {
    /// `metadata.managedFields` (controller-runtime's `TransformStripManagedFields`).
    pub managed_fields: bool,
    /// The kubectl last-applied annotation.
    pub last_applied: bool,
}

impl Strip {
    /// Drops what `self` names from `obj`.
    pub fn apply<K: Resource>(self, obj: &mut K) {
        let meta = obj.meta_mut();
        if self.managed_fields {
            meta.managed_fields = None;
        }
        if self.last_applied
            && let Some(annotations) = meta.annotations.as_mut()
        {
            annotations.remove(LAST_APPLIED_ANNOTATION);
            if annotations.is_empty() {
                meta.annotations = None;
            }
        }
    }
}

/// Drops `metadata.managedFields` and the kubectl last-applied annotation: the framework's default
/// transform (controller-runtime's `TransformStripManagedFields`, plus the annotation).
pub fn strip_for_cache<K: Resource>(obj: &mut K) {
    Strip {
        managed_fields: true,
        last_applied: true,
    }
    .apply(obj);
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};

    #[test]
    fn strips_managed_fields_and_last_applied() {
        let mut cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some("a".into()),
                managed_fields: Some(vec![ManagedFieldsEntry::default()]),
                annotations: Some(
                    [
                        (LAST_APPLIED_ANNOTATION.to_string(), "{...}".to_string()),
                        ("keep".to_string(), "me".to_string()),
                    ]
                    .into(),
                ),
                ..Default::default()
            },
            ..Default::default()
        };
        strip_for_cache(&mut cm);
        assert!(cm.metadata.managed_fields.is_none());
        let ann = cm.metadata.annotations.unwrap();
        assert_eq!(ann.len(), 1);
        assert_eq!(ann["keep"], "me");
    }

    #[test]
    fn can_keep_last_applied() {
        let mut cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some("a".into()),
                managed_fields: Some(vec![ManagedFieldsEntry::default()]),
                annotations: Some(
                    [(LAST_APPLIED_ANNOTATION.to_string(), "{...}".to_string())].into(),
                ),
                ..Default::default()
            },
            ..Default::default()
        };
        Strip {
            managed_fields: true,
            last_applied: false,
        }
        .apply(&mut cm);
        assert!(cm.metadata.managed_fields.is_none());
        assert_eq!(
            cm.metadata.annotations.unwrap()[LAST_APPLIED_ANNOTATION],
            "{...}"
        );
    }
}
