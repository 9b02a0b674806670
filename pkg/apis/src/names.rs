//! Object-name helpers that produce exactly the names Karmada produces.
//!
//! Karmada derives binding, Work and execution-namespace names from the template; matching them byte
//! for byte lets the Rust controllers adopt objects the Go controllers created (and vice versa).
//! Karmada hashes with FNV-32a over the text `kr/pretty` prints for a string under `%v`, which is the
//! string itself, and encodes the decimal hash with apimachinery's `rand.SafeEncodeString`.

use thiserror::Error;

use crate::well_known::{
    EXECUTION_SPACE_PREFIX, NAMESPACE_KARMADA_CLUSTER, NAMESPACE_KARMADA_SYSTEM,
};

/// The alphabet of apimachinery's `rand.String`/`SafeEncodeString` (no vowels, to avoid words).
const SAFE_ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

/// A name that does not have the expected shape.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum NameError {
    /// The namespace is not an execution namespace (`karmada-es-<cluster>`).
    #[error("the execution space name is in wrong format: {0:?}")]
    NotExecutionSpace(String),
}

/// FNV-1a, 32 bit (Go's `hash/fnv.New32a`).
pub fn fnv32a(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193)
    })
}

/// apimachinery's `rand.SafeEncodeString`: maps every character to the safe alphabet by its code
/// point modulo 27. Karmada only feeds it decimal digits.
pub fn safe_encode_string(s: &str) -> String {
    s.chars()
        .map(|c| char::from(SAFE_ALPHABET[(c as usize) % SAFE_ALPHABET.len()]))
        .collect()
}

/// Karmada's `hashutil.DeepHashObject` + `SafeEncodeString` for a string: the safe-encoded decimal
/// FNV-32a hash of its bytes.
fn hash_string(s: &str) -> String {
    safe_encode_string(&fnv32a(s.as_bytes()).to_string())
}

/// Go's `strings.ToLower` (per-rune simple lowercase mapping).
fn go_lower(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii() {
                c.to_ascii_lowercase()
            } else {
                c.to_lowercase().next().unwrap_or(c)
            }
        })
        .collect()
}

/// Replaces `:` (allowed in RBAC names, not in CRD object names) with `.`.
fn sanitize(name: &str) -> String {
    name.replace(':', ".")
}

/// Name of the ResourceBinding/ClusterResourceBinding of a template: `lower(<name>-<kind>)` with `:`
/// replaced by `.` (e.g. Deployment `nginx` → `nginx-deployment`).
pub fn binding_name(kind: &str, name: &str) -> String {
    go_lower(&format!("{}-{kind}", sanitize(name)))
}

/// Name of the Work for a template: `lower(<name>)-<hash>`, where the hash covers the namespace,
/// name and kind (e.g. Deployment `default/nginx` → `nginx-687f7fb96f`). `namespace` is empty for
/// cluster-scoped templates.
pub fn work_name(kind: &str, name: &str, namespace: &str) -> String {
    let name = go_lower(&sanitize(name));
    let key = if namespace.is_empty() {
        go_lower(&format!("{name}-{kind}"))
    } else {
        go_lower(&format!("{namespace}-{name}-{kind}"))
    };
    format!("{name}-{}", hash_string(&key))
}

/// Karmada's key for a binding: the safe-encoded hash of `<namespace>/<name>` (or `<name>`).
pub fn binding_reference_key(namespace: &str, name: &str) -> String {
    hash_string(&namespaced_key(namespace, name))
}

/// Name of a policy generated for a resource (e.g. by `karmadactl promote`):
/// `lower(<name>-<hash(namespace + gvk)>)` with `:` replaced by `.`.
pub fn policy_name(namespace: &str, name: &str, gvk: &str) -> String {
    let hash = hash_string(&format!("{namespace}{gvk}"));
    go_lower(&format!("{}-{hash}", sanitize(name)))
}

/// The execution namespace of a member cluster: `karmada-es-<cluster>`.
pub fn execution_space_name(cluster: &str) -> String {
    format!("{EXECUTION_SPACE_PREFIX}{cluster}")
}

/// The member cluster an execution namespace belongs to (`karmada-es-<cluster>` → `<cluster>`).
pub fn cluster_name(execution_space: &str) -> Result<&str, NameError> {
    execution_space
        .strip_prefix(EXECUTION_SPACE_PREFIX)
        .ok_or_else(|| NameError::NotExecutionSpace(execution_space.to_owned()))
}

/// Whether `namespace` is reserved for Karmada (`karmada-system`, `karmada-cluster`, `karmada-es-*`)
/// and never propagated.
pub fn is_reserved_namespace(namespace: &str) -> bool {
    namespace == NAMESPACE_KARMADA_SYSTEM
        || namespace == NAMESPACE_KARMADA_CLUSTER
        || namespace.starts_with(EXECUTION_SPACE_PREFIX)
}

