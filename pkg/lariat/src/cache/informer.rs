//! A cache: one watch of one (cluster, kind, scope), started lazily, feeding a [`Store`] and fanning
//! changed keys out to subscribers (the work queues of shared controllers).
//!
//! Watch errors are retried with jittered exponential backoff; the kube-rs watcher resumes from the
//! last resourceVersion and relists on `410 Gone`. A relist replaces objects in place and reports
//! objects that disappeared meanwhile as deleted, so no handler event is lost.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::Api;
use kube::Resource;
use kube::api::GroupVersionKind;
use kube::runtime::watcher::{self, Event};
use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::namespaced::{InNamespace, unwrap_event};
use super::scope::CacheKey;
use super::store::{Applied, IndexFn, Packing, Store, SyncState};
use super::transform::{Strip, Transform};
use crate::backoff::Backoff;
use crate::context::ClusterContext;
use crate::error::{Error, Result};
use crate::key::ObjectKey;
use crate::queue::Priority;

/// Bounds of an object a cache can hold: typed k8s-openapi/CRD types, `DynamicObject`, or
/// `PartialObjectMeta<K>` for metadata-only caches. `Serialize` lets a store keep them
/// [packed](super::store::Packing).
pub trait CacheObject:
    Resource<DynamicType: Clone + Send + Sync + 'static>
    + Clone
    + DeserializeOwned
    + Serialize
    + Debug
    + Send
    + Sync
    + 'static
{
}
impl<T> CacheObject for T
where
    T: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
    T::DynamicType: Clone + Send + Sync + 'static,
{
}

/// Produces the dynamic type (e.g. the `ApiResource` found by discovery) when the watch starts.
pub type Resolver<K> =
    Arc<dyn Fn() -> BoxFuture<'static, Result<<K as Resource>::DynamicType>> + Send + Sync>;

/// Called with every key whose object changed or was deleted, and whether the key comes from the
/// cache's first list (a replay of what already existed, which a queue may serve after live
/// changes) rather than from a change seen since.
pub type Subscriber = Arc<dyn Fn(&ObjectKey, bool) + Send + Sync>;

/// How a wait for an initial list ended when it did not fail (see [`Cache::wait_synced`]).
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncWait {
    /// The initial list completed: the store holds every object.
    Synced,
    /// The cancellation token fired first: the caller is stopping.
    Cancelled,
}

impl SyncWait {
    /// True if the wait ended because the caller was cancelled.
    pub fn is_cancelled(self) -> bool {
        self == SyncWait::Cancelled
    }
}

/// A handle on one shared cache. Cheap to clone; the watch opens on first use
/// ([`start`](Self::start), [`store`](Self::store), [`wait_for_sync`](Self::wait_for_sync), or a
/// controller using it).
pub struct Cache<K: CacheObject> {
    pub(crate) inner: Arc<CacheInner<K>>,
}

impl<K: CacheObject> Clone for Cache<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

pub(crate) struct CacheInner<K: CacheObject> {
    ctx: ClusterContext,
    key: CacheKey,
    store: Store<K>,
    subscribers: RwLock<Vec<(u64, Subscriber)>>,
    next_subscriber: AtomicU64,
    started: AtomicBool,
    resolver: Resolver<K>,
    strip: Strip,
    transform: Mutex<Option<Transform<K>>>,
    page_size: Option<u32>,
    last_error: Mutex<Option<String>>,
    token: CancellationToken,
    /// When the cache was made, in whole seconds (the resolution of `creationTimestamp`).
    made_at: i64,
}

impl<K: CacheObject> Cache<K> {
    pub(crate) fn new(
        ctx: ClusterContext,
        key: CacheKey,
        resolver: Resolver<K>,
        strip: Strip,
        page_size: Option<u32>,
        packing: Option<Packing<K>>,
    ) -> Self {
        let gauge = ctx
            .metrics()
            .cached_objects(&key.group, &key.version, &key.kind);
        let token = ctx.token().child_token();
        Self {
            inner: Arc::new(CacheInner {
                ctx,
                key,
                store: Store::with_packing(Some(gauge), packing),
                subscribers: RwLock::new(Vec::new()),
                next_subscriber: AtomicU64::new(0),
                started: AtomicBool::new(false),
                resolver,
                strip,
                transform: Mutex::new(None),
                page_size,
                last_error: Mutex::new(None),
                token,
                made_at: k8s_openapi::jiff::Timestamp::now().as_second(),
            }),
        }
    }

