//! Creating or updating one member object (PUT with the member's fields retained, see the
//! module doc of [`super`]), refusing objects Karmada does not manage or another Work owns.

use apimachinery::{ConflictRetry, DEFAULT_RETRY, is_conflict};
use karmada_apis::policy_rs::v1alpha1::Takeover;
use karmada_apis::well_known::{CONFLICT_RESOLUTION_ANNOTATION, CONFLICT_RESOLUTION_OVERWRITE};
use karmada_apis::work::v1alpha1::ManifestStatus;
use karmada_controllers_common::drift::{drifted_at, manifest_hash};
use karmada_controllers_common::drift_policy::{DriftDecision, MANIFEST_HASH_ANNOTATION};
use karmada_controllers_common::manifest::manifest_status;
use karmada_controllers_common::metrics::{OPERATION_NONE, OPERATION_UNCHANGED, OPERATION_UPDATED};
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::Value;

use super::ExecutionController;
use super::error::ApplyError;
use super::ownership::WorkIdentity;
use super::target::{Target, is_managed, to_dynamic, to_value};

/// The drift policy covering a manifest, with what it needs.
pub(super) struct Policy<'a> {
    /// The covering policy's decision, if a policy covers the manifest.
    decision: Option<DriftDecision>,
    /// The manifest as the Work has it (without the hash annotation).
    plain: &'a Value,
    /// Its hash, when a policy covers it.
    hash: Option<String>,
}

/// `manifest` with the [`MANIFEST_HASH_ANNOTATION`] set to `hash`.
fn with_hash(manifest: &Value, hash: &str) -> Value {
    let mut out = manifest.clone();
    if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(
                MANIFEST_HASH_ANNOTATION.to_owned(),
                Value::String(hash.to_owned()),
            );
        }
    }
    out
}

/// `manifest` without the labels and annotations Karmada and karmada-rs stamp on what they
/// propagate (`karmada.io/managed`, `work.karmada.io/*`, ...): a pre-existing object has none of
/// them, and they are not what `takeover: IfNoDiff` compares.
fn without_karmada_marks(manifest: &Value) -> Value {
    let ours = |key: &str| {
        key.split_once('/').is_some_and(|(domain, _)| {
            domain.ends_with("karmada.io") || domain.ends_with("karmada-rs.io")
        })
    };
    let mut out = manifest.clone();
    for map in ["labels", "annotations"] {
        if let Some(m) = out
            .get_mut("metadata")
            .and_then(|m| m.get_mut(map))
            .and_then(Value::as_object_mut)
        {
            m.retain(|k, _| !ours(k));
        }
    }
    out
}

/// What applying one manifest did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Applied {
    Created,
    Updated,
    Unchanged,
}

/// One manifest applied: what happened and, after a create or update, the object's status entry
/// as the member's API server returned it.
pub(super) struct Outcome {
    pub(super) applied: Applied,
    pub(super) status: Option<ManifestStatus>,
}

impl ExecutionController {
    /// What applying the `ordinal`-th manifest as `t` did; `written` is the object the member's
    /// API server returned for a create or update. A status that cannot be interpreted is left to
    /// the work-status controller, which reports the error.
    pub(super) fn outcome(
        &self,
        t: &Target,
        ordinal: usize,
        applied: Applied,
        written: Option<&DynamicObject>,
    ) -> Outcome {
        let status = written.and_then(|o| to_value(o).ok()).and_then(|v| {
            let observed = t.typed(v);
            manifest_status(&self.inner.interpreter, &observed, ordinal, &t.gvk).ok()
        });
        Outcome { applied, status }
    }

