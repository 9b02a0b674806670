//! `networking.karmada.io/v1alpha1`: MultiClusterService (how a Service of the same name is exposed
//! across clusters) and MultiClusterIngress (an Ingress spanning clusters).
//!
//! Karmada checks MultiClusterServices in its webhook; here the same checks are OpenAPI constraints
//! and CEL rules in the CRD: the name is a DNS-1035 label, `types` holds one kind of exposure
//! (`CrossCluster` or `LoadBalancer`) and never changes, port names are unique DNS-1123 labels,
//! port numbers lie in 1–65535, and provider/consumer cluster names are valid cluster names. The
//! API server bounds the cost of CEL rules, so `types` holds at most 2 entries and `ports` at most
//! 128 (Karmada sets no limit).
//!
//! Who uses them: the `multiclusterservice` controller propagates the Service to the provider and
//! consumer clusters; `endpointsliceCollect` collects the providers' EndpointSlices and
//! `endpointsliceDispatch` hands them to the consumers. MultiClusterIngress is served (Karmada's
//! ingress controllers live outside its controller-manager) but no controller here acts on it.

use k8s_openapi::api::core::v1::ServiceStatus;
use k8s_openapi::api::networking::v1::{IngressLoadBalancerStatus, IngressSpec};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of [`MultiClusterService`] and [`MultiClusterIngress`].
pub const GROUP: &str = "networking.karmada.io";
/// Their API version.
pub const VERSION: &str = "v1alpha1";
/// The kind of [`MultiClusterService`].
pub const MULTI_CLUSTER_SERVICE_KIND: &str = "MultiClusterService";
/// The MultiClusterService condition reporting whether the Service reached its clusters.
pub const SERVICE_APPLIED_CONDITION: &str = "ServiceApplied";
/// The MultiClusterService condition reporting whether EndpointSlices reached the consumers.
pub const ENDPOINT_SLICE_DISPATCHED_CONDITION: &str = "EndpointSliceDispatched";

/// How the Service named like this object is exposed beyond its own cluster.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "networking.karmada.io",
    version = "v1alpha1",
    kind = "MultiClusterService",
    plural = "multiclusterservices",
    singular = "multiclusterservice",
    shortname = "mcs",
    category = "karmada-io",
    namespaced,
    status = "ServiceStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "Exposes the Service of the same name across clusters: its endpoints in the provider clusters are made available to the consumer clusters.",
    validation = Rule::new("self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')")
        .message("metadata.name must be a DNS-1035 label (lower-case letters, digits and '-', starting with a letter, at most 63 characters)")
)]
#[serde(rename_all = "camelCase")]
pub struct MultiClusterServiceSpec {
    /// How the Service is exposed: `CrossCluster` (reachable from the consumer clusters) or
    /// `LoadBalancer`; one kind only, and fixed once created.
    #[schemars(length(max = 2), transform = crate::schema::cel(TYPES_RULES))]
    pub types: Vec<ExposureType>,

    /// The ports exposed; every port of the Service when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    /// At most 128 (Karmada sets no limit): the API server refuses the name-uniqueness rule over a
    /// list of unbounded length (its CEL cost estimate exceeds the budget).
    #[schemars(length(max = 128), transform = crate::schema::cel(PORTS_RULES))]
    pub ports: Vec<ExposurePort>,

    /// Deprecated in favour of `providerClusters`/`consumerClusters`: where the Service is exposed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<ExposureRange>,

    /// Deprecated in favour of `providerClusters`: the clusters providing the backends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_provision_clusters: Vec<String>,

    /// Deprecated in favour of `consumerClusters`: the clusters the Service is exposed to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_consumption_clusters: Vec<String>,

    /// The clusters whose endpoints back the Service; every cluster when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provider_clusters: Vec<ClusterSelector>,

    /// The clusters the Service is exposed to; every cluster when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consumer_clusters: Vec<ClusterSelector>,
}

const TYPES_RULES: &[crate::schema::Cel] = &[
    crate::schema::Cel::new(
        "self.all(t, t == self[0])",
        "MultiClusterService types should not contain more than one type",
    ),
    crate::schema::Cel::new("self == oldSelf", "MultiClusterService types are immutable"),
];

