//! The process shell: exit codes (0 graceful, 1 runtime failure, 2 invalid flags), logging set-up,
//! the async runtime, loading a kubeconfig named by a flag, and running the enabled controllers
//! until they stop or one fails.

use std::future::Future;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use karmada_controllers::{ControllerContext, StartFn, SyncReporter};
use lariat::runtime::client::{ClientConfigError, ConfigSource, load_config};
use lariat::runtime::logging::{self, LogOptions};
use lariat::runtime::{
    BindAddress, Health, LeaderContext, LeaderElectionConfig, Manager, ManagerConfig,
};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::flags::{LeaderElectionOptions, Logs};
use crate::version;

/// The `version` subcommand every process takes.
#[derive(clap::Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Print the version information.
    Version,
}

/// A parsed command line, as [`main`] takes it: whether it asks for the version (`--version` or
/// `version`), and the validated options or every problem with them.
pub type Parsed<O> = Result<(bool, Result<O, Vec<String>>), clap::Error>;

/// The `main` of every process: `--help` and parse errors print and exit (0 and 2); a version
/// request prints `<name> version: …` and exits 0; invalid flags print every problem and exit 2;
/// otherwise logging is set up from `logs` and `run` runs to its exit code ([`run_to_exit`]).
pub fn main<O, F>(
    name: &str,
    own_targets: &[&str],
    parsed: Parsed<O>,
    logs: impl FnOnce(&O) -> Logs,
    run: impl FnOnce(O) -> F,
) -> ExitCode
where
    F: Future<Output = anyhow::Result<()>>,
{
    let (wants_version, validated) = match parsed {
        Ok(parsed) => parsed,
        // --help prints and exits 0; a parse error prints and exits 2.
        Err(e) => e.exit(),
    };
    if wants_version {
        println!("{}", version::line(name));
        return ExitCode::SUCCESS;
    }
    let opts = match validated {
        Ok(o) => o,
        Err(problems) => return usage_problems(name, &problems),
    };
    let logs = logs(&opts);
    run_to_exit(name, logs, own_targets, run(opts))
}

/// A problem with the command line found after parsing (exit 2).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for UsageError {}

/// Prints every flag problem (one line each) and the usage hint; the exit code for invalid flags.
pub fn usage_problems(name: &str, problems: &[String]) -> ExitCode {
    for p in problems {
        eprintln!("error: {p}");
    }
    eprintln!("Run '{name} --help' for usage.");
    ExitCode::from(2)
}

/// Sets up logging (`own_targets` are this process's crates, logged at `-v`), runs `run` on a
/// multi-threaded runtime and maps its result to the exit code: 0, 2 for a [`UsageError`], 1
/// otherwise (the error is logged and printed).
pub fn run_to_exit<F>(name: &str, logs: Logs, own_targets: &[&str], run: F) -> ExitCode
where
    F: Future<Output = anyhow::Result<()>>,
{
    if let Err(e) = logging::init(&LogOptions {
        verbosity: logs.verbosity,
        format: logs.format,
        own_targets: own_targets.iter().map(ToString::to_string).collect(),
    }) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let tuned = crate::malloc::tune();
    tracing::debug!(
        tuned,
        "malloc thresholds pinned (see karmada_process::malloc)"
    );
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run);
    // Don't wait for stray blocking tasks (e.g. a hung DNS lookup) on the way out.
    runtime.shutdown_timeout(Duration::from_secs(1));
    match result {
        Ok(()) => {
            tracing::info!("exiting");
            ExitCode::SUCCESS
        }
        Err(e) if e.downcast_ref::<UsageError>().is_some() => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "{name} failed");
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The addresses a binary serves besides its controllers (`--profiling-bind-address`,
/// `--health-probe-bind-address`, `--metrics-bind-address`).
pub struct Servers<'a> {
    /// pprof endpoints (`0` when `--enable-pprof` is off).
    pub profiling: &'a BindAddress,
    /// `/healthz` and `/readyz`.
    pub health_probe: &'a BindAddress,
    /// `/metrics`.
    pub metrics: &'a BindAddress,
}

