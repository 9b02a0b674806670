//! Handlers: what controllers register on a shared controller.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;

use crate::error::BoxError;
use crate::key::ObjectKey;

/// What a handler says about one key.
#[derive(Debug)]
pub enum HandlerResult<K> {
    /// Done; the key is forgotten by the rate limiter.
    Success,
    /// Done, and this is the object the next handler of the key should see.
    Updated(Arc<K>),
    /// Done for now; process the key again after this delay.
    RequeueAfter(Duration),
    /// Failed in a way retrying cannot fix: recorded as an error, the key is not requeued
    /// (Lasso's `ErrIgnore`, controller-runtime's `TerminalError`).
    Ignore(BoxError),
    /// Failed: the key is requeued with per-key exponential backoff.
    Error(BoxError),
}

impl<K> HandlerResult<K> {
    /// `Error` from any error type.
    pub fn error(e: impl Into<BoxError>) -> Self {
        Self::Error(e.into())
    }

    /// `Ignore` from any error type.
    pub fn ignore(e: impl Into<BoxError>) -> Self {
        Self::Ignore(e.into())
    }
}

impl<K, E: Into<BoxError>> From<Result<(), E>> for HandlerResult<K> {
    fn from(r: Result<(), E>) -> Self {
        match r {
            Ok(()) => Self::Success,
            Err(e) => Self::Error(e.into()),
        }
    }
}

/// A handler: called with the key and the cached object, `None` when the object was deleted.
pub trait Handler<K>: Send + Sync + 'static {
    /// Handles one key.
    fn call(&self, key: ObjectKey, obj: Option<Arc<K>>) -> BoxFuture<'static, HandlerResult<K>>;
}

impl<K, F, Fut> Handler<K> for F
where
    F: Fn(ObjectKey, Option<Arc<K>>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerResult<K>> + Send + 'static,
{
    fn call(&self, key: ObjectKey, obj: Option<Arc<K>>) -> BoxFuture<'static, HandlerResult<K>> {
        self(key, obj).boxed()
    }
}
