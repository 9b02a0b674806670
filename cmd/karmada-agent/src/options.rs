//! `karmada-agent` flags, with Karmada's names, defaults and validation (Karmada's
//! `cmd/agent/app/options`). Like the controller-manager's, every problem is reported at once.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, CommandFactory, FromArgMatches, Parser};
use karmada_controllers::context::CertRotationSettings;
use karmada_process::flags::{
    Checker, LeaderElectionOptions, LogFlags, check_logs, normalize_args,
};
pub use karmada_process::shared::{RateLimiterOptions, SharedFlags, with_help};
pub use karmada_process::shell::{Command, Parsed};
use lariat::runtime::BindAddress;
use lariat::runtime::features::FeatureGates;
use lariat::runtime::logging::LogFormat;

/// Every controller name Karmada's agent accepts in `--controllers`, sorted.
pub const ALL_CONTROLLERS: &[&str] = &[
    "certRotation",
    "clusterStatus",
    "endpointsliceCollect",
    "execution",
    "serviceExport",
    "workStatus",
];

/// The agent controllers karmada-rs implements.
pub const IMPLEMENTED: &[&str] = ALL_CONTROLLERS;

/// Controllers that `*` does not turn on (Karmada's agent).
pub const DISABLED_BY_DEFAULT: &[&str] = &["certRotation"];

/// `karmada-agent` command line.
#[derive(Parser, Debug)]
#[command(
    name = "karmada-agent",
    about = "Runs in a member cluster and serves it to a Karmada control plane (Pull mode)",
    long_about = "The karmada-agent registers its member cluster with the Karmada control plane, keeps \
                  the Cluster's status and Lease up to date, applies the Works of the cluster's \
                  execution namespace to the member cluster and reports their status back.",
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
}

/// `Generic flags` section.
#[derive(Args, Debug)]
#[command(next_help_heading = "Generic flags")]
pub struct GenericFlags {
    /// Kubeconfig of the member cluster the agent runs in. Without it: $KUBECONFIG, then the in-cluster service account, then $HOME/.kube/config.
    #[arg(long = "kubeconfig", value_name = "path")]
    pub kubeconfig: Option<PathBuf>,
    /// Path to the Karmada control plane's kubeconfig.
    #[arg(long = "karmada-kubeconfig", value_name = "path")]
    pub karmada_kubeconfig: Option<PathBuf>,
    /// Context to use in --karmada-kubeconfig (its current context when empty).
    #[arg(long = "karmada-context", value_name = "name", default_value = "")]
    pub karmada_context: String,
    /// Controllers to run: '*' runs every controller that is on by default, 'foo' runs foo, '-foo' leaves foo out. Known: certRotation, clusterStatus, endpointsliceCollect, execution, serviceExport, workStatus (certRotation is off by default).
    #[arg(
        long = "controllers",
        value_name = "names",
        value_delimiter = ',',
        default_value = "*"
    )]
    pub controllers: Vec<String>,
    /// The flags the controller-manager declares too (their help reworded by [`AGENT_HELP`]).
    #[command(flatten)]
    pub shared: SharedFlags,
    /// Name of the member cluster the agent serves.
    #[arg(long = "cluster-name", value_name = "name", default_value = "")]
    pub cluster_name: String,
    /// Namespace on the Karmada control plane for member cluster secrets (created if missing).
    #[arg(
        long = "cluster-namespace",
        value_name = "namespace",
        default_value = "karmada-cluster"
    )]
    pub cluster_namespace: String,
    /// API endpoint of the member cluster, written to the Cluster's spec.apiEndpoint.
    #[arg(long = "cluster-api-endpoint", value_name = "url", default_value = "")]
    pub cluster_api_endpoint: String,
    /// Address of a proxy to the member cluster, written to spec.proxyURL.
    #[arg(long = "proxy-server-address", value_name = "url", default_value = "")]
    pub proxy_server_address: String,
    /// Provider of the member cluster (spec.provider).
    #[arg(long = "cluster-provider", value_name = "name", default_value = "")]
    pub cluster_provider: String,
    /// Region of the member cluster (spec.region).
    #[arg(long = "cluster-region", value_name = "name", default_value = "")]
    pub cluster_region: String,
    /// Zones of the member cluster (spec.zones), comma-separated.
    #[arg(long = "cluster-zones", value_name = "names", value_delimiter = ',')]
    pub cluster_zones: Vec<String>,
    /// Duration of the cluster Lease the agent renews (karmada-cluster/<cluster>).
    #[arg(
        long = "cluster-lease-duration",
        value_name = "duration",
        default_value = "40s",
        allow_hyphen_values = true
    )]
    pub cluster_lease_duration: String,
    /// The Lease is renewed every --cluster-lease-duration × this fraction.
    #[arg(
        long = "cluster-lease-renew-interval-fraction",
        value_name = "float",
        default_value = "0.25",
        allow_hyphen_values = true
    )]
    pub cluster_lease_renew_interval_fraction: String,
    /// Secrets reported to the control plane on registration: KubeCredentials, KubeImpersonator or None (karmada-rs reports none; other values warn).
    #[arg(
        long = "report-secrets",
        value_name = "kinds",
        value_delimiter = ',',
        default_value = "KubeCredentials,KubeImpersonator"
    )]
    pub report_secrets: Vec<String>,
    /// How often certRotation checks the agent's client certificate for the Karmada API server.
    #[arg(
        long = "cert-rotation-checking-interval",
        value_name = "duration",
        default_value = "5m0s",
        allow_hyphen_values = true
    )]
    pub cert_rotation_checking_interval: String,
    /// certRotation renews the certificate once no more than this fraction of its validity remains (0 to 1).
    #[arg(
        long = "cert-rotation-remaining-time-threshold",
        value_name = "float",
        default_value = "0.2",
        allow_hyphen_values = true
    )]
    pub cert_rotation_remaining_time_threshold: String,
    /// Member namespace of the Secret karmada-kubeconfig holding the agent's Karmada kubeconfig (certRotation renews the certificate in it).
    #[arg(
        long = "karmada-kubeconfig-namespace",
        value_name = "namespace",
        default_value = "karmada-system"
    )]
    pub karmada_kubeconfig_namespace: String,
}

