//! The controller's error, [`FhpaError`].

/// A FederatedHPA controller failure (what the sync returns; Events carry the details).
#[derive(Debug, thiserror::Error)]
pub enum FhpaError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// One step of the sync failed; the message names the FederatedHPA's target and the cause.
    #[error("{0}")]
    Sync(String),
}

karmada_controllers_common::core_error_from!(FhpaError);
