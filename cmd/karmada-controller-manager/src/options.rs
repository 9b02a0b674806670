//! Command-line flags, with Karmada's names, defaults and validation.
//!
//! Flags are parsed as text first and validated in one pass ([`Cli::validate`]), so every problem is
//! reported at once, one line each, naming the flag. Booleans follow Go's `pflag`: `--flag` means true and
//! a value must be attached with `=` (`--leader-elect=false`). Durations use Go's syntax (`15s`, `1m30s`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, Parser};
use lariat::runtime::BindAddress;
use lariat::runtime::features::FeatureGates;
use lariat::runtime::logging::LogFormat;

use crate::{controllers, no_effect};
use karmada_controllers::common::context::SchedulerEstimatorSettings;
use karmada_controllers::common::context::{PluginSet, ScheduleOptions, SchedulerSettings};
pub use karmada_process::flags::LeaderElectionOptions;
use karmada_process::flags::{Checker, check_logs};
pub use karmada_process::flags::{LogFlags, normalize_args, parse_go_bool};
pub use karmada_process::shared::{RateLimiterOptions, SharedFlags};
pub use karmada_process::shell::{Command, Parsed};

/// Lease name, as Karmada's component name.
pub const LEASE_NAME: &str = "karmada-controller-manager";

/// `karmada-controller-manager` command line.
#[derive(Parser, Debug)]
#[command(
    name = "karmada-controller-manager",
    about = "Runs the Karmada controllers against a Karmada control plane",
    long_about = "The karmada-controller-manager runs the Karmada controllers. They watch Karmada's \
                  objects (policies, bindings, Works, Clusters) on the Karmada API server and create \
                  the matching Kubernetes resources in member clusters.",
    disable_version_flag = true,
    args_conflicts_with_subcommands = true,
    args_override_self = true,
    next_display_order = None,
    after_help = "Flags taking a duration accept Go's syntax (e.g. 300ms, 15s, 1m30s). Boolean flags take \
                  their value after '=' (e.g. --leader-elect=false)."
)]
pub struct Cli {
    /// Subcommand.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Print version information and exit.
    #[arg(long = "version")]
    pub version: bool,

    /// Logging flags.
    #[command(flatten)]
    pub logs: LogFlags,

    /// Generic flags.
    #[command(flatten)]
    pub generic: GenericFlags,

    /// Cluster failover flags.
    #[command(flatten)]
    pub failover: ClusterFailoverFlags,

    /// Flags of Karmada's karmada-scheduler (the scheduler runs in this process).
    #[command(flatten)]
    pub scheduler: SchedulerFlags,
    /// Scheduler estimator flags (karmada-scheduler's).
    #[command(flatten)]
    pub estimator: SchedulerEstimatorFlags,
}

