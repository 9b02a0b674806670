//! The FederatedResourceQuota enforcement controller (`--controllers` name
//! `federatedResourceQuotaEnforcement`, Karmada's `federated-resource-quota-enforcement-controller`),
//! active only with the `FederatedQuotaEnforcement` gate (off by default, as in Karmada v1.16):
//! `status.overall` is `spec.overall` and `status.overallUsed` what the namespace's
//! ResourceBindings place, limited to the resources `overall` names (Karmada's
//! `CalculateResourceUsage`: each replica's request times the scheduled replicas, or for
//! multi-template workloads the components' requests times their replicas, per scheduled cluster).
//!
//! Karmada's ResourceBinding webhook refuses a placement that would exceed `overall` (the scheduler
//! then reports `Scheduled=False`, reason `QuotaExceeded`) and adds it to `overallUsed`. karmada-rs
//! has no webhook: the built-in scheduler refuses such a placement itself, and this controller
//! recalculates on every binding change (Karmada: on deletions and the periodic resync, the webhook
//! counting the rest). What is over `overall` anyway (bindings placed before the quota or by another
//! scheduler) is reported by a Warning Event `QuotaExceeded` on the FederatedResourceQuota naming the
//! resources and the bindings that place them.
//!
//! Triggers: FederatedResourceQuota creations and `spec.overall` changes, ResourceBinding changes
//! (the quotas of its namespace), and every `--federated-resource-quota-sync-period` all quotas.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use apimachinery::resource_list::{ResourceList, add_into, canonical, exceeded, filter_by_names};
use karmada_apis::ResourceBinding;
use karmada_apis::policy::v1alpha1::FederatedResourceQuota;
use karmada_apis::well_known::BINDING_REASON_QUOTA_EXCEEDED;
use karmada_controllers_common::error::framework;
use karmada_controllers_common::handlers::{shared_controller, start_fn_of};
use karmada_controllers_common::patch::guarded_merge_patch;
use karmada_controllers_common::quota::resource_usage;
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use lariat::events::{EventRecorder, EventType, reference_of};
use lariat::{HandlerResult, ObjectKey, SharedController};
use tokio_util::sync::CancellationToken;

use karmada_controllers_common::quota::FEDERATED_QUOTA_ENFORCEMENT;

/// The controller's `--controllers` name.
pub const NAME: &str = "federatedResourceQuotaEnforcement";
/// Karmada's controller name (User-Agent suffix, Event source).
pub const CONTROLLER_NAME: &str = "federated-resource-quota-enforcement-controller";

/// Event reason: `overall` and `overallUsed` were recalculated and written (Karmada's
/// `CollectOverallStatusSucceed`).
pub const REASON_COLLECT_SUCCEED: &str = "CollectOverallStatusSucceed";
/// Event reason: the recalculation failed (Karmada's `CollectOverallStatusFailed`).
pub const REASON_COLLECT_FAILED: &str = "CollectOverallStatusFailed";

/// An enforcement-controller failure.
#[derive(Debug, thiserror::Error)]
pub enum EnforcementError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// The status patch could not be built or written.
    #[error("update status of FederatedResourceQuota({key}): {message}")]
    Write {
        /// `namespace/name` of the quota.
        key: String,
        /// Why.
        message: String,
    },
}

karmada_controllers_common::core_error_from!(EnforcementError);

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    quotas: SharedController<FederatedResourceQuota>,
    bindings: SharedController<ResourceBinding>,
    /// `spec.overall` last seen per quota key, so only creations and `overall` changes of a
    /// quota trigger it (its own status writes do not).
    overall_seen: Mutex<HashMap<String, ResourceList>>,
    /// The exceeded resources last reported per quota key, so the Warning is not repeated on
    /// every recalculation.
    exceeded_seen: Mutex<HashMap<String, String>>,
    events: EventRecorder,
    cancel: CancellationToken,
}

/// The enforcement controller. Cheap to clone.
#[derive(Clone)]
pub struct EnforcementController {
    inner: Arc<Inner>,
}

