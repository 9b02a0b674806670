//! `work.karmada.io/v1alpha1`: Work, the manifests to apply to one member cluster.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema::raw_object;

/// The API version of [`Work`].
pub const VERSION: &str = "v1alpha1";

/// The desired state of a Work: the manifests to apply in its cluster (the one its namespace
/// `karmada-es-<cluster>` names).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "work.karmada.io",
    version = "v1alpha1",
    kind = "Work",
    plural = "works",
    singular = "work",
    shortname = "wk",
    category = "karmada-io",
    namespaced,
    status = "WorkStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "The resources to apply to one member cluster; lives in that cluster's execution namespace.",
    printcolumn(
        name = "WORKLOAD-KIND",
        type_ = "string",
        json_path = ".spec.workload.manifests[*].kind"
    ),
    printcolumn(
        name = "APPLIED",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Applied\")].status"
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct WorkSpec {
    /// The manifests to apply.
    #[serde(default)]
    #[schemars(transform = crate::schema::no_default)]
    pub workload: WorkloadTemplate,

    /// `true` stops applying to the member cluster (status is still collected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_dispatching: Option<bool>,

    /// Keep the member cluster's resources when the Work is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_resources_on_deletion: Option<bool>,
}

/// The manifests of a Work.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct WorkloadTemplate {
    /// Kubernetes objects to apply to the member cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<Manifest>,
}

// Stored as compact JSON text rather than a `serde_json::Value`: every Work in a cache holds its
// manifests for as long as the Work exists, and a decoded tree of a typical 1 KiB Deployment takes
// about 10 KiB (a B-tree node per object), the text 1 KiB. Readers decode what they need when they
// need it (`to_value`, `decode`, `identity`); (de)serialisation transcodes straight between the
// wire and the text, in any self-describing format, without building a tree. (A plain comment: the
// doc comment below becomes the CRD's description.)
/// One Kubernetes object, kept verbatim (Go's `runtime.RawExtension`).
#[derive(Clone, JsonSchema)]
#[schemars(schema_with = "raw_object")]
pub struct Manifest(#[schemars(skip)] Box<str>);

impl Manifest {
    /// The manifest as a JSON tree (the object as the user wrote it, plus what Karmada added).
    pub fn to_value(&self) -> serde_json::Result<serde_json::Value> {
        serde_json::from_str(&self.0)
    }

    /// Decodes the manifest, or just the parts `T` names (unknown fields are skipped unallocated).
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_str(&self.0)
    }

    /// The compact JSON text.
    pub fn as_json(&self) -> &str {
        &self.0
    }

    /// The manifest's `apiVersion`, `kind`, namespace and name, decoded without the rest.
    pub fn identity(&self) -> serde_json::Result<ManifestIdentity> {
        self.decode()
    }
}

/// What names a manifest: its type and its namespace/name (absent fields are empty).
#[derive(Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ManifestIdentity {
    /// `apiVersion`.
    #[serde(default)]
    pub api_version: String,
    /// `kind`.
    #[serde(default)]
    pub kind: String,
    /// `metadata.namespace` and `metadata.name`.
    #[serde(default)]
    pub metadata: ManifestName,
}

/// `metadata.namespace` and `metadata.name` of a manifest.
#[derive(Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ManifestName {
    /// `metadata.namespace`; empty for cluster-scoped objects.
    #[serde(default)]
    pub namespace: String,
    /// `metadata.name`.
    #[serde(default)]
    pub name: String,
}

impl From<serde_json::Value> for Manifest {
    fn from(value: serde_json::Value) -> Self {
        Self::from(&value)
    }
}

impl From<&serde_json::Value> for Manifest {
    /// `Value`'s `Display` is its compact JSON and cannot fail, so the text is valid by construction.
    fn from(value: &serde_json::Value) -> Self {
        Self(value.to_string().into_boxed_str())
    }
}

impl Default for Manifest {
    /// `null`, as a default `Value` would be.
    fn default() -> Self {
        Self("null".into())
    }
}

impl std::fmt::Debug for Manifest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Manifest").field(&&*self.0).finish()
    }
}

impl PartialEq for Manifest {
    /// Equal as JSON values: the same text, or texts that decode to the same tree (the API server
    /// may order keys or escape characters differently from us).
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0 || matches!((self.to_value(), other.to_value()), (Ok(a), Ok(b)) if a == b)
    }
}

impl Serialize for Manifest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut text = serde_json::Deserializer::from_str(&self.0);
        serde_transcode::transcode(&mut text, serializer)
    }
}

