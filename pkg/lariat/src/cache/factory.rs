//! The per-cluster cache factory: at most one [`Cache`] (one watch) per (kind, scope), created on
//! request without opening anything.

use std::any::Any;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use ahash::AHashMap;
use futures::FutureExt;
use kube::Resource;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use parking_lot::Mutex;

use super::informer::{Cache, CacheObject, Resolver};
use super::scope::{CacheKey, CacheScope};
use super::store::Packing;
use super::transform::Strip;
use crate::context::ClusterContext;
use crate::error::{Error, Result};
use crate::gvk::group_kind_string;

/// Cache settings of one cluster.
#[derive(Clone, Debug)]
pub struct CacheOptions {
    /// Scope of kinds without an entry in `scopes` (e.g. a label selector on member clusters).
    pub default_scope: CacheScope,
    /// Per-kind scope overrides, keyed `"Kind.group"` (or `"Kind"` for the core group).
    pub scopes: HashMap<String, CacheScope>,
    /// Drop managedFields before insert (default true).
    pub strip_managed_fields: bool,
    /// Drop kubectl's last-applied annotation before insert (default true). Often as large as
    /// the rest of the object; keep it where cached objects are copied elsewhere whole.
    pub strip_last_applied: bool,
    /// List page size (default 500; `None` lists everything at once).
    pub page_size: Option<u32>,
    /// Keep unstructured objects (`DynamicObject` caches) packed as compressed JSON text, decoded
    /// on each read (default true): a small fraction of the memory, for a decode per read. See
    /// [`Packing`](super::store::Packing).
    pub pack_dynamic_objects: bool,
    /// Typed kinds (`"Kind.group"`, see [`CacheOptions::pack`]) whose stores are kept packed
    /// too: worth it for a kind held by the thousand whose objects are read one at a
    /// time or through indexes, not listed whole on every pass.
    pub packed_kinds: BTreeSet<String>,
}

impl Default for CacheOptions {
    fn default() -> Self {
        Self {
            default_scope: CacheScope::default(),
            scopes: HashMap::new(),
            strip_managed_fields: true,
            strip_last_applied: true,
            page_size: Some(500),
            pack_dynamic_objects: true,
            packed_kinds: BTreeSet::new(),
        }
    }
}

impl CacheOptions {
    /// Keeps the caches of typed kind `K` packed (see [`packed_kinds`](Self::packed_kinds)).
    pub fn pack<K>(mut self) -> Self
    where
        K: Resource<DynamicType = ()>,
    {
        self.packed_kinds
            .insert(group_kind_string(&K::group(&()), &K::kind(&())));
        self
    }

    /// The scope configured for a kind.
    pub fn scope_for(&self, group: &str, kind: &str) -> CacheScope {
        self.scopes
            .get(&group_kind_string(group, kind))
            .cloned()
            .unwrap_or_else(|| self.default_scope.clone())
    }
}

/// Type-erased view of a cache for the factory's bookkeeping.
trait AnyCache: Send + Sync {
    fn as_any(&self) -> Arc<dyn Any + Send + Sync>;
    fn type_name(&self) -> &'static str;
    fn is_started(&self) -> bool;
    fn has_synced(&self) -> bool;
    fn stop(&self);
    fn wait(&self, timeout: Duration) -> futures::future::BoxFuture<'static, Result<()>>;
    fn describe(&self) -> String;
}

impl<K: CacheObject> AnyCache for Cache<K> {
    fn as_any(&self) -> Arc<dyn Any + Send + Sync> {
        Arc::new(self.clone())
    }
    fn type_name(&self) -> &'static str {
        std::any::type_name::<K>()
    }
    fn is_started(&self) -> bool {
        Cache::is_started(self)
    }
    fn has_synced(&self) -> bool {
        Cache::has_synced(self)
    }
    fn stop(&self) {
        Cache::stop(self);
    }
    fn wait(&self, timeout: Duration) -> futures::future::BoxFuture<'static, Result<()>> {
        let c = self.clone();
        async move { c.wait_for_sync(timeout).await }.boxed()
    }
    fn describe(&self) -> String {
        self.key().describe()
    }
}

