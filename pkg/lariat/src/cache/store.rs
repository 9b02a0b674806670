//! The cache's object store: `Arc`ed objects by key, with secondary indexes kept up to date on
//! every change, and a relist that works in place (old objects are replaced one by one and the
//! ones not seen again are deleted at the end) so a relist never holds two copies of the store.
//!
//! A store can keep its objects [packed](Packing) instead: as compact bytes, decoded again on every
//! read. Unstructured objects (`DynamicObject`) hold their body as a `serde_json::Value`, a B-tree
//! node per JSON object, about ten times the size of the same object as JSON text; a cache of
//! thousands of them is most of a controller's memory. Packed stores trade a decode per read (tens
//! of microseconds for a typical object) for that memory.
//!
//! The packed text is LZ4-compressed against a dictionary: the first object the store packed. Objects
//! of one kind repeat each other's keys, labels and defaults, so most of an object compresses to
//! references into a sibling (the propagation benchmark's Works and member objects at 1,000
//! templates × 10 members: 55.7 MB of text, 16 MB compressed). LZ4 because a
//! decode is on every read: it decompresses at memory speed, a small fraction of the JSON decode
//! after it. The dictionary never changes once set, so every slot decodes against the same bytes.

use std::collections::hash_map::Entry;
use std::sync::{Arc, OnceLock};

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

/// An index by value, then the keys under each value. Each value is held once, as an `Arc<str>`
/// that packed slots share (see [`IndexValues`]).
type Index = AHashMap<Arc<str>, AHashSet<ObjectKey>>;

/// One secondary index: its name, what computes an object's values, and the keys by value.
struct NamedIndex<K> {
    name: String,
    f: IndexFn<K>,
    keys: Index,
}

/// The index called `name`; `None`, logged as an error, when it was never added: such a lookup
/// can never find anything, a bug of the caller that must not pass unnoticed (it would read as
/// "no objects").
fn known_index<'a, K>(indexes: &'a [NamedIndex<K>], name: &str) -> Option<&'a Index> {
    let index = indexes.iter().find(|i| i.name == name).map(|i| &i.keys);
    if index.is_none() {
        tracing::error!(
            index = name,
            "lookup in a store index that was never added (add_index first); it finds nothing"
        );
    }
    index
}

/// Name of the index over one label key ([`Store::index_by_label`]).
pub fn label_index_name(label: &str) -> String {
    format!("label:{label}")
}

/// How a packed store turns objects into bytes and back; the store compresses what `pack` makes
/// (see the module docs).
pub struct Packing<K> {
    /// Encodes an object; `None` keeps it unpacked (e.g. it cannot be encoded).
    pub pack: fn(&K) -> Option<Box<[u8]>>,
    /// Decodes what `pack` made.
    pub unpack: fn(&[u8]) -> Result<K, String>,
}

impl<K> Clone for Packing<K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K> Copy for Packing<K> {}

/// A packed object's index values, every index's in one list (no allocation when there are none).
/// They are the very `Arc`s the indexes hold as keys, not copies: a value costs each object a
/// pointer, and its text is stored once however many objects share it (the ten Works of a binding
/// share its id).
type IndexValues = Box<[Arc<str>]>;

/// One stored object: shared as is, or packed with the resourceVersion and its index values kept
/// aside (an update compares the one and unindexes the other without a decode). The bytes are
/// shared so that a reader copies a pointer out under the lock and decodes after releasing it (a
/// decode is tens of microseconds; a list of thousands must not hold writers off for its whole
/// length). They hold the resourceVersion too (see [`packed_bytes`]): a slot is two pointers.
enum Slot<K> {
    Full(Arc<K>),
    Packed {
        bytes: Arc<[u8]>,
        index_values: IndexValues,
    },
}

/// What packed bytes start with when the object has no resourceVersion; otherwise the first byte
/// is its length, and its text follows.
const NO_RESOURCE_VERSION: u8 = u8::MAX;

