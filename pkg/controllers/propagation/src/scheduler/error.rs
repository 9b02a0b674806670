//! The controller's error, [`SchedulerError`].

use karmada_scheduler::ScheduleError;

/// A scheduler failure.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
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
}

karmada_controllers_common::core_error_from!(SchedulerError);

impl SchedulerError {
    /// Whether the API server refused a write because the binding changed meanwhile (409).
    pub fn is_conflict(&self) -> bool {
        matches!(self, SchedulerError::Core(core) if core.is_conflict())
    }
}
