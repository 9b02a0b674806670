//! The process: parse flags, set up logging, serve probes and metrics, elect, run the controllers.
//!
//! Exit codes: 0 after a graceful shutdown (first SIGTERM/SIGINT) or for `--help`/`version`; 1 on a
//! runtime failure (lost leadership, a controller failed, a second signal, a port already in use);
//! 2 for invalid flags (every problem is printed, one line each).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use karmada_controllers::common::template::control_plane_cache_options;
use karmada_controllers::{MemberClusters, Settings};
use lariat::controller::WorkerOptions;
use lariat::events::EventSink;
#[cfg(feature = "test-hooks")]
use lariat::runtime::GoDuration;
use lariat::runtime::client::wait_for_api_server;
use lariat::runtime::{LeaderContext, LeaderWork, SignalHandler};
use lariat::{ClientOptions, Cluster, ClusterOptions, ControllerOptions};
use tokio_util::sync::CancellationToken;

use crate::controllers::ControllerContext;
use crate::options::{self, LEASE_NAME, Options};
use crate::{cluster_source, controllers, no_effect};
use karmada_process::flags::Logs;
use karmada_process::shell::{self, GRACEFUL_SHUTDOWN_TIMEOUT};
use karmada_process::version;

const NAME: &str = "karmada-controller-manager";

/// Test hook, compiled only with the `test-hooks` feature (never in a release or default build):
/// after the controllers stopped, wait this long (a Go duration) before releasing the lease, as if
/// a handler were still finishing. Lets tests exercise "second signal during a slow shutdown".
#[cfg(feature = "test-hooks")]
const SLOW_SHUTDOWN_ENV: &str = "KARMADA_RS_TEST_SLOW_SHUTDOWN";

/// Parses the command line, runs the process and returns its exit code.
pub fn main() -> ExitCode {
    shell::main(
        NAME,
        &[
            "karmada_controller_manager",
            "karmada_controllers",
            "karmada_interpreter",
            "lariat",
        ],
        options::parse_from(std::env::args()),
        |o| Logs {
            verbosity: o.verbosity,
            format: o.logging_format,
        },
        run,
    )
}

async fn run(opts: Options) -> anyhow::Result<()> {
    let signals = SignalHandler::install().context("cannot install signal handlers")?;
    let shutdown = signals.token();
    for w in &opts.warnings {
        tracing::warn!("{w}");
    }
    if let Some(w) = no_effect::warning(&opts.no_effect) {
        tracing::warn!("{w}");
    }
    if !opts.controllers_left_out.is_empty() {
        tracing::warn!(
            controllers = %opts.controllers_left_out.join(","),
            "--controllers: these Karmada controllers are not implemented in karmada-rs yet and do \
             not run (docs/compatibility.md's \"Accepted, no effect yet\" table)"
        );
    }
    tracing::info!(version = %version::INFO, "{NAME} starting");
    version::register_build_info().context("cannot register karmada_build_info")?;

    let (config, source) =
        shell::load_kubeconfig(opts.kubeconfig.as_deref(), "kubeconfig", None).await?;
    let server = config.cluster_url.to_string();
    tracing::info!(server = %server, kubeconfig = %source, "using the Karmada API server");
    let client = kube::Client::try_from(config.clone())
        .with_context(|| format!("cannot build a client for {server} ({source})"))?;

    let (manager, _profiling) = shell::serve(
        LEASE_NAME.to_string(),
        &opts.leader_election,
        &shell::Servers {
            profiling: &opts.profiling_bind_address,
            health_probe: &opts.health_probe_bind_address,
            metrics: &opts.metrics_bind_address,
        },
        &shutdown,
    )
    .await?;

    if !wait_for_api_server(&client, &server, &source, &shutdown).await {
        manager.shutdown().await;
        return Ok(());
    }
    // Which server serves Clusters (the CRD or Karmada's aggregated API server); a warning when both
    // claim the group or neither does.
    cluster_source::report(&client).await;

    let opts = Arc::new(opts);
    let result = manager
        .lead(client, &shutdown, move |ctx| {
            run_controllers(config, opts, ctx)
        })
        .await;
    manager.shutdown().await;
    drop(signals);
    result.map_err(Into::into)
}