    /// Creates or updates the `ordinal`-th manifest of a Work in the member.
    pub(super) async fn apply(
        &self,
        cluster: &str,
        member: &lariat::Cluster,
        (ordinal, manifest): (usize, &Value),
        me: &WorkIdentity,
    ) -> Result<Outcome, ApplyError> {
        let decision = self.inner.policies.get().and_then(|p| p.decide(manifest));
        let hash = decision.as_ref().map(|_| manifest_hash(manifest));
        let policy = Policy {
            decision,
            plain: manifest,
            hash,
        };
        let annotated;
        let manifest: &Value = match &policy.hash {
            Some(h) => {
                annotated = with_hash(manifest, h);
                &annotated
            }
            None => manifest,
        };
        let t = self.target(member, manifest).await?;
        let (mut observed, mut from_cache) = self.observed(&t).await?;
        if observed.is_none() {
            let result = t
                .api
                .create(&PostParams::default(), &to_dynamic(manifest)?)
                .await;
            match result {
                Ok(created) => {
                    t.count_create(true, cluster);
                    tracing::info!(cluster, kind = %t.id.kind, namespace = %t.id.namespace, name = %t.id.name, "created in member");
                    return Ok(self.outcome(&t, ordinal, Applied::Created, Some(&created)));
                }
                Err(kube::Error::Api(s)) if s.reason == "AlreadyExists" => {
                    // Not in the managed cache: an unmanaged object, or the cache lags.
                    observed = t.read().await?;
                    from_cache = false;
                    if observed.is_none() {
                        return Err(ApplyError::Member(s));
                    }
                }
                Err(e) => {
                    t.count_create(false, cluster);
                    return Err(e.into());
                }
            }
        }
        let mut retry = ConflictRetry::new(DEFAULT_RETRY);
        while retry.next().await {
            let Some(current) = observed.take() else {
                return Err(ApplyError::Conflicts(t.id.name.clone()));
            };
            let r = self
                .update(cluster, &t, (manifest, &policy), (&current, from_cache), me)
                .await;
            match r {
                Ok(Some((applied, written))) => {
                    return Ok(self.outcome(&t, ordinal, applied, written.as_ref()));
                }
                Ok(None) => {
                    // Needs a fresh read (cache hit that differs, or a conflict).
                    observed = t.read().await?;
                    from_cache = false;
                    if observed.is_none() {
                        // Deleted meanwhile: create it.
                        let created = t
                            .api
                            .create(&PostParams::default(), &to_dynamic(manifest)?)
                            .await
                            .inspect_err(|_| {
                                t.count_create(false, cluster);
                            })?;
                        t.count_create(true, cluster);
                        return Ok(self.outcome(&t, ordinal, Applied::Created, Some(&created)));
                    }
                }
                Err(e) => {
                    t.count_update(false, cluster, OPERATION_NONE);
                    return Err(e);
                }
            }
        }
        Err(t.conflicts())
    }

