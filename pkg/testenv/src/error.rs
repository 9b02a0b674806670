//! Errors of the test environment; each names what failed and, where it can, how to fix it.

use std::path::Path;

/// Why the environment could not start or act.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A test binary is missing.
    #[error(
        "test binary {name} not found (looked in: {searched}); build it from the official Go modules with \
         `make test-binaries` (runs hack/build-test-binaries.sh; needs Go >= 1.26), or set KUBEBUILDER_ASSETS \
         to a folder that has it"
    )]
    MissingBinary {
        /// The binary's file name.
        name: String,
        /// The folders looked in.
        searched: String,
    },
    /// One of Karmada's Go binaries is missing (the Karmada peer in the benchmark).
    #[error(
        "Karmada's Go binary {name} not found (looked in: {searched}); build Karmada's controller-manager, \
         scheduler, webhook and aggregated API server from the pinned Go module with `make karmada-binaries` (runs \
         `hack/build-test-binaries.sh karmada`; needs Go >= 1.26)"
    )]
    MissingKarmadaBinary {
        /// The binary's file name.
        name: String,
        /// The folders looked in.
        searched: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Making the certificates or keys failed.
    #[error("certificates: {0}")]
    Pki(String),
    /// Running a component, or reading what it wrote, failed.
    #[error("process: {0}")]
    Process(String),
    /// A component exited before it was ready.
    #[error("{name} exited ({status}); last lines of its log:\n{log_tail}")]
    Exited {
        /// The component.
        name: String,
        /// Its exit status.
        status: String,
        /// The last lines of its log.
        log_tail: String,
    },
    /// Something did not happen in time.
    #[error("timed out: {0}")]
    Timeout(String),
    /// Writing or loading a kubeconfig failed.
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    /// A call to an API server failed.
    #[error("{context}: {source}")]
    Kube {
        /// What was being done.
        context: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The CRDs could not be read or installed.
    #[error("CRDs: {0}")]
    Crds(String),
    /// The options are inconsistent.
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
