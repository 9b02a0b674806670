//! Shared caches: one watch per (cluster, kind, scope), `Arc`ed and transformed objects, secondary
//! indexes, lazy start.

pub mod factory;
pub mod informer;
mod namespaced;
pub mod scope;
pub mod store;
pub mod transform;

pub use factory::{CacheFactory, CacheOptions};
pub use informer::{Cache, CacheObject, Resolver, Subscriber, SyncWait};
pub use scope::{CacheKey, CacheScope};
pub use store::{Applied, IndexFn, NAMESPACE_INDEX, Packing, Store, SyncState, label_index_name};
pub use transform::{LAST_APPLIED_ANNOTATION, Strip, Transform, strip_for_cache};