/// The control plane's framework settings from the flags.
fn control_plane_options(opts: &Options) -> ClusterOptions {
    ClusterOptions {
        clients: ClientOptions {
            qps: f64::from(opts.kube_api_qps),
            burst: opts.kube_api_burst,
            user_agent: NAME.to_string(),
            ..ClientOptions::default()
        },
        caches: control_plane_cache_options(),
        metrics: None,
        controllers: ControllerOptions {
            // Kinds without a `--concurrent-*-syncs` flag of their own are the resource templates
            // the detector watches: each gets `--concurrent-resource-template-syncs` workers.
            workers: WorkerOptions {
                default_workers: opts.concurrent_resource_template_syncs.max(1),
                group_kind_concurrency: opts
                    .group_kind_concurrency
                    .iter()
                    .map(|(k, v)| (k.clone(), *v))
                    .collect(),
            },
            rate_limiter: opts.rate_limiter.to_lariat(),
        },
    }
}

/// The controllers' settings from the flags.
fn controller_settings(opts: &Options) -> Settings {
    Settings {
        cluster_status_update_frequency: opts.cluster_status_update_frequency,
        cluster_success_threshold: opts.cluster_success_threshold,
        cluster_failure_threshold: opts.cluster_failure_threshold,
        cluster_cache_sync_timeout: opts.cluster_cache_sync_timeout,
        cluster_api_qps: opts.cluster_api_qps,
        cluster_api_burst: opts.cluster_api_burst,
        enable_cluster_resource_modeling: opts.enable_cluster_resource_modeling,
        skipped_propagating_apis: opts.skipped_propagating_apis.clone(),
        skipped_propagating_namespaces: opts.skipped_propagating_namespaces.clone(),
        concurrent_resource_template_syncs: opts.concurrent_resource_template_syncs,
        concurrent_dependent_resource_syncs: opts.concurrent_dependent_resource_syncs,
        concurrent_propagation_policy_syncs: opts.concurrent_propagation_policy_syncs,
        concurrent_cluster_propagation_policy_syncs: opts
            .concurrent_cluster_propagation_policy_syncs,
        concurrent_work_syncs: opts
            .group_kind_concurrency
            .get(crate::options::group_kinds::WORK)
            .copied()
            .unwrap_or(5),
        rate_limiter: control_plane_options(opts).controllers.rate_limiter,
        feature_gates: opts.feature_gates.clone(),
        federated_resource_quota_sync_period: opts.federated_resource_quota_sync_period,
        hpa: karmada_controllers::common::context::HpaSettings {
            sync_period: opts.hpa.sync_period,
            downscale_stabilization_window: opts.hpa.downscale_stabilization,
            tolerance: opts.hpa.tolerance,
            cpu_initialization_period: opts.hpa.cpu_initialization_period,
            initial_readiness_delay: opts.hpa.initial_readiness_delay,
        },
        failover: karmada_controllers::common::context::FailoverSettings {
            enable_taint_manager: opts.enable_taint_manager,
            enable_no_execute_taint_eviction: opts
                .cluster_failover
                .enable_no_execute_taint_eviction,
            no_execute_taint_eviction_purge_mode: opts
                .cluster_failover
                .no_execute_taint_eviction_purge_mode
                .clone(),
            resource_eviction_rate: opts.cluster_failover.resource_eviction_rate,
            graceful_eviction_timeout: opts.graceful_eviction_timeout,
        },
        // The agent's flags; the controller-manager renews no Lease.
        cluster_lease_duration: Duration::from_secs(40),
        cluster_lease_renew_interval_fraction: 0.25,
        cluster_monitor_period: opts.cluster_monitor_period,
        cluster_monitor_grace_period: opts.cluster_monitor_grace_period,
        cluster_startup_grace_period: opts.cluster_startup_grace_period,
        // Agent flags.
        cert_rotation: Default::default(),
        scheduler: opts.scheduler.clone(),
        scheduler_estimator: opts.scheduler_estimator.clone(),
    }
}