/// The shared flags whose help Karmada words differently for the agent (clap ids and text).
const AGENT_HELP: &[(&str, &str)] = &[
    (
        "leader_elect",
        "Elect a leader through a Lease (karmada-agent-<cluster>) on the Karmada API server before \
         running controllers.",
    ),
    (
        "leader_elect_resource_namespace",
        "Namespace of the leader-election Lease on the Karmada API server.",
    ),
    (
        "cluster_status_update_frequency",
        "How often the agent posts the cluster's status to the Karmada API server; keep it well \
         below the controller-manager's --cluster-monitor-grace-period.",
    ),
    (
        "cluster_api_qps",
        "Requests per second to the member cluster's API server.",
    ),
    (
        "cluster_api_burst",
        "Burst of requests to the member cluster's API server.",
    ),
    (
        "kube_api_qps",
        "Requests per second to the Karmada API server.",
    ),
    (
        "kube_api_burst",
        "Burst of requests to the Karmada API server.",
    ),
    (
        "concurrent_cluster_syncs",
        "Clusters synced concurrently (the agent has one: no effect).",
    ),
];

/// The agent's command: [`Cli`] with the agent's wording of the shared flags.
pub fn command() -> clap::Command {
    with_help(Cli::command(), AGENT_HELP)
}

/// Validated settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--karmada-kubeconfig`.
    pub karmada_kubeconfig: Option<PathBuf>,
    /// `--karmada-context` (`None` when empty).
    pub karmada_context: Option<String>,
    /// `--controllers`.
    pub controllers: Vec<String>,
    /// Placeholders the selection turns on (they warn and do not run).
    pub placeholders: Vec<&'static str>,
    /// Leader election.
    pub leader_election: LeaderElectionOptions,
    /// `--cluster-name`.
    pub cluster_name: String,
    /// `--cluster-namespace`.
    pub cluster_namespace: String,
    /// `--cluster-api-endpoint`.
    pub cluster_api_endpoint: String,
    /// `--proxy-server-address`.
    pub proxy_server_address: String,
    /// `--cluster-provider`.
    pub cluster_provider: String,
    /// `--cluster-region`.
    pub cluster_region: String,
    /// `--cluster-zones`.
    pub cluster_zones: Vec<String>,
    /// `--cluster-status-update-frequency`.
    pub cluster_status_update_frequency: Duration,
    /// `--cluster-lease-duration`.
    pub cluster_lease_duration: Duration,
    /// `--cluster-lease-renew-interval-fraction`.
    pub cluster_lease_renew_interval_fraction: f64,
    /// `--cluster-success-threshold`.
    pub cluster_success_threshold: Duration,
    /// `--cluster-failure-threshold`.
    pub cluster_failure_threshold: Duration,
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
    /// `--concurrent-work-syncs`.
    pub concurrent_work_syncs: usize,
    /// `--rate-limiter-*`: the controllers' queue rate limiter.
    pub rate_limiter: RateLimiterOptions,
    /// `--metrics-bind-address`.
    pub metrics_bind_address: BindAddress,
    /// `--health-probe-bind-address`.
    pub health_probe_bind_address: BindAddress,
    /// Where profiles are served: `--profiling-bind-address` with `--enable-pprof`, else disabled.
    pub profiling_bind_address: BindAddress,
    /// `--enable-cluster-resource-modeling`.
    pub enable_cluster_resource_modeling: bool,
    /// `--feature-gates`.
    pub feature_gates: FeatureGates,
    /// `-v`.
    pub verbosity: u32,
    /// `--logging-format`.
    pub logging_format: LogFormat,
    /// Startup warnings (flags accepted with no effect).
    pub warnings: Vec<String>,
    /// `--cert-rotation-*`, `--karmada-kubeconfig-namespace`: what certRotation acts on.
    pub cert_rotation: CertRotationSettings,
}