const PORTS_RULES: &[crate::schema::Cel] = &[crate::schema::Cel::new(
    "self.all(p, !has(p.name) || p.name == '' || self.exists_one(q, has(q.name) && q.name == p.name))",
    "port names must be unique",
)];

string_enum! {
    /// How a MultiClusterService exposes its Service.
    pub enum ExposureType {
        /// Reachable from other clusters' pods through the Service's name.
        CrossCluster = "CrossCluster",
        /// Reachable from outside the clusters through a load balancer.
        LoadBalancer = "LoadBalancer",
    }
}

/// A cluster named by a MultiClusterService.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ClusterSelector {
    /// The cluster's name.
    #[schemars(length(max = 48), pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub name: String,
}

/// One exposed port.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ExposurePort {
    /// The name of the Service's port.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 63), pattern(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$"))]
    pub name: String,
    /// The port number.
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
}

/// The deprecated cluster range of a MultiClusterService.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExposureRange {
    /// The clusters in range.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_names: Vec<String>,
}

impl MultiClusterServiceSpec {
    /// Whether the Service is exposed across clusters (`CrossCluster`).
    pub fn is_cross_cluster(&self) -> bool {
        self.types.contains(&ExposureType::CrossCluster)
    }

    /// The provider clusters as named, old (`serviceProvisionClusters`) and new fields together;
    /// empty means every cluster.
    pub fn provider_names(&self) -> Vec<String> {
        named(&self.service_provision_clusters, &self.provider_clusters)
    }

    /// The consumer clusters as named, old (`serviceConsumptionClusters`) and new fields together;
    /// empty means every cluster.
    pub fn consumer_names(&self) -> Vec<String> {
        named(&self.service_consumption_clusters, &self.consumer_clusters)
    }
}

fn named(old: &[String], new: &[ClusterSelector]) -> Vec<String> {
    let mut names: Vec<String> = old
        .iter()
        .cloned()
        .chain(new.iter().map(|c| c.name.clone()))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// An Ingress whose backends may live in several clusters.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "networking.karmada.io",
    version = "v1alpha1",
    kind = "MultiClusterIngress",
    plural = "multiclusteringresses",
    singular = "multiclusteringress",
    shortname = "mci",
    category = "karmada-io",
    namespaced,
    status = "MultiClusterIngressStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "An Ingress whose backend Services may be spread across clusters."
)]
#[serde(rename_all = "camelCase")]
pub struct MultiClusterIngressSpec {
    /// The Ingress spec (`networking.k8s.io/v1`).
    #[serde(flatten)]
    pub ingress: IngressSpec,
}

/// The state of a MultiClusterIngress: the Ingress status plus where traffic may go.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MultiClusterIngressStatus {
    /// The load balancer serving the ingress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<IngressLoadBalancerStatus>,
    /// Clusters that must not receive traffic.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub traffic_block_clusters: Vec<String>,
    /// Where each backend Service runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_locations: Vec<ServiceLocation>,
}

/// The clusters a backend Service runs in.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ServiceLocation {
    /// The Service's name.
    pub name: String,
    /// The clusters it runs in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_karmada_json_and_merges_old_and_new_cluster_fields() {
        let value = json!({
            "types": ["CrossCluster"],
            "ports": [{"name": "http", "port": 80}],
            "serviceProvisionClusters": ["member3"],
            "providerClusters": [{"name": "member1"}, {"name": "member3"}],
            "consumerClusters": [{"name": "member2"}],
        });
        let spec: MultiClusterServiceSpec = serde_json::from_value(value.clone()).expect("parses");
        assert!(spec.is_cross_cluster());
        assert_eq!(spec.provider_names(), ["member1", "member3"]);
        assert_eq!(spec.consumer_names(), ["member2"]);
        assert_eq!(serde_json::to_value(&spec).expect("serializes"), value);
        let lb: MultiClusterServiceSpec =
            serde_json::from_value(json!({"types": ["LoadBalancer"]})).expect("parses");
        assert!(!lb.is_cross_cluster());
        assert!(lb.consumer_names().is_empty());
    }

    #[test]
    fn ingress_spec_is_inline() {
        let value = json!({"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}});
        let spec: MultiClusterIngressSpec = serde_json::from_value(value.clone()).expect("parses");
        assert_eq!(serde_json::to_value(&spec).expect("serializes"), value);
    }
}