/// `Generic flags` section.
#[derive(Args, Debug)]
#[command(next_help_heading = "Generic flags")]
pub struct GenericFlags {
    /// Kubeconfig of the Karmada control plane. Without it: $KUBECONFIG, then the in-cluster service account, then $HOME/.kube/config.
    #[arg(long = "kubeconfig", value_name = "path")]
    pub kubeconfig: Option<PathBuf>,
    /// Controllers to run: '*' runs every controller that is on by default, 'foo' runs foo, '-foo' leaves foo out; the first entry naming a controller decides. Comma-separated, may be repeated.
    #[arg(long = "controllers", value_name = "names", value_delimiter = ',', default_value = "*", long_help = controllers_help())]
    pub controllers: Vec<String>,
    /// The flags the agent declares too (names, defaults and help as Karmada's controller-manager).
    #[command(flatten)]
    pub shared: SharedFlags,
    /// DEPRECATED: use --health-probe-bind-address. IP the health probes listen on, used with --secure-port.
    #[arg(long = "bind-address", value_name = "ip")]
    pub bind_address: Option<String>,
    /// DEPRECATED: use --health-probe-bind-address. Port the health probes listen on, used with --bind-address.
    #[arg(long = "secure-port", value_name = "port")]
    pub secure_port: Option<String>,
    /// How often the cluster controller checks Pull-mode clusters' Leases.
    #[arg(
        long = "cluster-monitor-period",
        value_name = "duration",
        default_value = "5s",
        allow_hyphen_values = true
    )]
    pub cluster_monitor_period: String,
    /// How long a running Pull-mode cluster may go without renewing its Lease or status before its Ready condition becomes Unknown.
    #[arg(
        long = "cluster-monitor-grace-period",
        value_name = "duration",
        default_value = "40s",
        allow_hyphen_values = true
    )]
    pub cluster_monitor_grace_period: String,
    /// Like --cluster-monitor-grace-period, for a cluster whose agent has never reported.
    #[arg(
        long = "cluster-startup-grace-period",
        value_name = "duration",
        default_value = "1m0s",
        allow_hyphen_values = true
    )]
    pub cluster_startup_grace_period: String,
    /// Resources never propagated, besides the built-in list; ';'-separated entries of the form <group>, <group>/<version>, or <group>/<version>/<kind>,<kind> (kinds case-insensitive).
    #[arg(
        long = "skipped-propagating-apis",
        value_name = "apis",
        default_value = ""
    )]
    pub skipped_propagating_apis: String,
    /// Namespaces (regular expressions, comma-separated) never propagated. karmada-system, karmada-cluster and karmada-es-* are always skipped.
    #[arg(
        long = "skipped-propagating-namespaces",
        value_name = "regexps",
        value_delimiter = ',',
        default_value = "kube-.*"
    )]
    pub skipped_propagating_namespaces: Vec<String>,
    /// Context to use in the cluster-api management cluster's kubeconfig.
    #[arg(long = "cluster-api-context", value_name = "name", default_value = "")]
    pub cluster_api_context: String,
    /// Kubeconfig of a cluster-api management cluster whose provisioned clusters are joined automatically.
    #[arg(
        long = "cluster-api-kubeconfig",
        value_name = "path",
        default_value = ""
    )]
    pub cluster_api_kubeconfig: String,
    /// ClusterResourceBindings synced concurrently.
    #[arg(
        long = "concurrent-clusterresourcebinding-syncs",
        value_name = "int",
        default_value = "5",
        allow_hyphen_values = true
    )]
    pub concurrent_clusterresourcebinding_syncs: String,
    /// ResourceBindings synced concurrently.
    #[arg(
        long = "concurrent-resourcebinding-syncs",
        value_name = "int",
        default_value = "5",
        allow_hyphen_values = true
    )]
    pub concurrent_resourcebinding_syncs: String,
    /// Namespaces synced concurrently.
    #[arg(
        long = "concurrent-namespace-syncs",
        value_name = "int",
        default_value = "1",
        allow_hyphen_values = true
    )]
    pub concurrent_namespace_syncs: String,
    /// PropagationPolicies synced concurrently.
    #[arg(
        long = "concurrent-propagation-policy-syncs",
        value_name = "int",
        default_value = "1",
        allow_hyphen_values = true
    )]
    pub concurrent_propagation_policy_syncs: String,
    /// ClusterPropagationPolicies synced concurrently.
    #[arg(
        long = "concurrent-cluster-propagation-policy-syncs",
        value_name = "int",
        default_value = "1",
        allow_hyphen_values = true
    )]
    pub concurrent_cluster_propagation_policy_syncs: String,
    /// Resource templates synced concurrently.
    #[arg(
        long = "concurrent-resource-template-syncs",
        value_name = "int",
        default_value = "5",
        allow_hyphen_values = true
    )]
    pub concurrent_resource_template_syncs: String,
    /// Dependent resources synced concurrently (workers of the dependencies distributor).
    #[arg(
        long = "concurrent-dependent-resource-syncs",
        value_name = "int",
        default_value = "2",
        allow_hyphen_values = true
    )]
    pub concurrent_dependent_resource_syncs: String,
    /// Honour NoExecute taints on clusters (with the Failover gate): evict what does not tolerate them.
    #[arg(long = "enable-taint-manager", value_name = "bool", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true")]
    pub enable_taint_manager: String,
    /// How long graceful eviction waits before removing a workload from its old cluster regardless.
    #[arg(
        long = "graceful-eviction-timeout",
        value_name = "duration",
        default_value = "10m0s",
        allow_hyphen_values = true
    )]
    pub graceful_eviction_timeout: String,
    /// Period of the FederatedHPA sync.
    #[arg(
        long = "horizontal-pod-autoscaler-sync-period",
        value_name = "duration",
        default_value = "15s",
        allow_hyphen_values = true
    )]
    pub hpa_sync_period: String,
    /// Minimum time between two FederatedHPA scale-ups (no effect yet).
    #[arg(
        long = "horizontal-pod-autoscaler-upscale-delay",
        value_name = "duration",
        default_value = "3m0s",
        allow_hyphen_values = true
    )]
    pub hpa_upscale_delay: String,
    /// Window the FederatedHPA looks back over before scaling down below an earlier recommendation.
    #[arg(
        long = "horizontal-pod-autoscaler-downscale-stabilization",
        value_name = "duration",
        default_value = "5m0s",
        allow_hyphen_values = true
    )]
    pub hpa_downscale_stabilization: String,
    /// Minimum time between two FederatedHPA scale-downs (no effect yet).
    #[arg(
        long = "horizontal-pod-autoscaler-downscale-delay",
        value_name = "duration",
        default_value = "5m0s",
        allow_hyphen_values = true
    )]
    pub hpa_downscale_delay: String,
    /// Smallest change of the desired/actual metric ratio (from 1.0) that makes the FederatedHPA scale.
    #[arg(
        long = "horizontal-pod-autoscaler-tolerance",
        value_name = "float",
        default_value = "0.1",
        allow_hyphen_values = true
    )]
    pub hpa_tolerance: String,
    /// Time after a pod starts during which its CPU samples may be ignored.
    #[arg(
        long = "horizontal-pod-autoscaler-cpu-initialization-period",
        value_name = "duration",
        default_value = "5m0s",
        allow_hyphen_values = true
    )]
    pub hpa_cpu_initialization_period: String,
    /// Time after a pod starts during which readiness changes count as its first readiness.
    #[arg(
        long = "horizontal-pod-autoscaler-initial-readiness-delay",
        value_name = "duration",
        default_value = "30s",
        allow_hyphen_values = true
    )]
    pub hpa_initial_readiness_delay: String,
    /// Period of the full FederatedResourceQuota recalculation (with the FederatedQuotaEnforcement gate).
    #[arg(
        long = "federated-resource-quota-sync-period",
        value_name = "duration",
        default_value = "5m0s",
        allow_hyphen_values = true
    )]
    pub federated_resource_quota_sync_period: String,
}

/// `Cluster failover flags` section.
#[derive(Args, Debug)]
#[command(next_help_heading = "Cluster failover flags")]
pub struct ClusterFailoverFlags {
    /// React to NoExecute taints on clusters by evicting workloads that do not tolerate them; off by default because evictions are disruptive.
    #[arg(long = "enable-no-execute-taint-eviction", value_name = "bool", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub enable_no_execute_taint_eviction: String,
    /// How NoExecute evictions clean up: "Gracefully" reschedules first and removes the old copy once the new one runs; "Directly" removes first, then reschedules.
    #[arg(
        long = "no-execute-taint-eviction-purge-mode",
        value_name = "mode",
        default_value = "Gracefully"
    )]
    pub no_execute_taint_eviction_purge_mode: String,
    /// Resources evicted per second during cluster failover, per eviction worker.
    #[arg(
        long = "resource-eviction-rate",
        value_name = "float",
        default_value = "0.5",
        allow_hyphen_values = true
    )]
    pub resource_eviction_rate: String,
}

/// `Scheduler flags` section: Karmada's `karmada-scheduler` flags, for the built-in scheduler
/// (the `scheduler` controller).
#[derive(Args, Debug)]
#[command(next_help_heading = "Scheduler flags")]
pub struct SchedulerFlags {
    /// SchedulerName represents the name of the scheduler. default is 'default-scheduler'. Bindings whose spec.schedulerName names another scheduler are left to it.
    #[arg(
        long = "scheduler-name",
        value_name = "string",
        default_value = "default-scheduler"
    )]
    pub scheduler_name: String,
    /// Enable workload with replicas 0 to be propagated to member clusters.
    #[arg(long = "enable-empty-workload-propagation", value_name = "bool", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub enable_empty_workload_propagation: String,
    /// A list of plugins to enable. '*' enables all build-in plugins, 'foo' enables the plugin named 'foo', '*,-foo' disables the plugin named 'foo'; an unknown name is an error. All build-in plugins: APIEnablement,TaintToleration,ClusterAffinity,SpreadConstraint,ClusterLocality,ClusterEviction,WorkloadAntiAffinity,WorkloadAffinity (the last two act under the WorkloadAffinity gate).
    #[arg(
        long = "plugins",
        value_name = "strings",
        value_delimiter = ',',
        default_value = "*",
        allow_hyphen_values = true
    )]
    pub plugins: Vec<String>,
}

