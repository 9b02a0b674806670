//! What every controller gets when it starts: the control plane, the member clusters, the settings
//! taken from flags, a cancellation token and a way to report that its caches have synced.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use lariat::runtime::features::FeatureGates;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::members::MemberClusters;
use lariat::events::EventSink;

pub use karmada_scheduler::ScheduleOptions;
pub use karmada_scheduler::plugins::{Plugin, PluginSet, UnknownPlugin};

/// Error type a controller's run future returns.
pub use apimachinery::BoxError;

/// A running controller: resolves when its cancel token fired and it drained, or on a fatal error.
pub type ControllerFuture = Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>;

/// Starts a controller.
pub type StartFn = Arc<dyn Fn(ControllerContext) -> ControllerFuture + Send + Sync>;

/// The controller settings that come from `karmada-controller-manager` flags (Karmada's names in the
/// field docs). The process builds it once from its validated options.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--cluster-status-update-frequency` (10s).
    pub cluster_status_update_frequency: Duration,
    /// `--cluster-success-threshold` (30s).
    pub cluster_success_threshold: Duration,
    /// `--cluster-failure-threshold` (30s).
    pub cluster_failure_threshold: Duration,
    /// `--cluster-cache-sync-timeout` (2m).
    pub cluster_cache_sync_timeout: Duration,
    /// `--cluster-api-qps` (40): one token bucket per member cluster.
    pub cluster_api_qps: f32,
    /// `--cluster-api-burst` (60).
    pub cluster_api_burst: u32,
    /// `--enable-cluster-resource-modeling` (true): member Node/Pod caches for resource summaries.
    pub enable_cluster_resource_modeling: bool,
    /// `--skipped-propagating-apis`, as given (syntax already validated).
    pub skipped_propagating_apis: String,
    /// `--skipped-propagating-namespaces`, anchored and compiled.
    pub skipped_propagating_namespaces: Vec<regex::Regex>,
    /// `--concurrent-resource-template-syncs` (5): detector workers.
    pub concurrent_resource_template_syncs: usize,
    /// `--concurrent-dependent-resource-syncs` (2): dependencies distributor workers.
    pub concurrent_dependent_resource_syncs: usize,
    /// `--concurrent-propagation-policy-syncs` (1).
    pub concurrent_propagation_policy_syncs: usize,
    /// `--concurrent-cluster-propagation-policy-syncs` (1).
    pub concurrent_cluster_propagation_policy_syncs: usize,
    /// `--concurrent-work-syncs` (5): execution and work-status workers.
    pub concurrent_work_syncs: usize,
    /// `--rate-limiter-*`: per-key backoff and overall bucket for every queue.
    pub rate_limiter: lariat::RateLimiterOptions,
    /// `--feature-gates`.
    pub feature_gates: FeatureGates,
    /// `--federated-resource-quota-sync-period` (5m): the full FederatedResourceQuota
    /// recalculation of the enforcement controller.
    pub federated_resource_quota_sync_period: Duration,
    /// The taint manager and graceful eviction flags.
    pub failover: FailoverSettings,
    /// The `--horizontal-pod-autoscaler-*` flags the FederatedHPA controller acts on.
    pub hpa: HpaSettings,
    /// Agent `--cluster-lease-duration` (40s): the Lease a Pull cluster's agent renews.
    pub cluster_lease_duration: Duration,
    /// Agent `--cluster-lease-renew-interval-fraction` (0.25): renew every duration × fraction.
    pub cluster_lease_renew_interval_fraction: f64,
    /// `--cluster-monitor-period` (5s): how often Pull clusters' Leases are checked.
    pub cluster_monitor_period: Duration,
    /// `--cluster-monitor-grace-period` (40s): a Pull cluster whose Lease was not renewed for this
    /// long becomes `Ready=Unknown`.
    pub cluster_monitor_grace_period: Duration,
    /// `--cluster-startup-grace-period` (60s): the same, for a cluster that never reported.
    pub cluster_startup_grace_period: Duration,
    /// The agent's `--cert-rotation-*` and `--karmada-kubeconfig-namespace` flags.
    pub cert_rotation: CertRotationSettings,
    /// The flags of Karmada's `karmada-scheduler` the built-in scheduler acts on.
    pub scheduler: SchedulerSettings,
    /// karmada-scheduler's `--scheduler-estimator-*` flags, for the scheduler controller.
    pub scheduler_estimator: SchedulerEstimatorSettings,
}

