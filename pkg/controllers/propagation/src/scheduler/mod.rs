//! The scheduler controller (`--controllers` name `scheduler`): Karmada's karmada-scheduler run
//! inside the controller-manager. It fills `spec.clusters` of ResourceBindings and
//! ClusterResourceBindings from their placement and the Cluster objects, and writes the `Scheduled`
//! condition, `schedulerObservedGeneration`, `lastScheduledTime` and the
//! `policy.karmada.io/applied-placement` annotation.
//!
//! When a binding is (re)scheduled (Karmada's `doScheduleBinding`): its placement differs from
//! the applied one, its replica count differs from the scheduled sum, a reschedule was requested
//! (`rescheduleTriggeredAt`), it is `Duplicated` or not a workload, one of its clusters is being
//! deleted or gone, or — after a Cluster change — the set of clusters that fit it changed.
//! Otherwise only `schedulerObservedGeneration` is brought up to date, so replicas are never
//! reshuffled without a reason.
//!
//! With the `FederatedQuotaEnforcement` gate, a ResourceBinding result that would raise a
//! resource beyond a FederatedResourceQuota's `overall` (counting the namespace's other bindings)
//! is not written: `Scheduled=False`, reason `QuotaExceeded`, retried with backoff (Karmada's
//! webhook refuses the scheduler's write, with the same outcome).
//!
//! # Who calls what
//!
//! - [`Scheduler::run`] (here) registers the Cluster and binding handlers ([`handlers`]); a
//!   Cluster change forces the bindings it may concern.
//! - `handle_binding` calls `do_schedule` ([`schedule`]), which decides whether to schedule, runs
//!   the algorithm (the `karmada-scheduler` crate) and checks quotas; `finish` writes the result
//!   ([`write`]) and announces it ([`events`]).
//! - Karmada's `karmada_scheduler_*` metrics are recorded where the work is done: bindings handed
//!   in (`handle_binding`, `handle_cluster`), attempts (`do_schedule`) and the algorithm's steps
//!   and plugins (its observer, [`metrics::Recorder`]).
//! - With `--enable-scheduler-estimator`, `do_schedule` first asks the members'
//!   `karmada-scheduler-estimator`s ([`estimator`]), whose connections follow the Cluster events.
//! - With the `SchedulerPreemption` gate, a binding that does not fit for lack of room may
//!   preempt lower-priority ones ([`preemption`]).
//! - Errors are in [`error`].

mod error;
pub mod estimator;
mod events;
mod handlers;
mod metrics;
pub mod preemption;
mod schedule;
mod workload_groups;
mod write;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use karmada_apis::policy::v1alpha1::FederatedResourceQuota;
use karmada_apis::well_known::DEFAULT_SCHEDULER_NAME;
use karmada_apis::{Cluster, ClusterResourceBinding, ResourceBinding};
use lariat::SharedController;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use karmada_controllers_common::binding::{
    FEATURE_PRIORITY_BASED_SCHEDULING, FEATURE_WORKLOAD_AFFINITY,
};
use karmada_controllers_common::context::ScheduleOptions;
use karmada_controllers_common::error::framework;
use karmada_controllers_common::handlers::{shared_controller, start_fn_of};
use karmada_controllers_common::priority::FEATURE_SCHEDULER_PREEMPTION;
use karmada_controllers_common::quota::FEDERATED_QUOTA_ENFORCEMENT;
use karmada_controllers_common::{ControllerContext, StartFn};
use lariat::events::EventRecorder;

pub use error::SchedulerError;

/// The controller's `--controllers` name.
pub const NAME: &str = "scheduler";

/// The scheduler name (`--scheduler-name`) as a `'static` Event source: each distinct name is
/// leaked once per process (the flag gives one).
fn event_component(name: &str) -> &'static str {
    static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    if name == DEFAULT_SCHEDULER_NAME {
        return DEFAULT_SCHEDULER_NAME;
    }
    let mut names = NAMES.lock();
    if let Some(known) = names.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    recorder: EventRecorder,
    rb: SharedController<ResourceBinding>,
    crb: SharedController<ClusterResourceBinding>,
    clusters: SharedController<Cluster>,
    /// FederatedResourceQuotas, with the `FederatedQuotaEnforcement` gate on: a ResourceBinding
    /// placement that would exceed one is refused (`QuotaExceeded`), as Karmada's webhook does.
    quotas: Option<SharedController<FederatedResourceQuota>>,
    /// Generation of each binding when it was last handled (`Kind/key`).
    handled: Mutex<HashMap<String, i64>>,
    /// Bindings to handle even if their generation did not change (Cluster changes, retries).
    forced: Mutex<HashSet<String>>,
    /// The clusters that fit each binding when it was last scheduled.
    feasible: Mutex<HashMap<String, BTreeSet<String>>>,
    /// Fingerprint of each Cluster's scheduling-relevant fields.
    cluster_fingerprints: Mutex<HashMap<String, u64>>,
    /// The members' `karmada-scheduler-estimator`s, with `--enable-scheduler-estimator`.
    estimators: Option<Arc<estimator::Estimators>>,
    /// With the `WorkloadAffinity` gate: where the bindings of each workload group are.
    workload_groups: Option<workload_groups::WorkloadGroups>,
    /// With the `SchedulerPreemption` gate (under `PriorityBasedScheduling`): the room preemptors
    /// claimed.
    preemption: Option<preemption::Claims>,
    cancel: CancellationToken,
}

