//! Which server serves `cluster.karmada.io/v1alpha1` on the control plane, said once at startup: the
//! Cluster CRD (karmada-rs's `crds/`, the chart's default) or Karmada's `karmada-aggregated-apiserver`
//! behind the APIService `v1alpha1.cluster.karmada.io` (control planes Karmada's own installers set
//! up). The controllers work the same with either. Both at once is reported as a warning: the
//! APIService wins, the CRD's Clusters are out of sight, and they would take over if the APIService
//! went away. Nothing serving the group is reported too: no controller touching Clusters can work.
//! Reading either object may be forbidden (a kubeconfig user with only the controllers' rights):
//! then nothing is said.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::Client;
use kube::api::Api;

/// The APIService an aggregated server registers for the group.
pub const API_SERVICE: &str = "v1alpha1.cluster.karmada.io";
/// The Cluster CRD.
pub const CRD: &str = "clusters.cluster.karmada.io";

/// What serves the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterSource {
    /// The Cluster CRD alone.
    Crd,
    /// The extension API server behind the APIService (`namespace/name` of its Service) alone.
    Aggregated(String),
    /// The APIService points at a Service and the Cluster CRD exists too.
    Both(String),
    /// Neither.
    None,
}

impl ClusterSource {
    /// From what the API server says: the APIService's Service (`namespace/name`), if it has one
    /// (a CRD-backed group has a local APIService, without a Service), and whether the CRD exists.
    pub fn of(service: Option<String>, crd: bool) -> Self {
        match (service, crd) {
            (Some(s), true) => ClusterSource::Both(s),
            (Some(s), false) => ClusterSource::Aggregated(s),
            (None, true) => ClusterSource::Crd,
            (None, false) => ClusterSource::None,
        }
    }
}

/// Reads what serves the group; `None` when the API server does not let us read it.
pub async fn detect(client: &Client) -> Option<ClusterSource> {
    let api_services: Api<APIService> = Api::all(client.clone());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let service = match api_services.get_opt(API_SERVICE).await {
        Ok(found) => found.and_then(|a| a.spec).and_then(|s| s.service).map(|s| {
            format!(
                "{}/{}",
                s.namespace.unwrap_or_default(),
                s.name.unwrap_or_default()
            )
        }),
        Err(e) => {
            tracing::debug!(error = %e, "cannot read the APIService {API_SERVICE}: not saying what serves Clusters");
            return None;
        }
    };
    let crd = match crds.get_opt(CRD).await {
        Ok(found) => found.is_some(),
        Err(e) => {
            tracing::debug!(error = %e, "cannot read the CRD {CRD}: not saying what serves Clusters");
            return None;
        }
    };
    Some(ClusterSource::of(service, crd))
}

/// Logs what serves the group (see the module documentation).
pub async fn report(client: &Client) {
    match detect(client).await {
        Some(ClusterSource::Crd) => {
            tracing::info!("Clusters (cluster.karmada.io/v1alpha1) are served by the CRD {CRD}");
        }
        Some(ClusterSource::Aggregated(service)) => tracing::info!(
            service = %service,
            "Clusters (cluster.karmada.io/v1alpha1) are served through the APIService {API_SERVICE} \
             (Karmada's karmada-aggregated-apiserver)"
        ),
        Some(ClusterSource::Both(service)) => tracing::warn!(
            service = %service,
            "both the APIService {API_SERVICE} (pointing at a Service: Karmada's \
             karmada-aggregated-apiserver) and the CRD {CRD} claim cluster.karmada.io/v1alpha1: the \
             APIService serves the Clusters and the CRD's Clusters are out of sight (they would take \
             over if the APIService were deleted). Delete the one not meant to serve Clusters (the \
             chart installs without the CRD with clusterCRD.install=false)"
        ),
        Some(ClusterSource::None) => tracing::warn!(
            "nothing serves cluster.karmada.io/v1alpha1 (no CRD {CRD}, no APIService {API_SERVICE} \
             pointing at a Service): install the CRDs (crds/) or Karmada's aggregated API server; \
             no controller handling Clusters can work until one serves it"
        ),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_source_follows_the_apiservice_service_and_the_crd() {
        let svc = || Some("karmada-system/karmada-aggregated-apiserver".to_owned());
        assert_eq!(
            ClusterSource::of(svc(), false),
            ClusterSource::Aggregated("karmada-system/karmada-aggregated-apiserver".to_owned())
        );
        assert!(matches!(
            ClusterSource::of(svc(), true),
            ClusterSource::Both(_)
        ));
        assert_eq!(ClusterSource::of(None, true), ClusterSource::Crd);
        assert_eq!(ClusterSource::of(None, false), ClusterSource::None);
    }
}
