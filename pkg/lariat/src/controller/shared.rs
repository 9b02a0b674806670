//! A shared controller: one work queue and one worker pool per (cluster, kind, scope), fed by the
//! shared cache, running every registered handler in order for each key (Lasso's shared handler).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::FutureExt;
use kube::Client;
use parking_lot::RwLock;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::handler::{Handler, HandlerResult};
use crate::cache::{Cache, CacheObject, Store, SyncState, SyncWait};
use crate::context::ClusterContext;
use crate::error::Result;
use crate::key::ObjectKey;
use crate::metrics::ReconcileMetrics;
use crate::queue::{Priority, RateLimiterOptions, WorkQueue};

/// How often the unfinished-work gauges are refreshed while workers run (client-go: 500 ms).
const UNFINISHED_WORK_PERIOD: Duration = Duration::from_millis(500);

tokio::task_local! {
    static CURRENT_PRIORITY: Priority;
}

/// The priority of the key the calling handler is processing ([`Priority::Normal`] outside a
/// handler): a handler that hands the key's work on to a queue of its own passes it along, so a
/// replayed object stays behind live changes there too.
pub fn current_priority() -> Priority {
    CURRENT_PRIORITY.try_with(|p| *p).unwrap_or_default()
}

/// Identifies a registered handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HandlerId(u64);

struct HandlerEntry<K> {
    id: HandlerId,
    name: Arc<str>,
    handler: Arc<dyn Handler<K>>,
}

impl<K> Clone for HandlerEntry<K> {
    fn clone(&self) -> Self {
        Self {
            id: self.id,
            name: self.name.clone(),
            handler: self.handler.clone(),
        }
    }
}

/// A handle on the shared controller of one kind. Cheap to clone. Obtaining it opens nothing; the
/// watch starts when a handler is registered, a key is enqueued, or the store is asked for.
pub struct SharedController<K: CacheObject> {
    inner: Arc<Inner<K>>,
}

impl<K: CacheObject> Clone for SharedController<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

struct Inner<K: CacheObject> {
    name: String,
    ctx: ClusterContext,
    cache: Cache<K>,
    queue: WorkQueue<ObjectKey>,
    handlers: RwLock<Arc<Vec<HandlerEntry<K>>>>,
    next_handler: AtomicU64,
    initialized: AtomicBool,
    /// Set when the factory starts; workers run once the controller is also initialised.
    start_requested: AtomicBool,
    running: AtomicBool,
    workers: usize,
    metrics: ReconcileMetrics,
    /// Cancelled to abort workers that outlive the shutdown deadline.
    token: CancellationToken,
}

impl<K: CacheObject> SharedController<K> {
    pub(crate) fn new(
        name: String,
        ctx: ClusterContext,
        cache: Cache<K>,
        workers: usize,
        rate_limiter: &RateLimiterOptions,
    ) -> Self {
        let queue = WorkQueue::new(
            name.clone(),
            rate_limiter.build(),
            ctx.metrics().queue(&name),
        );
        let metrics = ctx.metrics().controller(&name);
        metrics.max_concurrent.set(workers as i64);
        metrics.active_workers.set(0);
        let token = ctx.token().child_token();
        Self {
            inner: Arc::new(Inner {
                name,
                ctx,
                cache,
                queue,
                handlers: RwLock::new(Arc::new(Vec::new())),
                next_handler: AtomicU64::new(0),
                initialized: AtomicBool::new(false),
                start_requested: AtomicBool::new(false),
                running: AtomicBool::new(false),
                workers,
                metrics,
                token,
            }),
        }
    }

    /// The controller name (`Kind.group`, plus the scope when it is not the default): the
    /// `controller` and `name` label of its metrics.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The cluster this controller runs against.
    pub fn cluster(&self) -> &str {
        self.inner.ctx.name()
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.inner.workers
    }

    /// The shared cache behind this controller (not started by this call).
    pub fn cache(&self) -> &Cache<K> {
        &self.inner.cache
    }

    /// Starts the controller's watch now (idempotent): its queue follows the cache from here on,
    /// and workers run once the factory is started. Registering a handler, enqueueing a key and
    /// [`store`](Self::store) do the same.
    pub fn start_watch(&self) {
        self.ensure_initialized();
    }

    /// Starts the controller's watch and waits for its initial list, at most `timeout`, unless
    /// `cancel` fires first (see [`Cache::wait_synced`]).
    pub async fn wait_synced(
        &self,
        cancel: &CancellationToken,
        timeout: Duration,
    ) -> Result<SyncWait> {
        self.ensure_initialized();
        self.inner.cache.wait_synced(cancel, timeout).await
    }

    /// The store, starting the controller's watch if needed.
    pub fn store(&self) -> Store<K> {
        self.ensure_initialized();
        self.inner.cache.store()
    }