/// Karmada's defaults for every flag, so a caller states only what it sets (`Settings { x, ..
/// Settings::default() }`). Two exceptions: no feature gate is known (the binaries pass theirs,
/// whose table lives above this crate), and the rate limiter is lariat's default.
impl Default for Settings {
    fn default() -> Self {
        Self {
            cluster_status_update_frequency: Duration::from_secs(10),
            cluster_success_threshold: Duration::from_secs(30),
            cluster_failure_threshold: Duration::from_secs(30),
            cluster_cache_sync_timeout: Duration::from_secs(120),
            cluster_api_qps: 40.0,
            cluster_api_burst: 60,
            enable_cluster_resource_modeling: true,
            skipped_propagating_apis: String::new(),
            // `--skipped-propagating-namespaces=kube-.*`, anchored as the flag's check anchors it
            // (a constant pattern: the conversion cannot fail).
            skipped_propagating_namespaces: regex::Regex::new("^kube-.*$").into_iter().collect(),
            concurrent_resource_template_syncs: 5,
            concurrent_dependent_resource_syncs: 2,
            concurrent_propagation_policy_syncs: 1,
            concurrent_cluster_propagation_policy_syncs: 1,
            concurrent_work_syncs: 5,
            rate_limiter: lariat::RateLimiterOptions::default(),
            feature_gates: FeatureGates::new(&[]),
            federated_resource_quota_sync_period: Duration::from_secs(300),
            failover: FailoverSettings::default(),
            hpa: HpaSettings::default(),
            cluster_lease_duration: Duration::from_secs(40),
            cluster_lease_renew_interval_fraction: 0.25,
            cluster_monitor_period: Duration::from_secs(5),
            cluster_monitor_grace_period: Duration::from_secs(40),
            cluster_startup_grace_period: Duration::from_secs(60),
            cert_rotation: CertRotationSettings::default(),
            scheduler: SchedulerSettings::default(),
            scheduler_estimator: SchedulerEstimatorSettings::default(),
        }
    }
}

/// The flags of Karmada's `karmada-scheduler` that the built-in scheduler takes (Karmada's defaults
/// in [`Default`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerSettings {
    /// `--scheduler-name` (`default-scheduler`): the bindings whose `spec.schedulerName` names this
    /// scheduler (empty names the default) are scheduled; the source of its Events.
    pub scheduler_name: String,
    /// `--enable-empty-workload-propagation` (false) and `--plugins` (`*`).
    pub options: ScheduleOptions,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        Self {
            scheduler_name: karmada_apis::well_known::DEFAULT_SCHEDULER_NAME.to_owned(),
            options: ScheduleOptions::default(),
        }
    }
}

/// karmada-scheduler's flags for its accurate estimators (`karmada-scheduler-estimator`, one per
/// member), taken by the scheduler controller (Karmada's defaults in [`Default`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerEstimatorSettings {
    /// `--enable-scheduler-estimator` (false): ask each member's estimator too.
    pub enabled: bool,
    /// `--disable-scheduler-estimator-in-pull-mode` (false): connect to no estimator of a Pull
    /// cluster.
    pub disable_in_pull_mode: bool,
    /// `--scheduler-estimator-timeout` (3s): the deadline of the calls for one binding.
    pub timeout: Duration,
    /// `--scheduler-estimator-port` (10352): the Service port an estimator is found at.
    pub port: u16,
    /// `--scheduler-estimator-service-prefix` (`karmada-scheduler-estimator`): the Service of
    /// cluster `c` is `<prefix>-<c>`.
    pub service_prefix: String,
    /// `--scheduler-estimator-service-namespace` (`karmada-system`).
    pub service_namespace: String,
    /// `--scheduler-estimator-ca-file`: TLS, the server checked against this CA.
    pub ca_file: String,
    /// `--scheduler-estimator-cert-file`: the client certificate (with the key file).
    pub cert_file: String,
    /// `--scheduler-estimator-key-file`.
    pub key_file: String,
    /// `--insecure-skip-estimator-verify` (false): TLS without checking the server.
    pub insecure_skip_verify: bool,
}

impl Default for SchedulerEstimatorSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            disable_in_pull_mode: false,
            timeout: Duration::from_secs(3),
            port: 10352,
            service_prefix: "karmada-scheduler-estimator".to_owned(),
            service_namespace: "karmada-system".to_owned(),
            ca_file: String::new(),
            cert_file: String::new(),
            key_file: String::new(),
            insecure_skip_verify: false,
        }
    }
}

/// The agent flags its `certRotation` controller acts on (Karmada's defaults in [`Default`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CertRotationSettings {
    /// `--cert-rotation-checking-interval` (5m): how often the certificate is looked at.
    pub checking_interval: Duration,
    /// `--cert-rotation-remaining-time-threshold` (0.2): renew once no more than this fraction of
    /// the certificate's validity remains.
    pub remaining_time_threshold: f64,
    /// `--karmada-kubeconfig-namespace` (`karmada-system`): the member namespace of the Secret
    /// `karmada-kubeconfig` holding the agent's kubeconfig for the Karmada API server.
    pub karmada_kubeconfig_namespace: String,
}

