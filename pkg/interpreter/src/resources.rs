//! Per-pod resource requests and node constraints of a pod spec, summed the way Karmada's
//! `util.Resource.AddPodTemplateRequest` does, for a binding's `replicaRequirements`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as KubeQuantity;
use karmada_apis::work::v1alpha2::NodeClaim;
use serde_json::{Map, Value};

use crate::error::Cause;
use crate::object::{self, CResult};
use apimachinery::quantity::{Format, Quantity};

const CPU: &str = "cpu";
const MEMORY: &str = "memory";
const PODS: &str = "pods";
const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// Prefix of native resources with a domain (`kubernetes.io/...`).
const DEFAULT_NAMESPACE_PREFIX: &str = "kubernetes.io/";
/// Prefix quota names put in front of request resources.
const REQUESTS_PREFIX: &str = "requests.";
const HUGE_PAGES_PREFIX: &str = "hugepages-";
const ATTACHABLE_VOLUMES_PREFIX: &str = "attachable-volumes-";

/// Sum of the resources one replica requests, by kind of resource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Resource {
    milli_cpu: i64,
    memory: i64,
    ephemeral_storage: i64,
    pods: i64,
    scalars: BTreeMap<String, i64>,
}

impl Resource {
    fn add(&mut self, list: &[(String, Quantity)]) {
        for (name, q) in list {
            match name.as_str() {
                CPU => self.milli_cpu = self.milli_cpu.saturating_add(q.milli_value()),
                MEMORY => self.memory = self.memory.saturating_add(q.value()),
                PODS => self.pods = self.pods.saturating_add(q.value()),
                EPHEMERAL_STORAGE => {
                    self.ephemeral_storage = self.ephemeral_storage.saturating_add(q.value());
                }
                other if is_scalar_resource_name(other) => {
                    let slot = self.scalars.entry(other.to_owned()).or_default();
                    *slot = slot.saturating_add(q.value());
                }
                _ => {}
            }
        }
    }

    fn set_max(&mut self, list: &[(String, Quantity)]) {
        for (name, q) in list {
            match name.as_str() {
                CPU => self.milli_cpu = self.milli_cpu.max(q.milli_value()),
                MEMORY => self.memory = self.memory.max(q.value()),
                PODS => self.pods = self.pods.max(q.value()),
                EPHEMERAL_STORAGE => self.ephemeral_storage = self.ephemeral_storage.max(q.value()),
                other if is_scalar_resource_name(other) => {
                    let slot = self.scalars.entry(other.to_owned()).or_default();
                    *slot = (*slot).max(q.value());
                }
                _ => {}
            }
        }
    }

    /// The positive amounts as a resource list in apimachinery's canonical notation.
    pub(crate) fn to_list(&self) -> BTreeMap<String, KubeQuantity> {
        let mut out = BTreeMap::new();
        let mut put = |name: &str, text: String| {
            out.insert(name.to_owned(), KubeQuantity(text));
        };
        if self.milli_cpu > 0 {
            put(CPU, canonical(self.milli_cpu, -3, Format::DecimalSi));
        }
        if self.memory > 0 {
            put(MEMORY, canonical(self.memory, 0, Format::BinarySi));
        }
        if self.ephemeral_storage > 0 {
            put(
                EPHEMERAL_STORAGE,
                canonical(self.ephemeral_storage, 0, Format::BinarySi),
            );
        }
        if self.pods > 0 {
            put(PODS, canonical(self.pods, 0, Format::DecimalSi));
        }
        for (name, &value) in &self.scalars {
            if value > 0 {
                let text = if name.starts_with(HUGE_PAGES_PREFIX) {
                    canonical(value, 0, Format::BinarySi)
                } else {
                    canonical(value, 0, Format::DecimalSi)
                };
                put(name, text);
            }
        }
        out
    }
}

/// The resources one pod of `pod_spec` requests: containers summed, each init container raising
/// the total to at least its own request, plus the pod overhead. A container's limits stand in for
/// requests it does not set.
pub(crate) fn pod_request(pod_spec: &Value, spec_path: &[&str]) -> CResult<Resource> {
    let mut total = Resource::default();
    for container in containers(pod_spec, spec_path, "containers")? {
        total.add(&container);
    }
    for container in containers(pod_spec, spec_path, "initContainers")? {
        total.set_max(&container);
    }
    let overhead_path = path_with(spec_path, &["overhead"]);
    if let Some(overhead) = object::opt_object(pod_spec, &["overhead"])
        .map_err(|_| Cause::wrong_type(&overhead_path, "an object"))?
    {
        total.add(&quantities(overhead, &overhead_path)?);
    }
    Ok(total)
}