/// Packed bytes: a header with the resourceVersion (see [`NO_RESOURCE_VERSION`]), then the
/// compressed object, in one allocation of its exact length. `None` for a resourceVersion of 255
/// bytes or more (an object the store keeps unpacked; the API server's are numbers).
fn packed_bytes(resource_version: Option<&str>, compressed: &[u8]) -> Option<Arc<[u8]>> {
    let (head, text) = match resource_version {
        None => (NO_RESOURCE_VERSION, ""),
        Some(rv) => (
            u8::try_from(rv.len())
                .ok()
                .filter(|n| *n != NO_RESOURCE_VERSION)?,
            rv,
        ),
    };
    Some(
        std::iter::once(head)
            .chain(text.bytes())
            .chain(compressed.iter().copied())
            .collect(),
    )
}

/// The resourceVersion and the compressed object [`packed_bytes`] made; `None` for bytes it did
/// not make.
fn unpacked_bytes(bytes: &[u8]) -> Option<(Option<&str>, &[u8])> {
    let (&head, rest) = bytes.split_first()?;
    if head == NO_RESOURCE_VERSION {
        return Some((None, rest));
    }
    let (rv, compressed) = rest.split_at_checked(usize::from(head))?;
    Some((Some(std::str::from_utf8(rv).ok()?), compressed))
}

/// What a reader takes out of a [`Slot`] under the lock, decoded after the lock is released.
enum Taken<K> {
    Full(Arc<K>),
    Packed(ObjectKey, Arc<[u8]>),
}

impl<K: Resource> Taken<K> {
    /// The object, decoded by `store` when packed.
    fn load(self, store: &Store<K>) -> Option<Arc<K>> {
        match self {
            Taken::Full(o) => Some(o),
            Taken::Packed(key, bytes) => store.decode(&key, &bytes),
        }
    }
}

impl<K: Resource> Slot<K> {
    /// A cheap copy (two reference counts) for decoding outside the lock.
    fn take(&self, key: &ObjectKey) -> Taken<K> {
        match self {
            Slot::Full(o) => Taken::Full(o.clone()),
            Slot::Packed { bytes, .. } => Taken::Packed(key.clone(), bytes.clone()),
        }
    }

    fn resource_version(&self) -> Option<&str> {
        match self {
            Slot::Full(o) => o.meta().resource_version.as_deref(),
            Slot::Packed { bytes, .. } => unpacked_bytes(bytes).and_then(|(rv, _)| rv),
        }
    }
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
    packing: Option<Packing<K>>,
    /// What packed objects are compressed against (see the module docs); set by the first pack.
    dictionary: OnceLock<Box<[u8]>>,
}

/// LZ4 looks back at most 64 KiB: a longer dictionary's head would never be referenced.
const MAX_DICTIONARY: usize = 64 * 1024;

struct State<K> {
    objects: AHashMap<ObjectKey, Slot<K>>,
    /// In the order they were added.
    indexes: Vec<NamedIndex<K>>,
    /// Keys seen since the current relist began.
    relist: Option<AHashSet<ObjectKey>>,
}

/// Indexes `key` under `obj`'s values in every index; returns the values as the indexes hold them
/// when `keep` (a packed slot keeps them aside), else nothing.
fn index<K>(indexes: &mut [NamedIndex<K>], key: &ObjectKey, obj: &K, keep: bool) -> IndexValues {
    let mut kept = Vec::new();
    for index in indexes {
        for value in (index.f)(obj) {
            // The index's own `Arc` when it holds the value already: kept values are shared.
            let shared = match index.keys.get_key_value(value.as_str()) {
                Some((v, _)) => v.clone(),
                None => Arc::from(value),
            };
            if keep {
                kept.push(shared.clone());
            }
            index.keys.entry(shared).or_default().insert(key.clone());
        }
    }
    kept.into_boxed_slice()
}

