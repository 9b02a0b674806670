//! The controller's error, [`BindingError`], and the helpers that build it.

use karmada_controllers_common::error::ApiError;

/// A binding-controller failure.
#[derive(Debug, thiserror::Error)]
pub enum BindingError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// The interpreter rejected the template.
    #[error("{kind} {key} for cluster {cluster}: {source}")]
    Interpret {
        /// Template kind.
        kind: String,
        /// Template key.
        key: String,
        /// Target cluster.
        cluster: String,
        /// Why.
        #[source]
        source: karmada_interpreter::InterpretError,
    },
    /// Some clusters failed; the message lists each.
    #[error("{0}")]
    Clusters(String),
}

karmada_controllers_common::core_error_from!(BindingError);

pub(super) fn api_err(
    action: &'static str,
    kind: &str,
    key: &str,
) -> impl FnOnce(kube::Error) -> BindingError {
    let kind = kind.to_owned();
    let key = key.to_owned();
    move |source| ApiError::new(action, kind, key, source).into()
}

/// The interpreter rejected template `kind key` for `cluster` (empty: for every cluster).
pub(super) fn interpret_error(
    kind: &str,
    key: &str,
    cluster: &str,
    source: karmada_interpreter::InterpretError,
) -> BindingError {
    BindingError::Interpret {
        kind: kind.to_owned(),
        key: key.to_owned(),
        cluster: cluster.to_owned(),
        source,
    }
}