/// Effective requests of each container in `pod_spec[field]`.
fn containers(
    pod_spec: &Value,
    spec_path: &[&str],
    field: &str,
) -> CResult<Vec<Vec<(String, Quantity)>>> {
    let list_path = path_with(spec_path, &[field]);
    let Some(list) = object::opt_array(pod_spec, &[field])
        .map_err(|_| Cause::wrong_type(&list_path, "an array"))?
    else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(list.len());
    for (index, container) in list.iter().enumerate() {
        let item = format!("{field}[{index}]");
        let requests_path = path_with(spec_path, &[&item, "resources", "requests"]);
        let limits_path = path_with(spec_path, &[&item, "resources", "limits"]);
        let requests = object::opt_object(container, &["resources", "requests"])
            .map_err(|_| Cause::wrong_type(&requests_path, "an object"))?;
        let limits = object::opt_object(container, &["resources", "limits"])
            .map_err(|_| Cause::wrong_type(&limits_path, "an object"))?;
        let mut effective = match requests {
            Some(r) => quantities(r, &requests_path)?,
            None => Vec::new(),
        };
        if let Some(limits) = limits {
            for (name, q) in quantities(limits, &limits_path)? {
                if !requests.is_some_and(|r| r.contains_key(&name)) {
                    effective.push((name, q));
                }
            }
        }
        out.push(effective);
    }
    Ok(out)
}

/// apimachinery's canonical text of `value × 10^exponent` in `format`.
fn canonical(value: i64, exponent: i32, format: Format) -> String {
    Quantity::from_scaled(i128::from(value), exponent, format).to_string()
}

fn quantities(list: &Map<String, Value>, path: &[&str]) -> CResult<Vec<(String, Quantity)>> {
    let mut out = Vec::with_capacity(list.len());
    for (name, value) in list {
        let field_path = path_with(path, &[name]);
        let parsed = match value {
            Value::String(text) => Quantity::parse(text).map_err(|reason| Cause::Quantity {
                path: field_path.join("."),
                value: text.clone(),
                reason,
            })?,
            // A bare JSON number is accepted by apimachinery's Quantity decoder as well.
            Value::Number(n) => {
                Quantity::parse(&n.to_string()).map_err(|reason| Cause::Quantity {
                    path: field_path.join("."),
                    value: n.to_string(),
                    reason,
                })?
            }
            _ => return Err(Cause::wrong_type(&field_path, "a quantity string")),
        };
        out.push((name.clone(), parsed));
    }
    Ok(out)
}

fn path_with<'a>(base: &[&'a str], rest: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(rest).copied().collect()
}

/// The node constraints of a pod spec (`None` when it has no nodeSelector, required node
/// affinity or tolerations).
pub(crate) fn node_claim(pod_spec: &Value, spec_path: &[&str]) -> CResult<Option<NodeClaim>> {
    let at = |rest: &[&'static str]| path_with(spec_path, rest);
    let node_selector = object::string_map(pod_spec, &["nodeSelector"])
        .map_err(|_| Cause::wrong_type(&at(&["nodeSelector"]), "a map of strings"))?
        .unwrap_or_default();
    let tolerations: Vec<Toleration> = match object::get(pod_spec, &["tolerations"])
        .map_err(|_| Cause::wrong_type(&at(&["tolerations"]), "an array"))?
    {
        Some(v) => object::decode(v, &at(&["tolerations"]))?,
        None => Vec::new(),
    };
    let affinity_path = [
        "affinity",
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
    ];
    let hard_node_affinity: Option<NodeSelector> = match object::get(pod_spec, &affinity_path)
        .map_err(|_| Cause::wrong_type(&at(&affinity_path), "an object"))?
    {
        Some(v) => Some(object::decode(v, &at(&affinity_path))?),
        None => None,
    };
    if node_selector.is_empty() && tolerations.is_empty() && hard_node_affinity.is_none() {
        return Ok(None);
    }
    Ok(Some(NodeClaim {
        hard_node_affinity,
        node_selector,
        tolerations,
    }))
}

/// Kubernetes' `IsScalarResourceName`: extended resources, huge pages, `kubernetes.io/`-prefixed
/// native resources and attachable volumes.
pub(crate) fn is_scalar_resource_name(name: &str) -> bool {
    is_extended_resource_name(name)
        || name.starts_with(HUGE_PAGES_PREFIX)
        || name.contains(DEFAULT_NAMESPACE_PREFIX)
        || name.starts_with(ATTACHABLE_VOLUMES_PREFIX)
}

fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains(DEFAULT_NAMESPACE_PREFIX)
}