/// `Scheduler estimator flags` section: karmada-scheduler's flags for its accurate estimators,
/// taken here because the scheduler runs in this process (Karmada's names and defaults).
#[derive(Args, Debug)]
#[command(next_help_heading = "Scheduler estimator flags")]
pub struct SchedulerEstimatorFlags {
    /// Ask each member's karmada-scheduler-estimator how many replicas it can still take; the smaller of that and the Cluster's resource summary counts.
    #[arg(long = "enable-scheduler-estimator", value_name = "bool", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub enable_scheduler_estimator: String,
    /// With --enable-scheduler-estimator: connect to no estimator of a Pull-mode cluster.
    #[arg(long = "disable-scheduler-estimator-in-pull-mode", value_name = "bool", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub disable_scheduler_estimator_in_pull_mode: String,
    /// Deadline of the estimator calls made for one scheduling of a binding; past it, the general estimate alone counts.
    #[arg(
        long = "scheduler-estimator-timeout",
        value_name = "duration",
        default_value = "3s",
        allow_hyphen_values = true
    )]
    pub scheduler_estimator_timeout: String,
    /// Namespace of the estimators' Services on the Karmada control plane.
    #[arg(
        long = "scheduler-estimator-service-namespace",
        value_name = "namespace",
        default_value = "karmada-system"
    )]
    pub scheduler_estimator_service_namespace: String,
    /// The estimator Service of cluster <c> is named <prefix>-<c>.
    #[arg(
        long = "scheduler-estimator-service-prefix",
        value_name = "prefix",
        default_value = "karmada-scheduler-estimator"
    )]
    pub scheduler_estimator_service_prefix: String,
    /// Port of the estimators (an ExternalName Service maps this port to the estimator's target port).
    #[arg(
        long = "scheduler-estimator-port",
        value_name = "int",
        default_value = "10352",
        allow_hyphen_values = true
    )]
    pub scheduler_estimator_port: String,
    /// Client certificate shown to the estimators over TLS (with --scheduler-estimator-key-file).
    #[arg(
        long = "scheduler-estimator-cert-file",
        value_name = "path",
        default_value = ""
    )]
    pub scheduler_estimator_cert_file: String,
    /// Private key of --scheduler-estimator-cert-file.
    #[arg(
        long = "scheduler-estimator-key-file",
        value_name = "path",
        default_value = ""
    )]
    pub scheduler_estimator_key_file: String,
    /// CA bundle the estimators' serving certificates are checked against; setting it turns TLS on.
    #[arg(
        long = "scheduler-estimator-ca-file",
        value_name = "path",
        default_value = ""
    )]
    pub scheduler_estimator_ca_file: String,
    /// Use TLS to the estimators without checking their certificate chain or host name.
    #[arg(long = "insecure-skip-estimator-verify", value_name = "bool", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub insecure_skip_estimator_verify: String,
}

/// The `Scheduler estimator flags`: booleans, a non-negative timeout, a port in 0..=65535 (as
/// Karmada's scheduler validates them).
fn check_scheduler_estimator(
    c: &mut Checker,
    f: &SchedulerEstimatorFlags,
) -> SchedulerEstimatorSettings {
    let port = match c.int("scheduler-estimator-port", &f.scheduler_estimator_port) {
        Some(p) => u16::try_from(p).unwrap_or_else(|_| {
            c.bad(
                "scheduler-estimator-port",
                &f.scheduler_estimator_port,
                "must be a valid port between 0 and 65535 inclusive",
            );
            0
        }),
        None => 0,
    };
    SchedulerEstimatorSettings {
        enabled: c.boolean("enable-scheduler-estimator", &f.enable_scheduler_estimator),
        disable_in_pull_mode: c.boolean(
            "disable-scheduler-estimator-in-pull-mode",
            &f.disable_scheduler_estimator_in_pull_mode,
        ),
        timeout: c.non_negative_duration(
            "scheduler-estimator-timeout",
            &f.scheduler_estimator_timeout,
        ),
        port,
        service_prefix: f.scheduler_estimator_service_prefix.clone(),
        service_namespace: f.scheduler_estimator_service_namespace.clone(),
        ca_file: f.scheduler_estimator_ca_file.clone(),
        cert_file: f.scheduler_estimator_cert_file.clone(),
        key_file: f.scheduler_estimator_key_file.clone(),
        insecure_skip_verify: c.boolean(
            "insecure-skip-estimator-verify",
            &f.insecure_skip_estimator_verify,
        ),
    }
}

fn controllers_help() -> String {
    let missing = controllers::not_implemented();
    let missing = if missing.is_empty() {
        String::new()
    } else {
        format!(
            "\nNot implemented yet (an error when named, left out by '*' with a warning): {}.",
            missing.join(", ")
        )
    };
    format!(
        "Controllers to run: '*' runs every controller that is on by default, 'foo' runs foo, '-foo' \
         leaves foo out; the first entry naming a controller decides. Comma-separated, may be repeated.\n\
         All controllers: {}.{missing}\nOff by default: {}.",
        controllers::ALL_CONTROLLERS.join(", "),
        controllers::DISABLED_BY_DEFAULT.join(", ")
    )
}

/// FederatedHPA settings.
#[derive(Debug, Clone, PartialEq)]
pub struct HpaOptions {
    /// Sync period.
    pub sync_period: Duration,
    /// Upscale delay.
    pub upscale_delay: Duration,
    /// Downscale stabilization window.
    pub downscale_stabilization: Duration,
    /// Downscale delay.
    pub downscale_delay: Duration,
    /// Tolerance.
    pub tolerance: f64,
    /// CPU initialization period.
    pub cpu_initialization_period: Duration,
    /// Initial readiness delay.
    pub initial_readiness_delay: Duration,
}

/// Cluster failover settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterFailoverOptions {
    /// Evict on NoExecute taints.
    pub enable_no_execute_taint_eviction: bool,
    /// `Gracefully` or `Directly`.
    pub no_execute_taint_eviction_purge_mode: String,
    /// Evictions per second.
    pub resource_eviction_rate: f32,
}

