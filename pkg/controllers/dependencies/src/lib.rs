//! Dependencies controllers (Karmada's `pkg/dependenciesdistributor`): the dependencies
//! distributor, which propagates the ConfigMaps, Secrets, ServiceAccounts, … a workload uses along
//! with it (`propagateDeps: true`). Karmada starts it beside the resource detector, without a
//! `--controllers` name, when the `PropagateDeps` feature gate is on.

pub mod distributor;
