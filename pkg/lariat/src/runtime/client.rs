//! Finding the API server to talk to, in controller-runtime's order, and waiting until it answers.
//!
//! Order (`ctrl.GetConfig`): the `--kubeconfig` flag; the `KUBECONFIG` variable (which may list several
//! files, merged); the in-cluster service account; `$HOME/.kube/config`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio_util::sync::CancellationToken;

use crate::error::error_chain;

/// Where the client configuration came from (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// The `--kubeconfig` flag.
    Flag(PathBuf),
    /// The `KUBECONFIG` variable.
    Env(String),
    /// The pod's service account.
    InCluster,
    /// `$HOME/.kube/config`.
    Home(PathBuf),
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigSource::Flag(p) => write!(f, "--kubeconfig={}", p.display()),
            ConfigSource::Env(v) => write!(f, "KUBECONFIG={v}"),
            ConfigSource::InCluster => f.write_str("in-cluster service account"),
            ConfigSource::Home(p) => write!(f, "{}", p.display()),
        }
    }
}

/// No usable client configuration.
#[derive(Debug, thiserror::Error)]
pub enum ClientConfigError {
    /// The kubeconfig named by the flag or `KUBECONFIG` could not be used.
    #[error("cannot load kubeconfig ({source_desc}): {message}")]
    Kubeconfig {
        /// Where it came from.
        source_desc: ConfigSource,
        /// What went wrong.
        message: String,
    },
    /// Nothing to load.
    #[error(
        "no kubeconfig: pass --kubeconfig, set KUBECONFIG, run in a pod, or create $HOME/.kube/config"
    )]
    NotFound,
}

/// Loads the client configuration; see the module docs for the order.
pub async fn load_config(
    kubeconfig: Option<&Path>,
) -> Result<(kube::Config, ConfigSource), ClientConfigError> {
    async fn from_file(
        kc: Result<Kubeconfig, kube::config::KubeconfigError>,
        source: ConfigSource,
    ) -> Result<(kube::Config, ConfigSource), ClientConfigError> {
        let err = |e: &dyn std::error::Error| ClientConfigError::Kubeconfig {
            source_desc: source.clone(),
            message: error_chain(e),
        };
        let kc = kc.map_err(|e| err(&e))?;
        let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|e| err(&e))?;
        Ok((config, source))
    }

    if let Some(path) = kubeconfig {
        return from_file(
            Kubeconfig::read_from(path),
            ConfigSource::Flag(path.to_path_buf()),
        )
        .await;
    }
    if let Ok(v) = std::env::var("KUBECONFIG")
        && !v.is_empty()
    {
        return match Kubeconfig::from_env() {
            Ok(Some(kc)) => from_file(Ok(kc), ConfigSource::Env(v)).await,
            Ok(None) => Err(ClientConfigError::NotFound),
            Err(e) => from_file(Err(e), ConfigSource::Env(v)).await,
        };
    }
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        return kube::Config::incluster()
            .map(|c| (c, ConfigSource::InCluster))
            .map_err(|e| ClientConfigError::Kubeconfig {
                source_desc: ConfigSource::InCluster,
                message: error_chain(&e),
            });
    }
    if let Some(home) = std::env::var_os("HOME") {
        let path = Path::new(&home).join(".kube").join("config");
        if path.exists() {
            return from_file(Kubeconfig::read_from(&path), ConfigSource::Home(path)).await;
        }
    }
    Err(ClientConfigError::NotFound)
}

/// Calls `GET /version` until the server answers (`true`) or `cancel` fires (`false`), logging each
/// failure with the server's URL and where its address came from (a [`ConfigSource`], or the
/// caller's own wording of it).
pub async fn wait_for_api_server(
    client: &kube::Client,
    url: &str,
    source: &dyn fmt::Display,
    cancel: &CancellationToken,
) -> bool {
    let mut delay = Duration::from_millis(500);
    loop {
        let attempt = tokio::select! {
            _ = cancel.cancelled() => return false,
            r = tokio::time::timeout(Duration::from_secs(10), client.apiserver_version()) => r,
        };
        match attempt {
            Ok(Ok(info)) => {
                tracing::info!(server = %url, version = %info.git_version, "connected to the API server");
                return true;
            }
            Ok(Err(e)) => tracing::error!(
                server = %url,
                kubeconfig = %source,
                error = %error_chain(&e),
                retry_in = ?delay,
                "cannot reach the API server"
            ),
            Err(_) => tracing::error!(
                server = %url,
                kubeconfig = %source,
                retry_in = ?delay,
                "cannot reach the API server: no answer within 10s"
            ),
        }
        tokio::select! {
            _ = cancel.cancelled() => return false,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn missing_flag_file_names_the_flag() {
        let err = load_config(Some(Path::new("/nonexistent/kubeconfig")))
            .await
            .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("--kubeconfig=/nonexistent/kubeconfig"),
            "{msg}"
        );
    }
}
