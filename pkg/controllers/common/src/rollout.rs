//! The staged-rollout gate the binding controller asks before it renders a cluster's Work, and the
//! template revision both it and the rollout controller compute (a karmada-rs addition; see
//! `karmada_apis::rollout`).
//!
//! A workload without a [`Rollout`] object renders exactly as before. With one, cluster `X` gets
//! the current template only when the Rollout admitted `X` to the current revision (or the current
//! revision is the stable one); otherwise it gets the stable revision: the current template with
//! its content (everything but `apiVersion`, `kind`, `metadata` and `status`) replaced by the
//! Rollout's `status.stableTemplate`, its replica count kept. So replica changes from the scheduler
//! and override policies still reach clusters held back, and a rollback renders the stable content
//! again.

use karmada_apis::rollout::{Rollout, RolloutStatus};
use serde_json::{Map, Value};

pub use karmada_apis::rollout::REVISION_ANNOTATION;

/// Top-level fields that are not a template's content.
const NOT_CONTENT: &[&str] = &["apiVersion", "kind", "metadata", "status"];

/// The template's content: every top-level field but `apiVersion`, `kind`, `metadata` and
/// `status`, with `spec.replicas` left out (scaling is not a new revision).
pub fn template_content(template: &Value) -> Value {
    let mut content = Map::new();
    if let Some(object) = template.as_object() {
        for (key, value) in object {
            if !NOT_CONTENT.contains(&key.as_str()) {
                content.insert(key.clone(), value.clone());
            }
        }
    }
    if let Some(spec) = content.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("replicas");
    }
    Value::Object(content)
}

/// The revision of a template: a hash of its [`template_content`] (16 hex digits, FNV-1a over
/// the compact JSON, whose object keys are sorted). Labels, annotations and the replica count do
/// not make a new revision.
pub fn template_revision(template: &Value) -> String {
    let text = template_content(template).to_string();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// What the binding controller renders for one cluster.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// The current template, as without a rollout.
    Current,
    /// The stable revision: this template, to render instead of the current one.
    Stable(Value),
}

/// Which revision cluster `cluster` gets of `template` (whose revision is `revision`) under
/// `rollout`: [`Admission::Current`] without a Rollout, before its first status, when the
/// revision is the stable one or when the Rollout admitted the cluster to it; else
/// [`Admission::Stable`].
pub fn admission(
    rollout: Option<&Rollout>,
    cluster: &str,
    revision: &str,
    template: &Value,
) -> Admission {
    let Some(status) = rollout.and_then(|r| r.status.as_ref()) else {
        return Admission::Current;
    };
    let Some(stable) = stable_content(status) else {
        return Admission::Current;
    };
    if status.stable_revision.is_empty() || status.stable_revision == revision {
        return Admission::Current;
    }
    let admitted = status
        .clusters
        .iter()
        .any(|c| c.name == cluster && c.revision == revision);
    if admitted {
        Admission::Current
    } else {
        Admission::Stable(with_content(template, &stable))
    }
}

/// The stable template content a Rollout keeps, decoded.
fn stable_content(status: &RolloutStatus) -> Option<Value> {
    status.stable_template.as_ref()?.to_value().ok()
}

/// `template` with its content replaced by `content`, keeping the template's `spec.replicas`.
pub fn with_content(template: &Value, content: &Value) -> Value {
    let mut out = Map::new();
    if let Some(object) = template.as_object() {
        for key in NOT_CONTENT {
            if let Some(value) = object.get(*key) {
                out.insert((*key).to_owned(), value.clone());
            }
        }
    }
    if let Some(object) = content.as_object() {
        for (key, value) in object {
            out.insert(key.clone(), value.clone());
        }
    }
    let replicas = template.pointer("/spec/replicas").cloned();
    if let (Some(replicas), Some(spec)) =
        (replicas, out.get_mut("spec").and_then(Value::as_object_mut))
    {
        spec.insert("replicas".to_owned(), replicas);
    }
    Value::Object(out)
}

