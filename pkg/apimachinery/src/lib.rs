//! Kubernetes value helpers that know nothing about Karmada: what Go code gets from
//! `k8s.io/apimachinery` and `k8s.io/client-go` (resource quantities and lists, status conditions,
//! apiVersion splitting, API error classes, retry on conflict, resourceVersion order) and Go's
//! `encoding/json` escaping.
//! One implementation of each, so every controller and library reads and writes these values the
//! way Kubernetes does.

pub mod conditions;
#[cfg(feature = "client")]
pub mod errors;
pub mod gvk;
pub mod json;
pub mod quantity;
pub mod resource_list;
pub mod resource_version;
#[cfg(feature = "client")]
pub mod retry;

pub use conditions::{find_status_condition, remove_status_condition, set_status_condition};
#[cfg(feature = "client")]
pub use errors::{is_already_exists, is_conflict, is_not_found};
#[cfg(feature = "client")]
pub use gvk::gvk_of;
pub use gvk::split_api_version;
pub use json::go_escape_json;
pub use quantity::{Format, Quantity, QuantityError};
#[cfg(feature = "client")]
pub use retry::{Backoff, ConflictRetry, DEFAULT_RETRY, RetryError, retry_on_conflict};

/// The boxed error type used where any error may flow (tasks, tower services, controller
/// futures): one definition for the whole workspace.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;
