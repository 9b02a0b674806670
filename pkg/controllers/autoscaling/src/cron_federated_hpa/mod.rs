//! The CronFederatedHPA controller (`--controllers` name `cronFederatedHorizontalPodAutoscaler`,
//! Karmada's `cronfederatedhpa-controller`): each rule that is not suspended gets an executor that
//! wakes at the rule's cron schedule (in its `timeZone`, else this process's) and sets the target:
//! a workload's replicas through its scale subresource, or a FederatedHPA's `minReplicas` /
//! `maxReplicas`. Each run is recorded in the rule's `status.executionHistories` entry (newest
//! first, trimmed to the rule's history limits) together with the rule's next execution time.
//!
//! As in Karmada, the controller acts on spec changes (generation) only: an unchanged rule keeps
//! its executor, a changed one is restarted, a removed one is stopped and its history removed, and a
//! changed `scaleTargetRef` restarts them all. A rule that cannot be scheduled (bad cron expression
//! or time zone, which Karmada's webhook refuses and the CRD here refuses only in part) gets a
//! Warning Event `StartRuleFailed` and is retried with backoff; a failed run gets `ScaleFailed` and a
//! failed execution in status.
//!
//! Differs from Karmada: status is written by resourceVersion-guarded merge patches instead of PUTs,
//! the scale subresource and the FederatedHPA by merge patches of the replica fields, and a
//! `failedHistoryLimit` of 0 keeps no failed execution (Karmada's slice arithmetic panics there).

mod durations;
pub mod schedule;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apimachinery::{DEFAULT_RETRY, gvk_of, is_conflict, is_not_found, retry_on_conflict};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karmada_apis::autoscaling::v1alpha1::{
    API_VERSION, CronFederatedHPA, CronFederatedHPARule, CrossVersionObjectReference,
    ExecutionHistory, FEDERATED_HPA_KIND, FailedExecution, SuccessfulExecution,
};
use karmada_controllers_common::error::framework;
use karmada_controllers_common::handlers::{shared_controller, start_fn_of};
use karmada_controllers_common::patch::guarded_merge_patch;
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Client, ResourceExt};
use lariat::events::{EventRecorder, EventType, reference_of};
use lariat::{HandlerResult, ObjectKey, SharedController};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use schedule::{Schedule, load_time_zone};

/// The controller's `--controllers` name.
pub const NAME: &str = "cronFederatedHorizontalPodAutoscaler";
/// Karmada's controller name (User-Agent suffix, Event source).
pub const CONTROLLER_NAME: &str = "cronfederatedhpa-controller";

/// Event reason: a rule could not be scheduled.
pub const REASON_START_RULE_FAILED: &str = "StartRuleFailed";
/// Event reason: a rule's next execution time could not be written.
pub const REASON_UPDATE_FAILED: &str = "UpdateCronFederatedHPAFailed";
/// Event reason: a run could not scale the target.
pub const REASON_SCALE_FAILED: &str = "ScaleFailed";
/// Event reason: a run's history could not be written.
pub const REASON_UPDATE_STATUS_FAILED: &str = "UpdateStatusFailed";

/// A CronFederatedHPA controller failure.
#[derive(Debug, thiserror::Error)]
pub enum CronError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// A rule cannot be scheduled.
    #[error("CronFederatedHPA({key}) rule({rule}): {message}")]
    Rule {
        /// `namespace/name`.
        key: String,
        /// The rule's name.
        rule: String,
        /// Why.
        message: String,
    },
    /// Writing status failed.
    #[error("update status of CronFederatedHPA({key}): {message}")]
    Status {
        /// `namespace/name`.
        key: String,
        /// Why.
        message: String,
    },
}

karmada_controllers_common::core_error_from!(CronError);