/// Removes `key` from the indexes under the values `slot` was indexed with: those kept aside when
/// packed, computed again otherwise.
fn unindex<K: Resource>(indexes: &mut [NamedIndex<K>], key: &ObjectKey, slot: &Slot<K>) {
    match slot {
        Slot::Full(obj) => {
            for index in indexes {
                for value in (index.f)(obj) {
                    unindex_value(&mut index.keys, key, &value);
                }
            }
        }
        // Kept values do not say which index each came from: each is removed from every index.
        // That removes exactly what `index` added, since an index holds the key under a value
        // only when its function gave that value for this object.
        Slot::Packed { index_values, .. } => {
            for index in indexes {
                for value in index_values {
                    unindex_value(&mut index.keys, key, value);
                }
            }
        }
    }
}

/// Removes `key` from under `value`, and the value once no key is left under it.
fn unindex_value(index: &mut Index, key: &ObjectKey, value: &str) {
    if let Some(set) = index.get_mut(value) {
        set.remove(key);
        if set.is_empty() {
            index.remove(value);
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
        Self::with_packing(gauge, None)
    }

    /// An empty store that keeps its objects packed with `packing` (unpacked when `None`).
    pub fn with_packing(gauge: Option<IntGauge>, packing: Option<Packing<K>>) -> Self {
        let (sync, _) = watch::channel(SyncState::Pending);
        Self {
            inner: Arc::new(Inner {
                state: RwLock::new(State {
                    objects: AHashMap::new(),
                    indexes: Vec::new(),
                    relist: None,
                }),
                sync,
                gauge,
                packing,
                dictionary: OnceLock::new(),
            }),
        }
    }

    /// Whether objects are kept packed (each read decodes one).
    pub fn is_packed(&self) -> bool {
        self.inner.packing.is_some()
    }

    /// The object in `slot`. A packed object that no longer decodes (it was encoded by this
    /// process, so only a bug does that) is logged and reads as absent.
    fn load(&self, key: &ObjectKey, slot: &Slot<K>) -> Option<Arc<K>> {
        match slot {
            Slot::Full(o) => Some(o.clone()),
            Slot::Packed { bytes, .. } => self.decode(key, bytes),
        }
    }

    /// Decodes packed bytes (see [`load`](Self::load)).
    fn decode(&self, key: &ObjectKey, bytes: &[u8]) -> Option<Arc<K>> {
        let p = self.inner.packing.as_ref()?;
        let unpacked = self
            .inner
            .dictionary
            .get()
            .ok_or_else(|| "no dictionary".to_owned())
            .and_then(|dict| {
                let (_, compressed) =
                    unpacked_bytes(bytes).ok_or_else(|| "no packed header".to_owned())?;
                lz4_flex::block::decompress_size_prepended_with_dict(compressed, dict)
                    .map_err(|e| e.to_string())
            })
            .and_then(|text| (p.unpack)(&text));
        match unpacked {
            Ok(o) => Some(Arc::new(o)),
            Err(error) => {
                tracing::error!(object = %key, %error, "cached object does not decode; treating it as absent");
                None
            }
        }
    }

    /// Compresses packed text against the store's dictionary (this text when it is the first),
    /// behind the resourceVersion ([`packed_bytes`]).
    fn compress(&self, resource_version: Option<&str>, text: &[u8]) -> Option<Arc<[u8]>> {
        let dictionary = self
            .inner
            .dictionary
            .get_or_init(|| text[text.len().saturating_sub(MAX_DICTIONARY)..].into());
        // Copied into an allocation of its exact length: the encoder's buffer is sized for the
        // worst case.
        packed_bytes(
            resource_version,
            &lz4_flex::block::compress_prepend_size_with_dict(text, dictionary),
        )
    }

    /// Decodes what readers took out under the lock, after it was released.
    fn finish(&self, taken: Vec<Taken<K>>) -> Vec<Arc<K>> {
        taken.into_iter().filter_map(|t| t.load(self)).collect()
    }

    /// The object stored under `key`.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        let taken = self.inner.state.read().objects.get(key)?.take(key);
        taken.load(self)
    }

    /// Whether an object is stored under `key` (no decode, even when packed).
    pub fn contains(&self, key: &ObjectKey) -> bool {
        self.inner.state.read().objects.contains_key(key)
    }

    /// The object `namespace/name` (or `name` when `namespace` is `None`).
    pub fn get_named(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.get(&ObjectKey::new(namespace, name))
    }

    /// Every object.
    pub fn list(&self) -> Vec<Arc<K>> {
        let taken = {
            let st = self.inner.state.read();
            st.objects.iter().map(|(k, slot)| slot.take(k)).collect()
        };
        self.finish(taken)
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
        let mut guard = self.inner.state.write();
        let st = &mut *guard;
        if st.indexes.iter().any(|i| i.name == name) {
            return;
        }
        let mut added = [NamedIndex {
            name,
            f,
            keys: Index::new(),
        }];
        for (key, slot) in &mut st.objects {
            let packed = matches!(slot, Slot::Packed { .. });
            let values = match self.load(key, slot) {
                Some(o) => index(&mut added, key, &o, packed),
                None => IndexValues::default(),
            };
            if let Slot::Packed { index_values, .. } = slot
                && !values.is_empty()
            {
                let mut all = std::mem::take(index_values).into_vec();
                all.extend(values);
                *index_values = all.into_boxed_slice();
            }
        }
        st.indexes.extend(added);
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

    /// The objects whose index `name` contains `value`. Empty for an unknown index, which is
    /// logged as an error.
    pub fn by_index(&self, name: &str, value: &str) -> Vec<Arc<K>> {
        let taken = {
            let st = self.inner.state.read();
            known_index(&st.indexes, name)
                .and_then(|i| i.get(value))
                .map(|keys| {
                    keys.iter()
                        .filter_map(|k| st.objects.get(k).map(|slot| slot.take(k)))
                        .collect()
                })
                .unwrap_or_default()
        };
        self.finish(taken)
    }

    /// The values index `name` holds (each with at least one object), in no particular order.
    /// Empty for an unknown index (logged, as in [`by_index`](Self::by_index)).
    pub fn index_values(&self, name: &str) -> Vec<String> {
        let st = self.inner.state.read();
        known_index(&st.indexes, name)
            .map(|i| i.keys().map(|v| String::from(&**v)).collect())
            .unwrap_or_default()
    }

    /// The keys whose index `name` contains `value`. Empty for an unknown index (logged, as in
    /// [`by_index`](Self::by_index)).
    pub fn keys_by_index(&self, name: &str, value: &str) -> Vec<ObjectKey> {
        let st = self.inner.state.read();
        known_index(&st.indexes, name)
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
        // Encoded before the lock is taken: readers never wait for it.
        let packed: Option<Arc<[u8]>> = self
            .inner
            .packing
            .and_then(|p| (p.pack)(&obj))
            .and_then(|text| self.compress(obj.meta().resource_version.as_deref(), &text));
        let mut guard = self.inner.state.write();
        let st = &mut *guard;
        if let Some(relist) = st.relist.as_mut() {
            relist.insert(key.clone());
        }
        let (added, changed) = match st.objects.entry(key.clone()) {
            Entry::Occupied(mut entry) => {
                let changed =
                    entry.get().resource_version() != obj.meta().resource_version.as_deref();
                // The old values are unindexed before the new ones are indexed: a value both
                // versions have stays (and keeps its `Arc`) only if another object holds it.
                unindex(&mut st.indexes, &key, entry.get());
                entry.insert(Self::slot(&mut st.indexes, &key, obj, packed));
                (false, changed)
            }
            Entry::Vacant(entry) => {
                entry.insert(Self::slot(&mut st.indexes, &key, obj, packed));
                (true, true)
            }
        };
        drop(guard);
        if added && let Some(g) = &self.inner.gauge {
            g.inc();
        }
        if changed {
            Applied::Changed(key)
        } else {
            Applied::Unchanged(key)
        }
    }

    /// Indexes `obj` under `key` and makes its slot: packed when `packed` holds its bytes.
    fn slot(
        indexes: &mut [NamedIndex<K>],
        key: &ObjectKey,
        obj: K,
        packed: Option<Arc<[u8]>>,
    ) -> Slot<K> {
        let index_values = index(indexes, key, &obj, packed.is_some());
        match packed {
            Some(bytes) => Slot::Packed {
                bytes,
                index_values,
            },
            None => Slot::Full(Arc::new(obj)),
        }
    }

    /// Removes `key`; returns whether it was present.
    pub fn delete(&self, key: &ObjectKey) -> bool {
        let mut guard = self.inner.state.write();
        let st = &mut *guard;
        let Some(old) = st.objects.remove(key) else {
            return false;
        };
        unindex(&mut st.indexes, key, &old);
        drop(guard);
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
        let mut guard = self.inner.state.write();
        let st = &mut *guard;
        let seen = st.relist.take().unwrap_or_default();
        let gone: Vec<ObjectKey> = st
            .objects
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for k in &gone {
            if let Some(old) = st.objects.remove(k) {
                unindex(&mut st.indexes, k, &old);
            }
        }
        drop(guard);
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
        for index in &mut st.indexes {
            index.keys = Index::new();
        }
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

    fn packed() -> Store<ConfigMap> {
        Store::with_packing(
            None,
            Some(Packing {
                pack: |o| serde_json::to_vec(o).ok().map(Vec::into_boxed_slice),
                unpack: |b| serde_json::from_slice(b).map_err(|e| e.to_string()),
            }),
        )
    }

    #[test]
    fn a_packed_store_reads_back_what_it_stored_and_indexes_alike() {
        let s = packed();
        assert!(s.is_packed());
        s.index_by_label("app");
        let mut web = cm("a", "x", "1", Some("web"));
        web.data = Some([("k".to_string(), "v".repeat(100))].into());
        assert!(matches!(s.apply(web.clone()), Applied::Changed(_)));
        assert!(matches!(s.apply(web.clone()), Applied::Unchanged(_)));
        let key = ObjectKey::new(Some("a"), "x");
        assert_eq!(*s.get(&key).unwrap(), web);
        assert!(s.contains(&key));
        assert_eq!(s.list(), vec![Arc::new(web.clone())]);
        assert_eq!(s.list_by_label("app", "web").len(), 1);
        // An index added over packed objects: their values are kept beside the bytes too.
        s.index_by_namespace();
        assert_eq!(s.list_namespace("a").len(), 1);
        // An update unindexes the old version (by the values kept aside, not a decode).
        s.apply(cm("a", "x", "2", Some("db")));
        assert!(s.list_by_label("app", "web").is_empty());
        assert_eq!(s.list_by_label("app", "db").len(), 1);
        assert_eq!(
            s.index_values(&label_index_name("app")),
            vec!["db".to_owned()]
        );
        s.begin_relist();
        s.apply(cm("b", "y", "1", Some("db")));
        assert_eq!(s.end_relist(), vec![key.clone()]);
        assert!(!s.contains(&key));
        assert!(s.list_namespace("a").is_empty());
        assert_eq!(s.index_values(NAMESPACE_INDEX), vec!["b".to_owned()]);
        assert_eq!(s.list_by_label("app", "db").len(), 1);
        assert!(s.delete(&ObjectKey::new(Some("b"), "y")));
        assert!(s.list_by_label("app", "db").is_empty());
        assert!(s.index_values(NAMESPACE_INDEX).is_empty());
    }

    /// The values packed slot `name` keeps aside, and the `Arc` index `index` holds for `value`.
    fn kept_and_held(
        s: &Store<ConfigMap>,
        name: &str,
        index: &str,
        value: &str,
    ) -> (Vec<Arc<str>>, Option<Arc<str>>) {
        let state = s.inner.state.read();
        let kept = match state.objects.get(&ObjectKey::new(Some("a"), name)) {
            Some(Slot::Packed { index_values, .. }) => index_values.to_vec(),
            _ => Vec::new(),
        };
        let held = state
            .indexes
            .iter()
            .find(|i| i.name == index)
            .and_then(|i| i.keys.get_key_value(value))
            .map(|(v, _)| v.clone());
        (kept, held)
    }

    #[test]
    fn packed_slots_share_the_index_values_instead_of_copying_them() {
        let s = packed();
        s.index_by_label("app");
        let app = label_index_name("app");
        for name in ["x", "y", "z"] {
            s.apply(cm("a", name, "1", Some("web")));
        }
        let (kept, held) = kept_and_held(&s, "x", &app, "web");
        let held = held.expect("indexed");
        assert_eq!(kept.len(), 1);
        assert!(
            Arc::ptr_eq(&kept[0], &held),
            "a copy, not the index's value"
        );
        let (kept_z, _) = kept_and_held(&s, "z", &app, "web");
        assert!(Arc::ptr_eq(&kept_z[0], &held));
        // The index, three slots, and the three clones taken here.
        assert_eq!(Arc::strong_count(&held), 1 + 3 + 3);
        drop((kept, kept_z));

        // A new label value: the slot moves to the new value's `Arc`, the old loses a holder.
        s.apply(cm("a", "x", "2", Some("db")));
        assert_eq!(Arc::strong_count(&held), 1 + 2 + 1);
        let (kept, db) = kept_and_held(&s, "x", &app, "db");
        assert!(Arc::ptr_eq(&kept[0], &db.expect("indexed")));
        assert_eq!(s.list_by_label("app", "web").len(), 2);
        let mut values = s.index_values(&app);
        values.sort();
        assert_eq!(values, vec!["db".to_owned(), "web".to_owned()]);

        // An index added later appends its values to the slots, shared too.
        s.index_by_namespace();
        let (kept, ns) = kept_and_held(&s, "y", NAMESPACE_INDEX, "a");
        let ns = ns.expect("indexed");
        assert_eq!(kept.len(), 2);
        assert!(kept.iter().any(|v| Arc::ptr_eq(v, &ns)));
        drop(kept);
        assert_eq!(Arc::strong_count(&ns), 1 + 3 + 1);

        // The last holders go: the index drops the value, and only the clone here is left.
        assert!(s.delete(&ObjectKey::new(Some("a"), "y")));
        s.begin_relist();
        s.apply(cm("a", "x", "3", Some("db")));
        assert_eq!(s.end_relist(), vec![ObjectKey::new(Some("a"), "z")]);
        assert_eq!(Arc::strong_count(&held), 1);
        assert!(s.list_by_label("app", "web").is_empty());
        assert_eq!(s.index_values(&app), vec!["db".to_owned()]);
        assert_eq!(Arc::strong_count(&ns), 1 + 1 + 1);
        assert!(s.delete(&ObjectKey::new(Some("a"), "x")));
        assert_eq!(Arc::strong_count(&ns), 1);
        assert!(s.index_values(&app).is_empty());
        assert!(s.index_values(NAMESPACE_INDEX).is_empty());
    }

    #[test]
    fn a_value_two_indexes_give_one_object_is_unindexed_from_both() {
        let s = packed();
        let name = |o: &ConfigMap| o.metadata.name.iter().cloned().collect();
        s.add_index("name", Arc::new(name));
        s.add_index("name again", Arc::new(name));
        s.add_index(
            "label or nothing",
            Arc::new(|o: &ConfigMap| {
                o.metadata
                    .labels
                    .iter()
                    .flat_map(|l| l.values().cloned())
                    .collect()
            }),
        );
        // "x" under both name indexes, and "y"'s label is "x": one value, three entries.
        s.apply(cm("a", "x", "1", None));
        s.apply(cm("a", "y", "1", Some("x")));
        assert_eq!(s.keys_by_index("name", "x").len(), 1);
        assert_eq!(s.keys_by_index("name again", "x").len(), 1);
        assert_eq!(
            s.keys_by_index("label or nothing", "x"),
            vec![ObjectKey::new(Some("a"), "y")]
        );
        // Each kept value is removed from every index: "y" under "x" in the label index stays.
        assert!(s.delete(&ObjectKey::new(Some("a"), "x")));
        assert!(s.keys_by_index("name", "x").is_empty());
        assert!(s.keys_by_index("name again", "x").is_empty());
        assert_eq!(
            s.keys_by_index("label or nothing", "x"),
            vec![ObjectKey::new(Some("a"), "y")]
        );
        // A relabel of "y" keeps its name entries and moves its label entry.
        s.apply(cm("a", "y", "2", Some("z")));
        assert!(s.keys_by_index("label or nothing", "x").is_empty());
        assert_eq!(s.keys_by_index("label or nothing", "z").len(), 1);
        assert_eq!(s.keys_by_index("name", "y").len(), 1);
        assert_eq!(s.keys_by_index("name again", "y").len(), 1);
    }

    #[test]
    fn a_packed_slot_is_two_pointers_and_holds_its_resource_version() {
        assert_eq!(size_of::<Slot<ConfigMap>>(), 32);
        let s = packed();
        let key = ObjectKey::new(Some("a"), "x");
        let mut none = cm("a", "x", "", None);
        none.metadata.resource_version = None;
        for rv in [None, Some(""), Some("1"), Some("18446744073709551615")] {
            let mut o = none.clone();
            o.metadata.resource_version = rv.map(str::to_owned);
            assert!(matches!(s.apply(o.clone()), Applied::Changed(_)), "{rv:?}");
            assert!(
                matches!(s.apply(o.clone()), Applied::Unchanged(_)),
                "{rv:?}"
            );
            assert_eq!(*s.get(&key).unwrap(), o);
            let state = s.inner.state.read();
            let Some(slot @ Slot::Packed { .. }) = state.objects.get(&key) else {
                panic!("not packed");
            };
            assert_eq!(slot.resource_version(), rv);
        }
        // A resourceVersion too long for the header: the object is kept, unpacked.
        let mut long = none.clone();
        long.metadata.resource_version = Some("9".repeat(255));
        assert!(matches!(s.apply(long.clone()), Applied::Changed(_)));
        assert!(matches!(s.apply(long.clone()), Applied::Unchanged(_)));
        assert_eq!(*s.get(&key).unwrap(), long);
        assert!(matches!(
            s.inner.state.read().objects.get(&key),
            Some(Slot::Full(_))
        ));
        long.metadata.resource_version = Some("9".repeat(254));
        assert!(matches!(s.apply(long.clone()), Applied::Changed(_)));
        assert_eq!(*s.get(&key).unwrap(), long);
        assert!(unpacked_bytes(&[]).is_none());
        assert!(unpacked_bytes(&[3, b'1']).is_none());
    }

    #[test]
    fn packed_siblings_compress_against_the_first_and_read_back_whole() {
        let s = packed();
        let sibling = |i: usize| {
            let mut c = cm("ns", &format!("config-{i}"), &i.to_string(), Some("web"));
            c.data = Some(
                (0..20)
                    .map(|k| {
                        (
                            format!("setting-{k}"),
                            format!("a shared default value {k}"),
                        )
                    })
                    .chain([("own".to_owned(), format!("value of {i}"))])
                    .collect(),
            );
            c
        };
        for i in 0..50 {
            s.apply(sibling(i));
        }
        for i in 0..50 {
            let key = ObjectKey::new(Some("ns"), &format!("config-{i}"));
            assert_eq!(*s.get(&key).unwrap(), sibling(i));
        }
        let text = serde_json::to_vec(&sibling(49)).unwrap().len();
        let state = s.inner.state.read();
        let Some(Slot::Packed { bytes, .. }) =
            state.objects.get(&ObjectKey::new(Some("ns"), "config-49"))
        else {
            panic!("not packed");
        };
        assert!(
            bytes.len() * 5 < text,
            "{} bytes packed for {text} bytes of text",
            bytes.len()
        );
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
