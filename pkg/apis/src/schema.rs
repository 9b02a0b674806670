//! Schema helpers used by the API types: CEL validation rules (`x-kubernetes-validations`), raw
//! embedded objects and the label/qualified-name patterns Kubernetes validates against.
//!
//! Karmada validates much of its API in a webhook; karmada-rs has none, so the same checks are
//! expressed as OpenAPI constraints and CEL rules in the generated CRDs.

use schemars::{Schema, SchemaGenerator, json_schema};
use serde_json::{Map, Value};

/// The `openAPIV3Schema` of a hand-written CRD (one whose kind has no `spec`, so kube cannot derive
/// it), generated with the settings kube's derive uses; `crds::tidy` finishes it like the derived
/// ones.
pub(crate) fn crd_root_schema<T: schemars::JsonSchema>()
-> Option<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps> {
    let generator = schemars::generate::SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .with_transform(schemars::transform::AddNullable::default())
        .with_transform(kube::core::schema::StructuralSchemaRewriter)
        .with_transform(kube::core::schema::OptionalEnum)
        .into_generator();
    serde_json::to_value(generator.into_root_schema_for::<T>())
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
}

/// A schemars transform making an array a list of type `map` keyed by `keys` (items unique by
/// them, merged per item by server-side apply). Use as `#[schemars(transform = list_map(&["type"]))]`.
pub(crate) fn list_map(keys: &'static [&'static str]) -> impl FnMut(&mut Schema) {
    move |schema: &mut Schema| {
        let object = schema.ensure_object();
        object.insert("x-kubernetes-list-type".into(), "map".into());
        object.insert("x-kubernetes-list-map-keys".into(), keys.into());
    }
}

/// One CEL rule for a schema's `x-kubernetes-validations`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cel {
    /// The CEL expression; `self` is the value the schema describes.
    pub rule: &'static str,
    /// The message the API server returns when the rule fails.
    pub message: &'static str,
    /// A relative JSON path naming the field the error is reported on (e.g. `.propagateDeps`).
    pub field_path: Option<&'static str>,
}

impl Cel {
    /// A rule whose error is reported on the schema's own path.
    pub const fn new(rule: &'static str, message: &'static str) -> Self {
        Self {
            rule,
            message,
            field_path: None,
        }
    }

    /// A rule whose error is reported on `field_path` (relative to the schema, e.g. `.minGroups`).
    pub const fn at(field_path: &'static str, rule: &'static str, message: &'static str) -> Self {
        Self {
            rule,
            message,
            field_path: Some(field_path),
        }
    }

    fn to_value(self) -> Value {
        let mut rule = Map::new();
        rule.insert("rule".into(), self.rule.into());
        rule.insert("message".into(), self.message.into());
        if let Some(path) = self.field_path {
            rule.insert("fieldPath".into(), path.into());
        }
        Value::Object(rule)
    }
}

/// A schemars transform appending `rules` to the schema's `x-kubernetes-validations` (keeping any
/// rules already there, e.g. from the field's type). Use as `#[schemars(transform = cel(&[...]))]`.
pub(crate) fn cel(rules: &'static [Cel]) -> impl FnMut(&mut Schema) {
    move |schema: &mut Schema| {
        let object = schema.ensure_object();
        let entry = object
            .entry("x-kubernetes-validations")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = entry {
            list.extend(rules.iter().map(|rule| rule.to_value()));
        }
    }
}

/// A schemars transform replacing a string enum's allowed values with a subset (Karmada allows fewer
/// values in some places than the Go type defines, e.g. cluster failover's purge mode).
pub(crate) fn only_values(values: &'static [&'static str]) -> impl FnMut(&mut Schema) {
    move |schema: &mut Schema| {
        let object = schema.ensure_object();
        object.insert(
            "enum".into(),
            Value::Array(values.iter().map(|v| Value::from(*v)).collect()),
        );
    }
}

