//! Cluster lifecycle: the `cluster` controller (a Cluster's execution namespace, finalizer and
//! removal) and `clusterStatus` (connecting to members, health, versions, API enablements and the
//! resource summary the scheduler reads) and `agentcsrapproving` (Pull-mode agents' client
//! certificates) and `remedy` (the remedy actions Remedies ask for, in `status.remedyActions`).
//! Failover's cluster taints will join them here.

pub mod agent_csr_approving;
pub mod cluster;
pub mod cluster_status;
pub mod remedy;
