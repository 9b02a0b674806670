//! The cache's object store: `Arc`ed objects by key, with secondary indexes kept up to date on
//! every change, and a relist that works in place (old objects are replaced one by one and the
//! ones not seen again are deleted at the end) so a relist never holds two copies of the store.

use std::sync::Arc;

use ahash::{AHashMap, AHashSet};
use kube::Resource;
use parking_lot::RwLock;
use prometheus::IntGauge;
use tokio::sync::watch;

use crate::key::ObjectKey;

/// Computes the index values of an object (zero, one or many).
pub type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// Name of the namespace index ([`Store::index_by_namespace`]).
pub const NAMESPACE_INDEX: &str = "namespace";

/// Name of the index over one label key ([`Store::index_by_label`]).
pub fn label_index_name(label: &str) -> String {
    format!("label:{label}")
}

/// Sync state of a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncState {
    /// The initial list has not completed yet.
    Pending,
    /// The initial list completed at least once.
    Synced,
    /// The cache's watch was stopped.
    Stopped,
}

/// A read handle on a cache's objects. Cheap to clone.
pub struct Store<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

struct Inner<K> {
    state: RwLock<State<K>>,
    sync: watch::Sender<SyncState>,
    gauge: Option<IntGauge>,
}

struct State<K> {
    objects: AHashMap<ObjectKey, Arc<K>>,
    indexers: Vec<(String, IndexFn<K>)>,
    indexes: AHashMap<String, AHashMap<String, AHashSet<ObjectKey>>>,
    /// Keys seen since the current relist began.
    relist: Option<AHashSet<ObjectKey>>,
}

impl<K> State<K> {
    fn unindex(&mut self, key: &ObjectKey, obj: &K) {
        for (name, f) in &self.indexers {
            if let Some(index) = self.indexes.get_mut(name) {
                for v in f(obj) {
                    if let Some(set) = index.get_mut(&v) {
                        set.remove(key);
                        if set.is_empty() {
                            index.remove(&v);
                        }
                    }
                }
            }
        }
    }

    fn index(&mut self, key: &ObjectKey, obj: &K) {
        for (name, f) in &self.indexers {
            let index = self.indexes.entry(name.clone()).or_default();
            for v in f(obj) {
                index.entry(v).or_default().insert(key.clone());
            }
        }
    }
}

/// What [`Store::apply`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    /// A new object, or one whose resourceVersion changed.
    Changed(ObjectKey),
    /// The same resourceVersion was already stored.
    Unchanged(ObjectKey),
    /// The object had no name and was not stored.
    Skipped,
}

impl<K: Resource> Store<K> {
    /// An empty store; `gauge` (if any) tracks the object count.
    pub fn new(gauge: Option<IntGauge>) -> Self {
        let (sync, _) = watch::channel(SyncState::Pending);
        Self {
            inner: Arc::new(Inner {
                state: RwLock::new(State {
                    objects: AHashMap::new(),
                    indexers: Vec::new(),
                    indexes: AHashMap::new(),
                    relist: None,
                }),
                sync,
                gauge,
            }),
        }
    }