impl EnforcementController {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, EnforcementError> {
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("federatedResourceQuotaEnforcement client"))?;
        let quotas = shared_controller::<FederatedResourceQuota>(cp)?;
        quotas.store().index_by_namespace();
        let bindings = shared_controller::<ResourceBinding>(cp)?;
        bindings.store().index_by_namespace();
        let cancel = ctx.cancel.child_token();
        let events = ctx.events.recorder(CONTROLLER_NAME);
        Ok(EnforcementController {
            inner: Arc::new(Inner {
                ctx,
                client,
                quotas,
                bindings,
                overall_seen: Mutex::new(HashMap::new()),
                exceeded_seen: Mutex::new(HashMap::new()),
                events,
                cancel,
            }),
        })
    }

    /// Registers the handlers and runs until the context is cancelled; without the
    /// `FederatedQuotaEnforcement` gate it only reports ready (Karmada does not start it).
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        let wiring = inner
            .ctx
            .wiring("federatedResourceQuotaEnforcement", &self)
            .cancelled_by(&inner.cancel);
        if !inner
            .ctx
            .settings
            .feature_gates
            .enabled(FEDERATED_QUOTA_ENFORCEMENT)
        {
            tracing::info!(
                "federatedResourceQuotaEnforcement idle: the FederatedQuotaEnforcement gate is off"
            );
            wiring.run().await?;
            return Ok(());
        }
        // Its own serving: the first resync comes a period after the start, and none with a
        // zero period (the wiring's resync starts at once).
        let Some(mut synced) = wiring
            .waits_for(&inner.bindings)
            .handles(
                &inner.quotas,
                NAME,
                |this: Self, k, o: Option<Arc<FederatedResourceQuota>>| async move {
                    this.handle(k, o).await
                },
            )
            .handles(
                &inner.bindings,
                NAME,
                |this: Self, k, _o: Option<Arc<ResourceBinding>>| async move {
                    this.enqueue_namespace(k.namespace().unwrap_or_default());
                    HandlerResult::Success
                },
            )
            .sync()
            .await?
        else {
            return Ok(());
        };
        synced.report();
        self.resync_every(inner.ctx.settings.federated_resource_quota_sync_period)
            .await;
        tracing::info!("federatedResourceQuotaEnforcement stopped");
        Ok(())
    }

    /// Recalculates every quota each `period` until cancelled (Karmada's `QuotaRecalculation`;
    /// a zero period never resyncs).
    async fn resync_every(&self, period: std::time::Duration) {
        let inner = &self.inner;
        if period.is_zero() {
            inner.cancel.cancelled().await;
            return;
        }
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        loop {
            tokio::select! {
                () = inner.cancel.cancelled() => return,
                _ = ticker.tick() => {
                    if let Ok(mut seen) = inner.overall_seen.lock() {
                        seen.clear();
                    }
                    for key in inner.quotas.store().keys() {
                        inner.quotas.enqueue_key(key);
                    }
                }
            }
        }
    }

    fn enqueue_namespace(&self, namespace: &str) {
        for quota in self.inner.quotas.store().list_namespace(namespace) {
            if let Ok(mut seen) = self.inner.overall_seen.lock() {
                seen.remove(&quota_key(&quota));
            }
            self.inner
                .quotas
                .enqueue(Some(namespace), &quota.name_any());
        }
    }

    async fn handle(
        &self,
        key: ObjectKey,
        obj: Option<Arc<FederatedResourceQuota>>,
    ) -> HandlerResult<FederatedResourceQuota> {
        let Some(quota) = obj else {
            if let Ok(mut seen) = self.inner.overall_seen.lock() {
                seen.remove(key.as_str());
            }
            if let Ok(mut seen) = self.inner.exceeded_seen.lock() {
                seen.remove(key.as_str());
            }
            return HandlerResult::Success;
        };
        if quota.metadata.deletion_timestamp.is_some() {
            return HandlerResult::Success;
        }
        // Only a creation, an `overall` change or a binding change (which forgets the entry)
        // recalculates; the quota's own status writes do not.
        let unchanged = match self.inner.overall_seen.lock() {
            Ok(mut seen) => {
                let key = key.to_string();
                let same = seen.get(&key) == Some(&quota.spec.overall);
                seen.insert(key, quota.spec.overall.clone());
                same
            }
            Err(_) => false,
        };
        if unchanged {
            return HandlerResult::Success;
        }
        let reference = reference_of(&*quota);
        match self.collect(&quota).await {
            Ok(written) => {
                if written {
                    self.inner
                        .events
                        .record(
                            &reference,
                            EventType::Normal,
                            REASON_COLLECT_SUCCEED,
                            format!("Collect status of FederatedResourceQuota({key}) succeed."),
                        )
                        .await;
                }
                HandlerResult::Success
            }
            Err(e) => {
                if let Ok(mut seen) = self.inner.overall_seen.lock() {
                    seen.remove(key.as_str());
                }
                tracing::warn!(quota = %key, error = %e, "FederatedResourceQuota overall status not collected");
                self.inner
                    .events
                    .record(
                        &reference,
                        EventType::Warning,
                        REASON_COLLECT_FAILED,
                        e.to_string(),
                    )
                    .await;
                HandlerResult::error(e)
            }
        }
    }

    /// Recalculates and writes `overall`/`overallUsed`; whether the status was written.
    async fn collect(&self, quota: &FederatedResourceQuota) -> Result<bool, EnforcementError> {
        let namespace = quota.namespace().unwrap_or_default();
        let name = quota.name_any();
        let key = format!("{namespace}/{name}");
        let bindings = self.inner.bindings.store().list_namespace(&namespace);
        let mut used = ResourceList::new();
        let mut placing = Vec::new();
        for b in &bindings {
            let usage = filter_by_names(&resource_usage(&b.spec), &quota.spec.overall);
            if !usage.is_empty() {
                placing.push(b.name_any());
            }
            add_into(&mut used, &usage);
        }
        let overall = canonical(&quota.spec.overall);
        self.report_exceeded(quota, &key, &used, &overall, &placing)
            .await;
        let mut updated = quota.clone();
        let status = updated.status.get_or_insert_default();
        status.overall = overall;
        status.overall_used = used;
        let write_err = |message: String| EnforcementError::Write {
            key: key.clone(),
            message,
        };
        let Some(patch) =
            guarded_merge_patch(quota, &updated).map_err(|e| write_err(e.to_string()))?
        else {
            return Ok(false);
        };
        let api: Api<FederatedResourceQuota> =
            Api::namespaced(self.inner.client.clone(), &namespace);
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| write_err(e.to_string()))?;
        Ok(true)
    }

    /// A Warning Event `QuotaExceeded` when what the bindings place exceeds `overall` (once per
    /// distinct excess).
    async fn report_exceeded(
        &self,
        quota: &FederatedResourceQuota,
        key: &str,
        used: &ResourceList,
        overall: &ResourceList,
        placing: &[String],
    ) {
        let over: Vec<String> = exceeded(used, overall)
            .into_iter()
            .map(|(name, u, limit)| format!("{name}: used {}, limited {}", u.0, limit.0))
            .collect();
        let summary = over.join("; ");
        let repeat = match self.inner.exceeded_seen.lock() {
            Ok(mut seen) if over.is_empty() => {
                seen.remove(key);
                true
            }
            Ok(mut seen) => {
                seen.insert(key.to_owned(), summary.clone()).as_deref() == Some(&summary)
            }
            Err(_) => false,
        };
        if repeat {
            return;
        }
        self.inner
            .events
            .record(
                &reference_of(quota),
                EventType::Warning,
                BINDING_REASON_QUOTA_EXCEEDED,
                format!(
                    "FederatedResourceQuota({key}) exceeded: {summary}; placed by ResourceBindings {}",
                    placing.join(", ")
                ),
            )
            .await;
    }
}

fn quota_key(quota: &FederatedResourceQuota) -> String {
    format!(
        "{}/{}",
        quota.namespace().unwrap_or_default(),
        quota.name_any()
    )
}

/// The start function registered as `federatedResourceQuotaEnforcement`.
pub fn start_fn() -> StartFn {
    start_fn_of(EnforcementController::new, EnforcementController::run)
}
