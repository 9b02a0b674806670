//! The controller's errors: [`ApplyError`] for one manifest in a member, [`ExecutionError`] for a
//! Work (what the queue logs and backs off on).

use karmada_apis::well_known::CONFLICT_RESOLUTION_ANNOTATION;

/// Why one manifest could not be applied (or removed).
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The manifest is not a valid object.
    #[error("invalid manifest: {0}")]
    Manifest(String),
    /// The member API server rejected a request; the message is the API's.
    #[error("{}", .0.message)]
    Member(Box<kube::core::Status>),
    /// A request to the member failed before an answer.
    #[error("{0}")]
    Transport(kube::Error),
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// The object exists in the member and is not managed by Karmada.
    #[error(
        "resource(kind={kind}, {namespace}/{name}) already exists in the cluster {cluster} and the {CONFLICT_RESOLUTION_ANNOTATION} strategy value is empty, Karmada will not manage this resource"
    )]
    NotManaged {
        /// Kind.
        kind: String,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Member cluster.
        cluster: String,
    },
    /// The object exists in the member, is not managed, and a DriftPolicy's `takeover` says not
    /// to take it over.
    #[error(
        "resource(kind={kind}, {namespace}/{name}) already exists in the cluster {cluster} and is not taken over: {reason}"
    )]
    NotTakenOver {
        /// Kind.
        kind: String,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Member cluster.
        cluster: String,
        /// Which policy said so, and for `IfNoDiff` where the object differs.
        reason: String,
    },
    /// The object belongs to another Work (see [`ownership`]).
    #[error(
        "resource(kind={kind}, {namespace}/{name}) in the cluster {cluster} belongs to Work {owner}; Karmada will not update it"
    )]
    OwnedByAnotherWork {
        /// Kind.
        kind: String,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Member cluster.
        cluster: String,
        /// The other Work (`namespace/name`, or its permanent id).
        owner: String,
    },
    /// The interpreter failed on the objects.
    #[error("{0}")]
    Interpret(#[from] karmada_interpreter::InterpretError),
    /// Too many optimistic-lock conflicts.
    #[error("too many conflicts updating {0}")]
    Conflicts(String),
}

karmada_controllers_common::core_error_from!(ApplyError);

impl From<kube::Error> for ApplyError {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => ApplyError::Member(s),
            other => ApplyError::Transport(other),
        }
    }
}

/// An execution-controller failure (for the queue's logs).
#[derive(Debug, thiserror::Error)]
pub enum ExecutionError {
    /// The Work's cluster is not Ready.
    #[error("cluster({0}) not ready")]
    ClusterNotReady(String),
    /// The Work's Cluster does not exist.
    #[error("cluster {0} not found")]
    ClusterNotFound(String),
    /// The member is not connected.
    #[error("cluster {0} is not connected")]
    NotConnected(String),
    /// Applying failed.
    #[error("failed to sync work({namespace}/{name}) to cluster({cluster}): {message}")]
    Sync {
        /// Work namespace.
        namespace: String,
        /// Work name.
        name: String,
        /// Cluster.
        cluster: String,
        /// What failed.
        message: String,
    },
    /// A request to the control plane failed.
    #[error("{action} work {key}: {source}")]
    Api {
        /// What was attempted.
        action: &'static str,
        /// `namespace/name`.
        key: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
}

karmada_controllers_common::core_error_from!(ExecutionError);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_managed_message_names_object_and_cluster() {
        let e = ApplyError::NotManaged {
            kind: "Deployment".into(),
            namespace: "ns".into(),
            name: "nginx".into(),
            cluster: "member1".into(),
        };
        let m = e.to_string();
        assert!(m.contains("already exists in the cluster member1"), "{m}");
        assert!(m.contains("Karmada will not manage this resource"), "{m}");
    }
}