    /// Orders this kind's queue by `rank` of each key's object, read from the cache when the key
    /// is added: keys of a higher rank are handed to every handler first (a deleted object ranks
    /// 0). For priorities users give their objects, such as a scheduling priority; set it
    /// before the watch starts so the first list is ranked too: the workers of a ranked queue
    /// start once the first list is in it. One ranker per kind: returns
    /// false, changing nothing, if one was set before.
    pub fn set_ranker(&self, rank: impl Fn(&K) -> i32 + Send + Sync + 'static) -> bool {
        // The store without starting the watch: a watch started before the queue subscribes
        // lists objects no queue hears of.
        let store = self.inner.cache.peek_store().clone();
        self.inner.queue.set_ranker(Arc::new(move |k: &ObjectKey| {
            store.get(k).map_or(0, |o| rank(&o))
        }))
    }

    /// The work queue (for inspection; use the `enqueue*` methods to add keys).
    pub fn queue(&self) -> &WorkQueue<ObjectKey> {
        &self.inner.queue
    }

    /// A client of this cluster whose User-Agent names `controller`.
    pub fn client(&self, controller: &str) -> Result<Client> {
        self.inner.ctx.clients().client_for_controller(controller)
    }

    /// True once the watch was started.
    pub fn is_initialized(&self) -> bool {
        self.inner.initialized.load(Ordering::Acquire)
    }

    /// True while workers run.
    pub fn is_running(&self) -> bool {
        self.inner.running.load(Ordering::Acquire)
    }

    /// Names of the registered handlers, in call order.
    pub fn handler_names(&self) -> Vec<String> {
        self.inner
            .handlers
            .read()
            .iter()
            .map(|h| h.name.to_string())
            .collect()
    }

    /// Adds `handler` to this kind's queue. It runs after the handlers registered before it, for
    /// every key whose object changes or is deleted (`None`). If the cache already synced, every
    /// key in the store is replayed so a late handler sees every object. The handler is removed
    /// when `cancel` fires.
    pub fn register_handler<H: Handler<K>>(
        &self,
        name: &str,
        cancel: CancellationToken,
        handler: H,
    ) -> HandlerId {
        let id = HandlerId(self.inner.next_handler.fetch_add(1, Ordering::Relaxed));
        {
            let mut hs = self.inner.handlers.write();
            let mut v: Vec<HandlerEntry<K>> = hs.as_ref().clone();
            v.push(HandlerEntry {
                id,
                name: Arc::from(name),
                handler: Arc::new(handler),
            });
            *hs = Arc::new(v);
        }
        tracing::debug!(
            cluster = self.cluster(),
            controller = self.name(),
            handler = name,
            "handler registered"
        );
        if !self.ensure_initialized() && self.inner.cache.has_synced() {
            // A replay for the new handler: live changes of other keys, and objects created since
            // the cache was made, go first.
            self.replay();
        }
        let this = self.clone();
        let stop = self.inner.token.clone();
        self.inner.ctx.spawn(async move {
            tokio::select! {
                _ = cancel.cancelled() => this.remove_handler(id),
                _ = stop.cancelled() => {}
            }
        });
        id
    }

    /// Removes a handler at once (also happens when its cancellation token fires).
    pub fn remove_handler(&self, id: HandlerId) {
        let mut hs = self.inner.handlers.write();
        if hs.iter().any(|h| h.id == id) {
            let v: Vec<HandlerEntry<K>> = hs.iter().filter(|h| h.id != id).cloned().collect();
            *hs = Arc::new(v);
        }
    }

    /// Queues `namespace/name` (or `name`) for processing.
    pub fn enqueue(&self, namespace: Option<&str>, name: &str) {
        self.enqueue_key(ObjectKey::new(namespace, name));
    }

    /// Queues `namespace/name` after `delay`.
    pub fn enqueue_after(&self, namespace: Option<&str>, name: &str, delay: Duration) {
        self.ensure_initialized();
        self.inner
            .queue
            .add_after(ObjectKey::new(namespace, name), delay);
    }

    /// Queues a key. Keys queued before the factory starts are kept until workers run. Called from
    /// a handler, the key gets the priority of the key being handled ([`current_priority`]).
    pub fn enqueue_key(&self, key: ObjectKey) {
        self.enqueue_key_with_priority(key, current_priority());
    }

    /// Queues `key` with `priority`: for a key put aside by a handler and queued again later,
    /// outside any handler, with the priority it had then.
    pub fn enqueue_key_with_priority(&self, key: ObjectKey, priority: Priority) {
        self.ensure_initialized();
        self.inner.queue.add_with_priority(key, priority);
    }

    /// Queues every key the store holds, each at its replay priority, all at once: a worker
    /// already running takes the highest-ranked of them, not the first in the store's order.
    fn replay(&self) {
        self.inner
            .queue
            .add_all_with_priority(self.inner.cache.replay_keys());
    }

    /// Subscribes the queue to the cache and starts the watch (once). Starts workers if the
    /// factory was already started. True when this call subscribed to a cache someone else had
    /// started, and so replayed what it held: objects stored before the subscription were
    /// announced to no queue.
    fn ensure_initialized(&self) -> bool {
        if self.inner.initialized.swap(true, Ordering::AcqRel) {
            return false;
        }
        let started_before = self.inner.cache.is_started();
        let queue = self.inner.queue.clone();
        self.inner
            .cache
            .subscribe(Arc::new(move |k: &ObjectKey, initial: bool| {
                let priority = if initial {
                    Priority::Low
                } else {
                    Priority::Normal
                };
                queue.add_with_priority(k.clone(), priority);
            }));
        self.inner.cache.start();
        if started_before {
            self.replay();
        }
        if self.inner.start_requested.load(Ordering::Acquire) {
            self.spawn_workers();
        }
        started_before
    }