fn run_controllers(config: kube::Config, opts: Arc<Options>, ctx: LeaderContext) -> LeaderWork {
    Box::pin(async move {
        // The framework's tasks live under this token; the guard cancels it if this future is dropped
        // (e.g. aborted when leadership is lost), so nothing outlives the leader work.
        let cluster_token = CancellationToken::new();
        let _stop_on_drop = cluster_token.clone().drop_guard();
        let control_plane = Cluster::new("", config, control_plane_options(&opts), &cluster_token)?;
        control_plane.controllers().start();
        let settings = Arc::new(controller_settings(&opts));
        // Members get `--cluster-api-qps/-burst` and the `--rate-limiter-*` queue limits.
        let members = Arc::new(MemberClusters::from_settings(
            cluster_token.child_token(),
            &settings,
        ));
        members.start();
        // One Event writer for every controller of the process, on the control plane's budget
        // (spare tokens only: Events never slow the controllers).
        let events = EventSink::start(control_plane.clients().background_client()?, &cluster_token);

        let mut enabled: Vec<_> = controllers::registry()
            .into_iter()
            .filter(|s| controllers::is_enabled(&opts.controllers, s.name))
            .collect();
        // Like Karmada, the resource detector always runs: it is not a `--controllers` name.
        enabled.push(controllers::ControllerSpec {
            name: "detector",
            enabled_by_default: true,
            start: karmada_controllers::detector::start_fn(),
        });
        // And, like Karmada, the dependencies distributor beside it while `PropagateDeps` is on.
        if opts
            .feature_gates
            .enabled(karmada_process::features::PROPAGATE_DEPS)
        {
            enabled.push(controllers::ControllerSpec {
                name: karmada_controllers::dependencies_distributor::NAME,
                enabled_by_default: true,
                start: karmada_controllers::dependencies_distributor::start_fn(),
            });
        }
        // And, like Karmada, the Cluster API cluster detector when a management cluster is given.
        if !opts.cluster_api_kubeconfig.is_empty() {
            enabled.push(controllers::ControllerSpec {
                name: crate::cluster_api::NAME,
                enabled_by_default: true,
                start: crate::cluster_api::start_fn(
                    opts.cluster_api_kubeconfig.clone().into(),
                    opts.cluster_api_context.clone(),
                ),
            });
        }
        let enabled = enabled.into_iter().map(|s| (s.name, s.start)).collect();
        let failure = shell::run_controllers(
            enabled,
            |name, synced, cancel| ControllerContext {
                name,
                control_plane: control_plane.clone(),
                members: members.clone(),
                events: events.clone(),
                settings: settings.clone(),
                cancel,
                synced,
            },
            &ctx,
        )
        .await
        .err();
        #[cfg(feature = "test-hooks")]
        if ctx.cancel.is_cancelled()
            && let Ok(v) = std::env::var(SLOW_SHUTDOWN_ENV)
            && let Ok(d) = GoDuration::parse(&v)
        {
            tracing::warn!(delay = %d, "{SLOW_SHUTDOWN_ENV} is set: delaying shutdown");
            tokio::time::sleep(d.to_std()).await;
        }
        let (members_done, control_plane_done) = tokio::join!(
            members.shutdown(GRACEFUL_SHUTDOWN_TIMEOUT),
            control_plane.stop(GRACEFUL_SHUTDOWN_TIMEOUT)
        );
        if !(members_done && control_plane_done) {
            tracing::warn!("some controller workers did not stop in time");
        }
        match failure {
            Some(f) => Err(f.into()),
            None => Ok(()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Settings::default()` is what the controller-manager builds from no flags at all (but the
    /// feature gates, whose table lives in this binary's layer): one statement of Karmada's
    /// defaults for tests and the agent to start from.
    #[test]
    fn settings_default_is_the_flags_defaults() {
        let args = ["karmada-controller-manager".to_string()];
        let opts = crate::options::parse_from(args)
            .expect("clap accepts no flags")
            .1
            .expect("no flags are valid");
        let from_flags = controller_settings(&opts);
        let default = Settings {
            feature_gates: from_flags.feature_gates.clone(),
            ..Settings::default()
        };
        assert_eq!(format!("{from_flags:#?}"), format!("{default:#?}"));
    }
}
