//! What a cache watches: the kind plus its selector scope. At most one watch exists per key.

use kube::api::GroupVersionKind;

use crate::gvk::gvk_string;

/// The selector scope of a cache. Two consumers asking for the same kind and scope share one watch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CacheScope {
    /// Watch only this namespace (`None`: all namespaces).
    pub namespace: Option<String>,
    /// Label selector, e.g. `example.com/managed=true`.
    pub label_selector: Option<String>,
    /// Field selector.
    pub field_selector: Option<String>,
}

impl CacheScope {
    /// Everything.
    pub fn all() -> Self {
        Self::default()
    }

    /// Only objects matching `selector`.
    pub fn labels(selector: impl Into<String>) -> Self {
        Self {
            label_selector: Some(selector.into()),
            ..Self::default()
        }
    }

    /// Human-readable form used in errors and logs.
    pub fn describe(&self) -> String {
        let mut parts = vec![];
        if let Some(ns) = &self.namespace {
            parts.push(format!("namespace={ns}"));
        }
        if let Some(l) = &self.label_selector {
            parts.push(format!("labels={l}"));
        }
        if let Some(f) = &self.field_selector {
            parts.push(format!("fields={f}"));
        }
        parts.join(",")
    }
}

/// The registry key of a cache: (kind, scope). The cluster is implied by the factory.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// API group (empty for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Selector scope.
    pub scope: CacheScope,
}

impl CacheKey {
    /// The key of `gvk` in `scope`.
    pub fn new(gvk: &GroupVersionKind, scope: CacheScope) -> Self {
        Self {
            group: gvk.group.clone(),
            version: gvk.version.clone(),
            kind: gvk.kind.clone(),
            scope,
        }
    }

    /// The key's GVK.
    pub fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk(&self.group, &self.version, &self.kind)
    }

    /// `group/version, Kind=kind [scope]`.
    pub fn describe(&self) -> String {
        let s = self.scope.describe();
        if s.is_empty() {
            gvk_string(&self.gvk())
        } else {
            format!("{} [{s}]", gvk_string(&self.gvk()))
        }
    }
}