/// Validated settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--controllers`, as given (validated names).
    pub controllers: Vec<String>,
    /// Leader election.
    pub leader_election: LeaderElectionOptions,
    /// `/metrics` address.
    pub metrics_bind_address: BindAddress,
    /// Probe address (after applying the deprecated `--bind-address`/`--secure-port`).
    pub health_probe_bind_address: BindAddress,
    /// Where profiles are served: `--profiling-bind-address` with `--enable-pprof`, else disabled.
    pub profiling_bind_address: BindAddress,
    /// `--cluster-status-update-frequency`.
    pub cluster_status_update_frequency: Duration,
    /// `--cluster-success-threshold`.
    pub cluster_success_threshold: Duration,
    /// `--cluster-failure-threshold`.
    pub cluster_failure_threshold: Duration,
    /// `--cluster-monitor-period`.
    pub cluster_monitor_period: Duration,
    /// `--cluster-monitor-grace-period`.
    pub cluster_monitor_grace_period: Duration,
    /// `--cluster-startup-grace-period`.
    pub cluster_startup_grace_period: Duration,
    /// `--skipped-propagating-apis`, validated syntax.
    pub skipped_propagating_apis: String,
    /// `--skipped-propagating-namespaces`, each anchored as `^…$` and compiled.
    pub skipped_propagating_namespaces: Vec<regex::Regex>,
    /// `--cluster-api-context`.
    pub cluster_api_context: String,
    /// `--cluster-api-kubeconfig`.
    pub cluster_api_kubeconfig: String,
    /// `--cluster-api-qps`.
    pub cluster_api_qps: f32,
    /// `--cluster-api-burst`.
    pub cluster_api_burst: u32,
    /// `--kube-api-qps`.
    pub kube_api_qps: f32,
    /// `--kube-api-burst`.
    pub kube_api_burst: u32,
    /// `--cluster-cache-sync-timeout`.
    pub cluster_cache_sync_timeout: Duration,
    /// `--resync-period` (zero: no resync).
    pub resync_period: Duration,
    /// Concurrency per controller-runtime GroupKind key (`Kind.group`), from the `--concurrent-*-syncs` flags.
    pub group_kind_concurrency: BTreeMap<String, usize>,
    /// `--concurrent-propagation-policy-syncs`.
    pub concurrent_propagation_policy_syncs: usize,
    /// `--concurrent-cluster-propagation-policy-syncs`.
    pub concurrent_cluster_propagation_policy_syncs: usize,
    /// `--concurrent-resource-template-syncs`.
    pub concurrent_resource_template_syncs: usize,
    /// `--concurrent-dependent-resource-syncs`.
    pub concurrent_dependent_resource_syncs: usize,
    /// `--enable-taint-manager`.
    pub enable_taint_manager: bool,
    /// `--graceful-eviction-timeout`.
    pub graceful_eviction_timeout: Duration,
    /// `--enable-cluster-resource-modeling`.
    pub enable_cluster_resource_modeling: bool,
    /// Queue rate limiter.
    pub rate_limiter: RateLimiterOptions,
    /// FederatedHPA.
    pub hpa: HpaOptions,
    /// `--federated-resource-quota-sync-period`.
    pub federated_resource_quota_sync_period: Duration,
    /// Cluster failover.
    pub cluster_failover: ClusterFailoverOptions,
    /// The scheduler's flags.
    pub scheduler: SchedulerSettings,
    /// The `--scheduler-estimator-*` flags.
    pub scheduler_estimator: SchedulerEstimatorSettings,
    /// `--feature-gates`.
    pub feature_gates: FeatureGates,
    /// `-v`.
    pub verbosity: u32,
    /// `--logging-format`.
    pub logging_format: LogFormat,
    /// Warnings to log once logging is up (deprecated flags).
    pub warnings: Vec<String>,
    /// Flags and feature gates the user changed that have no effect yet (see [no_effect::changed]).
    pub no_effect: Vec<String>,
    /// The Karmada controllers `--controllers` turns on that karmada-rs does not implement yet.
    pub controllers_left_out: Vec<&'static str>,
}

/// Controller-runtime GroupKind keys (`Kind.group`) used for per-kind worker counts.
pub mod group_kinds {
    /// `Work.work.karmada.io`
    pub const WORK: &str = "Work.work.karmada.io";
    /// `ResourceBinding.work.karmada.io`
    pub const RESOURCE_BINDING: &str = "ResourceBinding.work.karmada.io";
    /// `ClusterResourceBinding.work.karmada.io`
    pub const CLUSTER_RESOURCE_BINDING: &str = "ClusterResourceBinding.work.karmada.io";
    /// `Cluster.cluster.karmada.io`
    pub const CLUSTER: &str = "Cluster.cluster.karmada.io";
    /// `Namespace` (core group)
    pub const NAMESPACE: &str = "Namespace";
}

fn explicit(matches: &ArgMatches, id: &str) -> bool {
    matches.value_source(id) == Some(ValueSource::CommandLine)
}

