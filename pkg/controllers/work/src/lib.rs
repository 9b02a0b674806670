//! Works in member clusters: `execution` applies each Work's manifests to its member and
//! `workStatus` reflects what the member reports back and repairs drift. The controller-manager runs
//! them for Push clusters; the agent runs the same code for its own cluster in Pull mode, which is
//! why they are a crate of their own.

pub mod execution;
pub mod work_status;
