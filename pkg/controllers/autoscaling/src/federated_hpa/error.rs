//! The controller's error, [`FhpaError`].

/// A FederatedHPA controller failure (what the sync returns; Events carry the details).
#[derive(Debug, thiserror::Error)]
pub enum FhpaError {
    /// The framework failed.
    #[error(transparent)]
    Framework(#[from] karmada_controllers_common::error::FrameworkError),
    /// One step of the sync failed; the message names the FederatedHPA's target and the cause.
    #[error("{0}")]
    Sync(String),
}
