//! Propagation: from a resource template and its policy to Works. The `detector` matches templates to
//! policies and writes bindings, `scheduler` places bindings on clusters, `binding` renders the
//! Works, `bindingStatus` aggregates member status back onto bindings and templates, `namespace`
//! propagates namespaces to every member, and `workloadRebalancer` asks the scheduler for a fresh
//! placement of listed workloads. `rollout` (karmada-rs's own, run beside `binding`) rolls a new
//! template revision out to the clusters stage by stage.

pub mod binding;
pub mod binding_status;
pub mod detector;
pub mod namespace;
pub mod rollout;
pub mod scheduler;
pub mod workload_rebalancer;