/// `<namespace>/<name>`, or `<name>` when the namespace is empty.
pub fn namespaced_key(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_owned()
    } else {
        format!("{namespace}/{name}")
    }
}

/// Name of the impersonator Secret of a cluster: `<cluster>-impersonator`.
pub fn impersonation_secret_name(cluster: &str) -> String {
    format!("{cluster}-impersonator")
}

/// Name of the ServiceAccount Karmada creates in a member cluster: `karmada-<cluster>`.
pub fn service_account_name(cluster: &str) -> String {
    format!("karmada-{cluster}")
}

/// Name of an EndpointSlice collected from a member cluster: `imported-<cluster>-<name>`.
pub fn endpoint_slice_name(endpoint_slice: &str, cluster: &str) -> String {
    format!(
        "{}-{cluster}-{endpoint_slice}",
        crate::well_known::ENDPOINT_SLICE_PREFIX
    )
}

/// Name of the Service derived from a ServiceImport: `derived-<service>`.
pub fn derived_service_name(service: &str) -> String {
    format!("{}-{service}", crate::well_known::DERIVED_SERVICE_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Vectors computed with Go's hash/fnv and the algorithm above (and, for the policy name,
    // taken from Karmada's own unit test).
    #[test]
    fn work_names_match_karmada() {
        let cases = [
            ("Deployment", "nginx", "default", "nginx-687f7fb96f"),
            ("Pod", "pod", "", "pod-6c46fd8b9d"),
            ("pods", "Pod", "default", "pod-5fdddc94c5"),
            ("Pods", "work:pod", "default", "work.pod-85bc474696"),
            (
                "ClusterRole",
                "system:controller:tom",
                "",
                "system.controller.tom-656877dbcf",
            ),
            ("Service", "My-Svc", "Prod", "my-svc-5dcfd9b4d"),
            ("Namespace", "default", "", "default-5b5ccb595b"),
            (
                "ConfigMap",
                "kube-root-ca.crt",
                "kube-system",
                "kube-root-ca.crt-f8cf88dbb",
            ),
        ];
        for (kind, name, namespace, want) in cases {
            assert_eq!(
                work_name(kind, name, namespace),
                want,
                "{kind} {namespace}/{name}"
            );
        }
    }

    #[test]
    fn binding_names_match_karmada() {
        assert_eq!(binding_name("Deployment", "nginx"), "nginx-deployment");
        assert_eq!(binding_name("Pods", "pod"), "pod-pods");
        assert_eq!(binding_name("pods", "Pod"), "pod-pods");
        assert_eq!(
            binding_name("Role", "system:controller:tom"),
            "system.controller.tom-role"
        );
    }

    #[test]
    fn hashes_match_go() {
        // Reference values of FNV-32a.
        assert_eq!(fnv32a(b""), 0x811c_9dc5);
        assert_eq!(fnv32a(b"a"), 0xe40c_292c);
        assert_eq!(fnv32a(b"foobar"), 0xbf9c_f968);
        assert_eq!(safe_encode_string("0123456789"), "456789bcdf");
        assert_eq!(policy_name("ns-foo", "foo", "rand"), "foo-b4978784");
        assert_eq!(
            policy_name("ns-foo", "system:foo", "rand"),
            "system.foo-b4978784"
        );
        assert_eq!(
            binding_reference_key("prod-xxx", "mytest-deployment"),
            "5d6cf9f4c6"
        );
        assert_eq!(binding_reference_key("", "mytest-deployment"), "5f6fd649fc");
    }

    #[test]
    fn execution_spaces() {
        assert_eq!(execution_space_name("member1"), "karmada-es-member1");
        assert_eq!(cluster_name("karmada-es-member1"), Ok("member1"));
        assert_eq!(
            cluster_name("default"),
            Err(NameError::NotExecutionSpace("default".into()))
        );
        assert!(is_reserved_namespace("karmada-system"));
        assert!(is_reserved_namespace("karmada-cluster"));
        assert!(is_reserved_namespace("karmada-es-member1"));
        assert!(!is_reserved_namespace("default"));
        assert!(!is_reserved_namespace("kube-system"));
    }

    #[test]
    fn other_names() {
        assert_eq!(namespaced_key("", "a"), "a");
        assert_eq!(namespaced_key("ns", "a"), "ns/a");
        assert_eq!(impersonation_secret_name("m1"), "m1-impersonator");
        assert_eq!(service_account_name("m1"), "karmada-m1");
        assert_eq!(endpoint_slice_name("svc-abc", "m1"), "imported-m1-svc-abc");
        assert_eq!(derived_service_name("svc"), "derived-svc");
    }
}