impl Cli {
    /// Validates every flag, returning all problems (one line each) when any is wrong.
    /// `matches` tells which flags were given explicitly.
    ///
    /// One step per flag group, in the order the problems are listed.
    pub fn validate(&self, matches: &ArgMatches) -> Result<Options, Vec<String>> {
        let mut c = Checker::default();
        let g = &self.generic;
        let logs = check_logs(&mut c, &self.logs);
        let controllers = check_controllers(&mut c, &g.controllers);
        let leader_election = g.shared.check_leader_election(&mut c);
        let servers = check_servers(&mut c, g, matches);
        let health = check_cluster_health(&mut c, g);
        let skipped_propagating_namespaces = check_propagation_filters(&mut c, g);
        let clients = g.shared.check_clients(&mut c);
        let concurrency = check_concurrency(&mut c, g);
        let eviction = check_eviction(&mut c, g);
        let rate_limiter = g.shared.check_rate_limiter(&mut c);
        let profiling_bind_address = g.shared.check_profiling(&mut c);
        let hpa = check_hpa(&mut c, g);
        let federated_resource_quota_sync_period = c.positive_duration(
            "federated-resource-quota-sync-period",
            &g.federated_resource_quota_sync_period,
        );
        let cluster_failover = check_cluster_failover(&mut c, &self.failover);
        let scheduler = check_scheduler(&mut c, &self.scheduler);
        let scheduler_estimator = check_scheduler_estimator(&mut c, &self.estimator);
        let feature_gates = g.shared.check_feature_gates(&mut c);
        if !c.problems.is_empty() {
            return Err(c.problems);
        }
        let no_effect = no_effect::changed(&Cli::command(), matches, &feature_gates);
        let controllers_left_out = controllers::left_out(&controllers);
        Ok(Options {
            kubeconfig: g.kubeconfig.clone(),
            controllers,
            leader_election,
            metrics_bind_address: servers.metrics,
            health_probe_bind_address: servers.health_probe,
            profiling_bind_address,
            cluster_status_update_frequency: health.status_update_frequency,
            cluster_success_threshold: health.success_threshold,
            cluster_failure_threshold: health.failure_threshold,
            cluster_monitor_period: health.monitor_period,
            cluster_monitor_grace_period: health.monitor_grace_period,
            cluster_startup_grace_period: health.startup_grace_period,
            skipped_propagating_apis: g.skipped_propagating_apis.clone(),
            skipped_propagating_namespaces,
            cluster_api_context: g.cluster_api_context.clone(),
            cluster_api_kubeconfig: g.cluster_api_kubeconfig.clone(),
            cluster_api_qps: clients.cluster_api_qps,
            cluster_api_burst: clients.cluster_api_burst,
            kube_api_qps: clients.kube_api_qps,
            kube_api_burst: clients.kube_api_burst,
            cluster_cache_sync_timeout: clients.cluster_cache_sync_timeout,
            resync_period: clients.resync_period,
            group_kind_concurrency: concurrency.group_kind,
            concurrent_propagation_policy_syncs: concurrency.propagation_policy,
            concurrent_cluster_propagation_policy_syncs: concurrency.cluster_propagation_policy,
            concurrent_resource_template_syncs: concurrency.resource_template,
            concurrent_dependent_resource_syncs: concurrency.dependent_resource,
            enable_taint_manager: eviction.enable_taint_manager,
            graceful_eviction_timeout: eviction.graceful_eviction_timeout,
            enable_cluster_resource_modeling: eviction.enable_cluster_resource_modeling,
            rate_limiter,
            hpa,
            federated_resource_quota_sync_period,
            cluster_failover,
            scheduler,
            scheduler_estimator,
            feature_gates,
            verbosity: logs.verbosity,
            logging_format: logs.format,
            warnings: servers.warnings,
            no_effect,
            controllers_left_out,
        })
    }
}

/// `--controllers`: the trimmed, non-empty names, each a known controller (or `*`, `-name`).
fn check_controllers(c: &mut Checker, given: &[String]) -> Vec<String> {
    let controllers: Vec<String> = given
        .iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    for problem in controllers::validate_selection(&controllers) {
        c.problems
            .push(format!("invalid value for --controllers: {problem}"));
    }
    controllers
}

/// The addresses the metrics and probe servers listen on.
struct Servers {
    metrics: BindAddress,
    health_probe: BindAddress,
    /// Deprecation warnings, logged once logging is up.
    warnings: Vec<String>,
}

/// `--metrics-bind-address`, `--health-probe-bind-address`, and the deprecated
/// `--bind-address`/`--secure-port` pair, which sets the probe address unless that is given too.
fn check_servers(c: &mut Checker, g: &GenericFlags, matches: &ArgMatches) -> Servers {
    let mut warnings = Vec::new();
    let metrics = c.address("metrics-bind-address", &g.shared.metrics_bind_address);
    let mut health_probe = c.address(
        "health-probe-bind-address",
        &g.shared.health_probe_bind_address,
    );
    if g.bind_address.is_some() || g.secure_port.is_some() {
        let ip = g.bind_address.clone().unwrap_or_else(|| "0.0.0.0".into());
        let port = g.secure_port.clone().unwrap_or_else(|| "10357".into());
        let ip_ok = ip.parse::<std::net::IpAddr>().is_ok();
        if !ip_ok {
            c.bad("bind-address", &ip, "must be an IP address");
        }
        let port_ok = matches!(port.parse::<u16>(), Ok(p) if p > 0);
        if !port_ok {
            c.bad("secure-port", &port, "must be a port between 1 and 65535");
        }
        if explicit(matches, "health_probe_bind_address") {
            warnings.push(
                "--bind-address and --secure-port are deprecated and ignored because \
                 --health-probe-bind-address is set"
                    .into(),
            );
        } else {
            warnings.push(
                "--bind-address and --secure-port are deprecated; use --health-probe-bind-address"
                    .into(),
            );
            if ip_ok && port_ok {
                let host = if ip.contains(':') {
                    format!("[{ip}]")
                } else {
                    ip
                };
                health_probe = c.address("bind-address", &format!("{host}:{port}"));
            }
        }
    }
    Servers {
        metrics,
        health_probe,
        warnings,
    }
}

/// How often cluster health is collected and judged.
struct ClusterHealth {
    status_update_frequency: Duration,
    success_threshold: Duration,
    failure_threshold: Duration,
    monitor_period: Duration,
    monitor_grace_period: Duration,
    startup_grace_period: Duration,
}

/// The `--cluster-*` health periods and thresholds: periods must be positive, thresholds may be 0.
fn check_cluster_health(c: &mut Checker, g: &GenericFlags) -> ClusterHealth {
    ClusterHealth {
        status_update_frequency: c.positive_duration(
            "cluster-status-update-frequency",
            &g.shared.cluster_status_update_frequency,
        ),
        success_threshold: c.non_negative_duration(
            "cluster-success-threshold",
            &g.shared.cluster_success_threshold,
        ),
        failure_threshold: c.non_negative_duration(
            "cluster-failure-threshold",
            &g.shared.cluster_failure_threshold,
        ),
        monitor_period: c.positive_duration("cluster-monitor-period", &g.cluster_monitor_period),
        monitor_grace_period: c.positive_duration(
            "cluster-monitor-grace-period",
            &g.cluster_monitor_grace_period,
        ),
        startup_grace_period: c.positive_duration(
            "cluster-startup-grace-period",
            &g.cluster_startup_grace_period,
        ),
    }
}

/// `--skipped-propagating-apis` (syntax only) and `--skipped-propagating-namespaces`, returned
/// compiled and anchored (`^…$`) as Karmada matches them.
fn check_propagation_filters(c: &mut Checker, g: &GenericFlags) -> Vec<regex::Regex> {
    for token in g
        .skipped_propagating_apis
        .split(';')
        .filter(|t| !t.is_empty())
    {
        if token.matches('/').count() > 2 {
            c.bad(
                "skipped-propagating-apis",
                &g.skipped_propagating_apis,
                format!("entry {token:?} is not <group>, <group>/<version> or <group>/<version>/<kind>[,<kind>]"),
            );
        }
    }
    let mut namespaces = Vec::new();
    for ns in &g.skipped_propagating_namespaces {
        match regex::Regex::new(&format!("^{ns}$")) {
            Ok(r) => namespaces.push(r),
            Err(_) => c.bad(
                "skipped-propagating-namespaces",
                ns,
                "not a valid regular expression",
            ),
        }
    }
    namespaces
}