/// Whether `name` runs under `selection` (Karmada's rule, the agent's defaults).
pub fn is_enabled(selection: &[String], name: &str) -> bool {
    karmada_process::flags::controller_enabled(selection, name, DISABLED_BY_DEFAULT)
}

impl Cli {
    /// Validates every flag, returning all problems (one line each) when any is wrong.
    #[allow(
        clippy::too_many_lines,
        reason = "one check per flag, side by side; every problem is collected before returning"
    )]
    pub fn validate(&self) -> Result<Options, Vec<String>> {
        let mut c = Checker::default();
        let g = &self.generic;
        let logs = check_logs(&mut c, &self.logs);
        let controllers: Vec<String> = g
            .controllers
            .iter()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        for item in &controllers {
            let name = item.strip_prefix('-').unwrap_or(item);
            if item != "*" && !ALL_CONTROLLERS.contains(&name) {
                c.problems.push(format!(
                    "invalid value for --controllers: unknown controller {name:?} (known controllers: {})",
                    ALL_CONTROLLERS.join(", ")
                ));
            }
        }
        let placeholders: Vec<&'static str> = ALL_CONTROLLERS
            .iter()
            .copied()
            .filter(|n| !IMPLEMENTED.contains(n) && is_enabled(&controllers, n))
            .collect();
        let leader_election = g.shared.check_leader_election(&mut c);
        if let Some(problem) =
            karmada_apis::cluster::v1alpha1::cluster_name_problem(&g.cluster_name)
        {
            c.bad("cluster-name", &g.cluster_name, problem);
        }
        let cluster_status_update_frequency = c.non_negative_duration(
            "cluster-status-update-frequency",
            &g.shared.cluster_status_update_frequency,
        );
        let cluster_lease_duration =
            c.non_negative_duration("cluster-lease-duration", &g.cluster_lease_duration);
        let fraction_flag = "cluster-lease-renew-interval-fraction";
        let cluster_lease_renew_interval_fraction =
            match c.float(fraction_flag, &g.cluster_lease_renew_interval_fraction) {
                Some(v) if v > 0.0 => v,
                Some(_) => {
                    c.bad(
                        fraction_flag,
                        &g.cluster_lease_renew_interval_fraction,
                        "must be greater than 0",
                    );
                    0.25
                }
                None => 0.25,
            };
        let cluster_success_threshold = c.non_negative_duration(
            "cluster-success-threshold",
            &g.shared.cluster_success_threshold,
        );
        let cluster_failure_threshold = c.non_negative_duration(
            "cluster-failure-threshold",
            &g.shared.cluster_failure_threshold,
        );
        let clients = g.shared.check_clients(&mut c);
        c.positive_int(
            "concurrent-cluster-syncs",
            &g.shared.concurrent_cluster_syncs,
        );
        let concurrent_work_syncs =
            c.positive_int("concurrent-work-syncs", &g.shared.concurrent_work_syncs);
        let mut warnings = Vec::new();
        for kind in &g.report_secrets {
            if !matches!(
                kind.as_str(),
                "KubeCredentials" | "KubeImpersonator" | "None"
            ) {
                c.bad(
                    "report-secrets",
                    kind,
                    "must be KubeCredentials, KubeImpersonator or None",
                );
            }
        }
        if g.report_secrets.iter().any(|k| k != "None") {
            warnings.push(
                "--report-secrets: karmada-rs's agent reports no member credentials to the control \
                 plane (as --report-secrets=None); the control plane never contacts a Pull member"
                    .to_owned(),
            );
        }
        if !clients.resync_period.is_zero() {
            warnings.push("--resync-period has no effect: caches never resync".to_owned());
        }
        let metrics_bind_address =
            c.address("metrics-bind-address", &g.shared.metrics_bind_address);
        let health_probe_bind_address = c.address(
            "health-probe-bind-address",
            &g.shared.health_probe_bind_address,
        );
        let enable_cluster_resource_modeling = c.boolean(
            "enable-cluster-resource-modeling",
            &g.shared.enable_cluster_resource_modeling,
        );
        let rate_limiter = g.shared.check_rate_limiter(&mut c);
        let profiling_bind_address = g.shared.check_profiling(&mut c);
        let defaults = CertRotationSettings::default();
        let checking_interval = c.positive_duration(
            "cert-rotation-checking-interval",
            &g.cert_rotation_checking_interval,
        );
        let threshold_flag = "cert-rotation-remaining-time-threshold";
        let remaining_time_threshold =
            match c.float(threshold_flag, &g.cert_rotation_remaining_time_threshold) {
                Some(v) if (0.0..=1.0).contains(&v) => v,
                Some(_) => {
                    c.bad(
                        threshold_flag,
                        &g.cert_rotation_remaining_time_threshold,
                        "must be between 0 and 1",
                    );
                    defaults.remaining_time_threshold
                }
                None => defaults.remaining_time_threshold,
            };
        let cert_rotation = CertRotationSettings {
            checking_interval,
            remaining_time_threshold,
            karmada_kubeconfig_namespace: g.karmada_kubeconfig_namespace.clone(),
        };
        let feature_gates = g.shared.check_feature_gates(&mut c);
        if !c.problems.is_empty() {
            return Err(c.problems);
        }
        Ok(Options {
            kubeconfig: g.kubeconfig.clone(),
            karmada_kubeconfig: g.karmada_kubeconfig.clone(),
            karmada_context: (!g.karmada_context.is_empty()).then(|| g.karmada_context.clone()),
            controllers,
            placeholders,
            leader_election,
            cluster_name: g.cluster_name.clone(),
            cluster_namespace: g.cluster_namespace.clone(),
            cluster_api_endpoint: g.cluster_api_endpoint.clone(),
            proxy_server_address: g.proxy_server_address.clone(),
            cluster_provider: g.cluster_provider.clone(),
            cluster_region: g.cluster_region.clone(),
            cluster_zones: g
                .cluster_zones
                .iter()
                .filter(|z| !z.is_empty())
                .cloned()
                .collect(),
            cluster_status_update_frequency,
            cluster_lease_duration,
            cluster_lease_renew_interval_fraction,
            cluster_success_threshold,
            cluster_failure_threshold,
            cluster_api_qps: clients.cluster_api_qps,
            cluster_api_burst: clients.cluster_api_burst,
            kube_api_qps: clients.kube_api_qps,
            kube_api_burst: clients.kube_api_burst,
            cluster_cache_sync_timeout: clients.cluster_cache_sync_timeout,
            concurrent_work_syncs,
            rate_limiter,
            metrics_bind_address,
            health_probe_bind_address,
            profiling_bind_address,
            enable_cluster_resource_modeling,
            feature_gates,
            verbosity: logs.verbosity,
            logging_format: logs.format,
            warnings,
            cert_rotation,
        })
    }
}