/// One running rule.
struct RuleExecutor {
    rule: CronFederatedHPARule,
    /// The first execution time, recorded as the rule's next execution time when it starts.
    first: Option<Timestamp>,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

impl RuleExecutor {
    fn stop(self) {
        self.cancel.cancel();
        self.task.abort();
    }
}

#[derive(Default)]
struct Executors {
    target: Option<CrossVersionObjectReference>,
    rules: HashMap<String, RuleExecutor>,
    generation: Option<i64>,
}

struct Inner {
    ctx: ControllerContext,
    client: Client,
    cron: SharedController<CronFederatedHPA>,
    executors: Mutex<HashMap<String, Executors>>,
    events: EventRecorder,
    cancel: CancellationToken,
}

/// The controller. Cheap to clone.
#[derive(Clone)]
pub struct CronController {
    inner: Arc<Inner>,
}

impl CronController {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, CronError> {
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("cronFederatedHorizontalPodAutoscaler client"))?;
        let cron = shared_controller::<CronFederatedHPA>(cp)?;
        let cancel = ctx.cancel.child_token();
        let events = ctx.events.recorder(CONTROLLER_NAME);
        Ok(CronController {
            inner: Arc::new(Inner {
                ctx,
                client,
                cron,
                executors: Mutex::new(HashMap::new()),
                events,
                cancel,
            }),
        })
    }

