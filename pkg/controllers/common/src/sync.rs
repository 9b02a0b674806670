//! Waiting for a controller's cache before its first reconcile.

use std::time::Duration;

use lariat::SharedController;
use tokio_util::sync::CancellationToken;

/// Waits until `controller`'s cache has synced. `Ok(false)` when cancelled first.
pub async fn wait_synced<K: lariat::cache::CacheObject>(
    cancel: &CancellationToken,
    controller: &SharedController<K>,
    timeout: Duration,
) -> Result<bool, lariat::Error> {
    let _ = controller.store();
    tokio::select! {
        _ = cancel.cancelled() => Ok(false),
        r = controller.cache().wait_for_sync(timeout) => r.map(|()| true),
    }
}
