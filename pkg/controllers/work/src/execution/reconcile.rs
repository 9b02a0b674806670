//! One Work against its cluster: the Dispatching condition, then every manifest applied
//! ([`super::apply`]) and the `Applied` condition and Events that say how it went; deletion goes
//! to [`super::cleanup`].

use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use karmada_apis::Work;
use karmada_apis::well_known::{
    EXECUTION_CONTROLLER_FINALIZER, WORK_APPLIED, WORK_DISPATCHING,
    WORK_MESSAGE_APPLIED_SUCCESSFUL, WORK_MESSAGE_DISPATCHING, WORK_MESSAGE_SUSPEND_DISPATCHING,
    WORK_REASON_APPLIED_FAILED, WORK_REASON_APPLIED_SUCCESSFUL, WORK_REASON_DISPATCHING,
    WORK_REASON_SUSPEND_DISPATCHING, event_reasons,
};
use karmada_apis::work::v1alpha1::ManifestStatus;
use karmada_controllers_common::metrics;
use kube::ResourceExt;
use lariat::events::{EventType, reference_of};

use super::ExecutionController;
use super::apply::Applied;
use super::error::{ApplyError, ExecutionError};
use super::ownership::{REASON_OWNED_BY_ANOTHER_WORK, WorkIdentity};
use super::status::condition;

impl ExecutionController {
    pub(super) async fn reconcile(&self, work: &Work, cluster: &str) -> Result<(), ExecutionError> {
        let inner = &self.inner;
        let deleting = work.metadata.deletion_timestamp.is_some();
        let cluster_obj = inner.clusters.store().get_named(None, cluster);
        let Some(cluster_obj) = cluster_obj else {
            if deleting {
                // The Cluster is gone: nothing can be removed from it any more.
                return self.remove_finalizer(work).await;
            }
            return Err(ExecutionError::ClusterNotFound(cluster.to_owned()));
        };
        // The controller-manager leaves Pull clusters' Works to their agents; an agent applies
        // only its own cluster's.
        if !inner.ctx.members.serves(&cluster_obj) {
            return Ok(());
        }
        if deleting {
            if !work
                .finalizers()
                .iter()
                .any(|f| f == EXECUTION_CONTROLLER_FINALIZER)
            {
                return Ok(());
            }
            self.handle_delete(work, &cluster_obj, cluster).await?;
            return self.remove_finalizer(work).await;
        }
        let suspended = work.spec.suspend_dispatching.unwrap_or(false);
        // A changed Dispatching condition is written together with Applied when the Work is
        // applied now (one status write instead of two), and alone when it is not.
        let dispatching = self.dispatching_changed(work, suspended).await;
        let member = match inner.ctx.members.get(cluster) {
            Some(m) if !suspended && cluster_obj.is_ready() => m,
            _ => {
                if let Some(c) = dispatching {
                    self.set_status(work, vec![c], None).await?;
                }
                return if suspended {
                    Ok(())
                } else if !cluster_obj.is_ready() {
                    Err(ExecutionError::ClusterNotReady(cluster.to_owned()))
                } else {
                    Err(ExecutionError::NotConnected(cluster.to_owned()))
                };
            }
        };
        let started = Instant::now();
        let result = self
            .sync_to_cluster(work, cluster, &member, dispatching)
            .await;
        metrics::observe_sync_workload(result.is_ok(), started);
        result
    }

