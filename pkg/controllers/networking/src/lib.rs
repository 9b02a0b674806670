//! Multi-cluster services: the Kubernetes MCS API (`serviceExport` collects the EndpointSlices of
//! exported Services from members, `endpointSlice` turns them into EndpointSlices of the derived
//! Service on the control plane, `serviceImport` derives that Service from a ServiceImport) and
//! Karmada's MultiClusterService (`multiclusterservice` propagates the Service to provider and
//! consumer clusters, `endpointsliceCollect` collects the providers' EndpointSlices,
//! `endpointsliceDispatch` hands them to the consumers).
//!
//! What the collectors share (the Works holding collected slices) lives in
//! `karmada_controllers_common::collected_slices`.

pub mod endpoint_slice;
pub mod endpointslice_collect;
pub mod endpointslice_dispatch;
pub mod multicluster_service;
pub mod service_export;
pub mod service_import;
