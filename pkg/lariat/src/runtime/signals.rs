//! Two-stage shutdown on SIGTERM / SIGINT, as Kubernetes components do: the first signal cancels the
//! returned token (graceful shutdown); a second one exits the process with status 1 at once.

use std::io;

use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Owns the signal-watching task; dropping it stops watching (and restores no handler: the process is
/// expected to be exiting by then).
#[derive(Debug)]
pub struct SignalHandler {
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

impl SignalHandler {
    /// Starts watching SIGTERM and SIGINT. Must be called inside a tokio runtime.
    pub fn install() -> io::Result<Self> {
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let task = tokio::spawn(async move {
            let mut seen = 0u32;
            loop {
                let name = tokio::select! {
                    Some(()) = term.recv() => "SIGTERM",
                    Some(()) = int.recv() => "SIGINT",
                    else => return,
                };
                seen += 1;
                if seen == 1 {
                    tracing::info!(
                        signal = name,
                        "shutting down gracefully; send the signal again to exit at once"
                    );
                    token.cancel();
                } else {
                    tracing::warn!(signal = name, "second signal received, exiting at once");
                    eprintln!("received {name} again during shutdown: exiting with status 1");
                    std::process::exit(1);
                }
            }
        });
        Ok(SignalHandler { shutdown, task })
    }

    /// The token cancelled by the first signal. Cancel it yourself to shut down as if signalled.
    pub fn token(&self) -> CancellationToken {
        self.shutdown.clone()
    }
}

impl Drop for SignalHandler {
    fn drop(&mut self) {
        self.task.abort();
    }
}
