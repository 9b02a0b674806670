//! The flags `karmada-controller-manager` and `karmada-agent` both declare, with Karmada's names and
//! defaults: one clap group ([`SharedFlags`]) that each binary flattens into its `Generic flags`
//! section, and the checks that read them. A binary whose Karmada counterpart describes a flag
//! differently rewords its help with [`with_help`]; names, defaults and validation stay the same.

use std::time::Duration;

use clap::Args;
use lariat::runtime::features::FeatureGates;
use lariat::runtime::{BindAddress, GoDuration};

use crate::features::KARMADA_FEATURES;
use crate::flags::{Checker, LeaderElectFlags, LeaderElectionOptions, check_leader_election};

/// The flags both processes take, declared once (flattened into each binary's `Generic flags`).
/// The help texts are the controller-manager's; the agent rewords some with [`with_help`].
#[derive(Args, Debug)]
pub struct SharedFlags {
    /// Elect a leader through a Lease before running controllers (for running several replicas).
    #[arg(long = "leader-elect", value_name = "bool", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true")]
    pub leader_elect: String,
    /// Namespace of the leader-election Lease (named karmada-controller-manager).
    #[arg(
        long = "leader-elect-resource-namespace",
        value_name = "namespace",
        default_value = "karmada-system"
    )]
    pub leader_elect_resource_namespace: String,
    /// How long a standby waits, after it last saw the leader renew, before taking the lease over: the longest a stopped leader goes unreplaced.
    #[arg(
        long = "leader-elect-lease-duration",
        value_name = "duration",
        default_value = "15s",
        allow_hyphen_values = true
    )]
    pub leader_elect_lease_duration: String,
    /// How long the leader keeps retrying to renew before it gives up leading; less than the lease duration.
    #[arg(
        long = "leader-elect-renew-deadline",
        value_name = "duration",
        default_value = "10s",
        allow_hyphen_values = true
    )]
    pub leader_elect_renew_deadline: String,
    /// Time between tries to acquire or renew the lease.
    #[arg(
        long = "leader-elect-retry-period",
        value_name = "duration",
        default_value = "2s",
        allow_hyphen_values = true
    )]
    pub leader_elect_retry_period: String,
    /// Address serving /metrics (e.g. 127.0.0.1:8080 or :8080); 0 turns it off.
    #[arg(
        long = "metrics-bind-address",
        value_name = "address",
        default_value = ":8080"
    )]
    pub metrics_bind_address: String,
    /// Address serving /healthz and /readyz (e.g. 127.0.0.1:10357 or :10357); 0 turns it off.
    #[arg(
        long = "health-probe-bind-address",
        value_name = "address",
        default_value = ":10357"
    )]
    pub health_probe_bind_address: String,
    /// How often the cluster status controller reports each cluster's status to the Karmada API server.
    #[arg(
        long = "cluster-status-update-frequency",
        value_name = "duration",
        default_value = "10s",
        allow_hyphen_values = true
    )]
    pub cluster_status_update_frequency: String,
    /// How long a recovered cluster must keep succeeding before it counts as healthy.
    #[arg(
        long = "cluster-success-threshold",
        value_name = "duration",
        default_value = "30s",
        allow_hyphen_values = true
    )]
    pub cluster_success_threshold: String,
    /// How long a cluster must keep failing before it counts as unhealthy.
    #[arg(
        long = "cluster-failure-threshold",
        value_name = "duration",
        default_value = "30s",
        allow_hyphen_values = true
    )]
    pub cluster_failure_threshold: String,
    /// Requests per second to each member cluster's API server: one budget per member, shared by
    /// every controller (as in Karmada).
    #[arg(
        long = "cluster-api-qps",
        value_name = "float",
        default_value = "40",
        allow_hyphen_values = true
    )]
    pub cluster_api_qps: String,
    /// Burst of requests allowed to each member cluster's API server.
    #[arg(
        long = "cluster-api-burst",
        value_name = "int",
        default_value = "60",
        allow_hyphen_values = true
    )]
    pub cluster_api_burst: String,
    /// Requests per second to the Karmada API server: one budget shared by the controllers (their
    /// Events take only what the controllers leave spare), and one more of the same size for the
    /// scheduler (a process of its own in Karmada, started with the same value).
    #[arg(
        long = "kube-api-qps",
        value_name = "float",
        default_value = "40",
        allow_hyphen_values = true
    )]
    pub kube_api_qps: String,
    /// Burst of requests allowed to the Karmada API server (per budget, like --kube-api-qps).
    #[arg(
        long = "kube-api-burst",
        value_name = "int",
        default_value = "60",
        allow_hyphen_values = true
    )]
    pub kube_api_burst: String,
    /// How long to wait for a member cluster's caches to sync.
    #[arg(
        long = "cluster-cache-sync-timeout",
        value_name = "duration",
        default_value = "2m0s",
        allow_hyphen_values = true
    )]
    pub cluster_cache_sync_timeout: String,
    /// Base period of full resyncs of the caches; 0 turns resyncs off (no effect yet: caches never resync).
    #[arg(
        long = "resync-period",
        value_name = "duration",
        default_value = "0s",
        allow_hyphen_values = true
    )]
    pub resync_period: String,
    /// Clusters synced concurrently.
    #[arg(
        long = "concurrent-cluster-syncs",
        value_name = "int",
        default_value = "5",
        allow_hyphen_values = true
    )]
    pub concurrent_cluster_syncs: String,
    /// Works synced concurrently.
    #[arg(
        long = "concurrent-work-syncs",
        value_name = "int",
        default_value = "5",
        allow_hyphen_values = true
    )]
    pub concurrent_work_syncs: String,
    /// Build a resource model of each cluster from its Nodes and Pods (used by the scheduler for dynamic replica division). Turn off to save memory when unused.
    #[arg(long = "enable-cluster-resource-modeling", value_name = "bool", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true")]
    pub enable_cluster_resource_modeling: String,
    /// Per-item base retry delay of the controllers' rate limiter.
    #[arg(
        long = "rate-limiter-base-delay",
        value_name = "duration",
        default_value = "5ms",
        allow_hyphen_values = true
    )]
    pub rate_limiter_base_delay: String,
    /// Per-item maximum retry delay of the controllers' rate limiter.
    #[arg(
        long = "rate-limiter-max-delay",
        value_name = "duration",
        default_value = "16m40s",
        allow_hyphen_values = true
    )]
    pub rate_limiter_max_delay: String,
    /// Overall queue rate (items per second) of the controllers' rate limiter.
    #[arg(
        long = "rate-limiter-qps",
        value_name = "int",
        default_value = "10",
        allow_hyphen_values = true
    )]
    pub rate_limiter_qps: String,
    /// Overall burst of the controllers' rate limiter.
    #[arg(
        long = "rate-limiter-bucket-size",
        value_name = "int",
        default_value = "100",
        allow_hyphen_values = true
    )]
    pub rate_limiter_bucket_size: String,
    /// Serve CPU and heap profiles under /debug/pprof/ (read them with `go tool pprof`).
    #[arg(long = "enable-pprof", value_name = "bool", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub enable_pprof: String,
    /// The TCP address of the profiling server, with --enable-pprof (e.g. 127.0.0.1:6060, :6060).
    #[arg(
        long = "profiling-bind-address",
        value_name = "address",
        default_value = ":6060"
    )]
    pub profiling_bind_address: String,
    /// Feature gates as key=value pairs, comma-separated.
    #[arg(long = "feature-gates", value_name = "key=value,...", default_value = "", long_help = feature_gates_help())]
    pub feature_gates: String,
}

