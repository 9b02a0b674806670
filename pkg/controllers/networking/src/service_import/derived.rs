//! The Service derived from a ServiceImport, and the merge patches that bring an existing Service
//! to it. Pure: no API calls.

use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Service, ServicePort, ServiceSpec, ServiceStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karmada_apis::multicluster::v1alpha1::ServiceImport;
use karmada_apis::names::derived_service_name;
use kube::ResourceExt;
use serde_json::{Value, json};

/// The type every derived Service has.
const CLUSTER_IP: &str = "ClusterIP";

/// What the derived Service of one ServiceImport must look like.
#[derive(Debug, Clone, PartialEq)]
pub struct DerivedService {
    namespace: String,
    name: String,
    ports: Vec<ServicePort>,
    ingress_ips: Vec<String>,
}

/// The derived Service of `import`: `derived-<name>`, type `ClusterIP`, the import's ports (name,
/// protocol, port, application protocol), and its `spec.ips` as load-balancer ingress.
pub fn desired_service(import: &ServiceImport) -> DerivedService {
    DerivedService {
        namespace: import.namespace().unwrap_or_default(),
        name: derived_service_name(&import.name_any()),
        ports: import
            .spec
            .ports
            .iter()
            .map(|p| ServicePort {
                name: (!p.name.is_empty()).then(|| p.name.clone()),
                protocol: (!p.protocol.is_empty()).then(|| p.protocol.clone()),
                app_protocol: p.app_protocol.clone(),
                port: p.port,
                ..Default::default()
            })
            .collect(),
        ingress_ips: import.spec.ips.clone(),
    }
}

/// A port as compared: what the import sets, with the API server's protocol default.
fn port_key(p: &ServicePort) -> (Option<&str>, &str, i32, Option<&str>) {
    (
        p.name.as_deref().filter(|n| !n.is_empty()),
        p.protocol.as_deref().unwrap_or("TCP"),
        p.port,
        p.app_protocol.as_deref(),
    )
}

impl DerivedService {
    /// The Service to create.
    pub fn create(&self) -> Service {
        Service {
            metadata: ObjectMeta {
                namespace: Some(self.namespace.clone()),
                name: Some(self.name.clone()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                type_: Some(CLUSTER_IP.into()),
                ports: Some(self.ports.clone()),
                ..Default::default()
            }),
            status: None,
        }
    }

    /// The merge patch setting the type and ports of `current`, when they differ. Other fields
    /// (the cluster IP, selectors, labels someone added) are left alone.
    pub fn spec_patch(&self, current: &Service) -> Result<Option<Value>, serde_json::Error> {
        let spec = current.spec.clone().unwrap_or_default();
        let current_ports = spec.ports.unwrap_or_default();
        let same_ports = current_ports.len() == self.ports.len()
            && current_ports
                .iter()
                .zip(&self.ports)
                .all(|(a, b)| port_key(a) == port_key(b));
        if spec.type_.as_deref() == Some(CLUSTER_IP) && same_ports {
            return Ok(None);
        }
        Ok(Some(json!({"spec": {
            "type": CLUSTER_IP,
            "ports": serde_json::to_value(&self.ports)?,
        }})))
    }

    /// The status merge patch setting the load-balancer ingress of `current` to the import's IPs,
    /// when it differs.
    pub fn status_patch(&self, current: &Service) -> Result<Option<Value>, serde_json::Error> {
        let current_ips: Vec<&str> = current
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref())
            .map(|i| i.iter().filter_map(|i| i.ip.as_deref()).collect())
            .unwrap_or_default();
        if current_ips == self.ingress_ips {
            return Ok(None);
        }
        let status = ServiceStatus {
            load_balancer: Some(LoadBalancerStatus {
                ingress: Some(
                    self.ingress_ips
                        .iter()
                        .map(|ip| LoadBalancerIngress {
                            ip: Some(ip.clone()),
                            ..Default::default()
                        })
                        .collect(),
                ),
            }),
            conditions: None,
        };
        Ok(Some(json!({"status": serde_json::to_value(status)?})))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn import(spec: Value) -> ServiceImport {
        serde_json::from_value(json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1",
            "kind": "ServiceImport",
            "metadata": {"namespace": "ns", "name": "web"},
            "spec": spec,
        }))
        .unwrap()
    }

    fn service(value: Value) -> Service {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn derives_a_cluster_ip_service_with_the_import_ports() {
        let d = desired_service(&import(json!({
            "type": "ClusterSetIP",
            "ports": [{"name": "http", "protocol": "TCP", "port": 80}, {"port": 53, "protocol": "UDP"}],
        })));
        let svc = serde_json::to_value(d.create()).unwrap();
        assert_eq!(
            svc,
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"namespace": "ns", "name": "derived-web"},
                "spec": {"type": "ClusterIP", "ports": [
                    {"name": "http", "protocol": "TCP", "port": 80},
                    {"protocol": "UDP", "port": 53},
                ]},
            })
        );
    }

    #[test]
    fn patches_only_what_differs() {
        let d = desired_service(&import(json!({
            "type": "ClusterSetIP",
            "ports": [{"name": "http", "port": 80}],
            "ips": ["10.1.2.3"],
        })));
        // As the API server returns it: defaults filled in, a label someone added.
        let current = service(json!({
            "metadata": {"name": "derived-web", "labels": {"team": "a"}},
            "spec": {"type": "ClusterIP", "clusterIP": "10.0.0.9",
                     "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 80}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "10.1.2.3"}]}},
        }));
        assert_eq!(d.spec_patch(&current).unwrap(), None);
        assert_eq!(d.status_patch(&current).unwrap(), None);

        let moved = service(json!({
            "spec": {"type": "NodePort", "ports": [{"name": "http", "protocol": "TCP", "port": 8080}]},
        }));
        assert_eq!(
            d.spec_patch(&moved).unwrap(),
            Some(json!({"spec": {"type": "ClusterIP", "ports": [{"name": "http", "port": 80}]}}))
        );
        assert_eq!(
            d.status_patch(&moved).unwrap(),
            Some(json!({"status": {"loadBalancer": {"ingress": [{"ip": "10.1.2.3"}]}}}))
        );
    }

    #[test]
    fn no_ips_means_no_ingress() {
        let d = desired_service(&import(json!({"type": "ClusterSetIP", "ports": []})));
        assert_eq!(d.status_patch(&service(json!({}))).unwrap(), None);
        let stale = service(json!({"status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}));
        assert_eq!(
            d.status_patch(&stale).unwrap(),
            Some(json!({"status": {"loadBalancer": {"ingress": []}}}))
        );
    }
}