    /// Registers the handler and runs until the context is cancelled; the executors stop with it.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        let served =
            inner
                .ctx
                .wiring(NAME, &self)
                .cancelled_by(&inner.cancel)
                .handles(
                    &inner.cron,
                    NAME,
                    |this: Self, k, o: Option<Arc<CronFederatedHPA>>| async move {
                        this.handle(k, o).await
                    },
                )
                .run()
                .await;
        inner.cancel.cancel();
        if let Ok(mut all) = inner.executors.lock() {
            for (_, executors) in all.drain() {
                executors.rules.into_values().for_each(RuleExecutor::stop);
            }
        }
        served?;
        Ok(())
    }

    fn stop_all(&self, key: &str) {
        if let Ok(mut all) = self.inner.executors.lock()
            && let Some(executors) = all.remove(key)
        {
            executors.rules.into_values().for_each(RuleExecutor::stop);
        }
    }

    fn stop_rule(&self, key: &str, rule: &str) {
        if let Ok(mut all) = self.inner.executors.lock()
            && let Some(executor) = all.get_mut(key).and_then(|e| e.rules.remove(rule))
        {
            executor.stop();
        }
    }

    async fn handle(
        &self,
        key: ObjectKey,
        obj: Option<Arc<CronFederatedHPA>>,
    ) -> HandlerResult<CronFederatedHPA> {
        let Some(cron) = obj.filter(|c| c.metadata.deletion_timestamp.is_none()) else {
            self.stop_all(key.as_str());
            return HandlerResult::Success;
        };
        match self.reconcile(key.as_str(), &cron).await {
            Ok(()) => HandlerResult::Success,
            Err(e) => {
                tracing::warn!(key = key.as_str(), error = %e, "CronFederatedHPA not reconciled");
                HandlerResult::error(e)
            }
        }
    }

    async fn reconcile(&self, key: &str, cron: &CronFederatedHPA) -> Result<(), CronError> {
        let generation = cron.metadata.generation;
        {
            // Karmada reconciles on spec (generation) changes only.
            let Ok(mut all) = self.inner.executors.lock() else {
                return Ok(());
            };
            let executors = all.entry(key.to_owned()).or_default();
            if executors.generation.is_some() && executors.generation == generation {
                return Ok(());
            }
            // A new target restarts every rule.
            if executors
                .target
                .as_ref()
                .is_some_and(|t| *t != cron.spec.scale_target_ref)
            {
                executors
                    .rules
                    .drain()
                    .for_each(|(_, executor)| executor.stop());
            }
            executors.target = Some(cron.spec.scale_target_ref.clone());
        }
        let started = std::time::Instant::now();
        let synced = self.sync_rules(key, cron).await;
        durations::observe_process(synced.is_ok(), started);
        if synced.is_ok()
            && let Ok(mut all) = self.inner.executors.lock()
            && let Some(executors) = all.get_mut(key)
        {
            executors.generation = generation;
        }
        synced
    }

    /// Starts or updates an executor per rule and drops the history of rules that are gone.
    async fn sync_rules(&self, key: &str, cron: &CronFederatedHPA) -> Result<(), CronError> {
        let known: HashSet<&str> = cron
            .status
            .iter()
            .flat_map(|s| &s.execution_histories)
            .map(|h| h.rule_name.as_str())
            .collect();
        let mut wanted = HashSet::new();
        for rule in &cron.spec.rules {
            self.process_rule(key, cron, rule).await?;
            wanted.insert(rule.name.as_str());
        }
        for gone in known.difference(&wanted) {
            self.stop_rule(key, gone);
            let removed = self
                .write_status(cron, |histories| {
                    histories.retain(|h| h.rule_name != *gone);
                })
                .await;
            if let Err(e) = removed {
                return Err(self.status_failed(cron, e).await);
            }
        }
        Ok(())
    }

    async fn status_failed(&self, cron: &CronFederatedHPA, e: CronError) -> CronError {
        self.inner
            .events
            .record(
                &reference_of(cron),
                EventType::Warning,
                REASON_UPDATE_FAILED,
                e.to_string(),
            )
            .await;
        e
    }

    async fn process_rule(
        &self,
        key: &str,
        cron: &CronFederatedHPA,
        rule: &CronFederatedHPARule,
    ) -> Result<(), CronError> {
        let unchanged = self.inner.executors.lock().ok().is_some_and(|all| {
            all.get(key)
                .and_then(|e| e.rules.get(&rule.name))
                .is_some_and(|e| e.rule == *rule)
        });
        if unchanged {
            return Ok(());
        }
        self.stop_rule(key, &rule.name);
        let mut next = None;
        if !rule.is_suspended() {
            match self.start_rule(key, cron, rule) {
                Ok(first) => next = first,
                Err(e) => {
                    self.inner
                        .events
                        .record(
                            &reference_of(cron),
                            EventType::Warning,
                            REASON_START_RULE_FAILED,
                            e.to_string(),
                        )
                        .await;
                    return Err(e);
                }
            }
        }
        let name = rule.name.clone();
        let written = self
            .write_status(cron, move |histories| {
                match histories.iter_mut().find(|h| h.rule_name == name) {
                    Some(history) => history.next_execution_time = next.map(Time),
                    None => histories.push(ExecutionHistory {
                        rule_name: name.clone(),
                        next_execution_time: next.map(Time),
                        ..Default::default()
                    }),
                }
            })
            .await;
        match written {
            Ok(()) => Ok(()),
            Err(e) => Err(self.status_failed(cron, e).await),
        }
    }

    /// Starts the rule's executor; returns its first execution time.
    fn start_rule(
        &self,
        key: &str,
        cron: &CronFederatedHPA,
        rule: &CronFederatedHPARule,
    ) -> Result<Option<Timestamp>, CronError> {
        let rule_error = |message: String| CronError::Rule {
            key: key.to_owned(),
            rule: rule.name.clone(),
            message,
        };
        let tz = load_time_zone(rule.time_zone.as_deref().unwrap_or("Local"))
            .map_err(|e| rule_error(format!("invalid time zone: {e}")))?;
        let schedule = Schedule::parse(&rule.schedule, tz)
            .map_err(|e| rule_error(format!("invalid schedule {:?}: {e}", rule.schedule)))?;
        let first = schedule.next(Timestamp::now());
        let cancel = self.inner.cancel.child_token();
        let job = Job {
            this: self.clone(),
            namespace: cron.namespace().unwrap_or_default(),
            name: cron.name_any(),
            rule: rule.clone(),
        };
        let task = tokio::spawn(job.run(schedule, first, cancel.clone()));
        let executor = RuleExecutor {
            rule: rule.clone(),
            first,
            cancel,
            task,
        };
        match self.inner.executors.lock() {
            Ok(mut all) => {
                let first = executor.first;
                if let Some(old) = all
                    .entry(key.to_owned())
                    .or_default()
                    .rules
                    .insert(rule.name.clone(), executor)
                {
                    old.stop();
                }
                Ok(first)
            }
            Err(_) => {
                executor.stop();
                Err(rule_error("executor registry poisoned".into()))
            }
        }
    }

    /// Re-reads the object, applies `change` to its histories and writes them with a
    /// resourceVersion-guarded merge patch of the status, retrying on conflicts.
    async fn write_status(
        &self,
        cron: &CronFederatedHPA,
        change: impl Fn(&mut Vec<ExecutionHistory>),
    ) -> Result<(), CronError> {
        let namespace = cron.namespace().unwrap_or_default();
        let name = cron.name_any();
        let key = format!("{namespace}/{name}");
        let api: Api<CronFederatedHPA> = Api::namespaced(self.inner.client.clone(), &namespace);
        let result = retry_on_conflict(DEFAULT_RETRY, is_conflict, |_| {
            let api = api.clone();
            let name = name.clone();
            let change = &change;
            async move {
                let current = api.get(&name).await?;
                let mut updated = current.clone();
                let status = updated.status.get_or_insert_with(Default::default);
                change(&mut status.execution_histories);
                let patch =
                    guarded_merge_patch(&current, &updated).map_err(kube::Error::SerdeError)?;
                if let Some(patch) = patch {
                    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?;
                }
                Ok::<_, kube::Error>(())
            }
        })
        .await;
        match result {
            Ok(()) => Ok(()),
            Err(e) => {
                let e = e.or_conflicts(|n| {
                    kube::Error::Service(format!("{n} conflicting writes").into())
                });
                Err(CronError::Status {
                    key,
                    message: e.to_string(),
                })
            }
        }
    }
}