/// `command` with the help (short and long) of the flags named by their clap ids replaced: for a
/// binary whose Karmada counterpart describes a shared flag differently.
pub fn with_help(command: clap::Command, help: &[(&'static str, &'static str)]) -> clap::Command {
    help.iter().fold(command, |cmd, (id, text)| {
        cmd.mut_arg(*id, |a| {
            a.help(*text).long_help(clap::builder::Resettable::Reset)
        })
    })
}

fn feature_gates_help() -> String {
    let mut s = String::from(
        "Feature gates as key=value pairs, comma-separated. AllAlpha / AllBeta set every alpha / beta \
         gate not named explicitly. Known gates:",
    );
    for line in FeatureGates::help_lines(KARMADA_FEATURES) {
        s.push_str("\n  ");
        s.push_str(&line);
    }
    s
}

/// Rate limiter settings for the controllers' queues (Karmada's `ratelimiterflag`).
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimiterOptions {
    /// Per-item base delay.
    pub base_delay: Duration,
    /// Per-item maximum delay.
    pub max_delay: Duration,
    /// Overall items per second.
    pub qps: u32,
    /// Overall burst.
    pub bucket_size: u32,
}

impl RateLimiterOptions {
    /// The framework's queue rate limiter with these settings.
    pub fn to_lariat(&self) -> lariat::RateLimiterOptions {
        lariat::RateLimiterOptions {
            base_delay: self.base_delay,
            max_delay: self.max_delay,
            bucket: Some((f64::from(self.qps), self.bucket_size)),
        }
    }
}