fn is_extended_resource_name(name: &str) -> bool {
    if is_native_resource(name) || name.starts_with(REQUESTS_PREFIX) {
        return false;
    }
    is_qualified_name(&format!("{REQUESTS_PREFIX}{name}"))
}

/// Kubernetes' `IsQualifiedName`: `[prefix/]name`, prefix a DNS subdomain, name up to 63
/// alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
fn is_qualified_name(value: &str) -> bool {
    let (prefix, name) = match value.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, value),
    };
    if name.contains('/') {
        return false;
    }
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && name
            .as_bytes()
            .first()
            .is_some_and(u8::is_ascii_alphanumeric)
        && name
            .as_bytes()
            .last()
            .is_some_and(u8::is_ascii_alphanumeric);
    name_ok && prefix.is_none_or(is_dns1123_subdomain)
}

fn is_dns1123_subdomain(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 253
        && value.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list(r: &Resource) -> BTreeMap<String, String> {
        r.to_list().into_iter().map(|(k, v)| (k, v.0)).collect()
    }

    #[test]
    fn scalar_resource_names() {
        assert!(is_scalar_resource_name("nvidia.com/gpu"));
        assert!(is_scalar_resource_name("hugepages-2Mi"));
        assert!(is_scalar_resource_name("kubernetes.io/something"));
        assert!(is_scalar_resource_name("attachable-volumes-aws-ebs"));
        assert!(!is_scalar_resource_name("storage"));
        assert!(!is_scalar_resource_name("Example.com/gpu"));
        assert!(!is_scalar_resource_name("requests.example.com/gpu"));
        assert!(!is_scalar_resource_name("example.com/a/b"));
    }

    #[test]
    fn containers_sum_init_containers_max_overhead_adds() {
        let spec = json!({
            "containers": [
                {"resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}},
                {"resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "1", "memory": "64Mi", "nvidia.com/gpu": "1"}}}
            ],
            "initContainers": [
                {"resources": {"requests": {"cpu": "2", "memory": "16Mi"}}}
            ],
            "overhead": {"cpu": "100m"}
        });
        let r = pod_request(&spec, &["spec"]).unwrap();
        assert_eq!(
            list(&r),
            BTreeMap::from([
                ("cpu".into(), "2100m".into()),
                ("memory".into(), "128Mi".into()),
                ("nvidia.com/gpu".into(), "1".into()),
            ])
        );
    }

    #[test]
    fn empty_pod_requests_nothing() {
        let r = pod_request(&json!({"containers": [{"name": "a"}]}), &["spec"]).unwrap();
        assert!(r.to_list().is_empty());
    }

    #[test]
    fn bad_quantity_names_its_path() {
        let spec = json!({"containers": [{"resources": {"requests": {"cpu": "lots"}}}]});
        let err = pod_request(&spec, &["spec", "template", "spec"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "field `spec.template.spec.containers[0].resources.requests.cpu`: invalid quantity \"lots\": no digits"
        );
    }

    #[test]
    fn node_claim_collects_selector_tolerations_and_required_affinity() {
        assert_eq!(node_claim(&json!({}), &["spec"]).unwrap(), None);
        let spec = json!({
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]},
                "preferredDuringSchedulingIgnoredDuringExecution": []
            }}
        });
        let claim = node_claim(&spec, &["spec"]).unwrap().unwrap();
        assert_eq!(
            claim.node_selector.get("disk").map(String::as_str),
            Some("ssd")
        );
        assert_eq!(claim.tolerations.len(), 1);
        assert_eq!(
            claim.hard_node_affinity.unwrap().node_selector_terms.len(),
            1
        );
        assert!(node_claim(&json!({"tolerations": "x"}), &["spec"]).is_err());
    }
}
