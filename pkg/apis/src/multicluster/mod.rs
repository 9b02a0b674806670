//! The `multicluster.x-k8s.io` API group: the Kubernetes Multi-Cluster Services API (mcs-api
//! v0.1.0, the version Karmada v1.16 vendors) that Karmada serves for `ServiceExport`/`ServiceImport`.

pub mod v1alpha1;