/// Schema of an embedded Kubernetes object kept verbatim (Go's `runtime.RawExtension`).
pub(crate) fn raw_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Schema of an arbitrary JSON value (Go's `apiextensionsv1.JSON`).
pub(crate) fn any_json(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Kubernetes label value: at most 63 characters, alphanumerics with `-`, `_`, `.` inside, may be empty.
pub(crate) const LABEL_VALUE_PATTERN: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";

/// Kubernetes qualified name (label key): optional DNS-subdomain prefix and `/`, then a name part of
/// at most 63 characters. Used together with a length limit of 317 (253 + 1 + 63).
pub(crate) const QUALIFIED_NAME_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";

/// Upper bound on `QUALIFIED_NAME_PATTERN` strings.
pub(crate) const QUALIFIED_NAME_MAX_LENGTH: u32 = 317;

/// A schemars transform dropping the `default` schemars derives from `#[serde(default)]`, for fields
/// Karmada's CRDs don't default (the server would otherwise fill in e.g. an empty object).
pub(crate) fn no_default(schema: &mut Schema) {
    if let Some(object) = schema.as_object_mut() {
        object.remove("default");
    }
}

/// A schemars transform making a top-level `metadata` field what the API server accepts and
/// Karmada's CRDs declare: a bare `type: object` (no description, no default).
pub(crate) fn object_meta(schema: &mut Schema) {
    *schema = schemars::json_schema!({"type": "object"});
}

/// A schemars transform declaring `default: 0` on an integer field that is omitted when zero.
pub(crate) fn zero_default(schema: &mut Schema) {
    schema
        .ensure_object()
        .insert("default".into(), Value::from(0));
}

/// JSON pointer (RFC 6901): empty, or starting with `/`.
pub(crate) const JSON_POINTER_PATTERN: &str = r"^(/.*)?$";

/// A schemars transform on an object schema requiring exactly one of `properties` to be present, as
/// OpenAPI `oneOf` of `required` (no CEL cost, so it can sit deep inside lists).
pub(crate) fn exactly_one_of(properties: &'static [&'static str]) -> impl FnMut(&mut Schema) {
    move |schema: &mut Schema| {
        let alternatives = properties
            .iter()
            .map(|p| serde_json::json!({ "required": [p] }))
            .collect();
        schema
            .ensure_object()
            .insert("oneOf".into(), Value::Array(alternatives));
    }
}

/// Sets `keyword: value` on the named properties of a list's item schema, for constraining item
/// types we don't own (e.g. `NodeSelectorRequirement.key`).
pub(crate) fn set_item_property(schema: &mut Schema, property: &str, keyword: &str, value: Value) {
    if let Some(Value::Object(target)) = schema
        .as_object_mut()
        .and_then(|o| o.get_mut("items"))
        .and_then(|items| items.get_mut("properties"))
        .and_then(|properties| properties.get_mut(property))
    {
        target.insert(keyword.into(), value);
    }
}

/// Sets `keyword: value` on the schema at `path` (a chain of `properties`/`items`/
/// `additionalProperties` steps) when it exists.
pub(crate) fn set_at(schema: &mut Value, path: &[&str], keyword: &str, value: Value) {
    let mut target = schema;
    for step in path {
        match target.get_mut(*step) {
            Some(next) => target = next,
            None => return,
        }
    }
    if let Some(object) = target.as_object_mut() {
        object.insert(keyword.into(), value);
    }
}

/// A schemars transform on a `metav1.LabelSelector` field making the API server refuse what
/// apimachinery's `LabelSelectorAsSelector` cannot compile (Karmada's webhook lets such a selector
/// through and it then silently selects nothing): an operator other than `In`, `NotIn`, `Exists`,
/// `DoesNotExist`; `In`/`NotIn` without values or `Exists`/`DoesNotExist` with values; a key that
/// is not a qualified name; a value (in `matchExpressions` or `matchLabels`) that is not a label
/// value. OpenAPI keywords only (no CEL), so the check costs nothing however deep the selector sits;
/// the values-per-operator rule is a `oneOf` that [`crate::crds::tidy`] adds
/// ([`label_requirement_values`]), as kube's structural-schema rewriter cannot carry it.
/// `matchLabels` keys are not checked: that needs CEL over the map, too costly inside lists.
pub(crate) fn label_selector(schema: &mut Schema) {
    use serde_json::json;
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let mut value = Value::Object(std::mem::take(object));
    let key = [
        "properties",
        "matchExpressions",
        "items",
        "properties",
        "key",
    ];
    let operator = [
        "properties",
        "matchExpressions",
        "items",
        "properties",
        "operator",
    ];
    let values = [
        "properties",
        "matchExpressions",
        "items",
        "properties",
        "values",
        "items",
    ];
    let labels = ["properties", "matchLabels", "additionalProperties"];
    set_at(&mut value, &key, "pattern", QUALIFIED_NAME_PATTERN.into());
    set_at(
        &mut value,
        &key,
        "maxLength",
        QUALIFIED_NAME_MAX_LENGTH.into(),
    );
    set_at(
        &mut value,
        &operator,
        "enum",
        json!(LABEL_SELECTOR_OPERATORS),
    );
    for path in [&values[..], &labels[..]] {
        set_at(&mut value, path, "pattern", LABEL_VALUE_PATTERN.into());
        set_at(&mut value, path, "maxLength", 63.into());
    }
    if let Value::Object(o) = value {
        *object = o;
    }
}

/// The operators of a label selector requirement.
const LABEL_SELECTOR_OPERATORS: [&str; 4] = ["In", "NotIn", "Exists", "DoesNotExist"];

/// On the schema of a label selector requirement constrained by [`label_selector`] (recognised by
/// its operator enum), adds the rule that `In`/`NotIn` take at least one value and
/// `Exists`/`DoesNotExist` none, as a `oneOf` (kube's rewriter would hoist the alternatives'
/// properties into the parent, so this runs on the finished CRD).
pub(crate) fn label_requirement_values(schema: &mut Map<String, Value>) {
    let operators = schema
        .get("properties")
        .and_then(|p| p.get("operator"))
        .and_then(|o| o.get("enum"));
    if operators != Some(&serde_json::json!(LABEL_SELECTOR_OPERATORS)) {
        return;
    }
    schema.insert(
        "oneOf".into(),
        serde_json::json!([
            {"properties": {"operator": {"enum": ["In", "NotIn"]}, "values": {"minItems": 1}},
             "required": ["values"]},
            {"properties": {"operator": {"enum": ["Exists", "DoesNotExist"]}, "values": {"maxItems": 0}}},
        ]),
    );
}
