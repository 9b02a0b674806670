//! The controller's error, [`SchedulerError`].

use karmada_controllers_common::error::{ApiError, FrameworkError};
use karmada_scheduler::ScheduleError;

/// A scheduler failure.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    /// An API request failed.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// Scheduling failed in a way that is retried.
    #[error("schedule {kind} {key}: {source}")]
    Schedule {
        /// Binding kind.
        kind: String,
        /// Binding key.
        key: String,
        /// Why.
        #[source]
        source: ScheduleError,
    },
    /// The scheduler estimator client could not be set up (its TLS files).
    #[error(transparent)]
    Estimator(#[from] super::estimator::EstimatorError),
    /// The framework could not provide a controller, cache or client.
    #[error(transparent)]
    Framework(#[from] FrameworkError),
}

impl SchedulerError {
    /// Whether the API server refused a write because the binding changed meanwhile (409).
    pub fn is_conflict(&self) -> bool {
        matches!(self, SchedulerError::Api(e) if apimachinery::is_conflict(&e.source))
    }
}