/// Hands out the caches of one cluster. Cheap to clone.
#[derive(Clone)]
pub struct CacheFactory {
    inner: Arc<Inner>,
}

struct Inner {
    ctx: ClusterContext,
    options: CacheOptions,
    caches: Mutex<AHashMap<CacheKey, Box<dyn AnyCache>>>,
}

impl CacheFactory {
    /// The cache factory of the cluster in `ctx`.
    pub fn new(ctx: ClusterContext, options: CacheOptions) -> Self {
        Self {
            inner: Arc::new(Inner {
                ctx,
                options,
                caches: Mutex::new(AHashMap::new()),
            }),
        }
    }

    /// The cluster's shared context.
    pub fn context(&self) -> &ClusterContext {
        &self.inner.ctx
    }

    /// The options this factory was built with.
    pub fn options(&self) -> &CacheOptions {
        &self.inner.options
    }

    /// The cache of `gvk` in `scope`, created (not started) if needed.
    pub fn get_or_create<K: CacheObject>(
        &self,
        gvk: &GroupVersionKind,
        scope: CacheScope,
        resolver: impl FnOnce() -> Resolver<K>,
    ) -> Result<Cache<K>> {
        self.get_or_create_packed(gvk, scope, resolver, None)
    }

    /// [`get_or_create`](Self::get_or_create), with the store packed by `packing` when the cache
    /// is made here.
    fn get_or_create_packed<K: CacheObject>(
        &self,
        gvk: &GroupVersionKind,
        scope: CacheScope,
        resolver: impl FnOnce() -> Resolver<K>,
        packing: Option<Packing<K>>,
    ) -> Result<Cache<K>> {
        let key = CacheKey::new(gvk, scope);
        let mut caches = self.inner.caches.lock();
        if let Some(existing) = caches.get(&key) {
            return match existing.as_any().downcast::<Cache<K>>() {
                Ok(c) => Ok((*c).clone()),
                Err(_) => Err(Error::RepresentationConflict {
                    cluster: self.inner.ctx.name().to_string(),
                    kind: key.describe(),
                    existing: existing.type_name(),
                    requested: std::any::type_name::<K>(),
                }),
            };
        }
        let cache = Cache::new(
            self.inner.ctx.clone(),
            key.clone(),
            resolver(),
            Strip {
                managed_fields: self.inner.options.strip_managed_fields,
                last_applied: self.inner.options.strip_last_applied,
            },
            self.inner.options.page_size,
            packing,
        );
        caches.insert(key, Box::new(cache.clone()));
        Ok(cache)
    }

    /// The cache of a statically typed kind in its configured scope.
    pub fn for_kind<K>(&self) -> Result<Cache<K>>
    where
        K: CacheObject,
        K::DynamicType: Default,
    {
        let dt = K::DynamicType::default();
        let scope = self.inner.options.scope_for(&K::group(&dt), &K::kind(&dt));
        self.for_kind_in(scope)
    }

    /// The cache of a statically typed kind in an explicit scope.
    pub fn for_kind_in<K>(&self, scope: CacheScope) -> Result<Cache<K>>
    where
        K: CacheObject,
        K::DynamicType: Default,
    {
        let dt = K::DynamicType::default();
        let gvk = GroupVersionKind::gvk(&K::group(&dt), &K::version(&dt), &K::kind(&dt));
        let packing = self
            .inner
            .options
            .packed_kinds
            .contains(&group_kind_string(&gvk.group, &gvk.kind))
            .then(json_packing::<K>);
        self.get_or_create_packed(
            &gvk,
            scope,
            || Arc::new(|| futures::future::ready(Ok(K::DynamicType::default())).boxed()),
            packing,
        )
    }

