//! Errors of the test environment; each names what failed and, where it can, how to fix it.

use std::path::Path;

/// Why the environment could not start or act.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "test binary {name} not found (looked in: {searched}); build it from the official Go modules with \
         `make test-binaries` (runs hack/build-test-binaries.sh; needs Go >= 1.26), or set KUBEBUILDER_ASSETS \
         to a folder that has it"
    )]
    MissingBinary { name: String, searched: String },
    #[error(
        "Karmada's Go binary {name} not found (looked in: {searched}); build Karmada's controller-manager, \
         scheduler and webhook from the pinned Go module with `make karmada-binaries` (runs \
         `hack/build-test-binaries.sh karmada`; needs Go >= 1.26)"
    )]
    MissingKarmadaBinary { name: String, searched: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("certificates: {0}")]
    Pki(String),
    #[error("process: {0}")]
    Process(String),
    #[error("{name} exited ({status}); last lines of its log:\n{log_tail}")]
    Exited {
        name: String,
        status: String,
        log_tail: String,
    },
    #[error("timed out: {0}")]
    Timeout(String),
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    #[error("{context}: {source}")]
    Kube {
        context: String,
        #[source]
        source: kube::Error,
    },
    #[error("CRDs: {0}")]
    Crds(String),
    #[error("invalid options: {0}")]
    Config(String),
}

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.display().to_string(),
            source,
        }
    }

    pub(crate) fn kube(context: impl Into<String>, source: kube::Error) -> Self {
        Error::Kube {
            context: context.into(),
            source,
        }
    }
}