/// How long controllers get to finish after the first signal (controller-runtime's default).
pub const GRACEFUL_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// What the controller-manager and the agent serve before they elect, in Karmada's order: the
/// profiling server first, then health probes and metrics, and the manager that will lead under
/// `lease_name` when leader election is on. A bind failure is an error (the process exits 1, as
/// Karmada's does). The profiling server runs until `shutdown`; its task is returned so that it is
/// owned by the caller's scope.
///
/// # Errors
/// When an address cannot be bound.
pub async fn serve(
    lease_name: String,
    leader_election: &LeaderElectionOptions,
    servers: &Servers<'_>,
    shutdown: &CancellationToken,
) -> anyhow::Result<(Manager, Option<JoinHandle<()>>)> {
    let leader_election = leader_election.enabled.then(|| LeaderElectionConfig {
        lease_name,
        namespace: leader_election.namespace.clone(),
        identity: lariat::runtime::leader_election::default_identity(),
        lease_duration: leader_election.lease_duration,
        renew_deadline: leader_election.renew_deadline,
        retry_period: leader_election.retry_period,
    });
    let profiling = crate::profiling::serve(servers.profiling, shutdown.clone())
        .await
        .context("cannot start the profiling server")?;
    let manager = Manager::serve(
        ManagerConfig {
            leader_election,
            health_probe_address: servers.health_probe.clone(),
            metrics_address: servers.metrics.clone(),
            graceful_shutdown_timeout: GRACEFUL_SHUTDOWN_TIMEOUT,
        },
        Health::new(),
    )
    .await?;
    Ok((manager, profiling))
}

/// Loads the client configuration from the kubeconfig given by `--<flag>` (or the usual fallbacks
/// when it is `None`), using `context` when given, and where it came from for logs and errors
/// (`--<flag>=<path>`, `KUBECONFIG=…`, …). A bad file named by the flag is a [`UsageError`].
pub async fn load_kubeconfig(
    path: Option<&Path>,
    flag: &str,
    context: Option<&str>,
) -> anyhow::Result<(kube::Config, String)> {
    if let (Some(path), Some(context)) = (path, context) {
        let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| {
            UsageError(format!(
                "invalid value for --{flag}: {}: {e}",
                path.display()
            ))
        })?;
        let options = kube::config::KubeConfigOptions {
            context: Some(context.to_string()),
            ..Default::default()
        };
        let config = kube::Config::from_custom_kubeconfig(kc, &options)
            .await
            .map_err(|e| {
                UsageError(format!(
                    "invalid kubeconfig {} (context {context}): {e}",
                    path.display()
                ))
            })?;
        return Ok((config, format!("--{flag}={}", path.display())));
    }
    // lariat names a kubeconfig given by a flag `--kubeconfig=<path>`; a binary with several
    // kubeconfig flags (the agent's `--karmada-kubeconfig`) names the flag that gave it.
    match load_config(path).await {
        Ok((config, ConfigSource::Flag(path))) => {
            Ok((config, format!("--{flag}={}", path.display())))
        }
        Ok((config, source)) => Ok((config, source.to_string())),
        Err(ClientConfigError::Kubeconfig {
            source_desc: ConfigSource::Flag(path),
            message,
        }) => Err(UsageError(format!(
            "invalid value for --{flag}: cannot load kubeconfig {}: {message}",
            path.display()
        ))
        .into()),
        Err(e) => Err(e.into()),
    }
}