    /// The Work's Dispatching condition when it differs from the one last written, with its
    /// Normal Event recorded; `None` when it did not change.
    async fn dispatching_changed(&self, work: &Work, suspended: bool) -> Option<Condition> {
        let dispatching = if suspended {
            condition(
                WORK_DISPATCHING,
                false,
                WORK_REASON_SUSPEND_DISPATCHING,
                WORK_MESSAGE_SUSPEND_DISPATCHING,
            )
        } else {
            condition(
                WORK_DISPATCHING,
                true,
                WORK_REASON_DISPATCHING,
                WORK_MESSAGE_DISPATCHING,
            )
        };
        let unchanged = self.inner.written.status(work).is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == WORK_DISPATCHING && c.status == dispatching.status)
        });
        if unchanged {
            return None;
        }
        self.inner
            .recorder
            .record(
                &reference_of(work),
                EventType::Normal,
                event_reasons::WORK_DISPATCHING,
                dispatching.message.clone(),
            )
            .await;
        Some(dispatching)
    }

    /// Applies every manifest of the Work and records `Applied` (with `dispatching`, when that
    /// condition changed too).
    pub(super) async fn sync_to_cluster(
        &self,
        work: &Work,
        cluster: &str,
        member: &lariat::Cluster,
        dispatching: Option<Condition>,
    ) -> Result<(), ExecutionError> {
        let inner = &self.inner;
        let manifests = &work.spec.workload.manifests;
        let ManifestsApplied {
            errors,
            wrote,
            owned_by_another,
            statuses,
        } = self.apply_manifests(work, cluster, member).await;
        let key = format!(
            "{}/{}",
            work.namespace().unwrap_or_default(),
            work.name_any()
        );
        if errors.is_empty() {
            let applied = condition(
                WORK_APPLIED,
                true,
                WORK_REASON_APPLIED_SUCCESSFUL,
                WORK_MESSAGE_APPLIED_SUCCESSFUL,
            );
            let statuses = (statuses.len() == manifests.len()).then_some(statuses);
            self.set_status(
                work,
                dispatching.into_iter().chain([applied]).collect(),
                statuses,
            )
            .await?;
            if wrote {
                inner
                    .recorder
                    .record(
                        &reference_of(work),
                        EventType::Normal,
                        event_reasons::SYNC_WORKLOAD_SUCCEED,
                        format!("Sync work({key}) to cluster({cluster}) successful."),
                    )
                    .await;
            }
            return Ok(());
        }
        Err(self
            .record_failure(work, cluster, dispatching, &errors, owned_by_another)
            .await)
    }

    /// Records that some manifests failed: `Applied=False` (with `dispatching`) and a Warning
    /// Event. Returns the error the sync fails with (the status write's, if that failed).
    async fn record_failure(
        &self,
        work: &Work,
        cluster: &str,
        dispatching: Option<Condition>,
        errors: &[String],
        owned_by_another: bool,
    ) -> ExecutionError {
        let manifests = &work.spec.workload.manifests;
        let message = format!(
            "Failed to apply all manifests ({}/{}): {}",
            manifests.len() - errors.len(),
            manifests.len(),
            errors.join(", ")
        );
        let reason = if owned_by_another {
            REASON_OWNED_BY_ANOTHER_WORK
        } else {
            WORK_REASON_APPLIED_FAILED
        };
        let failed = condition(WORK_APPLIED, false, reason, &message);
        let conditions = dispatching.into_iter().chain([failed]).collect();
        if let Err(e) = self.set_status(work, conditions, None).await {
            return e;
        }
        let err = ExecutionError::Sync {
            namespace: work.namespace().unwrap_or_default(),
            name: work.name_any(),
            cluster: cluster.to_owned(),
            message,
        };
        self.inner
            .recorder
            .record(
                &reference_of(work),
                EventType::Warning,
                if owned_by_another {
                    REASON_OWNED_BY_ANOTHER_WORK
                } else {
                    event_reasons::SYNC_WORKLOAD_FAILED
                },
                err.to_string(),
            )
            .await;
        err
    }

    /// Applies every manifest of the Work in `cluster`, going on after a failure.
    async fn apply_manifests(
        &self,
        work: &Work,
        cluster: &str,
        member: &lariat::Cluster,
    ) -> ManifestsApplied {
        let manifests = &work.spec.workload.manifests;
        let mut errors = Vec::new();
        let mut wrote = false;
        let mut owned_by_another = false;
        let mut statuses = Vec::with_capacity(manifests.len());
        let me = WorkIdentity::of(work);
        for (ordinal, m) in manifests.iter().enumerate() {
            let result = match m.to_value() {
                Ok(manifest) => self.apply(cluster, member, (ordinal, &manifest), &me).await,
                Err(e) => Err(ApplyError::Manifest(e.to_string())),
            };
            match result {
                Ok(outcome) => {
                    wrote |= outcome.applied != Applied::Unchanged;
                    statuses.extend(outcome.status);
                }
                Err(e) => {
                    owned_by_another |= matches!(e, ApplyError::OwnedByAnotherWork { .. });
                    let id = m.identity().unwrap_or_default();
                    let (kind, ns, name) = (&id.kind, &id.metadata.namespace, &id.metadata.name);
                    tracing::warn!(cluster, kind, namespace = ns, name, error = %e, "failed to apply manifest");
                    errors.push(e.to_string());
                }
            }
        }
        ManifestsApplied {
            errors,
            wrote,
            owned_by_another,
            statuses,
        }
    }
}

/// What applying a Work's manifests did.
struct ManifestsApplied {
    /// One message per manifest that failed.
    errors: Vec<String>,
    /// Whether a member object was created or updated.
    wrote: bool,
    /// Whether a failure was an object another Work owns.
    owned_by_another: bool,
    /// The status entries of what this sync wrote; recorded with `Applied` when every manifest
    /// has one, else left to the work-status controller.
    statuses: Vec<ManifestStatus>,
}