/// Worker counts.
struct Concurrency {
    /// Per controller-runtime GroupKind key.
    group_kind: BTreeMap<String, usize>,
    propagation_policy: usize,
    cluster_propagation_policy: usize,
    resource_template: usize,
    dependent_resource: usize,
}

/// The `--concurrent-*-syncs` flags, each at least 1.
fn check_concurrency(c: &mut Checker, g: &GenericFlags) -> Concurrency {
    let mut group_kind = BTreeMap::new();
    for (flag, value, key) in [
        (
            "concurrent-work-syncs",
            &g.shared.concurrent_work_syncs,
            group_kinds::WORK,
        ),
        (
            "concurrent-resourcebinding-syncs",
            &g.concurrent_resourcebinding_syncs,
            group_kinds::RESOURCE_BINDING,
        ),
        (
            "concurrent-clusterresourcebinding-syncs",
            &g.concurrent_clusterresourcebinding_syncs,
            group_kinds::CLUSTER_RESOURCE_BINDING,
        ),
        (
            "concurrent-cluster-syncs",
            &g.shared.concurrent_cluster_syncs,
            group_kinds::CLUSTER,
        ),
        (
            "concurrent-namespace-syncs",
            &g.concurrent_namespace_syncs,
            group_kinds::NAMESPACE,
        ),
    ] {
        group_kind.insert(key.to_string(), c.positive_int(flag, value));
    }
    Concurrency {
        group_kind,
        propagation_policy: c.positive_int(
            "concurrent-propagation-policy-syncs",
            &g.concurrent_propagation_policy_syncs,
        ),
        cluster_propagation_policy: c.positive_int(
            "concurrent-cluster-propagation-policy-syncs",
            &g.concurrent_cluster_propagation_policy_syncs,
        ),
        resource_template: c.positive_int(
            "concurrent-resource-template-syncs",
            &g.concurrent_resource_template_syncs,
        ),
        dependent_resource: c.positive_int(
            "concurrent-dependent-resource-syncs",
            &g.concurrent_dependent_resource_syncs,
        ),
    }
}

/// Taint manager and resource modelling switches.
struct Eviction {
    enable_taint_manager: bool,
    graceful_eviction_timeout: Duration,
    enable_cluster_resource_modeling: bool,
}

/// `--enable-taint-manager`, `--graceful-eviction-timeout` and
/// `--enable-cluster-resource-modeling`.
fn check_eviction(c: &mut Checker, g: &GenericFlags) -> Eviction {
    Eviction {
        enable_taint_manager: c.boolean("enable-taint-manager", &g.enable_taint_manager),
        graceful_eviction_timeout: c
            .non_negative_duration("graceful-eviction-timeout", &g.graceful_eviction_timeout),
        enable_cluster_resource_modeling: c.boolean(
            "enable-cluster-resource-modeling",
            &g.shared.enable_cluster_resource_modeling,
        ),
    }
}

/// `--scheduler-name` (not empty, as Karmada validates), `--enable-empty-workload-propagation` and
/// `--plugins` (every name one of Karmada's in-tree plugins).
fn check_scheduler(c: &mut Checker, s: &SchedulerFlags) -> SchedulerSettings {
    if s.scheduler_name.is_empty() {
        c.bad("scheduler-name", &s.scheduler_name, "should not be empty");
    }
    let enable_empty_workload_propagation = c.boolean(
        "enable-empty-workload-propagation",
        &s.enable_empty_workload_propagation,
    );
    let plugins: Vec<&str> = s.plugins.iter().map(|p| p.trim()).collect();
    let plugins = PluginSet::parse(&plugins).unwrap_or_else(|e| {
        c.bad("plugins", &s.plugins.join(","), e);
        PluginSet::all()
    });
    SchedulerSettings {
        scheduler_name: s.scheduler_name.clone(),
        options: ScheduleOptions {
            enable_empty_workload_propagation,
            plugins,
            // Gathered per binding: the estimators' answers when they are on, the workload
            // groups' placements under the `WorkloadAffinity` gate; the
            // `MultiplePodTemplatesScheduling` gate is read by the scheduler controller.
            accurate_estimates: None,
            workload_groups: None,
            multiple_pod_templates: false,
        },
    }
}

/// The `--horizontal-pod-autoscaler-*` flags.
fn check_hpa(c: &mut Checker, g: &GenericFlags) -> HpaOptions {
    HpaOptions {
        sync_period: c
            .positive_duration("horizontal-pod-autoscaler-sync-period", &g.hpa_sync_period),
        upscale_delay: c.non_negative_duration(
            "horizontal-pod-autoscaler-upscale-delay",
            &g.hpa_upscale_delay,
        ),
        downscale_stabilization: c.non_negative_duration(
            "horizontal-pod-autoscaler-downscale-stabilization",
            &g.hpa_downscale_stabilization,
        ),
        downscale_delay: c.non_negative_duration(
            "horizontal-pod-autoscaler-downscale-delay",
            &g.hpa_downscale_delay,
        ),
        tolerance: c
            .float("horizontal-pod-autoscaler-tolerance", &g.hpa_tolerance)
            .unwrap_or(0.1),
        cpu_initialization_period: c.non_negative_duration(
            "horizontal-pod-autoscaler-cpu-initialization-period",
            &g.hpa_cpu_initialization_period,
        ),
        initial_readiness_delay: c.non_negative_duration(
            "horizontal-pod-autoscaler-initial-readiness-delay",
            &g.hpa_initial_readiness_delay,
        ),
    }
}