impl Default for CertRotationSettings {
    fn default() -> Self {
        Self {
            checking_interval: Duration::from_secs(300),
            remaining_time_threshold: 0.2,
            karmada_kubeconfig_namespace: "karmada-system".to_owned(),
        }
    }
}

/// The failover flags (Karmada's defaults in [`Default`]).
#[derive(Debug, Clone, PartialEq)]
pub struct FailoverSettings {
    /// `--enable-taint-manager` (true): run the taint manager (with the `Failover` gate).
    pub enable_taint_manager: bool,
    /// `--enable-no-execute-taint-eviction` (false): evict what does not tolerate a NoExecute taint.
    pub enable_no_execute_taint_eviction: bool,
    /// `--no-execute-taint-eviction-purge-mode` (`Gracefully`; or `Directly`).
    pub no_execute_taint_eviction_purge_mode: String,
    /// `--resource-eviction-rate` (0.5): evictions per second per eviction worker.
    pub resource_eviction_rate: f32,
    /// `--graceful-eviction-timeout` (10m): how long an eviction task waits at most.
    pub graceful_eviction_timeout: Duration,
}

impl Default for FailoverSettings {
    fn default() -> Self {
        Self {
            enable_taint_manager: true,
            enable_no_execute_taint_eviction: false,
            no_execute_taint_eviction_purge_mode: "Gracefully".to_owned(),
            resource_eviction_rate: 0.5,
            graceful_eviction_timeout: Duration::from_secs(600),
        }
    }
}

/// The `--horizontal-pod-autoscaler-*` flags the FederatedHPA controller acts on (Karmada's defaults in
/// [`Default`]). Karmada accepts `--horizontal-pod-autoscaler-upscale-delay` and `-downscale-delay` but
/// uses neither; so does karmada-rs.
#[derive(Debug, Clone, PartialEq)]
pub struct HpaSettings {
    /// `--horizontal-pod-autoscaler-sync-period` (15s): how often each FederatedHPA is synced.
    pub sync_period: Duration,
    /// `--horizontal-pod-autoscaler-downscale-stabilization` (5m): the look-back window of
    /// scale-downs when `spec.behavior` sets none.
    pub downscale_stabilization_window: Duration,
    /// `--horizontal-pod-autoscaler-tolerance` (0.1): the smallest metric ratio change that scales.
    pub tolerance: f64,
    /// `--horizontal-pod-autoscaler-cpu-initialization-period` (5m): after a pod starts, CPU samples
    /// taken before it was ready for a full window are skipped.
    pub cpu_initialization_period: Duration,
    /// `--horizontal-pod-autoscaler-initial-readiness-delay` (30s): after a pod starts, readiness
    /// changes count as its first readiness.
    pub initial_readiness_delay: Duration,
}

impl Default for HpaSettings {
    fn default() -> Self {
        Self {
            sync_period: Duration::from_secs(15),
            downscale_stabilization_window: Duration::from_secs(300),
            tolerance: 0.1,
            cpu_initialization_period: Duration::from_secs(300),
            initial_readiness_delay: Duration::from_secs(30),
        }
    }
}

/// Tells the manager a controller's caches have synced (readiness waits for every enabled controller).
#[derive(Debug, Clone)]
pub struct SyncReporter(Arc<watch::Sender<bool>>);

impl SyncReporter {
    /// A reporter and the receiver that sees its report.
    pub fn new() -> (SyncReporter, watch::Receiver<bool>) {
        let (tx, rx) = watch::channel(false);
        (SyncReporter(Arc::new(tx)), rx)
    }

    /// Marks this controller's caches as synced.
    pub fn synced(&self) {
        self.0.send_replace(true);
    }
}

/// What a controller gets when it starts.
#[derive(Clone)]
pub struct ControllerContext {
    /// The controller's `--controllers` name.
    pub name: &'static str,
    /// The Karmada control plane: rate-limited clients (`--kube-api-qps/-burst`), shared caches, and
    /// shared controllers with per-GroupKind workers (`--concurrent-*-syncs`) and queue limits.
    pub control_plane: lariat::Cluster,
    /// The member clusters this process is connected to (shared by all controllers).
    pub members: Arc<MemberClusters>,
    /// The process's Event sink on the control plane: one writer spending the control plane's
    /// request budget, shared by every controller's recorder.
    pub events: EventSink,
    /// Settings from flags.
    pub settings: Arc<Settings>,
    /// Cancelled when the controller must stop (shutdown or lost leadership).
    pub cancel: CancellationToken,
    /// Report here once caches are synced.
    pub synced: SyncReporter,
}
