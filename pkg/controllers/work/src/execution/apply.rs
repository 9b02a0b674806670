//! Creating or updating one member object (PUT with the member's fields retained, see the
//! module doc of [`super`]), refusing objects Karmada does not manage or another Work owns.

use apimachinery::{ConflictRetry, DEFAULT_RETRY, is_conflict};
use karmada_apis::well_known::{CONFLICT_RESOLUTION_ANNOTATION, CONFLICT_RESOLUTION_OVERWRITE};
use karmada_apis::work::v1alpha1::ManifestStatus;
use karmada_controllers_common::manifest::manifest_status;
use karmada_controllers_common::metrics::{OPERATION_NONE, OPERATION_UNCHANGED, OPERATION_UPDATED};
use kube::api::{DynamicObject, PostParams};
use serde_json::Value;

use super::ExecutionController;
use super::error::ApplyError;
use super::ownership::WorkIdentity;
use super::target::{Target, is_managed, to_dynamic, to_value};

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
                .update(cluster, &t, manifest, &current, from_cache, me)
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
        manifest: &Value,
        observed: &Value,
        from_cache: bool,
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
        let allowed = is_managed(observed)
            || manifest
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(CONFLICT_RESOLUTION_ANNOTATION))
                .and_then(Value::as_str)
                == Some(CONFLICT_RESOLUTION_OVERWRITE);
        if !allowed {
            return Err(ApplyError::NotManaged {
                kind: t.id.kind.clone(),
                namespace: t.id.namespace.clone(),
                name: t.id.name.clone(),
                cluster: cluster.to_owned(),
            });
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