    /// One update attempt against `observed`: what it did and the object it wrote, if it wrote.
    /// `Ok(None)`: read again and retry.
    pub(super) async fn update(
        &self,
        cluster: &str,
        t: &Target,
        (manifest, policy): (&Value, &Policy<'_>),
        (observed, from_cache): (&Value, bool),
        me: &WorkIdentity,
    ) -> Result<Option<(Applied, Option<DynamicObject>)>, ApplyError> {
        // Another Work's object is never touched, whatever the conflict resolution says.
        if let Some(owner) = me.other_owner(observed) {
            return Err(ApplyError::OwnedByAnotherWork {
                kind: t.id.kind.clone(),
                namespace: t.id.namespace.clone(),
                name: t.id.name.clone(),
                cluster: cluster.to_owned(),
                owner,
            });
        }
        let managed = is_managed(observed);
        if !managed {
            self.may_take_over(cluster, t, manifest, observed, policy)?;
        }
        let observed = &t.typed(observed.clone());
        let mut desired = t.typed(manifest.clone());
        self.inner.interpreter.retain(&mut desired, observed)?;
        if self.inner.interpreter.matches_member(&desired, observed)? {
            t.count_update(true, cluster, OPERATION_NONE);
            return Ok(Some((Applied::Unchanged, None)));
        }
        if from_cache {
            return Ok(None);
        }
        let report_only = policy
            .decision
            .as_ref()
            .is_some_and(DriftDecision::report_only);
        if managed
            && report_only
            && let Some(done) = self.report_only(cluster, t, observed, policy).await?
        {
            return Ok(Some(done));
        }
        let before = observed
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match t
            .api
            .replace(&t.id.name, &PostParams::default(), &to_dynamic(&desired)?)
            .await
        {
            Ok(updated) => {
                let changed = updated.metadata.resource_version.as_deref() != Some(before.as_str());
                let op = if changed {
                    OPERATION_UPDATED
                } else {
                    OPERATION_UNCHANGED
                };
                t.count_update(true, cluster, op);
                tracing::info!(cluster, kind = %t.id.kind, namespace = %t.id.namespace, name = %t.id.name, changed, "updated in member");
                Ok(Some((Applied::Updated, Some(updated))))
            }
            Err(e) if is_conflict(&e) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

impl ExecutionController {
    /// Whether the unmanaged member object `observed` may be taken over: by the covering
    /// DriftPolicy's `takeover` when it has one, else by the conflict resolution (Karmada's rule).
    fn may_take_over(
        &self,
        cluster: &str,
        t: &Target,
        manifest: &Value,
        observed: &Value,
        policy: &Policy<'_>,
    ) -> Result<(), ApplyError> {
        let refused = |reason: String| ApplyError::NotTakenOver {
            kind: t.id.kind.clone(),
            namespace: t.id.namespace.clone(),
            name: t.id.name.clone(),
            cluster: cluster.to_owned(),
            reason,
        };
        let Some((takeover, by)) = policy
            .decision
            .as_ref()
            .and_then(|d| d.takeover.clone().map(|t| (t, d.policy.clone())))
        else {
            let overwrite = manifest
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(CONFLICT_RESOLUTION_ANNOTATION))
                .and_then(Value::as_str)
                == Some(CONFLICT_RESOLUTION_OVERWRITE);
            return if overwrite {
                Ok(())
            } else {
                Err(ApplyError::NotManaged {
                    kind: t.id.kind.clone(),
                    namespace: t.id.namespace.clone(),
                    name: t.id.name.clone(),
                    cluster: cluster.to_owned(),
                })
            };
        };
        match takeover {
            Takeover::Always => Ok(()),
            Takeover::IfNoDiff => {
                let observed = t.typed(observed.clone());
                let wanted = without_karmada_marks(policy.plain);
                let diff = drifted_at(&self.inner.interpreter, &wanted, &observed);
                if diff.is_empty() {
                    return Ok(());
                }
                let at: Vec<String> = diff.iter().map(ToString::to_string).collect();
                Err(refused(format!(
                    "takeover is IfNoDiff ({by}) and it differs from the manifest at {}",
                    at.join(", ")
                )))
            }
            Takeover::Never => Err(refused(format!("takeover is Never ({by})"))),
            Takeover::Other(v) => Err(refused(format!("unknown takeover {v:?} ({by})"))),
        }
    }

    /// Under `drift: ReportOnly`, for a managed object that differs from its manifest: leaves it
    /// as it is when it was last written from this very manifest (its hash annotation says so),
    /// and records the hash without touching anything else when it has none (an object written
    /// before the policy covered it: its differences are taken as drift). `None`: the manifest
    /// changed, write it.
    async fn report_only(
        &self,
        cluster: &str,
        t: &Target,
        observed: &Value,
        policy: &Policy<'_>,
    ) -> Result<Option<(Applied, Option<DynamicObject>)>, ApplyError> {
        let Some(hash) = &policy.hash else {
            return Ok(None);
        };
        let recorded = observed
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(MANIFEST_HASH_ANNOTATION))
            .and_then(Value::as_str);
        match recorded {
            Some(h) if h == hash => {
                t.count_update(true, cluster, OPERATION_NONE);
                Ok(Some((Applied::Unchanged, None)))
            }
            Some(_) => Ok(None),
            None => {
                let patch = serde_json::json!({"metadata": {
                    "resourceVersion": observed.pointer("/metadata/resourceVersion"),
                    "annotations": {MANIFEST_HASH_ANNOTATION: hash},
                }});
                match t
                    .api
                    .patch(&t.id.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => {
                        tracing::info!(cluster, kind = %t.id.kind, namespace = %t.id.namespace, name = %t.id.name, "ReportOnly: manifest hash recorded, differences left as they are");
                        t.count_update(true, cluster, OPERATION_NONE);
                        Ok(Some((Applied::Unchanged, None)))
                    }
                    Err(e) if is_conflict(&e) => Err(t.conflicts()),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hash_annotation_and_marks() {
        let m = json!({"metadata": {"name": "a", "labels": {"karmada.io/managed": "true", "app": "x"},
            "annotations": {"work.karmada.io/name": "w", "note": "n"}}});
        let h = with_hash(&m, "abc");
        assert_eq!(
            h["metadata"]["annotations"][MANIFEST_HASH_ANNOTATION],
            "abc"
        );
        let plain = without_karmada_marks(&h);
        assert_eq!(
            plain["metadata"],
            json!({"name": "a", "labels": {"app": "x"}, "annotations": {"note": "n"}})
        );
        let bare = with_hash(&json!({"metadata": {"name": "a"}}), "h");
        assert_eq!(
            bare["metadata"]["annotations"][MANIFEST_HASH_ANNOTATION],
            "h"
        );
    }
}