/// The cluster failover flags; the purge mode is only checked when NoExecute eviction is on.
fn check_cluster_failover(c: &mut Checker, f: &ClusterFailoverFlags) -> ClusterFailoverOptions {
    let enable_no_execute_taint_eviction = c.boolean(
        "enable-no-execute-taint-eviction",
        &f.enable_no_execute_taint_eviction,
    );
    if enable_no_execute_taint_eviction
        && !matches!(
            f.no_execute_taint_eviction_purge_mode.as_str(),
            "Gracefully" | "Directly"
        )
    {
        c.bad(
            "no-execute-taint-eviction-purge-mode",
            &f.no_execute_taint_eviction_purge_mode,
            "must be \"Gracefully\" or \"Directly\"",
        );
    }
    let resource_eviction_rate = match c.float("resource-eviction-rate", &f.resource_eviction_rate)
    {
        Some(v) if v >= 0.0 => v as f32,
        Some(_) => {
            c.bad(
                "resource-eviction-rate",
                &f.resource_eviction_rate,
                "must not be negative",
            );
            0.0
        }
        None => 0.0,
    };
    ClusterFailoverOptions {
        enable_no_execute_taint_eviction,
        no_execute_taint_eviction_purge_mode: f.no_execute_taint_eviction_purge_mode.clone(),
        resource_eviction_rate,
    }
}

