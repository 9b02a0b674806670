//! Cluster lifecycle: the `cluster` controller (a Cluster's execution namespace, finalizer and
//! removal) and `clusterStatus` (connecting to members, health, versions, API enablements and the
//! resource summary the scheduler reads), `agentcsrapproving` (Pull-mode agents' client
//! certificates), `unifiedAuth` (impersonation RBAC in members for Karmada's proxies) and
//! `remedy` (the remedy actions Remedies ask for, in `status.remedyActions`), and the agent's
//! `certRotation` (renewing its client certificate).

pub mod agent_csr_approving;
pub mod cert_rotation;
pub mod cluster;
pub mod cluster_status;
pub mod remedy;
pub mod unified_auth;