impl Inner {
    /// `--scheduler-name`.
    fn name(&self) -> &str {
        &self.ctx.settings.scheduler.scheduler_name
    }

    /// `--enable-empty-workload-propagation` and `--plugins`.
    fn options(&self) -> &ScheduleOptions {
        &self.ctx.settings.scheduler.options
    }
}

/// The scheduler controller. Cheap to clone.
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

impl Scheduler {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, SchedulerError> {
        let cp = &ctx.control_plane;
        // Karmada's scheduler is a process of its own with its own `--kube-api-qps`/`--kube-api-burst`
        // bucket; this one gets a bucket of its own at the same values, so the same flags give the
        // same request budget as Karmada's controller-manager and scheduler together.
        let client = cp
            .clients()
            .client_for_component(NAME)
            .map_err(framework("scheduler client"))?;
        let rb = shared_controller::<ResourceBinding>(cp)?;
        let crb = shared_controller::<ClusterResourceBinding>(cp)?;
        if ctx
            .settings
            .feature_gates
            .enabled(FEATURE_PRIORITY_BASED_SCHEDULING)
        {
            rank_by_schedule_priority(&rb, &crb);
        }
        let workload_groups = ctx
            .settings
            .feature_gates
            .enabled(FEATURE_WORKLOAD_AFFINITY)
            .then(|| {
                workload_groups::index(&rb.store());
                workload_groups::WorkloadGroups::default()
            });
        let gates = &ctx.settings.feature_gates;
        let preemption = (gates.enabled(FEATURE_PRIORITY_BASED_SCHEDULING)
            && gates.enabled(FEATURE_SCHEDULER_PREEMPTION))
        .then(|| preemption::Claims::new(ctx.settings.failover.graceful_eviction_timeout));
        let clusters = shared_controller::<Cluster>(cp)?;
        let quotas = if ctx
            .settings
            .feature_gates
            .enabled(FEDERATED_QUOTA_ENFORCEMENT)
        {
            Some(shared_controller::<FederatedResourceQuota>(cp)?)
        } else {
            None
        };
        // Its Events spend the same bucket's spare tokens, as its own process's recorder would.
        let events_client = cp
            .clients()
            .background_client_for_component(NAME)
            .map_err(framework("scheduler events client"))?;
        // Its Events come from the scheduler name, as Karmada's scheduler's do.
        let component = event_component(&ctx.settings.scheduler.scheduler_name);
        let recorder = EventRecorder::new(events_client, component, &ctx.cancel);
        let cancel = ctx.cancel.child_token();
        metrics::register();
        let estimators = estimator::Estimators::new(
            &ctx.settings.scheduler_estimator,
            client.clone(),
            cancel.clone(),
        )?;
        Ok(Scheduler {
            inner: Arc::new(Inner {
                ctx,
                client,
                recorder,
                rb,
                crb,
                clusters,
                quotas,
                handled: Mutex::new(HashMap::new()),
                forced: Mutex::new(HashSet::new()),
                feasible: Mutex::new(HashMap::new()),
                cluster_fingerprints: Mutex::new(HashMap::new()),
                estimators,
                workload_groups,
                preemption,
                cancel,
            }),
        })
    }

    /// Registers the handlers and runs until the context is cancelled.
    pub async fn run(self) -> Result<(), karmada_controllers_common::BoxError> {
        let inner = &self.inner;
        // Clusters first, so bindings are scheduled against a synced cluster list.
        let mut wiring =
            inner
                .ctx
                .wiring("scheduler", &self)
                .cancelled_by(&inner.cancel)
                .waits_for(&inner.clusters)
                .handles(
                    &inner.clusters,
                    NAME,
                    |this: Self, k, o: Option<Arc<Cluster>>| async move {
                        this.handle_cluster(k, o).await
                    },
                )
                .handles(
                    &inner.rb,
                    NAME,
                    |this: Self, k, o: Option<Arc<ResourceBinding>>| async move {
                        this.handle_binding(k, o).await
                    },
                )
                .handles(
                    &inner.crb,
                    NAME,
                    |this: Self, k, o: Option<Arc<ClusterResourceBinding>>| async move {
                        this.handle_binding(k, o).await
                    },
                );
        if let Some(quotas) = &inner.quotas {
            wiring = wiring.waits_for(quotas);
        }
        wiring.run().await?;
        Ok(())
    }
}

/// Karmada's priority queue (`PriorityBasedScheduling`): bindings of a higher
/// `spec.schedulePriority.priority` are handed out first, first in first out within a priority.
/// The queues are the kinds' shared ones, so the controllers after the scheduler (Works, status)
/// take such bindings first too.
fn rank_by_schedule_priority(
    rb: &SharedController<ResourceBinding>,
    crb: &SharedController<ClusterResourceBinding>,
) {
    let ranked = rb.set_ranker(|b: &ResourceBinding| b.spec.schedule_priority_value())
        && crb.set_ranker(|b: &ClusterResourceBinding| b.spec.schedule_priority_value());
    if !ranked {
        tracing::warn!(
            controller = NAME,
            "the binding queues were already ranked by another controller; scheduling priorities \
             follow that order"
        );
    }
}

/// Starts the controller: the [`StartFn`] the registry holds.
pub fn start_fn() -> StartFn {
    start_fn_of(Scheduler::new, Scheduler::run)
}