/// Parses and validates `args` (including the program name): whether they ask for the version,
/// and the options.
pub fn parse_from(args: impl IntoIterator<Item = String>) -> Parsed<Options> {
    use clap::FromArgMatches;
    let matches = Cli::command().try_get_matches_from(normalize_args(args))?;
    let cli = Cli::from_arg_matches(&matches)?;
    let validated = cli.validate(&matches);
    Ok((
        cli.version || cli.command == Some(Command::Version),
        validated,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options, Vec<String>> {
        let mut all = vec!["karmada-controller-manager".to_string()];
        all.extend(args.iter().map(ToString::to_string));
        parse_from(all).expect("clap accepts the flags").1
    }

    #[test]
    fn defaults_match_karmada() {
        let o = parse(&[]).unwrap();
        assert_eq!(o.controllers, vec!["*"]);
        assert!(o.leader_election.enabled);
        assert_eq!(o.leader_election.namespace, "karmada-system");
        assert_eq!(o.leader_election.lease_duration, Duration::from_secs(15));
        assert_eq!(o.leader_election.renew_deadline, Duration::from_secs(10));
        assert_eq!(o.leader_election.retry_period, Duration::from_secs(2));
        assert_eq!(o.metrics_bind_address.to_string(), ":8080");
        assert_eq!(o.health_probe_bind_address.to_string(), ":10357");
        assert_eq!(o.kube_api_qps, 40.0);
        assert_eq!(o.kube_api_burst, 60);
        assert_eq!(o.cluster_api_qps, 40.0);
        assert_eq!(o.cluster_api_burst, 60);
        assert_eq!(o.cluster_cache_sync_timeout, Duration::from_secs(120));
        assert_eq!(o.resync_period, Duration::ZERO);
        assert_eq!(o.cluster_status_update_frequency, Duration::from_secs(10));
        assert_eq!(o.cluster_monitor_period, Duration::from_secs(5));
        assert_eq!(o.cluster_monitor_grace_period, Duration::from_secs(40));
        assert_eq!(o.cluster_startup_grace_period, Duration::from_secs(60));
        assert_eq!(o.cluster_success_threshold, Duration::from_secs(30));
        assert_eq!(o.cluster_failure_threshold, Duration::from_secs(30));
        assert_eq!(o.group_kind_concurrency[group_kinds::WORK], 5);
        assert_eq!(o.group_kind_concurrency[group_kinds::RESOURCE_BINDING], 5);
        assert_eq!(
            o.group_kind_concurrency[group_kinds::CLUSTER_RESOURCE_BINDING],
            5
        );
        assert_eq!(o.group_kind_concurrency[group_kinds::CLUSTER], 5);
        assert_eq!(o.group_kind_concurrency[group_kinds::NAMESPACE], 1);
        assert_eq!(o.concurrent_resource_template_syncs, 5);
        assert_eq!(o.concurrent_propagation_policy_syncs, 1);
        assert_eq!(o.concurrent_cluster_propagation_policy_syncs, 1);
        assert_eq!(o.concurrent_dependent_resource_syncs, 2);
        assert_eq!(
            o.rate_limiter,
            RateLimiterOptions {
                base_delay: Duration::from_millis(5),
                max_delay: Duration::from_secs(1000),
                qps: 10,
                bucket_size: 100
            }
        );
        assert_eq!(o.graceful_eviction_timeout, Duration::from_secs(600));
        assert_eq!(
            o.federated_resource_quota_sync_period,
            Duration::from_secs(300)
        );
        assert!(o.enable_taint_manager);
        assert!(o.enable_cluster_resource_modeling);
        assert!(!o.cluster_failover.enable_no_execute_taint_eviction);
        assert_eq!(
            o.cluster_failover.no_execute_taint_eviction_purge_mode,
            "Gracefully"
        );
        assert_eq!(o.cluster_failover.resource_eviction_rate, 0.5);
        assert_eq!(o.skipped_propagating_namespaces.len(), 1);
        assert!(o.skipped_propagating_namespaces[0].is_match("kube-system"));
        assert!(!o.skipped_propagating_namespaces[0].is_match("xkube-system"));
        assert_eq!(o.verbosity, 0);
        assert_eq!(o.logging_format, LogFormat::Text);
        assert!(o.feature_gates.enabled("PropagateDeps"));
        assert!(!o.feature_gates.enabled("Failover"));
        assert_eq!(o.scheduler, SchedulerSettings::default());
        assert_eq!(o.scheduler.scheduler_name, "default-scheduler");
    }

    #[test]
    fn scheduler_flags() {
        use karmada_controllers::common::context::Plugin;
        let o = parse(&[
            "--scheduler-name=other",
            "--enable-empty-workload-propagation",
            "--plugins=*,-TaintToleration",
        ])
        .unwrap();
        assert_eq!(o.scheduler.scheduler_name, "other");
        assert!(o.scheduler.options.enable_empty_workload_propagation);
        assert!(!o.scheduler.options.plugins.enabled(Plugin::TaintToleration));
        assert!(o.scheduler.options.plugins.enabled(Plugin::ClusterLocality));
        let errors = parse(&["--scheduler-name=", "--plugins=*,-Nope"]).unwrap_err();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].contains("--scheduler-name"), "{errors:?}");
        assert!(
            errors[1].contains("--plugins") && errors[1].contains("Nope"),
            "{errors:?}"
        );
    }

    #[test]
    fn scheduler_estimator_flags_are_karmada_schedulers() {
        let o = parse(&[]).unwrap();
        assert_eq!(o.scheduler_estimator, SchedulerEstimatorSettings::default());
        let d = &o.scheduler_estimator;
        assert!(!d.enabled && !d.disable_in_pull_mode && !d.insecure_skip_verify);
        assert_eq!(d.timeout, Duration::from_secs(3));
        assert_eq!(d.port, 10352);
        assert_eq!(d.service_prefix, "karmada-scheduler-estimator");
        assert_eq!(d.service_namespace, "karmada-system");
        let o = parse(&[
            "--enable-scheduler-estimator",
            "--scheduler-estimator-timeout=0s",
            "--scheduler-estimator-port=4000",
            "--scheduler-estimator-ca-file=/ca.crt",
        ])
        .unwrap();
        assert!(o.scheduler_estimator.enabled);
        assert_eq!(o.scheduler_estimator.timeout, Duration::ZERO);
        assert_eq!(o.scheduler_estimator.port, 4000);
        assert_eq!(o.scheduler_estimator.ca_file, "/ca.crt");
        let errs = parse(&[
            "--scheduler-estimator-port=65536",
            "--scheduler-estimator-timeout=-1s",
            "--enable-scheduler-estimator=maybe",
        ])
        .unwrap_err();
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(errs[0].contains("--scheduler-estimator-port"), "{errs:?}");
    }

    #[test]
    fn go_style_values() {
        let o = parse(&[
            "--leader-elect=false",
            "--leader-elect-lease-duration=1m",
            "-v=4",
            "--logging-format=json",
            "--controllers=*,-cluster",
            "--controllers",
            "namespace,-serviceImport",
            "--feature-gates=Failover=true,AllAlpha=true",
            "--log_dir=/tmp",
            "--metrics-bind-address=0",
        ])
        .unwrap();
        assert!(!o.leader_election.enabled);
        assert_eq!(o.leader_election.lease_duration, Duration::from_secs(60));
        assert_eq!(o.verbosity, 4);
        assert_eq!(o.logging_format, LogFormat::Json);
        assert_eq!(
            o.controllers,
            vec!["*", "-cluster", "namespace", "-serviceImport"]
        );
        assert_eq!(
            o.controllers_left_out,
            crate::controllers::left_out(&o.controllers)
        );
        assert!(o.feature_gates.enabled("Failover"));
        assert!(o.feature_gates.enabled("WorkloadAffinity"));
        assert_eq!(o.metrics_bind_address, BindAddress::Disabled);
        // AllAlpha turned on alpha gates that have no effect yet, too.
        assert_eq!(
            o.no_effect[..2],
            ["--log-dir=/tmp", "LoggingAlphaOptions=true"]
        );
        assert!(
            o.no_effect
                .contains(&"SchedulingOvercommitProtection=true".to_string())
        );
        let o = parse(&["--leader-elect", "-v", "2", "-v=3"]).unwrap();
        assert!(o.leader_election.enabled);
        // Like pflag, a repeated flag takes its last value.
        assert_eq!(o.verbosity, 3);
    }

    #[test]
    fn reports_every_problem_at_once() {
        let errs = parse(&[
            "--controllers=nope,-alsonope",
            "--leader-elect-lease-duration=-1s",
            "--cluster-monitor-period=0s",
            "--kube-api-qps=abc",
            "--logging-format=xml",
            "--metrics-bind-address=8080",
            "--feature-gates=Unknown=true",
            "--skipped-propagating-namespaces=(",
            "--concurrent-work-syncs=0",
        ])
        .unwrap_err();
        let joined = errs.join("\n");
        assert_eq!(errs.len(), 10, "{joined}");
        for flag in [
            "--controllers",
            "--leader-elect-lease-duration",
            "--cluster-monitor-period",
            "--kube-api-qps",
            "--logging-format",
            "--metrics-bind-address",
            "--feature-gates",
            "--skipped-propagating-namespaces",
            "--concurrent-work-syncs",
        ] {
            assert!(joined.contains(flag), "{flag} missing in:\n{joined}");
        }
        assert!(joined.contains("\"nope\""), "{joined}");
        assert!(joined.contains("\"alsonope\""), "{joined}");
    }

    #[test]
    fn leader_election_timing_relations() {
        let errs = parse(&["--leader-elect-renew-deadline=20s"]).unwrap_err();
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0].contains("--leader-elect-lease-duration"),
            "{errs:?}"
        );
        // Not checked when leader election is off.
        assert!(parse(&["--leader-elect=false", "--leader-elect-renew-deadline=20s"]).is_ok());
        let errs = parse(&["--leader-elect-retry-period=9s"]).unwrap_err();
        assert!(
            errs[0].contains("--leader-elect-renew-deadline"),
            "{errs:?}"
        );
    }

    #[test]
    fn deprecated_probe_address_flags() {
        let o = parse(&["--bind-address=127.0.0.1", "--secure-port=12345"]).unwrap();
        assert_eq!(o.health_probe_bind_address.to_string(), "127.0.0.1:12345");
        assert!(o.warnings.iter().any(|w| w.contains("deprecated")));
        let o = parse(&["--secure-port=12345"]).unwrap();
        assert_eq!(o.health_probe_bind_address.to_string(), "0.0.0.0:12345");
        let o = parse(&["--secure-port=12345", "--health-probe-bind-address=:999"]).unwrap();
        assert_eq!(o.health_probe_bind_address.to_string(), ":999");
        assert!(parse(&["--secure-port=0"]).is_err());
        assert!(parse(&["--bind-address=notanip"]).is_err());
    }

    #[test]
    fn rate_limiter_falls_back_like_karmada() {
        let o = parse(&["--rate-limiter-qps=0", "--rate-limiter-base-delay=0s"]).unwrap();
        assert_eq!(o.rate_limiter.qps, 10);
        assert_eq!(o.rate_limiter.base_delay, Duration::from_millis(5));
    }

    #[test]
    fn purge_mode_checked_only_when_enabled() {
        assert!(parse(&["--no-execute-taint-eviction-purge-mode=Nope"]).is_ok());
        let errs = parse(&[
            "--enable-no-execute-taint-eviction",
            "--no-execute-taint-eviction-purge-mode=Nope",
        ])
        .unwrap_err();
        assert!(errs[0].contains("--no-execute-taint-eviction-purge-mode"));
    }

    #[test]
    fn normalizes_underscores_in_flag_names_only() {
        assert_eq!(
            normalize_args([
                "x".into(),
                "--log_dir=/a_b".into(),
                "--one_output".into(),
                "-v".into()
            ]),
            vec!["x", "--log-dir=/a_b", "--one-output", "-v"]
        );
    }
}
