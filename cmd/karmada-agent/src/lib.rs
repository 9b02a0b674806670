//! The `karmada-agent` process (Pull mode): Karmada's agent flags, registration of the member
//! cluster with the control plane, and the wiring of the shared controllers onto the framework's
//! process runtime, serving only the agent's own cluster.

pub mod app;
pub mod options;
pub mod register;