/// One rule's scheduled runs.
struct Job {
    this: CronController,
    namespace: String,
    name: String,
    rule: CronFederatedHPARule,
}

impl Job {
    async fn run(self, schedule: Schedule, first: Option<Timestamp>, cancel: CancellationToken) {
        let mut next = first;
        while let Some(at) = next {
            let wait = Duration::try_from(at.duration_since(Timestamp::now())).unwrap_or_default();
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
            let following = schedule
                .next(at)
                .filter(|t| *t > Timestamp::now())
                .or_else(|| schedule.next(Timestamp::now()));
            tokio::select! {
                () = cancel.cancelled() => return,
                () = self.execute(following) => {}
            }
            next = following;
        }
    }

    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// One run: scale the target, then record the outcome (Karmada's `RunCronFederatedHPARule`).
    async fn execute(&self, next: Option<Timestamp>) {
        let client = &self.this.inner.client;
        let api: Api<CronFederatedHPA> = Api::namespaced(client.clone(), &self.namespace);
        let cron = match api.get(&self.name).await {
            Ok(cron) => cron,
            Err(e) if is_not_found(&e) => {
                tracing::info!(key = self.key(), "CronFederatedHPA not found");
                return;
            }
            Err(e) => {
                tracing::warn!(key = self.key(), error = %e, "get CronFederatedHPA failed");
                return;
            }
        };
        if self.rule.is_suspended() {
            return;
        }
        let started = std::time::Instant::now();
        let target = &cron.spec.scale_target_ref;
        let scaled = if target.api_version == API_VERSION {
            if target.kind == FEDERATED_HPA_KIND {
                self.scale_federated_hpa(target).await
            } else {
                Err(format!(
                    "CronFederatedHPA({}) do not support scale target {}/{}",
                    self.key(),
                    target.api_version,
                    target.kind
                ))
            }
        } else {
            self.scale_workload(target).await
        };
        let events = &self.this.inner.events;
        let reference = reference_of(&cron);
        let now = Time(Timestamp::now());
        let rule = &self.rule;
        let scaled_ok = scaled.is_ok();
        let written = match scaled {
            Err(message) => {
                events
                    .record(
                        &reference,
                        EventType::Warning,
                        REASON_SCALE_FAILED,
                        message.clone(),
                    )
                    .await;
                let limit = rule.failed_history_limit();
                self.this
                    .write_status(&cron, |histories| {
                        if let Some(h) = histories.iter_mut().find(|h| h.rule_name == rule.name) {
                            let entry = FailedExecution {
                                schedule_time: h.next_execution_time.clone().unwrap_or(now.clone()),
                                execution_time: now.clone(),
                                message: message.clone(),
                            };
                            h.failed_executions.insert(0, entry);
                            h.failed_executions.truncate(limit);
                            h.next_execution_time = next.map(Time);
                        }
                    })
                    .await
            }
            Ok(()) => {
                let limit = rule.successful_history_limit();
                self.this
                    .write_status(&cron, |histories| {
                        if let Some(h) = histories.iter_mut().find(|h| h.rule_name == rule.name) {
                            let entry = SuccessfulExecution {
                                schedule_time: h.next_execution_time.clone().unwrap_or(now.clone()),
                                execution_time: now.clone(),
                                applied_replicas: rule.target_replicas,
                                applied_max_replicas: rule.target_max_replicas,
                                applied_min_replicas: rule.target_min_replicas,
                            };
                            h.successful_executions.insert(0, entry);
                            h.successful_executions.truncate(limit);
                            h.next_execution_time = next.map(Time);
                        }
                    })
                    .await
            }
        };
        if let Err(e) = written {
            events
                .record(
                    &reference,
                    EventType::Warning,
                    REASON_UPDATE_STATUS_FAILED,
                    e.to_string(),
                )
                .await;
        }
        // As Karmada: the scale's result, timed to the end of its history entry.
        durations::observe_rule(scaled_ok, started);
    }