    /// The key of `gvk`'s cache in its configured scope (whether or not it exists).
    pub(crate) fn key_for_gvk(&self, gvk: &GroupVersionKind) -> CacheKey {
        CacheKey::new(gvk, self.inner.options.scope_for(&gvk.group, &gvk.kind))
    }

    /// A dynamic cache of `gvk` in its configured scope; the resource is found through discovery
    /// when the watch starts.
    pub fn for_gvk(&self, gvk: &GroupVersionKind) -> Result<Cache<DynamicObject>> {
        let scope = self.inner.options.scope_for(&gvk.group, &gvk.kind);
        self.for_gvk_in(gvk, scope)
    }

    /// A dynamic cache of `gvk` in an explicit scope.
    pub fn for_gvk_in(
        &self,
        gvk: &GroupVersionKind,
        scope: CacheScope,
    ) -> Result<Cache<DynamicObject>> {
        let clients = self.inner.ctx.clients().clone();
        let g = gvk.clone();
        let resolver = move || -> Resolver<DynamicObject> {
            Arc::new(move || {
                let clients = clients.clone();
                let g = g.clone();
                async move { clients.resolve(&g).await.map(|(ar, _)| ar) }.boxed()
            })
        };
        self.get_or_create_packed(gvk, scope, resolver, self.dynamic_packing())
    }

    /// How this factory packs `DynamicObject` caches (`None`: it does not).
    fn dynamic_packing(&self) -> Option<Packing<DynamicObject>> {
        self.inner
            .options
            .pack_dynamic_objects
            .then(json_packing::<DynamicObject>)
    }

    /// A dynamic cache of an already resolved resource in its configured scope.
    pub fn for_resource(&self, ar: &ApiResource) -> Result<Cache<DynamicObject>> {
        let scope = self.inner.options.scope_for(&ar.group, &ar.kind);
        let gvk = GroupVersionKind::gvk(&ar.group, &ar.version, &ar.kind);
        let ar = ar.clone();
        let resolver = move || -> Resolver<DynamicObject> {
            Arc::new(move || futures::future::ready(Ok(ar.clone())).boxed())
        };
        self.get_or_create_packed(&gvk, scope, resolver, self.dynamic_packing())
    }

    /// Number of caches created (started or not).
    pub fn len(&self) -> usize {
        self.inner.caches.lock().len()
    }

    /// True when no cache was created.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Descriptions of the started caches (each one holds one watch).
    pub fn started(&self) -> Vec<String> {
        self.inner
            .caches
            .lock()
            .values()
            .filter(|c| c.is_started())
            .map(|c| c.describe())
            .collect()
    }

    /// True when every started cache has synced (for `/readyz`).
    pub fn all_synced(&self) -> bool {
        self.inner
            .caches
            .lock()
            .values()
            .filter(|c| c.is_started())
            .all(|c| c.has_synced())
    }

    /// Waits for every started cache to sync, at most `timeout` each.
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<()> {
        let waits: Vec<_> = self
            .inner
            .caches
            .lock()
            .values()
            .filter(|c| c.is_started())
            .map(|c| c.wait(timeout))
            .collect();
        for r in futures::future::join_all(waits).await {
            r?;
        }
        Ok(())
    }

    /// Stops every cache and forgets them.
    pub fn stop_all(&self) {
        let caches: Vec<_> = self.inner.caches.lock().drain().map(|(_, c)| c).collect();
        for c in caches {
            c.stop();
        }
    }
}

impl<K: CacheObject> std::fmt::Debug for Cache<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("cluster", &self.cluster())
            .field("key", &self.key().describe())
            .field("started", &self.is_started())
            .finish()
    }
}

/// Packing as JSON text: compact, and what the objects came as.
fn json_packing<K: CacheObject>() -> Packing<K> {
    Packing {
        pack: |o| serde_json::to_vec(o).ok().map(Vec::into_boxed_slice),
        unpack: |b| serde_json::from_slice(b).map_err(|e| e.to_string()),
    }
}
