//! The controller's error, [`BindingStatusError`]: every variant names the object and the cause.

use karmada_apis::names;

/// A binding-status failure; every variant names the object and the cause.
#[derive(Debug, thiserror::Error)]
pub enum BindingStatusError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// A Work of the binding has no manifest for the binding's template.
    #[error("Work {work} of {binding}: no manifest for {template}")]
    NoManifest {
        /// `namespace/name` of the Work.
        work: String,
        /// Kind and key of the binding.
        binding: String,
        /// Kind and key of the template.
        template: String,
    },
    /// A Work of the binding lives outside an execution namespace.
    #[error("Work {work} of {binding}: {source}")]
    NotExecutionSpace {
        /// `namespace/name` of the Work.
        work: String,
        /// Kind and key of the binding.
        binding: String,
        /// Why the namespace names no cluster.
        #[source]
        source: names::NameError,
    },
    /// The interpreter could not aggregate the template's status.
    #[error("aggregate status of {template}: {source}")]
    Aggregate {
        /// Kind and key of the template.
        template: String,
        /// The interpreter's error.
        #[source]
        source: karmada_interpreter::InterpretError,
    },
    /// A status write kept conflicting.
    #[error("update status of {kind} {key}: still conflicting after {attempts} attempts")]
    Conflicts {
        /// Kind of the object.
        kind: String,
        /// `namespace/name` or `name`.
        key: String,
        /// Attempts made.
        attempts: u32,
    },
}

karmada_controllers_common::core_error_from!(BindingStatusError);
