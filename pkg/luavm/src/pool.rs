//! The threads every Lua call runs on: a fixed, process-wide pool, so Lua never runs on an
//! async runtime's worker threads and at most [`size`] scripts run at once (which also bounds
//! the memory all running scripts hold: pool size × the memory limit).
//!
//! A caller hands a job and waits for its answer at most the job's deadline plus a little
//! slack; inside a multi-threaded tokio runtime the wait is `block_in_place`, so the runtime
//! moves its other tasks (lease renewal among them) to other threads meanwhile. A job still
//! queued when its queueing deadline passes is dropped unrun ([`Outcome::Busy`]).

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// Stack of each pool thread: room for the matcher's bounded recursion and the converters.
const STACK: usize = 16 << 20;
/// Most threads, whatever the machine.
const MAX_THREADS: usize = 4;
/// Jobs that may wait for a thread; more are refused at once ([`Outcome::Busy`]).
const MAX_QUEUED: usize = 1024;

type Job = Box<dyn FnOnce() + Send>;

struct Queued {
    job: Job,
    /// When the job stops being worth starting.
    start_by: Instant,
    /// Tells the caller the job was dropped unrun.
    expired: Box<dyn FnOnce() + Send>,
}

struct Pool {
    queue: Mutex<std::collections::VecDeque<Queued>>,
    ready: Condvar,
    size: usize,
}

/// How many threads run Lua: the machine's parallelism, between 2 and [`MAX_THREADS`].
pub fn size() -> usize {
    pool().map_or(0, |p| p.size)
}

fn pool() -> Option<&'static Arc<Pool>> {
    static POOL: OnceLock<Option<Arc<Pool>>> = OnceLock::new();
    POOL.get_or_init(|| {
        let size = std::thread::available_parallelism()
            .map_or(2, usize::from)
            .clamp(2, MAX_THREADS);
        let pool = Arc::new(Pool {
            queue: Mutex::new(std::collections::VecDeque::new()),
            ready: Condvar::new(),
            size,
        });
        let mut started = 0;
        for i in 0..size {
            let p = pool.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("lua-{i}"))
                .stack_size(STACK)
                .spawn(move || work(&p));
            match spawned {
                Ok(_) => started += 1,
                Err(e) => tracing::error!(error = %e, "cannot start a Lua thread"),
            }
        }
        (started > 0).then_some(pool)
    })
    .as_ref()
}

fn work(pool: &Pool) {
    loop {
        let next = {
            let mut queue = pool.queue.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                match queue.pop_front() {
                    Some(q) => break q,
                    None => {
                        queue = pool
                            .ready
                            .wait(queue)
                            .unwrap_or_else(PoisonError::into_inner);
                    }
                }
            }
        };
        if Instant::now() > next.start_by {
            (next.expired)();
        } else {
            // A job never panics by design; should one, the thread lives on.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(next.job));
        }
    }
}

/// What became of a job.
#[derive(Debug)]
pub enum Outcome<T> {
    /// It ran and answered.
    Done(T),
    /// It waited in the queue past its start deadline (or the queue was full) and never ran.
    Busy,
    /// It did not answer within the caller's wait (it may still be running).
    NoAnswer,
}

/// Runs `job` on the pool: it must start within `queue_wait` and is expected to finish within
/// `run` once started; the caller waits at most `queue_wait + run + slack`.
pub fn run<T: Send + 'static>(
    queue_wait: Duration,
    run: Duration,
    job: impl FnOnce() -> T + Send + 'static,
) -> Outcome<T> {
    let Some(pool) = pool() else {
        // No thread could be started: run here rather than not at all.
        return Outcome::Done(job());
    };
    let (tx, rx): (SyncSender<Option<T>>, Receiver<Option<T>>) = sync_channel(1);
    let expired_tx = tx.clone();
    let queued = Queued {
        job: Box::new(move || {
            let _ = tx.send(Some(job()));
        }),
        start_by: Instant::now() + queue_wait,
        expired: Box::new(move || {
            let _ = expired_tx.send(None);
        }),
    };
    {
        let mut queue = pool.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if queue.len() >= MAX_QUEUED {
            return Outcome::Busy;
        }
        queue.push_back(queued);
    }
    pool.ready.notify_one();
    let limit = queue_wait + run + Duration::from_millis(500);
    let wait = || rx.recv_timeout(limit);
    let got = match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(wait)
        }
        _ => wait(),
    };
    match got {
        Ok(Some(answer)) => Outcome::Done(answer),
        Ok(None) => Outcome::Busy,
        Err(_) => Outcome::NoAnswer,
    }
}
