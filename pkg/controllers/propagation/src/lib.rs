//! Propagation: from a resource template and its policy to Works. The `detector` matches templates to
//! policies and writes bindings, `scheduler` places bindings on clusters, `binding` renders the
//! Works, `bindingStatus` aggregates member status back onto bindings and templates, and `namespace`
//! propagates namespaces to every member.

pub mod binding;
pub mod binding_status;
pub mod detector;
pub mod namespace;
pub mod scheduler;
