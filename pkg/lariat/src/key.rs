//! Object keys: the `namespace/name` (or `name` for cluster-scoped objects) strings that flow through
//! work queues, like client-go's `MetaNamespaceKeyFunc`.

use std::fmt;
use std::sync::Arc;

use kube::Resource;

/// A cheap-to-clone object key: `namespace/name` for namespaced objects, `name` otherwise.
///
/// Cloning is a reference-count increment, so keys can be fanned out to many queues cheaply.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(Arc<str>);

impl ObjectKey {
    /// Builds a key from an optional namespace and a name.
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        match namespace {
            Some(ns) if !ns.is_empty() => Self(Arc::from(format!("{ns}/{name}"))),
            _ => Self(Arc::from(name)),
        }
    }

    /// Builds the key of a Kubernetes object from its metadata; `None` if the object has no name.
    pub fn from_object<K: Resource>(obj: &K) -> Option<Self> {
        let meta = obj.meta();
        let name = meta.name.as_deref()?;
        Some(Self::new(meta.namespace.as_deref(), name))
    }

    /// The namespace part, if the key has one.
    pub fn namespace(&self) -> Option<&str> {
        self.0.split_once('/').map(|(ns, _)| ns)
    }

    /// The name part.
    pub fn name(&self) -> &str {
        match self.0.split_once('/') {
            Some((_, name)) => name,
            None => &self.0,
        }
    }

    /// The whole key as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for ObjectKey {
    fn from(s: &str) -> Self {
        Self(Arc::from(s))
    }
}

impl From<String> for ObjectKey {
    fn from(s: String) -> Self {
        Self(Arc::from(s))
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", &*self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaced_and_cluster_keys() {
        let k = ObjectKey::new(Some("default"), "cm");
        assert_eq!(k.as_str(), "default/cm");
        assert_eq!(k.namespace(), Some("default"));
        assert_eq!(k.name(), "cm");
        let c = ObjectKey::new(None, "node-1");
        assert_eq!(c.as_str(), "node-1");
        assert_eq!(c.namespace(), None);
        assert_eq!(c.name(), "node-1");
        assert_eq!(ObjectKey::new(Some(""), "x").as_str(), "x");
    }
}
