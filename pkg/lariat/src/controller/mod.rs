//! Shared controllers: one queue and worker pool per (cluster, kind, scope) with handlers
//! registered and removed at run time, and the [`Wiring`] a controller declares its start-up with.

pub mod factory;
pub mod handler;
pub mod shared;
pub mod wiring;
pub mod workers;

pub use factory::{ControllerFactory, ControllerOptions};
pub use handler::{Handler, HandlerResult};
pub use shared::{HandlerId, SharedController, current_priority};
pub use wiring::{Synced, Wiring};
pub use workers::{MAX_WORKERS, WorkerOptions};

#[cfg(test)]
mod tests;
