//! A Pull member's scale as the control plane knows it. The controller-manager never connects to
//! a Pull member (its agent holds the only credentials), so where Karmada reads the workload's
//! scale subresource in the member, this reads the member's Work in `karmada-es-<cluster>`: the
//! replicas the manifest asks for, the selector of its `spec.selector`, and the replicas the
//! agent reflected into the Work's status. Pods and their metrics stay out of reach.
//!
//! The agent writes that status, so it is treated as a member response: only `replicas` is read,
//! as a non-negative count.

use k8s_openapi::api::autoscaling::v1::{Scale, ScaleSpec, ScaleStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use karmada_apis::names::{execution_space_name, work_name};
use karmada_apis::work::v1alpha1::Work;
use kube::api::{Api, GroupVersionKind};
use serde_json::Value;

use super::FederatedHpaController;
use super::members::selector_string;

impl FederatedHpaController {
    /// The scale of `namespace/name` in Pull member `cluster`, from its Work, or why not.
    pub(super) async fn reported_scale(
        &self,
        cluster: &str,
        gvk: &GroupVersionKind,
        namespace: &str,
        name: &str,
    ) -> Result<Scale, String> {
        let works: Api<Work> =
            Api::namespaced(self.inner.client.clone(), &execution_space_name(cluster));
        let work_name = work_name(&gvk.kind, name, namespace);
        let work = works
            .get_opt(&work_name)
            .await
            .map_err(|e| format!("Work {work_name} not read: {e}"))?
            .ok_or_else(|| format!("no Work {work_name}"))?;
        scale_of_work(&work, gvk, namespace, name)
            .ok_or_else(|| format!("Work {work_name} does not hold {} {name}", gvk.kind))
    }
}

/// The scale of the manifest `namespace/name` of kind `gvk` in `work`: `spec.replicas` and the
/// selector from the manifest, `status.replicas` from the reflected status (0 until reported).
/// `None` when the Work holds no such manifest.
pub(super) fn scale_of_work(
    work: &Work,
    gvk: &GroupVersionKind,
    namespace: &str,
    name: &str,
) -> Option<Scale> {
    let manifest = work
        .spec
        .workload
        .manifests
        .iter()
        .find(|m| {
            m.identity().is_ok_and(|id| {
                id.kind == gvk.kind
                    && id.metadata.name == name
                    && id.metadata.namespace == namespace
            })
        })?
        .to_value()
        .ok()?;
    let spec_replicas = manifest.pointer("/spec/replicas").map(count);
    let selector = match manifest.pointer("/spec/selector") {
        Some(Value::String(s)) => s.clone(),
        Some(v @ Value::Object(_)) => {
            let parsed: Option<LabelSelector> = serde_json::from_value(v.clone()).ok();
            selector_string(parsed.as_ref())
        }
        _ => String::new(),
    };
    let status_replicas = work
        .status
        .as_ref()
        .into_iter()
        .flat_map(|s| &s.manifest_statuses)
        .find(|s| {
            s.identifier.kind == gvk.kind
                && s.identifier.name == name
                && s.identifier.namespace == namespace
        })
        .and_then(|s| s.status.as_ref())
        .and_then(|raw| raw.to_value().ok())
        .and_then(|v| v.get("replicas").map(count))
        .unwrap_or(0);
    Some(Scale {
        spec: Some(ScaleSpec {
            replicas: spec_replicas,
        }),
        status: Some(ScaleStatus {
            replicas: status_replicas,
            selector: Some(selector).filter(|s| !s.is_empty()),
        }),
        ..Default::default()
    })
}

/// A replica count from JSON: an integer clamped to `0..=i32::MAX`, anything else 0.
fn count(v: &Value) -> i32 {
    v.as_i64()
        .map_or(0, |n| i32::try_from(n.max(0)).unwrap_or(i32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(status: Value) -> Work {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "work.karmada.io/v1alpha1",
            "kind": "Work",
            "metadata": {"name": "web-abc", "namespace": "karmada-es-member3"},
            "spec": {"workload": {"manifests": [{
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}}
            }]}},
            "status": status
        }))
        .unwrap()
    }

    fn deployment() -> GroupVersionKind {
        GroupVersionKind::gvk("apps", "v1", "Deployment")
    }

    #[test]
    fn the_manifest_gives_replicas_and_selector_and_the_status_what_was_reported() {
        let w = work(serde_json::json!({"manifestStatuses": [{
            "identifier": {"ordinal": 0, "group": "apps", "version": "v1", "kind": "Deployment",
                           "resource": "deployments", "namespace": "default", "name": "web"},
            "status": {"replicas": 2, "readyReplicas": 1}
        }]}));
        let s = scale_of_work(&w, &deployment(), "default", "web").unwrap();
        assert_eq!(s.spec.unwrap().replicas, Some(3));
        let status = s.status.unwrap();
        assert_eq!(status.replicas, 2);
        assert_eq!(status.selector.as_deref(), Some("app=web"));
    }

    #[test]
    fn nothing_reported_counts_zero_and_hostile_counts_are_clamped() {
        let s = scale_of_work(
            &work(serde_json::json!({})),
            &deployment(),
            "default",
            "web",
        )
        .unwrap();
        assert_eq!(s.status.unwrap().replicas, 0);
        let w = work(serde_json::json!({"manifestStatuses": [{
            "identifier": {"ordinal": 0, "group": "apps", "version": "v1", "kind": "Deployment",
                           "resource": "deployments", "namespace": "default", "name": "web"},
            "status": {"replicas": -7}
        }]}));
        assert_eq!(
            scale_of_work(&w, &deployment(), "default", "web")
                .unwrap()
                .status
                .unwrap()
                .replicas,
            0
        );
        assert_eq!(count(&serde_json::json!(1_i64 << 40)), i32::MAX);
        assert_eq!(count(&serde_json::json!("3")), 0);
    }

    #[test]
    fn another_object_is_not_read() {
        assert!(
            scale_of_work(
                &work(serde_json::json!({})),
                &deployment(),
                "default",
                "api"
            )
            .is_none()
        );
        assert!(
            scale_of_work(&work(serde_json::json!({})), &deployment(), "other", "web").is_none()
        );
    }
}
