//! The start-up steps every controller takes: getting the shared controllers it watches,
//! registering its handlers on them, then reporting its caches synced and serving until it is
//! cancelled.

use std::future::Future;
use std::sync::Arc;

use karmada_apis::{ClusterResourceBinding, ResourceBinding};
use kube::api::{ApiResource, DynamicObject};
use kube::{Resource, ResourceExt};
use lariat::cache::CacheObject;
use lariat::{HandlerResult, ObjectKey, SharedController, SyncWait};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::context::{BoxError, ControllerContext, StartFn, SyncReporter};
use crate::error::{FrameworkError, framework};

/// Registers `handle` on `controller` as `name` until `cancel` fires. Each event gets its own
/// clone of `this` (a controller is cheap to clone), so the handler's future owns what it uses.
pub fn register<K, T, F, Fut>(
    controller: &SharedController<K>,
    name: &str,
    cancel: &CancellationToken,
    this: &T,
    handle: F,
) where
    K: CacheObject,
    T: Clone + Send + Sync + 'static,
    F: Fn(T, ObjectKey, Option<Arc<K>>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerResult<K>> + Send + 'static,
{
    let this = this.clone();
    controller.register_handler(name, cancel.clone(), move |k, o| handle(this.clone(), k, o));
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

/// [`register`] on a [`template_controller`]: `handle` gets the object parsed as `K`. An object
/// that does not parse (not possible for what the API server serves as `K`) is an ignored error
/// naming it.
pub fn register_typed<K, T, F, Fut>(
    controller: &SharedController<DynamicObject>,
    name: &str,
    cancel: &CancellationToken,
    this: &T,
    handle: F,
) where
    K: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
    F: Fn(T, ObjectKey, Option<Arc<K>>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerResult<DynamicObject>> + Send + 'static,
{
    register(
        controller,
        name,
        cancel,
        this,
        move |this: T, key: ObjectKey, obj: Option<Arc<DynamicObject>>| {
            let parsed = obj
                .map(|o| {
                    let id = format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any());
                    Arc::unwrap_or_clone(o)
                        .try_parse::<K>()
                        .map(Arc::new)
                        .map_err(|e| format!("{} {id}: {e}", K::kind(&())))
                })
                .transpose();
            let handled = parsed.map(|typed| handle(this, key, typed));
            async move {
                match handled {
                    Ok(fut) => fut.await,
                    Err(e) => HandlerResult::ignore(e),
                }
            }
        },
    );
}

/// Reports the controller's caches synced (readiness waits for it), then waits for `cancel`;
/// `what` names the controller in the two log lines.
pub async fn serve_until_cancelled(synced: &SyncReporter, cancel: &CancellationToken, what: &str) {
    synced.synced();
    tracing::info!("{what} synced");
    cancel.cancelled().await;
    tracing::info!("{what} stopped");
}

/// The `run` of a controller that, like Karmada's ResourceBinding/ClusterResourceBinding controller
/// pairs, handles both binding kinds: registers `rb` and `crb` (each a shared controller, its
/// handler name and handler) until `cancel` fires, waits for both caches, then reports synced and
/// serves until cancelled. Returns `Ok` early when cancelled before the caches synced.
pub async fn serve_bindings<T, FR, FutR, FC, FutC>(
    ctx: &ControllerContext,
    cancel: &CancellationToken,
    this: &T,
    rb: (&SharedController<ResourceBinding>, &str, FR),
    crb: (&SharedController<ClusterResourceBinding>, &str, FC),
    what: &str,
) -> Result<(), BoxError>
where
    T: Clone + Send + Sync + 'static,
    FR: Fn(T, ObjectKey, Option<Arc<ResourceBinding>>) -> FutR + Send + Sync + 'static,
    FutR: Future<Output = HandlerResult<ResourceBinding>> + Send + 'static,
    FC: Fn(T, ObjectKey, Option<Arc<ClusterResourceBinding>>) -> FutC + Send + Sync + 'static,
    FutC: Future<Output = HandlerResult<ClusterResourceBinding>> + Send + 'static,
{
    let (rbs, rb_name, rb_handle) = rb;
    let (crbs, crb_name, crb_handle) = crb;
    register(rbs, rb_name, cancel, this, rb_handle);
    register(crbs, crb_name, cancel, this, crb_handle);
    let timeout = ctx.settings.cluster_cache_sync_timeout;
    if !matches!(rbs.wait_synced(cancel, timeout).await?, SyncWait::Synced)
        || !matches!(crbs.wait_synced(cancel, timeout).await?, SyncWait::Synced)
    {
        return Ok(());
    }
    serve_until_cancelled(&ctx.synced, cancel, what).await;
    Ok(())
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

/// Waits for `controller`'s cache (up to `--cluster-cache-sync-timeout`), then reports synced and
/// serves until the context is cancelled: the rest of the life of a controller that watches one
/// kind, once its handler is registered.
pub async fn serve_when_synced<K: CacheObject>(
    controller: &SharedController<K>,
    ctx: &ControllerContext,
    what: &str,
) -> lariat::Result<()> {
    let timeout = ctx.settings.cluster_cache_sync_timeout;
    let SyncWait::Synced = controller.wait_synced(&ctx.cancel, timeout).await? else {
        return Ok(());
    };
    serve_until_cancelled(&ctx.synced, &ctx.cancel, what).await;
    Ok(())
}

/// Waits for `controller`'s cache (up to `--cluster-cache-sync-timeout`), reports synced, then
/// calls `resync` every `period` until `cancel` fires: the rest of the life of a controller that
/// watches members on demand, where `resync` re-arms the handlers of members connected anew (their
/// caches are new and carry none). `what` names the controller in the two log lines.
pub async fn serve_with_resync<K: CacheObject>(
    controller: &SharedController<K>,
    ctx: &ControllerContext,
    cancel: &CancellationToken,
    what: &str,
    period: std::time::Duration,
    mut resync: impl FnMut(),
) -> lariat::Result<()> {
    let timeout = ctx.settings.cluster_cache_sync_timeout;
    let SyncWait::Synced = controller.wait_synced(cancel, timeout).await? else {
        return Ok(());
    };
    ctx.synced.synced();
    tracing::info!("{what} synced");
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tick.tick() => resync(),
        }
    }
    tracing::info!("{what} stopped");
    Ok(())
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
