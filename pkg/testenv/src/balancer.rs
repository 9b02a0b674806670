//! One loopback port in front of several kube-apiserver replicas over one etcd: each new TCP
//! connection goes to the next replica in turn, as the layer-4 load balancer in front of a highly
//! available control plane does. TLS passes through untouched (every replica serves the same
//! certificate), so clients cannot tell it is there.
//!
//! It runs on a thread of its own with its own runtime, so it outlives whichever runtime started the
//! environment, and stops (dropping every connection it carries) when dropped.

use std::thread::JoinHandle;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use crate::Error;

/// A running balancer; dropping it stops it.
#[derive(Debug)]
pub(crate) struct Balancer {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Balancer {
    /// Listens on `127.0.0.1:port` and spreads connections over `backends` (loopback ports).
    pub(crate) fn start(name: &str, port: u16, backends: Vec<u16>) -> Result<Balancer, Error> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", port))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| Error::Process(format!("{name}: balancer on port {port}: {e}")))?;
        let (stop, stopped) = oneshot::channel();
        let label = format!("{name}-balancer");
        let thread = std::thread::Builder::new()
            .name(label.clone())
            .spawn(move || {
                match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime.block_on(serve(listener, backends, stopped)),
                    Err(e) => tracing::error!(balancer = %label, error = %e, "no runtime"),
                }
            })
            .map_err(|e| Error::Process(format!("{name}: balancer thread: {e}")))?;
        Ok(Balancer {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accepts until `stopped`; each connection to the next backend that accepts it (a replica that is
/// down is skipped, as a health-checking balancer would).
async fn serve(
    listener: std::net::TcpListener,
    backends: Vec<u16>,
    mut stopped: oneshot::Receiver<()>,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "balancer cannot listen");
            return;
        }
    };
    let mut next = 0usize;
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => {
                let Ok((mut client, _)) = accepted else { continue };
                let order: Vec<u16> = (0..backends.len())
                    .map(|i| backends[(next + i) % backends.len()])
                    .collect();
                next = next.wrapping_add(1);
                connections.spawn(async move {
                    for port in order {
                        if let Ok(mut server) = TcpStream::connect(("127.0.0.1", port)).await {
                            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                            return;
                        }
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    // Dropping the set aborts every connection still carried.
}
