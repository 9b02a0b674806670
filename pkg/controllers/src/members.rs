//! The member clusters the controller-manager is connected to: one `lariat` cluster (clients, caches,
//! controllers, metrics) per joined Push-mode member, shared by every controller that talks to members.
//!
//! The clusterStatus controller connects a member (building its client from `Cluster.spec` and the
//! Secret named by `spec.secretRef`) and reconnects it when its endpoint or credentials change; the
//! cluster controller disconnects it when the Cluster goes. Other controllers only look members up.

use std::time::Duration;

use lariat::ClusterRegistry;
use tokio_util::sync::CancellationToken;

/// The registry of connected member clusters.
pub struct MemberClusters {
    registry: ClusterRegistry,
}

impl MemberClusters {
    /// An empty set; every member's cancellation token is a child of `token`.
    pub fn new(token: CancellationToken) -> Self {
        MemberClusters {
            registry: ClusterRegistry::new(token),
        }
    }

    /// The underlying registry.
    pub fn registry(&self) -> &ClusterRegistry {
        &self.registry
    }

    /// The connected member called `name`, if any.
    pub fn get(&self, name: &str) -> Option<lariat::Cluster> {
        self.registry.get(name)
    }

    /// Starts the controllers of every member, now and as members connect.
    pub fn start(&self) {
        self.registry.start();
    }

    /// Disconnects every member (controllers drained within `timeout`).
    pub async fn shutdown(&self, timeout: Duration) -> bool {
        self.registry.shutdown(timeout).await
    }
}
