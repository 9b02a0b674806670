//! `testenv up`: bring up a host and member clusters by hand and keep them running until Ctrl-C.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "testenv",
    about = "Real kube-apiserver + etcd clusters on this machine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a host and member clusters; print their kubeconfigs; stop everything on Ctrl-C or SIGTERM.
    Up {
        /// Number of member clusters.
        #[arg(long, default_value_t = 2)]
        members: usize,
        /// Make the first member full (kube-scheduler, kube-controller-manager, kwok nodes).
        #[arg(long)]
        full: bool,
        /// Number of full members (overrides --full).
        #[arg(long)]
        full_members: Option<usize>,
        /// Fake nodes per full member.
        #[arg(long, default_value_t = 3)]
        kwok_nodes: usize,
        /// Install the CRDs in crds/ into the host.
        #[arg(long)]
        install_crds: bool,
        /// Run metrics-server in the full members (metrics.k8s.io from kwok's emulated pod usage).
        #[arg(long)]
        metrics_server: bool,
        /// Serve cluster.karmada.io through Karmada's karmada-aggregated-apiserver (`make
        /// karmada-binaries`) instead of the Cluster CRD.
        #[arg(long)]
        aggregated_apiserver: bool,
        /// kube-apiservers serving the host over its etcd, behind one balanced loopback endpoint.
        #[arg(long, default_value_t = 1)]
        host_replicas: usize,
        /// Keep state in this folder (default: a fresh temporary folder, removed on exit).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Write a line "ready <folder>" to this file once everything is up (for scripts).
        #[arg(long)]
        ready_file: Option<PathBuf>,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("info,kube_client::client::builder=off")
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    let Command::Up {
        members,
        full,
        full_members,
        kwok_nodes,
        install_crds,
        metrics_server,
        aggregated_apiserver,
        host_replicas,
        dir,
        ready_file,
    } = Cli::parse().command;
    let options = testenv::EnvOptions {
        members,
        full_members: full_members.unwrap_or(if full { 1.min(members) } else { 0 }),
        kwok_nodes,
        host_controller_manager: true,
        install_crds,
        host_audit_log: false,
        member_audit_logs: false,
        metrics_server,
        aggregated_apiserver,
        kwok_extra_stages: Vec::new(),
        dir,
        host_replicas,
        host_profiling: false,
    };
    let started = std::time::Instant::now();
    let env = testenv::TestEnv::start(options)
        .await
        .context("starting the environment")?;
    println!(
        "environment ready in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    println!("folder:     {}", env.dir().display());
    println!(
        "kubeconfig: {}  (contexts: host, member1, …)",
        env.kubeconfig_path().display()
    );
    for s in std::iter::once(env.host()).chain(env.members()) {
        println!(
            "  {:<8} {}  {}",
            s.name(),
            s.url(),
            s.kubeconfig_path().display()
        );
    }
    println!("stop with Ctrl-C");
    if let Some(path) = ready_file {
        std::fs::write(&path, format!("ready {}\n", env.dir().display()))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    println!("stopping");
    drop(env);
    Ok(())
}