/// Starts every controller in `enabled` with the context `context_for` builds (given its name,
/// sync reporter and cancellation token, a child of `ctx.cancel`), marks the process ready once
/// all of them reported synced, and waits until they all stopped or one failed (its error is the
/// result). Running controllers are aborted on the way out.
pub async fn run_controllers<C>(
    enabled: Vec<(&'static str, StartFn)>,
    context_for: C,
    ctx: &LeaderContext,
) -> Result<(), String>
where
    C: Fn(&'static str, SyncReporter, CancellationToken) -> ControllerContext,
{
    let names: Vec<&str> = enabled.iter().map(|(n, _)| *n).collect();
    tracing::info!(controllers = ?names, "starting controllers");
    let mut running = JoinSet::new();
    let mut receivers = Vec::new();
    for (name, start) in enabled {
        let (reporter, rx) = SyncReporter::new();
        receivers.push(rx);
        let cctx = context_for(name, reporter, ctx.cancel.child_token());
        running.spawn(async move { (name, start(cctx).await) });
    }
    let all_synced = async move {
        for mut rx in receivers {
            // An error means the controller ended without reporting: nothing left to wait for.
            let _ = rx.wait_for(|synced| *synced).await;
        }
    };
    tokio::pin!(all_synced);
    let mut synced = false;
    let mut failure = None;
    loop {
        tokio::select! {
            biased;
            _ = &mut all_synced, if !synced => {
                synced = true;
                if !ctx.cancel.is_cancelled() {
                    ctx.readiness.set_ready();
                    tracing::info!("all controllers' caches synced; ready");
                }
            }
            joined = running.join_next() => match joined {
                None => break,
                Some(Ok((_, Ok(())))) => {}
                Some(Ok((name, Err(e)))) => {
                    let hint = sync_timeout_hint(e.as_ref());
                    failure = Some(format!("controller {name:?} failed: {e}{hint}"));
                    break;
                }
                Some(Err(e)) => {
                    failure = Some(format!("a controller panicked: {e}"));
                    break;
                }
            },
        }
    }
    running.abort_all();
    failure.map_or(Ok(()), Err)
}

/// What to do about a cache that did not sync in time, when that is why a controller failed: a
/// control plane holding that many objects may need longer to list them (a restart over 30,000
/// workloads lists 120,000 Works).
fn sync_timeout_hint(error: &(dyn std::error::Error + 'static)) -> &'static str {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if matches!(
            e.downcast_ref::<lariat::Error>(),
            Some(lariat::Error::SyncTimeout { .. })
        ) {
            return "; a control plane this large may need a longer --cluster-cache-sync-timeout";
        }
        cause = e.source();
    }
    ""
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_sync_timeout_names_the_flag_that_gives_it_more_time() {
        let timeout = lariat::Error::SyncTimeout {
            cluster: String::new(),
            kind: "work.karmada.io/v1alpha1, Kind=Work".into(),
            timeout: Duration::from_secs(120),
            listed: 95_000,
            last_error: None,
        };
        assert!(
            timeout
                .to_string()
                .contains("(95000 objects listed by then)")
        );
        assert!(sync_timeout_hint(&timeout).contains("--cluster-cache-sync-timeout"));
        let other = lariat::Error::CacheStopped {
            cluster: String::new(),
            kind: "Work".into(),
        };
        assert_eq!(sync_timeout_hint(&other), "");
    }

    const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    \
        server: https://127.0.0.1:6443\ncontexts:\n- name: c\n  context:\n    cluster: c\n    \
        user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n";

    #[tokio::test]
    async fn a_kubeconfig_is_named_by_the_flag_that_gave_it() {
        let dir = std::env::temp_dir().join(format!("shell-kubeconfig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("karmada.config");
        std::fs::write(&good, KUBECONFIG).unwrap();
        let (config, source) = load_kubeconfig(Some(&good), "karmada-kubeconfig", None)
            .await
            .unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert_eq!(source, format!("--karmada-kubeconfig={}", good.display()));

        let missing = dir.join("missing.config");
        let err = load_kubeconfig(Some(&missing), "karmada-kubeconfig", None)
            .await
            .unwrap_err();
        assert!(err.downcast_ref::<UsageError>().is_some(), "{err:#}");
        let text = format!("{err:#}");
        assert!(
            text.starts_with("invalid value for --karmada-kubeconfig: cannot load kubeconfig ")
                && text.contains(&missing.display().to_string())
                && !text.contains("--kubeconfig"),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