    /// Sets a FederatedHPA's bounds to the rule's (the FederatedHPA is read untyped).
    async fn scale_federated_hpa(
        &self,
        target: &CrossVersionObjectReference,
    ) -> Result<(), String> {
        let resource = ApiResource {
            group: "autoscaling.karmada.io".into(),
            version: "v1alpha1".into(),
            api_version: API_VERSION.into(),
            kind: FEDERATED_HPA_KIND.into(),
            plural: "federatedhpas".into(),
        };
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.this.inner.client.clone(), &self.namespace, &resource);
        let rule = &self.rule;
        retry_on_conflict(DEFAULT_RETRY, is_conflict, |_| {
            let api = api.clone();
            async move {
                let current = api.get(&target.name).await?;
                let mut updated = current.clone();
                let spec = &mut updated.data["spec"];
                if let Some(max) = rule.target_max_replicas {
                    spec["maxReplicas"] = json!(max);
                }
                if let Some(min) = rule.target_min_replicas {
                    spec["minReplicas"] = json!(min);
                }
                if let Some(patch) =
                    guarded_merge_patch(&current, &updated).map_err(kube::Error::SerdeError)?
                {
                    api.patch(&target.name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?;
                }
                Ok::<_, kube::Error>(())
            }
        })
        .await
        .map_err(|e| {
            e.or_conflicts(|n| kube::Error::Service(format!("{n} conflicting writes").into()))
                .to_string()
        })
    }

    /// Sets a workload's replicas through its scale subresource.
    async fn scale_workload(&self, target: &CrossVersionObjectReference) -> Result<(), String> {
        let Some(replicas) = self.rule.target_replicas else {
            return Err(format!(
                "CronFederatedHPA({}) rule({}) has no targetReplicas",
                self.key(),
                self.rule.name
            ));
        };
        let gvk = gvk_of(&target.api_version, &target.kind);
        let (resource, _) = self
            .this
            .inner
            .ctx
            .control_plane
            .clients()
            .resolve(&gvk)
            .await
            .map_err(|e| format!("resolve {}/{}: {e}", target.api_version, target.kind))?;
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.this.inner.client.clone(), &self.namespace, &resource);
        let scale = api
            .get_scale(&target.name)
            .await
            .map_err(|e| e.to_string())?;
        if scale.spec.and_then(|s| s.replicas) == Some(replicas) {
            return Ok(());
        }
        api.patch_scale(
            &target.name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
    }
}

/// The controller's [`StartFn`].
pub fn start_fn() -> StartFn {
    start_fn_of(CronController::new, CronController::run)
}
