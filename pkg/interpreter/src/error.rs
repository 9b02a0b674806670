//! Errors of the interpreter: every error names the object it is about and the cause.

use std::fmt;

use serde_json::Value;

/// Identifies the object an operation ran on, for error messages and logs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectRef {
    /// `apiVersion` of the object (empty when missing).
    pub api_version: String,
    /// `kind` of the object (empty when missing).
    pub kind: String,
    /// `metadata.namespace` (empty for cluster-scoped objects).
    pub namespace: String,
    /// `metadata.name` (empty when missing).
    pub name: String,
}

impl ObjectRef {
    /// Reads the identifying fields of an unstructured object; missing or mistyped fields are empty.
    pub fn of(object: &Value) -> Self {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
        let metadata = object.get("metadata");
        Self {
            api_version: text(object.get("apiVersion")),
            kind: text(object.get("kind")),
            namespace: text(metadata.and_then(|m| m.get("namespace"))),
            name: text(metadata.and_then(|m| m.get("name"))),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.kind.is_empty() {
            "object"
        } else {
            &self.kind
        };
        let name = if self.name.is_empty() {
            "<unnamed>"
        } else {
            &self.name
        };
        if self.namespace.is_empty() {
            write!(f, "{kind} {name}")
        } else {
            write!(f, "{kind} {}/{name}", self.namespace)
        }
    }
}

/// An interpreter operation failed on an object (boxed: errors are rare, results are hot).
#[derive(Debug, thiserror::Error)]
#[error("{}: {}", .0.object, .0.cause)]
pub struct InterpretError(Box<ErrorInner>);

#[derive(Debug)]
struct ErrorInner {
    object: ObjectRef,
    cause: Cause,
}

impl InterpretError {
    /// An error about `object`.
    pub fn new(object: ObjectRef, cause: Cause) -> Self {
        Self(Box::new(ErrorInner { object, cause }))
    }

    /// The object the operation ran on.
    pub fn object(&self) -> &ObjectRef {
        &self.0.object
    }

    /// Why it failed.
    pub fn cause(&self) -> &Cause {
        &self.0.cause
    }
}

/// Why an interpreter operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Cause {
    /// The manifest is not a JSON object.
    #[error("manifest is not a JSON object")]
    NotAnObject,
    /// A field has the wrong JSON type (or an out-of-range number).
    #[error("field `{path}` must be {expected}")]
    WrongType {
        /// Dotted path of the field.
        path: String,
        /// What the field should have been.
        expected: &'static str,
    },
    /// A field the rule needs is missing.
    #[error("field `{path}` is missing")]
    Missing {
        /// Dotted path of the field.
        path: String,
    },
    /// A resource quantity could not be parsed.
    #[error("field `{path}`: invalid quantity {value:?}: {reason}")]
    Quantity {
        /// Dotted path of the quantity.
        path: String,
        /// The quantity as written.
        value: String,
        /// What is wrong with it.
        reason: apimachinery::QuantityError,
    },
    /// A field could not be decoded into its Kubernetes type.
    #[error("field `{path}`: {source}")]
    Decode {
        /// Dotted path of the field.
        path: String,
        /// The decoding error.
        source: serde_json::Error,
    },
    /// An annotation that must hold an integer does not.
    #[error("annotation {key} = {value:?} is not an integer")]
    AnnotationNotInteger {
        /// The annotation key.
        key: &'static str,
        /// Its value.
        value: String,
    },
    /// A rule of an interpreter layer (a ResourceInterpreterCustomization's Lua script, ...)
    /// failed; the source names the rule and why.
    #[error("{0}")]
    Layer(Box<dyn std::error::Error + Send + Sync>),
    /// The status a member cluster reported is malformed.
    #[error("status reported by cluster {cluster:?}: {cause}")]
    MemberStatus {
        /// The member cluster.
        cluster: String,
        /// What is wrong with the status.
        cause: Box<Cause>,
    },
}

impl Cause {
    /// Attaches the object this cause is about.
    pub fn at(self, object: &ObjectRef) -> InterpretError {
        InterpretError::new(object.clone(), self)
    }

    pub(crate) fn wrong_type(path: &[&str], expected: &'static str) -> Self {
        Cause::WrongType {
            path: path.join("."),
            expected,
        }
    }
}

/// Result of an interpreter operation.
pub type Result<T, E = InterpretError> = std::result::Result<T, E>;

/// Attaches an object to a `Result<T, Cause>`.
pub(crate) trait AtObject<T> {
    fn at(self, object: &ObjectRef) -> Result<T>;
}

impl<T> AtObject<T> for std::result::Result<T, Cause> {
    fn at(self, object: &ObjectRef) -> Result<T> {
        self.map_err(|cause| cause.at(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn object_ref_display_names_kind_namespace_and_name() {
        let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"namespace": "default", "name": "nginx"}});
        assert_eq!(
            ObjectRef::of(&deploy).to_string(),
            "Deployment default/nginx"
        );
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}});
        assert_eq!(ObjectRef::of(&ns).to_string(), "Namespace x");
        assert_eq!(ObjectRef::of(&json!(3)).to_string(), "object <unnamed>");
    }

    #[test]
    fn error_message_names_object_and_cause() {
        let deploy = json!({"kind": "Deployment", "metadata": {"namespace": "ns", "name": "a"}});
        let err =
            Cause::wrong_type(&["spec", "replicas"], "an integer").at(&ObjectRef::of(&deploy));
        assert_eq!(
            err.to_string(),
            "Deployment ns/a: field `spec.replicas` must be an integer"
        );
    }
}
