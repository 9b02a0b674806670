//! Go's `runtime.RawExtension` (a Work's manifests, the statuses reflected from member
//! clusters) kept as compact JSON text.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema::raw_object;

// Stored as compact JSON text rather than a `serde_json::Value`: a cached Work holds its manifests
// and the status reflected from its member, a cached binding one reflected status per member, for
// as long as they exist; a decoded tree of a typical 1 KiB Deployment takes about 10 KiB (a B-tree
// node per object), the text 1 KiB. Readers decode what they need when they need it (`to_value`,
// `decode`, `identity`); (de)serialisation transcodes straight between the wire and the text, in
// any self-describing format, without building a tree. (A plain comment: the doc comment below
// becomes the CRD's description.)
/// One Kubernetes object, kept verbatim (Go's `runtime.RawExtension`).
#[derive(Clone, JsonSchema)]
#[schemars(schema_with = "raw_object")]
pub struct RawExtension(#[schemars(skip)] Box<str>);

impl RawExtension {
    /// The value as a JSON tree.
    pub fn to_value(&self) -> serde_json::Result<serde_json::Value> {
        serde_json::from_str(&self.0)
    }

    /// Decodes the value, or just the parts `T` names (unknown fields are skipped unallocated).
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_str(&self.0)
    }

    /// The compact JSON text.
    pub fn as_json(&self) -> &str {
        &self.0
    }

    /// A manifest's `apiVersion`, `kind`, namespace and name, decoded without the rest.
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

impl From<serde_json::Value> for RawExtension {
    fn from(value: serde_json::Value) -> Self {
        Self::from(&value)
    }
}

impl From<&serde_json::Value> for RawExtension {
    /// `Value`'s `Display` is its compact JSON and cannot fail, so the text is valid by construction.
    fn from(value: &serde_json::Value) -> Self {
        Self(value.to_string().into_boxed_str())
    }
}

impl Default for RawExtension {
    /// `null`, as a default `Value` would be.
    fn default() -> Self {
        Self("null".into())
    }
}

impl std::fmt::Debug for RawExtension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RawExtension").field(&&*self.0).finish()
    }
}

impl PartialEq for RawExtension {
    /// Equal as JSON values: the same text, or texts that decode to the same tree (the API server
    /// may order keys or escape characters differently from us).
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0 || matches!((self.to_value(), other.to_value()), (Ok(a), Ok(b)) if a == b)
    }
}

impl Serialize for RawExtension {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut text = serde_json::Deserializer::from_str(&self.0);
        serde_transcode::transcode(&mut text, serializer)
    }
}

impl<'de> Deserialize<'de> for RawExtension {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut out = Vec::with_capacity(512);
        serde_transcode::transcode(deserializer, &mut serde_json::Serializer::new(&mut out))
            .map_err(serde::de::Error::custom)?;
        // serde_json writes UTF-8 only; the check cannot fail but costs nothing to keep honest.
        let text = String::from_utf8(out).map_err(serde::de::Error::custom)?;
        Ok(Self(text.into_boxed_str()))
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
        let m = RawExtension::from(&v);
        assert_eq!(m.to_value().unwrap(), v);
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(
            text,
            m.as_json(),
            "JSON output is the stored text, verbatim"
        );
        let back: RawExtension = serde_json::from_str(&text).unwrap();
        assert_eq!(back.as_json(), m.as_json());
        // Through a Value (serde_json::to_value/from_value), as callers that patch Works do.
        let tree = serde_json::to_value(&m).unwrap();
        assert_eq!(tree, v);
        let from_tree: RawExtension = serde_json::from_value(tree).unwrap();
        assert_eq!(from_tree.as_json(), m.as_json());
    }

    #[test]
    fn reads_the_api_servers_text_compacted() {
        // Go escapes <, > and & and may order keys differently; whitespace is dropped.
        let wire = r#"{ "kind":"Deployment", "apiVersion":"apps/v1",
            "metadata":{"name":"web","namespace":"prod","labels":{"app":"web"}},
            "spec":{"replicas":3,"ratio":0.5,"big":18446744073709551615,"neg":-7,
                    "note":"a\u003cb \u0026 \"c\"\n","empty":{},"list":[1,null,true,"x"]}}"#;
        let m: RawExtension = serde_json::from_str(wire).unwrap();
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
            RawExtension::from(deployment()),
            "equal as JSON, not as text"
        );
        assert_ne!(m, RawExtension::from(json!({"kind": "Deployment"})));
    }

    #[test]
    fn reads_yaml_like_any_other_format() {
        let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: v\n";
        let m: RawExtension = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(
            m.to_value().unwrap(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}})
        );
    }

    #[test]
    fn identity_decodes_type_and_name_only() {
        let id = RawExtension::from(deployment()).identity().unwrap();
        assert_eq!(
            (id.api_version.as_str(), id.kind.as_str()),
            ("apps/v1", "Deployment")
        );
        assert_eq!(
            (id.metadata.namespace.as_str(), id.metadata.name.as_str()),
            ("prod", "web")
        );
        let none = RawExtension::from(json!({"spec": {}})).identity().unwrap();
        assert_eq!(none, ManifestIdentity::default());
    }
}
