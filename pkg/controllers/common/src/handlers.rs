//! How a controller starts: [`ControllerContext::wiring`] (lariat's [`Wiring`] with the
//! context's cache-sync timeout, cancellation and readiness filled in), the shared controllers it
//! gets ([`shared_controller`], [`template_controller`]) and its [`StartFn`] ([`start_fn_of`]).
//!
//! A controller's `run` reads as a declaration:
//!
//! ```ignore
//! ctx.wiring("binding controller", &self)
//!     .waits_for(&works)                      // read by the handlers: complete first
//!     .handles(&bindings, NAME, |this: Self, key, obj| async move { this.handle(key, obj).await })
//!     .run()                                  // waits for the bindings, reports synced, serves
//!     .await?;
//! ```

use std::future::Future;
use std::sync::Arc;

use kube::Resource;
use kube::api::{ApiResource, DynamicObject};
use lariat::cache::CacheObject;
use lariat::{SharedController, Wiring};

use crate::context::{BoxError, ControllerContext, StartFn};
use crate::error::{FrameworkError, framework};

impl ControllerContext {
    /// The start-up of the controller `this`, named `what` in its "synced" and "stopped" log
    /// lines: caches are waited for up to `--cluster-cache-sync-timeout`, everything stops when
    /// the context is cancelled (or the token given to [`Wiring::cancelled_by`]), and being synced
    /// is reported to the manager's readiness.
    pub fn wiring<T>(&self, what: impl Into<String>, this: &T) -> Wiring<T>
    where
        T: Clone + Send + Sync + 'static,
    {
        let synced = self.synced.clone();
        Wiring::new(
            what,
            this.clone(),
            &self.cancel,
            self.settings.cluster_cache_sync_timeout,
        )
        .on_synced(move || synced.synced())
    }
}

/// The control plane's *dynamic* shared controller of `K`'s kind: the one the resource detector
/// gets for the kind through discovery, so a controller that reads resource templates of a built-in
/// kind (Deployments, HPAs…) shares the detector's watch. A typed controller of the same kind would
/// make the kind unwatchable for the detector: a cache holds one representation per kind.
pub fn template_controller<K>(
    cp: &lariat::Cluster,
) -> Result<SharedController<DynamicObject>, FrameworkError>
where
    K: Resource<DynamicType = ()>,
{
    cp.controllers()
        .for_resource(&ApiResource::erase::<K>(&()))
        .map_err(framework(format!("{} controller", K::kind(&()))))
}

/// The control plane's shared controller of kind `K`; the error names it (`"<Kind> controller"`).
pub fn shared_controller<K>(cp: &lariat::Cluster) -> Result<SharedController<K>, FrameworkError>
where
    K: CacheObject,
    K::DynamicType: Default,
{
    cp.controllers().for_kind::<K>().map_err(framework(format!(
        "{} controller",
        K::kind(&K::DynamicType::default())
    )))
}

/// The [`StartFn`] of a controller that `new` builds from its context and `run` drives until the
/// context is cancelled: the one shape of every controller's `start_fn`.
pub fn start_fn_of<C, E, Fut>(
    new: fn(ControllerContext) -> Result<C, E>,
    run: fn(C) -> Fut,
) -> StartFn
where
    C: Send + 'static,
    E: Into<BoxError> + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
{
    Arc::new(move |ctx| {
        Box::pin(async move {
            let controller = new(ctx).map_err(Into::into)?;
            run(controller).await
        })
    })
}