    /// Starts the workers now if the controller is in use, or as soon as it is.
    pub(crate) fn request_start(&self) {
        self.inner.start_requested.store(true, Ordering::Release);
        if self.is_initialized() {
            self.spawn_workers();
        }
    }

    fn spawn_workers(&self) {
        if self.inner.running.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::debug!(
            cluster = self.cluster(),
            controller = self.name(),
            workers = self.inner.workers,
            "starting workers"
        );
        let tracker = self.inner.ctx.tracker();
        for _ in 0..self.inner.workers {
            let this = self.clone();
            let abort = self.inner.token.clone();
            tracker.spawn(async move {
                tokio::select! {
                    _ = abort.cancelled() => {}
                    () = this.worker() => {}
                }
            });
        }
        let queue = self.inner.queue.clone();
        let stop = self.inner.token.clone();
        self.inner.ctx.spawn(async move {
            let mut tick = tokio::time::interval(UNFINISHED_WORK_PERIOD);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tick.tick() => queue.update_unfinished_work(),
                }
            }
        });
    }

    async fn worker(&self) {
        while let Some((key, priority)) = self.inner.queue.get_with_priority().await {
            // A ranked queue hands out nothing before the cache's initial list is in (as
            // client-go's controllers wait for their informers): then every listed key is queued
            // before the first is taken, and the highest-ranked of them all goes first, not
            // whichever was listed first. Checked here rather than when the workers start, since
            // a controller made later may rank the queue after that; a key taken too early goes
            // back at its rank. Other queues hand out at once: keys enqueued directly are handled
            // even while the watch cannot list.
            let store = self.inner.cache.peek_store();
            if self.inner.queue.is_ranked() && store.sync_state() == SyncState::Pending {
                self.inner.queue.add_with_priority(key.clone(), priority);
                self.inner.queue.done(&key);
                store.wait_synced().await;
                continue;
            }
            // Handlers that queue work elsewhere (e.g. per-member queues) keep the key's priority
            // through [`current_priority`].
            CURRENT_PRIORITY.scope(priority, self.process(&key)).await;
            self.inner.queue.done(&key);
        }
    }

    async fn process(&self, key: &ObjectKey) {
        let m = &self.inner.metrics;
        m.active_workers.inc();
        let started = Instant::now();
        let handlers = self.inner.handlers.read().clone();
        let mut obj = self.inner.cache.peek_store().get(key);
        let mut failed = false;
        let mut ignored = false;
        let mut requeue_after: Option<Duration> = None;
        for h in handlers.iter() {
            let fut = h.handler.call(key.clone(), obj.clone());
            match AssertUnwindSafe(fut).catch_unwind().await {
                Err(_) => {
                    tracing::error!(cluster = self.cluster(), controller = self.name(), handler = %h.name, %key, "handler panicked; requeuing");
                    m.panics.inc();
                    failed = true;
                }
                Ok(HandlerResult::Success) => {}
                Ok(HandlerResult::Updated(o)) => obj = Some(o),
                Ok(HandlerResult::RequeueAfter(d)) => {
                    requeue_after = Some(requeue_after.map_or(d, |r| r.min(d)));
                }
                Ok(HandlerResult::Ignore(e)) => {
                    tracing::warn!(cluster = self.cluster(), controller = self.name(), handler = %h.name, %key, error = %e, "handler error ignored; not requeuing");
                    ignored = true;
                }
                Ok(HandlerResult::Error(e)) => {
                    tracing::error!(cluster = self.cluster(), controller = self.name(), handler = %h.name, %key, error = %e, "handler failed; requeuing");
                    failed = true;
                }
            }
        }
        m.time.observe(started.elapsed().as_secs_f64());
        m.active_workers.dec();
        let q = &self.inner.queue;
        if failed {
            q.add_rate_limited(key.clone());
            m.errors.inc();
            m.total_error.inc();
        } else if let Some(d) = requeue_after {
            q.forget(key);
            q.add_after(key.clone(), d);
            m.total_requeue_after.inc();
        } else {
            q.forget(key);
            if ignored {
                m.errors.inc();
                m.terminal_errors.inc();
                m.total_error.inc();
            } else {
                m.total_success.inc();
            }
        }
    }

    /// Stops taking keys, waits up to `timeout` for running handlers, then aborts what is left.
    /// Returns true if every running handler finished in time.
    pub async fn shutdown(&self, timeout: Duration) -> bool {
        let drained = self.inner.queue.drain(timeout).await;
        self.inner.token.cancel();
        drained
    }
}

impl<K: CacheObject> std::fmt::Debug for SharedController<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedController")
            .field("cluster", &self.cluster())
            .field("name", &self.name())
            .field("workers", &self.workers())
            .finish()
    }
}