    /// The cluster this cache watches.
    pub fn cluster(&self) -> &str {
        self.inner.ctx.name()
    }

    /// The kind and scope of this cache.
    pub fn key(&self) -> &CacheKey {
        &self.inner.key
    }

    /// The watched GVK.
    pub fn gvk(&self) -> GroupVersionKind {
        self.inner.key.gvk()
    }

    /// The store, starting the watch if needed.
    pub fn store(&self) -> Store<K> {
        self.start();
        self.inner.store.clone()
    }

    /// The store without starting the watch.
    pub fn peek_store(&self) -> &Store<K> {
        &self.inner.store
    }

    /// Every stored key with the priority of its replay to a handler registered late: an object
    /// created since the cache was made is live, as in the first list, and goes ahead of the
    /// replay; the rest is replayed at [`Priority::Low`]. A packed store's objects all replay low
    /// (telling their age would decode every one).
    pub fn replay_keys(&self) -> Vec<(ObjectKey, Priority)> {
        let store = &self.inner.store;
        if store.is_packed() {
            return store
                .keys()
                .into_iter()
                .map(|k| (k, Priority::Low))
                .collect();
        }
        store
            .list()
            .iter()
            .filter_map(|o| {
                let priority = if self.inner.created_since_made(o) {
                    Priority::Normal
                } else {
                    Priority::Low
                };
                ObjectKey::from_object(o.as_ref()).map(|k| (k, priority))
            })
            .collect()
    }

    /// Adds a secondary index without starting the watch.
    pub fn add_index(&self, name: impl Into<String>, f: IndexFn<K>) {
        self.inner.store.add_index(name, f);
    }

    /// Sets an extra transform, run after the default stripping. Only effective before start.
    pub fn set_transform(&self, f: Transform<K>) {
        *self.inner.transform.lock() = Some(f);
    }

    /// True once the watch was started.
    pub fn is_started(&self) -> bool {
        self.inner.started.load(Ordering::Acquire)
    }

    /// True once the initial list completed.
    pub fn has_synced(&self) -> bool {
        self.inner.store.has_synced()
    }

    /// The last watch or discovery error, if the latest attempt failed.
    pub fn last_error(&self) -> Option<String> {
        self.inner.last_error.lock().clone()
    }

    /// Starts the watch (idempotent).
    pub fn start(&self) {
        if self.inner.started.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::debug!(cluster = self.cluster(), cache = %self.inner.key.describe(), "starting cache");
        let inner = self.inner.clone();
        self.inner.ctx.tracker().spawn(async move {
            inner.run().await;
            inner.store.mark_stopped();
            inner.store.clear();
        });
    }

    /// Stops the watch and frees the objects.
    pub fn stop(&self) {
        self.inner.token.cancel();
        if !self.is_started() {
            self.inner.store.mark_stopped();
        }
    }

    /// Starts the watch if needed and waits for the initial list, at most `timeout`.
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<()> {
        self.start();
        match tokio::time::timeout(timeout, self.inner.store.wait_synced()).await {
            Ok(SyncState::Synced) => Ok(()),
            Ok(_) => Err(Error::CacheStopped {
                cluster: self.cluster().to_string(),
                kind: self.inner.key.describe(),
            }),
            Err(_) => Err(Error::SyncTimeout {
                cluster: self.cluster().to_string(),
                kind: self.inner.key.describe(),
                timeout,
                listed: self.inner.store.len(),
                last_error: self.last_error(),
            }),
        }
    }

    /// Starts the watch if needed and waits for the initial list, at most `timeout`, unless `cancel`
    /// fires first. A timeout is [`Error::SyncTimeout`]; a stopped cache, [`Error::CacheStopped`].
    pub async fn wait_synced(
        &self,
        cancel: &CancellationToken,
        timeout: Duration,
    ) -> Result<SyncWait> {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => Ok(SyncWait::Cancelled),
            r = self.wait_for_sync(timeout) => r.map(|()| SyncWait::Synced),
        }
    }

    /// Calls `f` with every changed or deleted key from now on; returns an id for
    /// [`unsubscribe`](Self::unsubscribe). Does not start the watch.
    pub fn subscribe(&self, f: Subscriber) -> u64 {
        let id = self.inner.next_subscriber.fetch_add(1, Ordering::Relaxed);
        self.inner.subscribers.write().push((id, f));
        id
    }

    /// Removes a subscriber.
    pub fn unsubscribe(&self, id: u64) {
        self.inner.subscribers.write().retain(|(i, _)| *i != id);
    }
}

