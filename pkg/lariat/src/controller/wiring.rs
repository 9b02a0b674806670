//! One way to wire a controller: declare once which shared controllers it handles and which
//! caches it waits for, then one [`run`](Wiring::run) registers the handlers, waits for the
//! caches, reports synced and serves until cancelled.
//!
//! In the spirit of kube-runtime's `Controller::new(..).owns(..).watches(..).run(..)`, but on
//! shared controllers: the handlers are registered on controllers other controllers share, and
//! the wiring owns nothing but the order of the start-up steps.
//!
//! ```no_run
//! # async fn demo(host: lariat::Cluster, cancel: tokio_util::sync::CancellationToken) -> lariat::Result<()> {
//! use std::{sync::Arc, time::Duration};
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret};
//! use lariat::{HandlerResult, ObjectKey, Wiring};
//!
//! #[derive(Clone)]
//! struct Mirror; // a controller is cheap to clone: each event gets its own clone
//!
//! let secrets = host.controllers().for_kind::<Secret>()?;
//! let configmaps = host.controllers().for_kind::<ConfigMap>()?;
//! Wiring::new("mirror controller", Mirror, &cancel, Duration::from_secs(120))
//!     // read by the handler below: complete before it sees its first key
//!     .waits_for(&secrets)
//!     .handles(&configmaps, "mirror", |_m: Mirror, _k: ObjectKey, _o: Option<Arc<ConfigMap>>| async {
//!         HandlerResult::Success
//!     })
//!     .on_synced(|| { /* readiness */ })
//!     .run() // waits for the ConfigMap cache too, then serves until `cancel`
//!     .await
//! # }
//! ```
//!
//! The steps run in the order they are declared: a [`waits_for`](Wiring::waits_for) waits at its
//! place, so the handlers declared after it start on a complete cache; a
//! [`handles`](Wiring::handles) registers at its place (registering on a synced cache replays every
//! object, so a late handler misses nothing). After the last step every handled cache is waited
//! for, then the controller is synced. When the cancellation token fires before that, `run`
//! returns `Ok` without reporting synced: the controller is stopping, not failing.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::api::DynamicObject;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::handler::HandlerResult;
use super::shared::SharedController;
use crate::cache::{CacheObject, SyncWait};
use crate::error::Result;
use crate::key::ObjectKey;

/// Waits for one cache: the shared controller's `wait_synced`, its type erased.
type WaitFn =
    Box<dyn FnOnce(CancellationToken, Duration) -> BoxFuture<'static, Result<SyncWait>> + Send>;

/// Registers one handler, removed when the token fires.
type RegisterFn<T> = Box<dyn FnOnce(&T, &CancellationToken) + Send>;

/// The callback told the controller is synced.
type SyncedFn = Box<dyn FnOnce() + Send>;

/// One start-up step, run in declaration order.
enum Step<T> {
    /// Wait for a cache.
    Wait(WaitFn),
    /// Register a handler, removed when the token fires.
    Register(RegisterFn<T>),
    /// Run a closure (typically: publish what the waits before it made complete).
    Then(Box<dyn FnOnce(&T) + Send>),
}

/// A controller's start-up, declared once: see the [module docs](self).
#[must_use = "a wiring does nothing until `run` or `sync` is awaited"]
pub struct Wiring<T> {
    what: String,
    this: T,
    cancel: CancellationToken,
    timeout: Duration,
    steps: Vec<Step<T>>,
    handled: Vec<WaitFn>,
    report_to: Option<SyncedFn>,
    resync: Option<Resync<T>>,
}

/// A closure called once synced and then every `period`.
struct Resync<T> {
    period: Duration,
    call: Box<dyn FnMut(&T) + Send>,
}