/// Client limits and cache timings.
#[derive(Debug, Clone)]
pub struct Clients {
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
}

impl SharedFlags {
    /// The `--leader-elect*` flags (checked only when election is on, as client-go does).
    pub fn check_leader_election(&self, c: &mut Checker) -> LeaderElectionOptions {
        check_leader_election(
            c,
            &LeaderElectFlags {
                leader_elect: &self.leader_elect,
                resource_namespace: &self.leader_elect_resource_namespace,
                lease_duration: &self.leader_elect_lease_duration,
                renew_deadline: &self.leader_elect_renew_deadline,
                retry_period: &self.leader_elect_retry_period,
            },
        )
    }

    /// The QPS/burst flags of the control-plane and member clients, the cache sync timeout and the
    /// resync period.
    pub fn check_clients(&self, c: &mut Checker) -> Clients {
        let qps = |c: &mut Checker, flag: &str, value: &str| -> f32 {
            match c.float(flag, value) {
                Some(v) if v > 0.0 => v as f32,
                Some(_) => {
                    c.bad(flag, value, "must be greater than 0");
                    1.0
                }
                None => 1.0,
            }
        };
        let cluster_api_qps = qps(c, "cluster-api-qps", &self.cluster_api_qps);
        let kube_api_qps = qps(c, "kube-api-qps", &self.kube_api_qps);
        Clients {
            cluster_api_qps,
            cluster_api_burst: c.positive_int("cluster-api-burst", &self.cluster_api_burst) as u32,
            kube_api_qps,
            kube_api_burst: c.positive_int("kube-api-burst", &self.kube_api_burst) as u32,
            cluster_cache_sync_timeout: c.non_negative_duration(
                "cluster-cache-sync-timeout",
                &self.cluster_cache_sync_timeout,
            ),
            resync_period: c.non_negative_duration("resync-period", &self.resync_period),
        }
    }

    /// The `--rate-limiter-*` flags. Like Karmada, zero or negative values fall back to the defaults.
    pub fn check_rate_limiter(&self, c: &mut Checker) -> RateLimiterOptions {
        let duration = |c: &mut Checker, flag: &str, value: &str, default: Duration| {
            c.duration(flag, value)
                .filter(GoDuration::is_positive)
                .map_or(default, |d| d.to_std())
        };
        let int = |c: &mut Checker, flag: &str, value: &str, default: u32| {
            c.int(flag, value)
                .filter(|v| *v > 0)
                .map_or(default, |v| u32::try_from(v).unwrap_or(u32::MAX))
        };
        RateLimiterOptions {
            base_delay: duration(
                c,
                "rate-limiter-base-delay",
                &self.rate_limiter_base_delay,
                Duration::from_millis(5),
            ),
            max_delay: duration(
                c,
                "rate-limiter-max-delay",
                &self.rate_limiter_max_delay,
                Duration::from_secs(1000),
            ),
            qps: int(c, "rate-limiter-qps", &self.rate_limiter_qps, 10),
            bucket_size: int(
                c,
                "rate-limiter-bucket-size",
                &self.rate_limiter_bucket_size,
                100,
            ),
        }
    }

    /// `--enable-pprof` and `--profiling-bind-address` (`0` turns profiling off): where to serve
    /// profiles ([`crate::profiling::serve`]), [`BindAddress::Disabled`] unless both ask for it.
    pub fn check_profiling(&self, c: &mut Checker) -> BindAddress {
        let enabled = c.boolean("enable-pprof", &self.enable_pprof);
        let address = c.address("profiling-bind-address", &self.profiling_bind_address);
        if enabled {
            address
        } else {
            BindAddress::Disabled
        }
    }

    /// `--feature-gates`, against Karmada's known gates; one problem per bad entry.
    pub fn check_feature_gates(&self, c: &mut Checker) -> FeatureGates {
        let mut gates = FeatureGates::new(KARMADA_FEATURES);
        if let Err(errs) = gates.set_from_str(&self.feature_gates) {
            for e in errs {
                c.bad("feature-gates", &self.feature_gates, e);
            }
        }
        gates
    }
}
