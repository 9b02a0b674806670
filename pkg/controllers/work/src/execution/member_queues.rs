//! One work queue and worker pool per connected member, so one member cannot stall the others.
//!
//! The shared Work queue is fed by every execution space; if its workers talked to members
//! themselves, a member that accepts connections but never answers would hold every worker until
//! each request's deadline passed, and propagation to healthy members would wait behind it. So the
//! shared Work handler only routes a Work's key to its member's queue, and that queue's workers
//! (`--concurrent-work-syncs` per member) do the member I/O, with their own per-key backoff. A
//! hung member then stalls only its own queue.
//!
//! A member's queue lives as long as its connection: its workers run under the member's
//! cancellation token, and a reconnected member gets a fresh queue (the controller requeues the
//! member's Works when it connects, so nothing queued on the old one is lost).

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use lariat::{ObjectKey, RateLimiterOptions, WorkQueue};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// How often the unfinished-work gauges are refreshed (client-go: 500 ms).
const UNFINISHED_WORK_PERIOD: Duration = Duration::from_millis(500);

/// Reconciles one Work key of a member; `false` requeues the key with backoff.
pub type Reconcile = Arc<dyn Fn(String, ObjectKey) -> BoxFuture<'static, bool> + Send + Sync>;

struct MemberQueue {
    queue: WorkQueue<ObjectKey>,
    /// The member connection's token: cancelled when it is disconnected or reconnected.
    token: CancellationToken,
}

/// The per-member queues of one controller.
pub struct MemberQueues {
    name: &'static str,
    workers: usize,
    rate_limiter: RateLimiterOptions,
    reconcile: Reconcile,
    queues: Mutex<HashMap<String, MemberQueue>>,
}

impl MemberQueues {
    /// Queues named `name` (the `name` label of their work-queue metrics, with the member as
    /// `cluster`), each with `workers` workers running `reconcile`.
    pub fn new<F, Fut>(
        name: &'static str,
        workers: usize,
        rate_limiter: RateLimiterOptions,
        reconcile: F,
    ) -> Self
    where
        F: Fn(String, ObjectKey) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = bool> + Send + 'static,
    {
        let reconcile: Reconcile = Arc::new(move |c, k| Box::pin(reconcile(c, k)));
        MemberQueues {
            name,
            workers: workers.max(1),
            rate_limiter,
            reconcile,
            queues: Mutex::new(HashMap::new()),
        }
    }

    /// Queues `key` on `member`'s queue, starting the queue and its workers on first use (or
    /// after the member was reconnected). The key keeps the priority of the Work key being handled
    /// (a Work replayed after a start waits behind live changes here too).
    pub fn add(&self, member: &lariat::Cluster, key: ObjectKey) {
        let priority = lariat::current_priority();
        let token = member.context().token();
        let mut queues = self.queues.lock();
        // A reconnected member was disconnected first, which cancelled the old queue's token.
        if let Some(q) = queues.get(member.name())
            && !q.token.is_cancelled()
        {
            q.queue.add_with_priority(key, priority);
            return;
        }
        if token.is_cancelled() {
            // Disconnected meanwhile; the controller requeues the member's Works on reconnect.
            return;
        }
        let queue = self.start(member);
        queue.add_with_priority(key, priority);
        queues.insert(
            member.name().to_owned(),
            MemberQueue {
                queue,
                token: token.clone(),
            },
        );
    }

    fn start(&self, member: &lariat::Cluster) -> WorkQueue<ObjectKey> {
        let name = member.name().to_owned();
        let queue: WorkQueue<ObjectKey> = WorkQueue::new(
            self.name,
            self.rate_limiter.build(),
            member.metrics().queue(self.name),
        );
        tracing::debug!(cluster = %name, workers = self.workers, queue = self.name, "starting member work queue");
        let ctx = member.context();
        for _ in 0..self.workers {
            let queue = queue.clone();
            let reconcile = self.reconcile.clone();
            let name = name.clone();
            // Dropped at its next await once the member is disconnected.
            ctx.spawn(async move {
                while let Some(key) = queue.get().await {
                    // A panic fails this key (retried with backoff) instead of ending the worker
                    // for the rest of the connection, as the shared controllers' workers do.
                    let done = AssertUnwindSafe(reconcile(name.clone(), key.clone()))
                        .catch_unwind()
                        .await
                        .unwrap_or_else(|_| {
                            tracing::error!(cluster = %name, %key, "member work panicked; requeuing");
                            false
                        });
                    if done {
                        queue.forget(&key);
                    } else {
                        queue.add_rate_limited(key.clone());
                    }
                    queue.done(&key);
                }
            });
        }
        let q = queue.clone();
        ctx.spawn(async move {
            let mut tick = tokio::time::interval(UNFINISHED_WORK_PERIOD);
            loop {
                tick.tick().await;
                q.update_unfinished_work();
            }
        });
        let q = queue.clone();
        let token = ctx.token().clone();
        tokio::spawn(async move {
            token.cancelled().await;
            q.shut_down();
        });
        queue
    }
}
