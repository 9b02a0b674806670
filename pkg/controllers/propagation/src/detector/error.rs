//! Errors of the detector; each names the object it is about and the cause.

use karmada_controllers_common::error::{ApiError, CoreError};

/// A detector failure.
#[derive(Debug, thiserror::Error)]
pub enum DetectorError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] CoreError),
    /// No policy matches the template (retried once; then it waits for a policy).
    #[error("no matched propagation policy for {kind} {key}")]
    NoMatchedPolicy {
        /// Kind of the template.
        kind: String,
        /// `namespace/name` or `name`.
        key: String,
    },
    /// The claiming policy is being deleted; its claim is cleaned up first.
    #[error("{policy} is being deleted")]
    PolicyDeleting {
        /// The policy, e.g. `policy(ns/name)`.
        policy: String,
    },
    /// Override policies the policy depends on do not exist yet.
    #[error("waiting for dependent overrides of {policy}: {missing} not found")]
    DependentOverrides {
        /// The policy.
        policy: String,
        /// The first missing override policy.
        missing: String,
    },
    /// The binding exists but belongs to another object with the same name (Karmada issue #2090).
    #[error(
        "{kind} {key} is controlled by uid {owner}, not by template uid {template}; will try again after it is garbage collected"
    )]
    OwnerMismatch {
        /// Binding kind.
        kind: &'static str,
        /// Binding key.
        key: String,
        /// UID of the binding's controller.
        owner: String,
        /// UID of the template.
        template: String,
    },
    /// The interpreter could not read the template's replicas.
    #[error("get replicas: {0}")]
    Replicas(#[from] karmada_interpreter::InterpretError),
    /// The interpreter could not read the template's components (gate
    /// `MultiplePodTemplatesScheduling`).
    #[error("get components: {0}")]
    Components(#[source] karmada_interpreter::InterpretError),
    /// The template's components cannot go into a binding (Karmada's ResourceBinding webhook
    /// refuses them under gate `MultiplePodTemplatesScheduling`).
    #[error("{kind} {key}: {why}")]
    InvalidComponents {
        /// Kind of the template.
        kind: String,
        /// `namespace/name` or `name` of the template.
        key: String,
        /// Every invalid field, as Karmada's webhook lists them.
        why: String,
    },
    /// A kind's ApiResource is not known (not discovered yet).
    #[error("kind {kind}.{group} is not discovered (yet)")]
    UnknownKind {
        /// API group.
        group: String,
        /// Kind.
        kind: String,
    },
    /// An object could not be converted.
    #[error("convert {what}: {source}")]
    Convert {
        /// What was converted.
        what: String,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// The binding differs from the template only in the template's resourceVersion, and the
    /// Work cache that tells whether its Works are current has not listed yet: the template
    /// waits for that list rather than rewriting the binding (a restart writes nothing).
    #[error("{kind} {key}: waiting for the Work cache's first list")]
    WorksNotListed {
        /// Binding kind.
        kind: String,
        /// Binding key.
        key: String,
    },
    /// A write kept conflicting with concurrent writers.
    #[error("write {kind} {key}: conflict retries exhausted")]
    ConflictRetries {
        /// Kind of the object.
        kind: String,
        /// `namespace/name` or `name`.
        key: String,
    },
    /// Several failures (policy reconciles touch many objects).
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Many(Vec<DetectorError>),
}

karmada_controllers_common::core_error_from!(DetectorError);

impl DetectorError {
    /// An API error on `kind key`.
    pub fn api(
        action: &'static str,
        kind: impl Into<String>,
        key: impl Into<String>,
        source: kube::Error,
    ) -> Self {
        ApiError::new(action, kind, key, source).into()
    }

    /// Whether this is a 409 Conflict from the API server.
    pub fn is_conflict(&self) -> bool {
        matches!(self, DetectorError::Core(CoreError::Api(e)) if is_conflict(&e.source))
    }
}

/// Whether a kube error is a 409: a lost race (`Conflict`) or a create that found the object
/// (`AlreadyExists`); either way the detector reads again and retries.
pub fn is_conflict(e: &kube::Error) -> bool {
    apimachinery::is_conflict(e) || apimachinery::is_already_exists(e)
}

/// Collects errors: `Ok` when empty, the error itself when one, [`DetectorError::Many`] otherwise.
pub fn aggregate(mut errors: Vec<DetectorError>) -> Result<(), DetectorError> {
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(DetectorError::Many(errors)),
    }
}
