//! One manifest's member object: its identity, the member API and cache it lives in, and how it
//! is read (cache first, API server when the cache has not synced or looks different).

use karmada_apis::well_known::{MANAGED_BY_KARMADA_LABEL, MANAGED_BY_KARMADA_LABEL_VALUE};
use karmada_controllers_common::metrics::{count_create, count_update};
use kube::api::{Api, DynamicObject, GroupVersionKind};
use serde_json::Value;

use super::error::ApplyError;
use super::{CONTROLLER_NAME, ExecutionController};

/// The identifying fields of a manifest.
pub(super) struct Ident {
    pub(super) api_version: String,
    pub(super) kind: String,
    pub(super) namespace: String,
    pub(super) name: String,
}

impl Ident {
    fn of(manifest: &Value) -> Result<Ident, ApplyError> {
        let s = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
        let id = Ident {
            api_version: s(manifest.get("apiVersion")),
            kind: s(manifest.get("kind")),
            namespace: s(manifest.pointer("/metadata/namespace")),
            name: s(manifest.pointer("/metadata/name")),
        };
        if id.api_version.is_empty() || id.kind.is_empty() || id.name.is_empty() {
            return Err(ApplyError::Manifest(
                "apiVersion, kind and metadata.name are required".to_owned(),
            ));
        }
        Ok(id)
    }
}

pub(super) fn is_managed(obj: &Value) -> bool {
    obj.pointer("/metadata/labels")
        .and_then(|l| l.get(MANAGED_BY_KARMADA_LABEL))
        .and_then(Value::as_str)
        == Some(MANAGED_BY_KARMADA_LABEL_VALUE)
}

pub(super) fn to_dynamic(v: &Value) -> Result<DynamicObject, ApplyError> {
    serde_json::from_value(v.clone()).map_err(|e| ApplyError::Manifest(e.to_string()))
}

pub(super) fn to_value(o: &DynamicObject) -> Result<Value, ApplyError> {
    serde_json::to_value(o).map_err(|e| ApplyError::Manifest(e.to_string()))
}

/// A member object's API and cache for one manifest.
pub(super) struct Target {
    pub(super) api: Api<DynamicObject>,
    pub(super) cache: lariat::Cache<DynamicObject>,
    pub(super) id: Ident,
    pub(super) gvk: GroupVersionKind,
}

impl Target {
    /// Counts a create of this object in `cluster` (Karmada's `CountCreateResourceToCluster`).
    pub(super) fn count_create(&self, ok: bool, cluster: &str) {
        count_create(ok, &self.id.api_version, &self.id.kind, cluster, false);
    }

    /// Counts an update of this object in `cluster` (Karmada's `CountUpdateResourceToCluster`).
    pub(super) fn count_update(&self, ok: bool, cluster: &str, operation: &str) {
        count_update(ok, &self.id.api_version, &self.id.kind, cluster, operation);
    }

    /// The object as the member's API server has it now (not the cache), as JSON.
    pub(super) async fn read(&self) -> Result<Option<Value>, ApplyError> {
        self.api
            .get_opt(&self.id.name)
            .await?
            .map(|o| to_value(&o))
            .transpose()
    }

    /// The error of a write that kept conflicting, naming the object.
    pub(super) fn conflicts(&self) -> ApplyError {
        ApplyError::Conflicts(format!(
            "{} {}/{}",
            self.id.kind, self.id.namespace, self.id.name
        ))
    }

    /// The object with the manifest's `apiVersion` and `kind` (list and watch items from the cache
    /// come without them).
    pub(super) fn typed(&self, mut v: Value) -> Value {
        if let Some(o) = v.as_object_mut() {
            o.insert(
                "apiVersion".to_owned(),
                Value::String(self.id.api_version.clone()),
            );
            o.insert("kind".to_owned(), Value::String(self.id.kind.clone()));
        }
        v
    }
}

impl ExecutionController {
    pub(super) async fn target(
        &self,
        member: &lariat::Cluster,
        manifest: &Value,
    ) -> Result<Target, ApplyError> {
        let id = Ident::of(manifest)?;
        let gvk = apimachinery::gvk_of(&id.api_version, &id.kind);
        let (ar, caps) = member.clients().resolve(&gvk).await?;
        let client = member.clients().client_for_controller(CONTROLLER_NAME)?;
        let api = if caps.scope == kube::discovery::Scope::Namespaced {
            Api::namespaced_with(client, &id.namespace, &ar)
        } else {
            Api::all_with(client, &ar)
        };
        let cache = member.caches().for_resource(&ar)?;
        Ok(Target {
            api,
            cache,
            id,
            gvk,
        })
    }

    /// The member object, from the managed cache when it has synced (`None` = not managed or
    /// absent), else from the API server.
    pub(super) async fn observed(&self, t: &Target) -> Result<(Option<Value>, bool), ApplyError> {
        let store = t.cache.store();
        if t.cache.has_synced() {
            let ns = (!t.id.namespace.is_empty()).then_some(t.id.namespace.as_str());
            return match store.get_named(ns, &t.id.name) {
                Some(o) => Ok((Some(t.typed(to_value(&o)?)), true)),
                None => Ok((None, true)),
            };
        }
        Ok((
            t.api
                .get_opt(&t.id.name)
                .await?
                .map(|o| to_value(&o))
                .transpose()?,
            false,
        ))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn managed_label_gate() {
        assert!(is_managed(
            &json!({"metadata": {"labels": {"karmada.io/managed": "true"}}})
        ));
        assert!(!is_managed(
            &json!({"metadata": {"labels": {"karmada.io/managed": "false"}}})
        ));
        assert!(!is_managed(&json!({"metadata": {}})));
    }
}
