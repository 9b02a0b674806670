//! The process shell around leader-only work: what controller-runtime's Manager gives a Go component.
//!
//! [`Manager::serve`] starts the probe (`/healthz`, `/readyz`) and metrics (`/metrics`) servers, which
//! answer on every replica, leader or not, until [`Manager::shutdown`]. [`Manager::lead`] then elects
//! (if configured), runs the leader-only work, and handles the three ways it ends:
//!
//! | event | what happens | result |
//! |---|---|---|
//! | shutdown token cancelled (first SIGTERM) | work token cancelled; wait up to the graceful timeout; close the write fence; release the lease | `Ok(())` |
//! | lease lost (renew deadline passed) | write fence closed; work token cancelled and the work aborted at once (no grace, as controller-runtime) | `Err(LeadershipLost)` |
//! | the work returned an error or panicked | write fence closed; lease released so a standby takes over | `Err(Work)` |
//!
//! With leader election the elector holds the process's [`WriteFence`] open only while leadership is
//! certain (see [`crate::client::fence`]), so leader-only work writes nothing once a standby may lead,
//! even before this loop has noticed (a process resumed after SIGSTOP).
//!
//! Readiness (`/readyz`, check `informer-sync`): a standby is ready; the leader is not ready until its work
//! calls [`ReadinessGate::set_ready`] (for the controller-manager: once every controller's caches synced).

use std::io;
use std::pin::Pin;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::addr::BindAddress;
use super::exposition;
use super::health::{Health, HealthError, ReadinessGate};
use super::leader_election::{LeaderElectionConfig, LeaderElector};
use crate::client::fence::WriteFence;

/// Error type of leader-only work.
pub use crate::error::BoxError;

/// The leader-only work: runs until its [`LeaderContext::cancel`] token is cancelled, then drains and returns.
pub type LeaderWork = Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>;

/// Name of the readiness check the manager adds.
pub const READINESS_CHECK: &str = "informer-sync";

/// How the process runs.
#[derive(Debug, Clone)]
pub struct ManagerConfig {
    /// `None` runs the work at once (`--leader-elect=false`).
    pub leader_election: Option<LeaderElectionConfig>,
    /// Where to serve `/healthz` and `/readyz`.
    pub health_probe_address: BindAddress,
    /// Where to serve `/metrics`.
    pub metrics_address: BindAddress,
    /// How long the work may take to stop after the first signal (controller-runtime: 30 s).
    pub graceful_shutdown_timeout: Duration,
}

/// What the leader-only work gets.
#[derive(Debug, Clone)]
pub struct LeaderContext {
    /// Cancelled when the work must stop (shutdown or lost lease).
    pub cancel: CancellationToken,
    /// Set it once the work's caches have synced.
    pub readiness: ReadinessGate,
}

