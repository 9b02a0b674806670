//! The rollout controller's errors, each naming the workload and the cause.

/// A failed rollout sync.
#[derive(Debug, thiserror::Error)]
pub enum RolloutError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// An API call failed.
    #[error("{action} {what}: {source}")]
    Api {
        /// What was being done (`get`, `create`, `patch status of`…).
        action: &'static str,
        /// The object, `Kind namespace/name`.
        what: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The template could not be encoded.
    #[error("{what}: cannot encode template: {source}")]
    Encode {
        /// The template.
        what: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
}

karmada_controllers_common::core_error_from!(RolloutError);

/// A mapper to [`RolloutError::Api`].
pub(super) fn api_err(
    action: &'static str,
    what: String,
) -> impl FnOnce(kube::Error) -> RolloutError {
    move |source| RolloutError::Api {
        action,
        what,
        source,
    }
}