/// How long start-up keeps asking discovery whether Rollouts are served before it gives up.
const DISCOVERY_PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether the control plane serves the Rollout kind (the CRDs of `apps.karmada-rs.io` are
/// installed): without them there is no rollout to gate on, and nothing watches them.
///
/// Both the binding controller (which gates) and the rollout controller (which admits) ask this
/// once at start-up, so a transient discovery failure must not read as "not served": that would
/// leave the rollout controller admitting clusters stage by stage while the binding controller
/// renders the new revision everywhere. Only a definite answer (the group/version or the resource
/// is unknown) counts; other errors are retried for up to a minute, then returned.
pub async fn rollouts_served(client: &kube::Client) -> Result<bool, kube::Error> {
    let api_version = karmada_apis::rollout::API_VERSION;
    let deadline = tokio::time::Instant::now() + DISCOVERY_PATIENCE;
    let mut backoff = lariat::backoff::Backoff::new(
        std::time::Duration::from_millis(200),
        std::time::Duration::from_secs(5),
    );
    loop {
        match lariat::client::resource_served(client, api_version, "rollouts").await {
            Ok(true) => return Ok(true),
            Ok(false) => {
                tracing::info!("{api_version} serves no rollouts: staged rollouts are off");
            }
            Err(e) if apimachinery::is_not_found(&e) => {
                tracing::info!(error = %e, "{api_version} not served: staged rollouts are off");
            }
            Err(e) => {
                let delay = backoff.next_delay();
                if tokio::time::Instant::now() + delay > deadline {
                    return Err(e);
                }
                tracing::warn!(error = %e, ?delay, "discovery of {api_version} failed; asking again");
                tokio::time::sleep(delay).await;
                continue;
            }
        }
        return Ok(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karmada_apis::rollout::{ClusterRolloutStatus, RolloutState};
    use serde_json::json;

    fn deploy(image: &str, replicas: i64) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns", "generation": 3, "labels": {"a": "b"}},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": image}]}}},
            "status": {"readyReplicas": 1},
        })
    }

    fn rollout(stable: &Value, admitted: &[(&str, &str)]) -> Rollout {
        Rollout {
            status: Some(RolloutStatus {
                stable_revision: template_revision(stable),
                stable_template: Some(template_content(stable).into()),
                clusters: admitted
                    .iter()
                    .map(|(name, revision)| ClusterRolloutStatus {
                        name: (*name).to_owned(),
                        revision: (*revision).to_owned(),
                        state: RolloutState::Progressing,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn revision_ignores_metadata_status_and_replicas() {
        let a = deploy("nginx:1", 2);
        let mut b = deploy("nginx:1", 5);
        b["metadata"]["labels"]["x"] = json!("y");
        b["status"] = json!({});
        assert_eq!(template_revision(&a), template_revision(&b));
        assert_ne!(
            template_revision(&a),
            template_revision(&deploy("nginx:2", 2))
        );
        assert_eq!(template_revision(&a).len(), 16);
    }

    #[test]
    fn no_rollout_or_stable_revision_renders_current() {
        let t = deploy("nginx:2", 2);
        let r = template_revision(&t);
        assert_eq!(admission(None, "m1", &r, &t), Admission::Current);
        let same = rollout(&t, &[]);
        assert_eq!(admission(Some(&same), "m1", &r, &t), Admission::Current);
        assert_eq!(
            admission(Some(&Rollout::default()), "m1", &r, &t),
            Admission::Current
        );
    }

    #[test]
    fn clusters_not_admitted_get_the_stable_content_with_current_replicas() {
        let old = deploy("nginx:1", 2);
        let new = deploy("nginx:2", 4);
        let r = template_revision(&new);
        let ro = rollout(&old, &[("m1", &r), ("m2", "other")]);
        assert_eq!(admission(Some(&ro), "m1", &r, &new), Admission::Current);
        let Admission::Stable(m2) = admission(Some(&ro), "m2", &r, &new) else {
            panic!("m2 not held back");
        };
        assert_eq!(
            m2.pointer("/spec/template/spec/containers/0/image"),
            Some(&json!("nginx:1"))
        );
        assert_eq!(m2.pointer("/spec/replicas"), Some(&json!(4)));
        assert_eq!(m2["metadata"], new["metadata"]);
        assert_eq!(template_revision(&m2), template_revision(&old));
    }
}