/// Why the manager failed.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// A server could not listen.
    #[error("cannot serve {what} on {address}: {source}")]
    Bind {
        /// `health probes` or `metrics`.
        what: &'static str,
        /// The address.
        address: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Registering the readiness check failed.
    #[error(transparent)]
    Health(#[from] HealthError),
    /// The lease could not be renewed in time.
    #[error("leader election lost")]
    LeadershipLost,
    /// The leader-only work failed.
    #[error("{0}")]
    Work(String),
}

/// A running process shell; see the module docs.
#[derive(Debug)]
pub struct Manager {
    config: ManagerConfig,
    health: Health,
    readiness: ReadinessGate,
    servers: JoinSet<()>,
    servers_stop: CancellationToken,
    probe_addr: Option<std::net::SocketAddr>,
    metrics_addr: Option<std::net::SocketAddr>,
}

impl Manager {
    /// Binds and starts the probe and metrics servers, and registers the process metrics.
    pub async fn serve(config: ManagerConfig, health: Health) -> Result<Manager, ManagerError> {
        exposition::register_process_metrics();
        let readiness = health.readiness_gate(READINESS_CHECK, "starting")?;
        if config.leader_election.is_some() {
            // A standby is ready: it serves probes and waits for the lease.
            readiness.set_ready();
        }
        let servers_stop = CancellationToken::new();
        let mut servers = JoinSet::new();
        let mut bound = Vec::new();
        for (what, address, router) in [
            (
                "health probes",
                &config.health_probe_address,
                health.router(),
            ),
            ("metrics", &config.metrics_address, exposition::router()),
        ] {
            let listener = address.bind().await.map_err(|source| ManagerError::Bind {
                what,
                address: address.to_string(),
                source,
            })?;
            let Some(listener) = listener else {
                tracing::info!("{what} server disabled");
                bound.push(None);
                continue;
            };
            let local = listener.local_addr().ok();
            tracing::info!(address = ?local, "serving {what}");
            bound.push(local);
            let stop = servers_stop.clone();
            servers.spawn(async move {
                let served = axum::serve(listener, router)
                    .with_graceful_shutdown(stop.cancelled_owned())
                    .await;
                if let Err(e) = served {
                    tracing::error!(error = %e, "{what} server stopped");
                }
            });
        }
        Ok(Manager {
            config,
            health,
            readiness,
            servers,
            servers_stop,
            probe_addr: bound.first().copied().flatten(),
            metrics_addr: bound.get(1).copied().flatten(),
        })
    }

    /// The checks served on the probe address.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// The readiness gate (check `informer-sync`).
    pub fn readiness(&self) -> &ReadinessGate {
        &self.readiness
    }

    /// Where the probe server listens, if it does.
    pub fn probe_address(&self) -> Option<std::net::SocketAddr> {
        self.probe_addr
    }

    /// Where the metrics server listens, if it does.
    pub fn metrics_address(&self) -> Option<std::net::SocketAddr> {
        self.metrics_addr
    }

    /// Elects (if configured), then runs `work` until `shutdown` fires, the lease is lost, or the work
    /// fails. See the module docs for what each outcome does.
    pub async fn lead<F>(
        &self,
        client: kube::Client,
        shutdown: &CancellationToken,
        work: F,
    ) -> Result<(), ManagerError>
    where
        F: FnOnce(LeaderContext) -> LeaderWork,
    {
        let leadership = match &self.config.leader_election {
            Some(le) => match LeaderElector::new(client, le.clone())
                .with_fence(WriteFence::process().clone())
                .acquire(shutdown)
                .await
            {
                Some(l) => Some(l),
                None => return Ok(()),
            },
            None => None,
        };
        self.readiness.set_not_ready("caches not synced yet");
        let work_stop = CancellationToken::new();
        let ctx = LeaderContext {
            cancel: work_stop.clone(),
            readiness: self.readiness.clone(),
        };
        let mut task = tokio::spawn(work(ctx));
        let lost = leadership
            .as_ref()
            .map(super::leader_election::Leadership::lost)
            .unwrap_or_default();

        enum Outcome {
            Shutdown,
            Lost,
            Failed(String),
        }
        let mut finished = false;
        let outcome = loop {
            tokio::select! {
                _ = shutdown.cancelled() => break Outcome::Shutdown,
                _ = lost.cancelled() => break Outcome::Lost,
                r = &mut task, if !finished => {
                    finished = true;
                    match r {
                        Ok(Ok(())) => tracing::info!("leader work finished early; waiting for shutdown"),
                        Ok(Err(e)) => break Outcome::Failed(e.to_string()),
                        Err(e) => break Outcome::Failed(format!("leader work panicked: {e}")),
                    }
                }
            }
        };
        work_stop.cancel();
        let fence = leadership.as_ref().map(|_| WriteFence::process());
        match outcome {
            Outcome::Shutdown => {
                if !finished {
                    let grace = self.config.graceful_shutdown_timeout;
                    match tokio::time::timeout(grace, &mut task).await {
                        Ok(Ok(Ok(()))) => tracing::info!("controllers stopped"),
                        Ok(Ok(Err(e))) => {
                            tracing::warn!(error = %e, "controllers stopped with an error");
                        }
                        Ok(Err(e)) => {
                            tracing::warn!(error = %e, "controllers panicked while stopping");
                        }
                        Err(_) => {
                            tracing::warn!(timeout = ?grace, "controllers did not stop within the graceful shutdown timeout; abandoning them");
                            task.abort();
                        }
                    }
                }
                // Work abandoned after the grace period must not write once a standby leads.
                if let Some(f) = fence {
                    f.close();
                }
                if let Some(l) = leadership
                    && let Err(e) = l.release().await
                {
                    tracing::warn!(error = %e, "cannot release the leader lease; a standby takes over when it expires");
                }
                Ok(())
            }
            Outcome::Lost => {
                if let Some(f) = fence {
                    f.close();
                }
                task.abort();
                Err(ManagerError::LeadershipLost)
            }
            Outcome::Failed(msg) => {
                if let Some(f) = fence {
                    f.close();
                }
                if let Some(l) = leadership
                    && let Err(e) = l.release().await
                {
                    tracing::warn!(error = %e, "cannot release the leader lease");
                }
                Err(ManagerError::Work(msg))
            }
        }
    }

    /// Stops the probe and metrics servers (waiting at most 5 s for open connections).
    pub async fn shutdown(mut self) {
        self.servers_stop.cancel();
        let drained = tokio::time::timeout(Duration::from_secs(5), async {
            while self.servers.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            self.servers.abort_all();
        }
    }
}
