//! The per-cluster controller factory: one [`SharedController`] per (kind, scope), sharing the
//! cluster's caches. `for_*` calls only create handles; nothing is watched until a controller is used.

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ahash::AHashMap;
use futures::FutureExt;
use futures::future::BoxFuture;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use parking_lot::Mutex;

use super::shared::SharedController;
use super::workers::WorkerOptions;
use crate::cache::{Cache, CacheFactory, CacheKey, CacheObject, CacheScope};
use crate::error::{Error, Result};
use crate::gvk::group_kind_string;
use crate::queue::RateLimiterOptions;

/// Controller settings of one cluster.
#[derive(Clone, Debug, Default)]
pub struct ControllerOptions {
    /// Worker counts.
    pub workers: WorkerOptions,
    /// Per-key backoff and overall bucket of every controller's queue.
    pub rate_limiter: RateLimiterOptions,
}

trait AnyController: Send + Sync {
    fn as_any(&self) -> Arc<dyn Any + Send + Sync>;
    fn type_name(&self) -> &'static str;
    fn request_start(&self);
    fn shutdown(&self, timeout: Duration) -> BoxFuture<'static, bool>;
}

impl<K: CacheObject> AnyController for SharedController<K> {
    fn as_any(&self) -> Arc<dyn Any + Send + Sync> {
        Arc::new(self.clone())
    }
    fn type_name(&self) -> &'static str {
        std::any::type_name::<K>()
    }
    fn request_start(&self) {
        SharedController::request_start(self);
    }
    fn shutdown(&self, timeout: Duration) -> BoxFuture<'static, bool> {
        let c = self.clone();
        async move { c.shutdown(timeout).await }.boxed()
    }
}

/// Hands out the shared controllers of one cluster. Cheap to clone.
#[derive(Clone)]
pub struct ControllerFactory {
    inner: Arc<Inner>,
}

struct Inner {
    caches: CacheFactory,
    options: ControllerOptions,
    controllers: Mutex<AHashMap<CacheKey, Box<dyn AnyController>>>,
    started: AtomicBool,
}

/// The controller name of a cache key: `Kind.group`, plus `[scope]` when scoped.
fn controller_name(key: &CacheKey) -> String {
    let gk = group_kind_string(&key.group, &key.kind);
    let scope = key.scope.describe();
    if scope.is_empty() {
        gk
    } else {
        format!("{gk}[{scope}]")
    }
}

impl ControllerFactory {
    /// The controller factory over `caches`.
    pub fn new(caches: CacheFactory, options: ControllerOptions) -> Self {
        Self {
            inner: Arc::new(Inner {
                caches,
                options,
                controllers: Mutex::new(AHashMap::new()),
                started: AtomicBool::new(false),
            }),
        }
    }

    /// The cache factory behind the controllers.
    pub fn caches(&self) -> &CacheFactory {
        &self.inner.caches
    }

    /// The options this factory was built with.
    pub fn options(&self) -> &ControllerOptions {
        &self.inner.options
    }

    fn get_or_create<K: CacheObject>(&self, cache: Cache<K>) -> Result<SharedController<K>> {
        let key = cache.key().clone();
        let mut ctrls = self.inner.controllers.lock();
        if let Some(existing) = ctrls.get(&key) {
            return match existing.as_any().downcast::<SharedController<K>>() {
                Ok(c) => Ok((*c).clone()),
                Err(_) => Err(Error::RepresentationConflict {
                    cluster: self.inner.caches.context().name().to_string(),
                    kind: key.describe(),
                    existing: existing.type_name(),
                    requested: std::any::type_name::<K>(),
                }),
            };
        }
        let workers = self
            .inner
            .options
            .workers
            .workers_for(&key.group, &key.kind);
        let ctrl = SharedController::new(
            controller_name(&key),
            self.inner.caches.context().clone(),
            cache,
            workers,
            &self.inner.options.rate_limiter,
        );
        if self.inner.started.load(Ordering::Acquire) {
            ctrl.request_start();
        }
        ctrls.insert(key, Box::new(ctrl.clone()));
        Ok(ctrl)
    }

    /// The shared controller of a statically typed kind, in its configured scope.
    pub fn for_kind<K>(&self) -> Result<SharedController<K>>
    where
        K: CacheObject,
        K::DynamicType: Default,
    {
        self.get_or_create(self.inner.caches.for_kind::<K>()?)
    }

    /// The shared controller of a statically typed kind in an explicit scope.
    pub fn for_kind_in<K>(&self, scope: CacheScope) -> Result<SharedController<K>>
    where
        K: CacheObject,
        K::DynamicType: Default,
    {
        self.get_or_create(self.inner.caches.for_kind_in::<K>(scope)?)
    }

    /// The dynamic shared controller of `gvk` (discovery runs when it is first used).
    pub fn for_gvk(&self, gvk: &GroupVersionKind) -> Result<SharedController<DynamicObject>> {
        self.get_or_create(self.inner.caches.for_gvk(gvk)?)
    }

    /// The dynamic shared controller of `gvk` in its configured scope if one is in use; none is
    /// made (for a check that must not start a watch).
    pub fn existing_gvk(&self, gvk: &GroupVersionKind) -> Option<SharedController<DynamicObject>> {
        let key = self.inner.caches.key_for_gvk(gvk);
        let ctrls = self.inner.controllers.lock();
        let c = ctrls.get(&key)?.as_any();
        c.downcast::<SharedController<DynamicObject>>()
            .ok()
            .map(|c| (*c).clone())
    }

    /// The dynamic shared controller of the kind of `obj` (from its `apiVersion` and `kind`).
    pub fn for_object(&self, obj: &DynamicObject) -> Result<SharedController<DynamicObject>> {
        let gvk = obj
            .types
            .as_ref()
            .and_then(|t| GroupVersionKind::try_from(t).ok())
            .ok_or_else(|| Error::ObjectWithoutKind {
                cluster: self.inner.caches.context().name().to_string(),
                name: obj.metadata.name.clone().unwrap_or_default(),
            })?;
        self.for_gvk(&gvk)
    }

    /// The dynamic shared controller of an already resolved resource.
    pub fn for_resource(&self, ar: &ApiResource) -> Result<SharedController<DynamicObject>> {
        self.get_or_create(self.inner.caches.for_resource(ar)?)
    }

    /// Starts the workers of every controller in use, and of every controller put to use later.
    /// Idempotent.
    pub fn start(&self) {
        self.inner.started.store(true, Ordering::Release);
        for c in self.inner.controllers.lock().values() {
            c.request_start();
        }
    }

    /// True once [`start`](Self::start) was called.
    pub fn is_started(&self) -> bool {
        self.inner.started.load(Ordering::Acquire)
    }

    /// Graceful shutdown of every controller: stop taking keys, wait up to `timeout` for running
    /// handlers, abort the rest. Returns true if everything finished in time.
    pub async fn shutdown(&self, timeout: Duration) -> bool {
        let waits: Vec<_> = self
            .inner
            .controllers
            .lock()
            .values()
            .map(|c| c.shutdown(timeout))
            .collect();
        futures::future::join_all(waits)
            .await
            .into_iter()
            .all(|ok| ok)
    }
}