impl<'de> Deserialize<'de> for Manifest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut out = Vec::with_capacity(512);
        serde_transcode::transcode(deserializer, &mut serde_json::Serializer::new(&mut out))
            .map_err(serde::de::Error::custom)?;
        // serde_json writes UTF-8 only; the check cannot fail but costs nothing to keep honest.
        let text = String::from_utf8(out).map_err(serde::de::Error::custom)?;
        Ok(Self(text.into_boxed_str()))
    }
}

/// The observed state of a Work.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkStatus {
    /// Conditions; Karmada sets `Applied` and `Dispatching`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// Status of each applied manifest as observed in the member cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifest_statuses: Vec<ManifestStatus>,
}

/// The status of one manifest in the member cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ManifestStatus {
    /// Which manifest this is.
    pub identifier: ResourceIdentifier,
    /// The object's reflected status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "raw_object")]
    pub status: Option<serde_json::Value>,
    /// The object's health.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<ResourceHealth>,
}

/// Identifies a manifest and the object it became.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ResourceIdentifier {
    /// Index in `spec.workload.manifests`.
    pub ordinal: i64,
    /// API group (empty for the core group).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name.
    pub resource: String,
    /// Namespace (empty for cluster-scoped objects).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    pub name: String,
}

string_enum! {
    /// The health of a resource in a member cluster.
    pub enum ResourceHealth {
        /// The resource is healthy.
        Healthy = "Healthy",
        /// The resource is unhealthy.
        Unhealthy = "Unhealthy",
        /// Health can't be determined.
        Unknown = "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> serde_json::Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "prod", "labels": {"app": "web"}},
            "spec": {"replicas": 3, "ratio": 0.5, "big": u64::MAX, "neg": -7,
                     "note": "a<b & \"c\"\n", "empty": {}, "list": [1, null, true, "x"]},
        })
    }

    #[test]
    fn round_trips_through_json_text_and_values_unchanged() {
        let v = deployment();
        let m = Manifest::from(&v);
        assert_eq!(m.to_value().unwrap(), v);
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(
            text,
            m.as_json(),
            "JSON output is the stored text, verbatim"
        );
        let back: Manifest = serde_json::from_str(&text).unwrap();
        assert_eq!(back.as_json(), m.as_json());
        // Through a Value (serde_json::to_value/from_value), as callers that patch Works do.
        let tree = serde_json::to_value(&m).unwrap();
        assert_eq!(tree, v);
        let from_tree: Manifest = serde_json::from_value(tree).unwrap();
        assert_eq!(from_tree.as_json(), m.as_json());
    }

    #[test]
    fn reads_the_api_servers_text_compacted() {
        // Go escapes <, > and & and may order keys differently; whitespace is dropped.
        let wire = r#"{ "kind":"Deployment", "apiVersion":"apps/v1",
            "metadata":{"name":"web","namespace":"prod","labels":{"app":"web"}},
            "spec":{"replicas":3,"ratio":0.5,"big":18446744073709551615,"neg":-7,
                    "note":"a\u003cb \u0026 \"c\"\n","empty":{},"list":[1,null,true,"x"]}}"#;
        let m: Manifest = serde_json::from_str(wire).unwrap();
        assert!(
            m.as_json()
                .starts_with(r#"{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"#),
            "{}",
            m.as_json()
        );
        assert!(
            m.as_json().contains(r#""note":"a<b & \"c\"\n""#),
            "{}",
            m.as_json()
        );
        assert_eq!(m.to_value().unwrap(), deployment());
        assert_eq!(
            m,
            Manifest::from(deployment()),
            "equal as JSON, not as text"
        );
        assert_ne!(m, Manifest::from(json!({"kind": "Deployment"})));
    }

    #[test]
    fn reads_yaml_like_any_other_format() {
        let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: v\n";
        let m: Manifest = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(
            m.to_value().unwrap(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}})
        );
    }

    #[test]
    fn identity_decodes_type_and_name_only() {
        let id = Manifest::from(deployment()).identity().unwrap();
        assert_eq!(
            (id.api_version.as_str(), id.kind.as_str()),
            ("apps/v1", "Deployment")
        );
        assert_eq!(
            (id.metadata.namespace.as_str(), id.metadata.name.as_str()),
            ("prod", "web")
        );
        let none = Manifest::from(json!({"spec": {}})).identity().unwrap();
        assert_eq!(none, ManifestIdentity::default());
    }

    #[test]
    fn a_work_serialises_its_manifests_inline() {
        let work = Work::new(
            "w",
            WorkSpec {
                workload: WorkloadTemplate {
                    manifests: vec![deployment().into()],
                },
                ..Default::default()
            },
        );
        let v = serde_json::to_value(&work).unwrap();
        assert_eq!(v["spec"]["workload"]["manifests"][0], deployment());
        let back: Work = serde_json::from_value(v).unwrap();
        assert_eq!(back.spec, work.spec);
    }
}