impl<T: Clone + Send + Sync + 'static> Wiring<T> {
    /// The start-up of the controller `this` (cheap to clone: each handler call gets a clone), named
    /// `what` in its "synced" and "stopped" log lines. Each cache wait lasts at most `timeout`
    /// (an error naming the cache when exceeded); everything stops when `cancel` fires.
    pub fn new(
        what: impl Into<String>,
        this: T,
        cancel: &CancellationToken,
        timeout: Duration,
    ) -> Self {
        Wiring {
            what: what.into(),
            this,
            cancel: cancel.clone(),
            timeout,
            steps: Vec::new(),
            handled: Vec::new(),
            report_to: None,
            resync: None,
        }
    }

    /// Waits for and serves until `cancel` instead (a controller's own child token); handlers are
    /// removed when it fires.
    pub fn cancelled_by(mut self, cancel: &CancellationToken) -> Self {
        self.cancel = cancel.clone();
        self
    }

    /// Waits for `controller`'s cache at this point: what its handlers, or the ones declared after
    /// this, read must be complete before they run.
    pub fn waits_for<K: CacheObject>(mut self, controller: &SharedController<K>) -> Self {
        self.steps.push(Step::Wait(wait_fn(controller)));
        self
    }

    /// Registers `handle` on `controller` as `name` at this point, with a clone of `this` for each
    /// call; `controller`'s cache is waited for after the last step.
    pub fn handles<K, F, Fut>(
        mut self,
        controller: &SharedController<K>,
        name: &str,
        handle: F,
    ) -> Self
    where
        K: CacheObject,
        F: Fn(T, ObjectKey, Option<Arc<K>>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult<K>> + Send + 'static,
    {
        let ctrl = controller.clone();
        let name = name.to_owned();
        self.steps.push(Step::Register(Box::new(
            move |this: &T, cancel: &CancellationToken| {
                let this = this.clone();
                ctrl.register_handler(&name, cancel.clone(), move |k, o| {
                    handle(this.clone(), k, o)
                });
            },
        )));
        self.handled.push(wait_fn(controller));
        self
    }

    /// [`handles`](Self::handles) on a dynamic controller whose objects are of kind `K`: `handle`
    /// gets each object parsed as `K`. An object that does not parse (not possible for what an API
    /// server serves as `K`) is an ignored error naming it.
    pub fn handles_typed<K, F, Fut>(
        self,
        controller: &SharedController<DynamicObject>,
        name: &str,
        handle: F,
    ) -> Self
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        F: Fn(T, ObjectKey, Option<Arc<K>>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult<DynamicObject>> + Send + 'static,
    {
        self.handles(
            controller,
            name,
            move |this: T, key, obj: Option<Arc<DynamicObject>>| {
                let handled = parse::<K>(obj).map(|typed| handle(this, key, typed));
                async move {
                    match handled {
                        Ok(fut) => fut.await,
                        Err(e) => HandlerResult::ignore(e),
                    }
                }
            },
        )
    }

    /// Calls `f` with `this` at this point, once the waits declared before it are done: to
    /// publish what they made complete before the handlers declared after it run.
    pub fn then(mut self, f: impl FnOnce(&T) + Send + 'static) -> Self {
        self.steps.push(Step::Then(Box::new(f)));
        self
    }

    /// Called once when the controller is synced (every declared cache complete), before it
    /// serves: where the process learns the controller is ready.
    pub fn on_synced(mut self, synced: impl FnOnce() + Send + 'static) -> Self {
        self.report_to = Some(Box::new(synced));
        self
    }

    /// While serving, calls `resync` once synced and then every `period` (a late tick is delayed,
    /// not doubled): for what no event brings back, such as handlers on member caches made anew.
    pub fn resync_every(
        mut self,
        period: Duration,
        resync: impl FnMut(&T) + Send + 'static,
    ) -> Self {
        self.resync = Some(Resync {
            period,
            call: Box::new(resync),
        });
        self
    }

    /// Runs the steps and waits for every handled cache. `None` when cancelled first (the
    /// handlers registered by then are removed by the cancellation). Nothing is reported: the
    /// returned [`Synced`] reports and serves, for a controller that does more in between.
    pub async fn sync(self) -> Result<Option<Synced<T>>> {
        let Wiring {
            what,
            this,
            cancel,
            timeout,
            steps,
            handled,
            report_to,
            resync,
        } = self;
        for step in steps {
            match step {
                Step::Wait(wait) => {
                    if wait(cancel.clone(), timeout).await?.is_cancelled() {
                        return Ok(None);
                    }
                }
                Step::Register(register) => register(&this, &cancel),
                Step::Then(f) => f(&this),
            }
        }
        for wait in handled {
            if wait(cancel.clone(), timeout).await?.is_cancelled() {
                return Ok(None);
            }
        }
        Ok(Some(Synced {
            what,
            this,
            cancel,
            report_to,
            reported: false,
            resync,
        }))
    }

    /// [`sync`](Self::sync), then reports synced and serves until cancelled. `Ok` when cancelled,
    /// before or after the caches synced; an error when a cache did not sync in time.
    pub async fn run(self) -> Result<()> {
        if let Some(synced) = self.sync().await? {
            synced.serve().await;
        }
        Ok(())
    }
}

/// A wired controller whose caches are synced: reports it and serves.
#[must_use = "a synced controller reports nothing until `report` or `serve`"]
pub struct Synced<T> {
    what: String,
    this: T,
    cancel: CancellationToken,
    report_to: Option<SyncedFn>,
    reported: bool,
    resync: Option<Resync<T>>,
}

impl<T> Synced<T> {
    /// Calls the synced callback and logs "`<what>` synced" (once; later calls do nothing).
    pub fn report(&mut self) {
        if self.reported {
            return;
        }
        self.reported = true;
        if let Some(synced) = self.report_to.take() {
            synced();
        }
        tracing::info!("{} synced", self.what);
    }

    /// Reports synced (if not yet), serves until cancelled (calling the resync closure, if any),
    /// then logs "`<what>` stopped".
    pub async fn serve(mut self) {
        self.report();
        match self.resync.take() {
            Some(Resync { period, mut call }) => {
                let mut tick = tokio::time::interval(period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        () = self.cancel.cancelled() => break,
                        _ = tick.tick() => call(&self.this),
                    }
                }
            }
            None => self.cancel.cancelled().await,
        }
        tracing::info!("{} stopped", self.what);
    }
}

fn wait_fn<K: CacheObject>(controller: &SharedController<K>) -> WaitFn {
    let controller = controller.clone();
    Box::new(move |cancel, timeout| {
        async move { controller.wait_synced(&cancel, timeout).await }.boxed()
    })
}

/// `obj` parsed as `K`; the error names the object.
fn parse<K>(obj: Option<Arc<DynamicObject>>) -> std::result::Result<Option<Arc<K>>, String>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    obj.map(|o| {
        let id = format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any());
        Arc::unwrap_or_clone(o)
            .try_parse::<K>()
            .map(Arc::new)
            .map_err(|e| format!("{} {id}: {e}", K::kind(&())))
    })
    .transpose()
}

#[cfg(test)]
mod tests;