/// Parses and validates `args` (including the program name): whether they ask for the version,
/// and the options.
pub fn parse_from(args: impl IntoIterator<Item = String>) -> Parsed<Options> {
    let matches = command().try_get_matches_from(normalize_args(args))?;
    let cli = Cli::from_arg_matches(&matches)?;
    let validated = cli.validate();
    Ok((
        cli.version || cli.command == Some(Command::Version),
        validated,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options, Vec<String>> {
        let mut all = vec!["karmada-agent".to_string()];
        all.extend(args.iter().map(ToString::to_string));
        parse_from(all).expect("clap accepts the flags").1
    }

    #[test]
    fn defaults_match_karmada() {
        let o = parse(&["--cluster-name=m1"]).unwrap();
        assert_eq!(o.controllers, vec!["*"]);
        assert!(o.leader_election.enabled);
        assert_eq!(o.leader_election.namespace, "karmada-system");
        assert_eq!(o.cluster_namespace, "karmada-cluster");
        assert_eq!(o.cluster_status_update_frequency, Duration::from_secs(10));
        assert_eq!(o.cluster_lease_duration, Duration::from_secs(40));
        assert_eq!(o.cluster_lease_renew_interval_fraction, 0.25);
        assert_eq!(o.kube_api_qps, 40.0);
        assert_eq!(o.cluster_api_burst, 60);
        assert_eq!(o.metrics_bind_address.to_string(), ":8080");
        assert_eq!(o.health_probe_bind_address.to_string(), ":10357");
        // Every agent controller is implemented; certRotation is off by default.
        assert!(o.placeholders.is_empty());
        assert!(is_enabled(&o.controllers, "execution"));
        assert!(!is_enabled(&o.controllers, "certRotation"));
        assert_eq!(o.cert_rotation, CertRotationSettings::default());
    }

    #[test]
    fn cert_rotation_flags() {
        let o = parse(&[
            "--cluster-name=m1",
            "--cert-rotation-checking-interval=30s",
            "--cert-rotation-remaining-time-threshold=0.5",
            "--karmada-kubeconfig-namespace=agents",
        ])
        .unwrap();
        assert_eq!(
            o.cert_rotation,
            CertRotationSettings {
                checking_interval: Duration::from_secs(30),
                remaining_time_threshold: 0.5,
                karmada_kubeconfig_namespace: "agents".into(),
            }
        );
        let errs = parse(&[
            "--cluster-name=m1",
            "--cert-rotation-checking-interval=0s",
            "--cert-rotation-remaining-time-threshold=1.5",
        ])
        .unwrap_err();
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[1].contains("must be between 0 and 1"), "{errs:?}");
    }

    #[test]
    fn reports_every_problem_at_once() {
        let errs = parse(&[
            "--cluster-name=Bad_Name",
            "--controllers=nope",
            "--cluster-lease-renew-interval-fraction=0",
            "--report-secrets=Foo",
        ])
        .unwrap_err();
        let joined = errs.join("\n");
        assert_eq!(errs.len(), 4, "{joined}");
        for flag in [
            "--cluster-name",
            "--controllers",
            "--cluster-lease-renew-interval-fraction",
            "--report-secrets",
        ] {
            assert!(joined.contains(flag), "{flag} missing in:\n{joined}");
        }
        assert!(parse(&[]).unwrap_err()[0].contains("cluster name is required"));
    }

    #[test]
    fn every_agent_controller_can_be_named() {
        let o = parse(&[
            "--cluster-name=m1",
            "--controllers=certRotation,clusterStatus,endpointsliceCollect,execution,serviceExport,workStatus",
        ])
        .unwrap();
        assert!(o.placeholders.is_empty());
    }
}