    /// The object stored under `key`.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.inner.state.read().objects.get(key).cloned()
    }

    /// The object `namespace/name` (or `name` when `namespace` is `None`).
    pub fn get_named(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.get(&ObjectKey::new(namespace, name))
    }

    /// Every object.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.inner.state.read().objects.values().cloned().collect()
    }

    /// Every key.
    pub fn keys(&self) -> Vec<ObjectKey> {
        self.inner.state.read().objects.keys().cloned().collect()
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.inner.state.read().objects.len()
    }

    /// True when the store holds no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds an index called `name`; it is built over the current objects at once and kept up to
    /// date afterwards. Adding an existing name again does nothing.
    pub fn add_index(&self, name: impl Into<String>, f: IndexFn<K>) {
        let name = name.into();
        let mut st = self.inner.state.write();
        if st.indexers.iter().any(|(n, _)| *n == name) {
            return;
        }
        let mut index: AHashMap<String, AHashSet<ObjectKey>> = AHashMap::new();
        for (key, obj) in &st.objects {
            for v in f(obj) {
                index.entry(v).or_default().insert(key.clone());
            }
        }
        st.indexes.insert(name.clone(), index);
        st.indexers.push((name, f));
    }

    /// Adds the namespace index ([`NAMESPACE_INDEX`]).
    pub fn index_by_namespace(&self) {
        self.add_index(
            NAMESPACE_INDEX,
            Arc::new(|o: &K| o.meta().namespace.iter().cloned().collect()),
        );
    }

    /// Adds an index over the values of label `label` (objects without it are not indexed).
    pub fn index_by_label(&self, label: &str) {
        let l = label.to_string();
        self.add_index(
            label_index_name(label),
            Arc::new(move |o: &K| {
                o.meta()
                    .labels
                    .as_ref()
                    .and_then(|m| m.get(&l))
                    .cloned()
                    .into_iter()
                    .collect()
            }),
        );
    }

    /// The objects whose index `name` contains `value`. Empty for an unknown index.
    pub fn by_index(&self, name: &str, value: &str) -> Vec<Arc<K>> {
        let st = self.inner.state.read();
        st.indexes
            .get(name)
            .and_then(|i| i.get(value))
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| st.objects.get(k).cloned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The keys whose index `name` contains `value`.
    pub fn keys_by_index(&self, name: &str, value: &str) -> Vec<ObjectKey> {
        let st = self.inner.state.read();
        st.indexes
            .get(name)
            .and_then(|i| i.get(value))
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Objects in `namespace` (needs [`index_by_namespace`](Self::index_by_namespace)).
    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        self.by_index(NAMESPACE_INDEX, namespace)
    }

    /// Objects with label `label=value` (needs [`index_by_label`](Self::index_by_label)).
    pub fn list_by_label(&self, label: &str, value: &str) -> Vec<Arc<K>> {
        self.by_index(&label_index_name(label), value)
    }

    /// Stores `obj`, replacing any previous version.
    pub fn apply(&self, obj: K) -> Applied {
        let Some(key) = ObjectKey::from_object(&obj) else {
            return Applied::Skipped;
        };
        let new = Arc::new(obj);
        let mut st = self.inner.state.write();
        if let Some(relist) = st.relist.as_mut() {
            relist.insert(key.clone());
        }
        let old = st.objects.insert(key.clone(), new.clone());
        let changed = match &old {
            Some(o) => o.meta().resource_version != new.meta().resource_version,
            None => true,
        };
        if !st.indexers.is_empty() {
            if let Some(o) = &old {
                st.unindex(&key, o);
            }
            st.index(&key, &new);
        }
        drop(st);
        if old.is_none()
            && let Some(g) = &self.inner.gauge
        {
            g.inc();
        }
        if changed {
            Applied::Changed(key)
        } else {
            Applied::Unchanged(key)
        }
    }

    /// Removes `key`; returns whether it was present.
    pub fn delete(&self, key: &ObjectKey) -> bool {
        let mut st = self.inner.state.write();
        let Some(old) = st.objects.remove(key) else {
            return false;
        };
        if !st.indexers.is_empty() {
            st.unindex(key, &old);
        }
        drop(st);
        if let Some(g) = &self.inner.gauge {
            g.dec();
        }
        true
    }

    /// Starts a relist: keys applied from now on are remembered.
    pub fn begin_relist(&self) {
        self.inner.state.write().relist = Some(AHashSet::new());
    }

    /// Ends a relist: deletes every key not applied since [`begin_relist`](Self::begin_relist),
    /// returns them, and marks the store synced.
    pub fn end_relist(&self) -> Vec<ObjectKey> {
        let mut st = self.inner.state.write();
        let seen = st.relist.take().unwrap_or_default();
        let gone: Vec<ObjectKey> = st
            .objects
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for k in &gone {
            if let Some(old) = st.objects.remove(k)
                && !st.indexers.is_empty()
            {
                st.unindex(k, &old);
            }
        }
        drop(st);
        if let Some(g) = &self.inner.gauge {
            g.sub(gone.len() as i64);
        }
        self.inner.sync.send_replace(SyncState::Synced);
        gone
    }

    /// Removes every object (used when the cache stops, to free memory at once).
    pub fn clear(&self) {
        let mut st = self.inner.state.write();
        let n = st.objects.len();
        st.objects = AHashMap::new();
        st.indexes = AHashMap::new();
        st.relist = None;
        drop(st);
        if let Some(g) = &self.inner.gauge {
            g.sub(n as i64);
        }
    }

    /// Marks the store as stopped: sync waiters give up.
    pub fn mark_stopped(&self) {
        self.inner.sync.send_if_modified(|s| {
            if *s == SyncState::Stopped {
                false
            } else {
                *s = SyncState::Stopped;
                true
            }
        });
    }

    /// The current sync state.
    pub fn sync_state(&self) -> SyncState {
        *self.inner.sync.borrow()
    }

    /// True once the initial list completed.
    pub fn has_synced(&self) -> bool {
        self.sync_state() == SyncState::Synced
    }

    /// Waits until the store is synced or stopped and returns that state.
    pub async fn wait_synced(&self) -> SyncState {
        let mut rx = self.inner.sync.subscribe();
        match rx.wait_for(|s| *s != SyncState::Pending).await {
            Ok(s) => *s,
            Err(_) => SyncState::Stopped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn cm(ns: &str, name: &str, rv: &str, app: Option<&str>) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                labels: app.map(|a| [("app".to_string(), a.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn apply_detects_changes_and_indexes_follow() {
        let s = Store::<ConfigMap>::new(None);
        s.index_by_namespace();
        s.index_by_label("app");
        assert!(matches!(
            s.apply(cm("a", "x", "1", Some("web"))),
            Applied::Changed(_)
        ));
        assert!(matches!(
            s.apply(cm("a", "x", "1", Some("web"))),
            Applied::Unchanged(_)
        ));
        s.apply(cm("b", "y", "1", Some("web")));
        assert_eq!(s.list_namespace("a").len(), 1);
        assert_eq!(s.list_by_label("app", "web").len(), 2);
        // relabel moves it between index buckets
        s.apply(cm("a", "x", "2", Some("db")));
        assert_eq!(s.list_by_label("app", "web").len(), 1);
        assert_eq!(s.list_by_label("app", "db").len(), 1);
        assert!(s.delete(&ObjectKey::new(Some("a"), "x")));
        assert!(s.list_namespace("a").is_empty());
        assert!(s.list_by_label("app", "db").is_empty());
        // an index added late covers existing objects
        s.add_index(
            "name",
            Arc::new(|o: &ConfigMap| o.metadata.name.iter().cloned().collect()),
        );
        assert_eq!(s.by_index("name", "y").len(), 1);
    }

    #[test]
    fn relist_deletes_unseen_and_syncs() {
        let gauge = IntGauge::new("g", "g").unwrap();
        let s = Store::<ConfigMap>::new(Some(gauge.clone()));
        s.apply(cm("a", "x", "1", None));
        s.apply(cm("a", "y", "1", None));
        assert_eq!(gauge.get(), 2);
        assert_eq!(s.sync_state(), SyncState::Pending);
        s.begin_relist();
        s.apply(cm("a", "y", "2", None));
        s.apply(cm("a", "z", "1", None));
        let gone = s.end_relist();
        assert_eq!(gone, vec![ObjectKey::new(Some("a"), "x")]);
        assert_eq!(s.len(), 2);
        assert_eq!(gauge.get(), 2);
        assert!(s.has_synced());
        s.clear();
        assert_eq!(gauge.get(), 0);
    }
}