impl<K: CacheObject> CacheInner<K> {
    fn notify(&self, key: &ObjectKey, initial: bool) {
        for (_, s) in self.subscribers.read().iter() {
            s(key, initial);
        }
    }

    /// Whether `o` was created in or after the second the cache was made.
    fn created_since_made(&self, o: &K) -> bool {
        o.meta()
            .creation_timestamp
            .as_ref()
            .is_some_and(|t| t.0.as_second() >= self.made_at)
    }

    fn record_error(&self, what: &str, err: &dyn std::fmt::Display) {
        let msg = format!("{what}: {err}");
        tracing::warn!(cluster = self.ctx.name(), cache = %self.key.describe(), error = %msg, "cache watch error; backing off");
        *self.last_error.lock() = Some(msg);
    }

    fn handle(&self, event: Event<K>, transform: &Option<Transform<K>>) {
        let prepare = |mut o: K| {
            self.strip.apply(&mut o);
            if let Some(t) = transform {
                t(&mut o);
            }
            o
        };
        match event {
            Event::Init => self.store.begin_relist(),
            Event::InitApply(o) => {
                // Only the first list is a replay; a relist after a broken watch reports what
                // changed while the watch was down, which is as live as any watch event. An object
                // created since the cache was made is new to this process even in the first list
                // (made while the list was on its way): it is live, not a replay.
                let initial = !self.store.has_synced() && !self.created_since_made(&o);
                if let Applied::Changed(k) = self.store.apply(prepare(o)) {
                    self.notify(&k, initial);
                }
            }
            Event::Apply(o) => {
                if let Applied::Changed(k) = self.store.apply(prepare(o)) {
                    self.notify(&k, false);
                }
            }
            Event::Delete(o) => {
                if let Some(k) = ObjectKey::from_object(&o)
                    && self.store.delete(&k)
                {
                    self.notify(&k, false);
                }
            }
            Event::InitDone => {
                if !self.store.has_synced() {
                    tracing::debug!(
                        cluster = self.ctx.name(),
                        cache = %self.key.describe(),
                        objects = self.store.len(),
                        "cache synced"
                    );
                }
                for k in self.store.end_relist() {
                    self.notify(&k, false);
                }
            }
        }
    }

    async fn run(&self) {
        let token = self.token.clone();
        let mut backoff = Backoff::default();
        let dt = loop {
            match (self.resolver)().await {
                Ok(dt) => break dt,
                Err(e) => {
                    self.record_error("resolving kind", &e);
                    tokio::select! {
                        _ = token.cancelled() => return,
                        _ = tokio::time::sleep(backoff.next_delay()) => {}
                    }
                }
            }
        };
        backoff.reset();
        let client = self.ctx.clients().client();
        let wc = watcher::Config {
            label_selector: self.key.scope.label_selector.clone(),
            field_selector: self.key.scope.field_selector.clone(),
            page_size: self.page_size,
            ..watcher::Config::default()
        };
        let transform = self.transform.lock().clone();
        // A namespace scope watches the namespace's own path (see `namespaced`).
        let mut stream = match &self.key.scope.namespace {
            Some(ns) => {
                let api = Api::<InNamespace<K>>::all_with(client, &dt).constrain(ns);
                watcher::watcher(api, wc)
                    .map(|r| r.map(unwrap_event))
                    .boxed()
            }
            None => watcher::watcher(Api::<K>::all_with(client, &dt), wc).boxed(),
        };
        loop {
            let next = tokio::select! {
                _ = token.cancelled() => return,
                n = stream.next() => n,
            };
            match next {
                None => return,
                Some(Ok(event)) => {
                    backoff.reset();
                    *self.last_error.lock() = None;
                    self.handle(event, &transform);
                }
                Some(Err(e)) => {
                    self.record_error("watch", &e);
                    tokio::select! {
                        _ = token.cancelled() => return,
                        _ = tokio::time::sleep(backoff.next_delay()) => {}
                    }
                }
            }
        }
    }
}
