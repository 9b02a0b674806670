//! The process: parse flags, set up logging, register the cluster, serve probes and metrics,
//! elect, and run the agent's controllers (the controller-manager's `clusterStatus`, `execution`
//! and `workStatus`, serving only this cluster, and the agent's own `certRotation`).
//!
//! Exit codes as the controller-manager's: 0 after a graceful shutdown, 1 on a runtime failure
//! (including a refused registration), 2 for invalid flags.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use karmada_apis::Work;
use karmada_apis::names::execution_space_name;
use karmada_apis::well_known::KARMADA_AGENT_NAME;
use karmada_controllers::{ControllerContext, MemberClusters, Settings, StartFn};
use karmada_process::flags::Logs;
use karmada_process::shell::{self, GRACEFUL_SHUTDOWN_TIMEOUT};
use karmada_process::version;
use lariat::events::EventSink;
use lariat::runtime::client::wait_for_api_server;
use lariat::runtime::{LeaderContext, LeaderWork, SignalHandler};
use lariat::{CacheOptions, CacheScope, ClientOptions, Cluster, ClusterOptions, ControllerOptions};
use tokio_util::sync::CancellationToken;

use crate::options::{self, Options};
use crate::register;

const NAME: &str = KARMADA_AGENT_NAME;

/// Connect timeout of the member client.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Parses the command line, runs the process and returns its exit code.
pub fn main() -> ExitCode {
    shell::main(
        NAME,
        &[
            "karmada_agent",
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

/// The agent's controllers as the registry of `karmada-controllers` starts them.
fn implemented() -> Vec<(&'static str, StartFn)> {
    karmada_controllers::registry::implemented()
        .into_iter()
        .filter(|(n, _)| options::IMPLEMENTED.contains(n))
        // The agent's own controller (not a controller-manager name).
        .chain([(
            karmada_controllers::cert_rotation::NAME,
            karmada_controllers::cert_rotation::start_fn(),
        )])
        .collect()
}

async fn run(opts: Options) -> anyhow::Result<()> {
    let signals = SignalHandler::install().context("cannot install signal handlers")?;
    let shutdown = signals.token();
    for w in &opts.warnings {
        tracing::warn!("{w}");
    }
    if !opts.placeholders.is_empty() {
        tracing::warn!(
            controllers = %opts.placeholders.join(","),
            "--controllers: these Karmada agent controllers are not implemented in karmada-rs yet \
             and do not run (docs/compatibility.md)"
        );
    }
    tracing::info!(version = %version::INFO, cluster = %opts.cluster_name, "{NAME} starting");
    version::register_build_info().context("cannot register karmada_build_info")?;

    let (cp_config, cp_source) = shell::load_kubeconfig(
        opts.karmada_kubeconfig.as_deref(),
        "karmada-kubeconfig",
        opts.karmada_context.as_deref(),
    )
    .await?;
    let (mut member_config, member_source) =
        shell::load_kubeconfig(opts.kubeconfig.as_deref(), "kubeconfig", None).await?;
    member_config.connect_timeout = Some(CONNECT_TIMEOUT);
    let server = cp_config.cluster_url.to_string();
    tracing::info!(server = %server, kubeconfig = %cp_source, "using the Karmada API server");
    tracing::info!(server = %member_config.cluster_url, kubeconfig = %member_source, "using the member cluster");
    let cp_client = kube::Client::try_from(cp_config.clone())
        .with_context(|| format!("cannot build a client for {server} ({cp_source})"))?;
    let member_client = kube::Client::try_from(member_config.clone()).with_context(|| {
        format!(
            "cannot build a client for the member cluster {} ({member_source})",
            member_config.cluster_url
        )
    })?;

    let (manager, _profiling) = shell::serve(
        format!("{NAME}-{}", opts.cluster_name),
        &opts.leader_election,
        &shell::Servers {
            profiling: &opts.profiling_bind_address,
            health_probe: &opts.health_probe_bind_address,
            metrics: &opts.metrics_bind_address,
        },
        &shutdown,
    )
    .await?;

    if !wait_for_api_server(&cp_client, &server, &cp_source, &shutdown).await {
        manager.shutdown().await;
        return Ok(());
    }
    let registered = tokio::select! {
        r = register::register(&cp_client, &member_client, member_config.accept_invalid_certs, &opts) => r,
        _ = shutdown.cancelled() => {
            manager.shutdown().await;
            return Ok(());
        }
    };
    if let Err(e) = registered {
        manager.shutdown().await;
        return Err(anyhow::Error::new(e).context(format!(
            "failed to register cluster {} with the Karmada control plane",
            opts.cluster_name
        )));
    }

    let opts = Arc::new(opts);
    let result = manager
        .lead(cp_client, &shutdown, move |ctx| {
            run_controllers(cp_config, member_config, opts, ctx)
        })
        .await;
    manager.shutdown().await;
    drop(signals);
    result.map_err(Into::into)
}

/// The control plane as the agent sees it: Works of its execution namespace only, its own
/// Cluster only.
fn control_plane_options(opts: &Options) -> ClusterOptions {
    let mut scopes = HashMap::new();
    scopes.insert(
        "Work.work.karmada.io".to_owned(),
        CacheScope {
            namespace: Some(execution_space_name(&opts.cluster_name)),
            ..CacheScope::default()
        },
    );
    scopes.insert(
        "Cluster.cluster.karmada.io".to_owned(),
        CacheScope {
            field_selector: Some(format!("metadata.name={}", opts.cluster_name)),
            ..CacheScope::default()
        },
    );
    ClusterOptions {
        clients: ClientOptions {
            qps: f64::from(opts.kube_api_qps),
            burst: opts.kube_api_burst,
            user_agent: NAME.to_owned(),
            ..ClientOptions::default()
        },
        // Works packed as in the controller-manager (`control_plane_cache_options`): one per
        // template propagated here, read one at a time or through indexes.
        caches: CacheOptions {
            scopes,
            ..CacheOptions::default()
        }
        .pack::<Work>(),
        metrics: None,
        controllers: ControllerOptions {
            rate_limiter: opts.rate_limiter.to_lariat(),
            ..ControllerOptions::default()
        },
    }
}

/// The controllers' settings from the agent's flags.
fn controller_settings(opts: &Options) -> Settings {
    // What the agent's flags set; the rest (control-plane flags such as Lease monitoring, the
    // scheduler, FederatedHPA and failover, for controllers the agent does not run) keep Karmada's
    // defaults.
    Settings {
        cluster_status_update_frequency: opts.cluster_status_update_frequency,
        cluster_success_threshold: opts.cluster_success_threshold,
        cluster_failure_threshold: opts.cluster_failure_threshold,
        cluster_cache_sync_timeout: opts.cluster_cache_sync_timeout,
        cluster_api_qps: opts.cluster_api_qps,
        cluster_api_burst: opts.cluster_api_burst,
        enable_cluster_resource_modeling: opts.enable_cluster_resource_modeling,
        skipped_propagating_namespaces: Vec::new(),
        concurrent_resource_template_syncs: 1,
        concurrent_work_syncs: opts.concurrent_work_syncs,
        rate_limiter: opts.rate_limiter.to_lariat(),
        feature_gates: opts.feature_gates.clone(),
        cluster_lease_duration: opts.cluster_lease_duration,
        cluster_lease_renew_interval_fraction: opts.cluster_lease_renew_interval_fraction,
        cert_rotation: opts.cert_rotation.clone(),
        ..Settings::default()
    }
}

fn run_controllers(
    cp_config: kube::Config,
    member_config: kube::Config,
    opts: Arc<Options>,
    ctx: LeaderContext,
) -> LeaderWork {
    Box::pin(async move {
        let cluster_token = CancellationToken::new();
        let _stop_on_drop = cluster_token.clone().drop_guard();
        let control_plane =
            Cluster::new("", cp_config, control_plane_options(&opts), &cluster_token)?;
        control_plane.controllers().start();
        let settings = Arc::new(controller_settings(&opts));
        let members = Arc::new(MemberClusters::for_own_cluster(
            cluster_token.child_token(),
            &settings,
            &opts.cluster_name,
            member_config,
            NAME,
        )?);
        members.start();
        // One Event writer for every controller of the process, on the control plane's budget
        // (spare tokens only: Events never slow the controllers).
        let events = EventSink::start(control_plane.clients().background_client()?, &cluster_token);
        let enabled = implemented()
            .into_iter()
            .filter(|(n, _)| options::is_enabled(&opts.controllers, n))
            .collect();
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
