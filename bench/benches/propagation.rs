//! `make bench`: the propagation benchmark at full size (see `karmada_bench`). Prints Markdown
//! tables and writes the JSON report (default `target/bench/propagation.json`).
//!
//! `cargo bench -p karmada-bench --bench propagation -- --help` lists the knobs; `--smoke` runs the size
//! the test suite uses.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use karmada_bench::session::Impl;
use karmada_bench::{BenchConfig, run, write_file};

/// Whose controllers the benchmark measures.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Which {
    /// karmada-rs's controller-manager.
    Rust,
    /// Karmada's Go controller-manager, scheduler and webhook (`make karmada-binaries` builds them).
    Karmada,
    /// Both, each on its own fresh environments, side by side in the report.
    Both,
}

#[derive(Parser, Debug)]
#[command(about = "Propagation benchmark against real API servers and the real controller-manager")]
struct Args {
    /// The small size `make test` runs.
    #[arg(long)]
    smoke: bool,
    /// Members in the main runs.
    #[arg(long)]
    members: Option<usize>,
    /// Templates per burst (half Deployments, half ConfigMaps).
    #[arg(long)]
    templates: Option<usize>,
    /// Member counts of the scale-out bursts, comma separated (empty: none).
    #[arg(long, value_parser = member_counts)]
    scale_out: Option<MemberCounts>,
    /// Templates per second in the steady run.
    #[arg(long)]
    steady_rate: Option<f64>,
    /// Length of the steady run in seconds.
    #[arg(long)]
    steady_seconds: Option<f64>,
    /// Skip the run with Karmada's default client QPS.
    #[arg(long)]
    no_default_qps: bool,
    /// Templates in the burst with Karmada's default client QPS.
    #[arg(long)]
    default_qps_templates: Option<usize>,
    /// Skip the minimal-writes floor.
    #[arg(long)]
    no_floor: bool,
    /// Skip the burst with a Lua ResourceInterpreterCustomization.
    #[arg(long)]
    no_customization: bool,
    /// Skip the burst with the members in Pull mode (served by karmada-agents).
    #[arg(long)]
    no_pull: bool,
    /// Skip the burst with Clusters served by Karmada's aggregated API server.
    #[arg(long)]
    no_aggregated: bool,
    /// Skip the main run (its burst, restart and steady rate): only the other runs asked for.
    #[arg(long)]
    no_main_run: bool,
    /// Deployments of the failover run (0: none).
    #[arg(long)]
    failover_templates: Option<usize>,
    /// Cold start of this many Deployments, each with its own ConfigMap and PropagationPolicy
    /// (`propagateDeps: true`), all created before the controllers start (0: none).
    #[arg(long)]
    cold_start: Option<usize>,
    /// After the cold start settles, restart the controllers and time a fresh workload.
    #[arg(long)]
    cold_start_restart: bool,
    /// Only the cold start (and its restart): skip every burst run and the floor.
    #[arg(long)]
    only_cold_start: bool,
    /// Namespaces the templates (and the cold start's workloads) spread over.
    #[arg(long)]
    namespaces: Option<usize>,
    /// Longest wait for any one convergence, in seconds (default: 1800, smoke 180).
    #[arg(long)]
    timeout_seconds: Option<f64>,
    /// Whose controllers to measure.
    #[arg(long = "impl", value_enum, default_value = "both")]
    implementation: Which,
    /// Write a heap profile of our controller-manager after each Push burst into this folder
    /// (`go tool pprof -top <file>` reads it).
    #[arg(long)]
    heap_profiles: Option<PathBuf>,
    /// Write CPU profiles of our controller-manager and of the host API server (ours' and
    /// Karmada's runs) into this folder: the cold start's first 300 s from ready and, with
    /// --cold-start-restart, the restart's first 180 s from the spawn (`go tool pprof -top
    /// <binary> <files>` reads them; the host API server's come in 50 s pieces).
    #[arg(long)]
    cpu_profile: Option<PathBuf>,
    /// An extra flag for the controller-manager of the cold-start runs, ours or Karmada's
    /// (repeatable; e.g. --cold-start-arg=--cluster-cache-sync-timeout=10m).
    #[arg(long = "cold-start-arg", allow_hyphen_values = true)]
    cold_start_arg: Vec<String>,
    /// kube-apiservers serving the host over its one etcd, behind one balanced endpoint (every
    /// run; default 1).
    #[arg(long)]
    host_replicas: Option<usize>,
    /// Where to write the JSON report.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/bench/propagation.json"))]
    out: PathBuf,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// `--scale-out`'s list (`""` is the empty list).
#[derive(Clone, Debug)]
struct MemberCounts(Vec<usize>);

fn member_counts(s: &str) -> Result<MemberCounts, String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.parse()
                .map_err(|e| format!("{p:?} is not a member count: {e}"))
        })
        .collect::<Result<_, _>>()
        .map(MemberCounts)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut config = if args.smoke {
        BenchConfig::smoke()
    } else {
        BenchConfig::full()
    };
    if let Some(m) = args.members {
        config.members = m;
    }
    if let Some(n) = args.templates {
        config.deployments = n.div_ceil(2);
        config.configmaps = n / 2;
    }
    if let Some(MemberCounts(s)) = args.scale_out {
        config.scale_out = s;
    }
    if let Some(n) = args.default_qps_templates {
        config.default_qps_templates = n;
    }
    if let Some(r) = args.steady_rate {
        config.steady_rate = r;
    }
    if let Some(s) = args.steady_seconds {
        config.steady_seconds = s;
    }
    config.karmada_default_qps &= !args.no_default_qps;
    config.floor &= !args.no_floor;
    config.customization &= !args.no_customization;
    config.pull &= !args.no_pull;
    config.aggregated &= !args.no_aggregated;
    config.main_run &= !args.no_main_run;
    if let Some(n) = args.failover_templates {
        config.failover_templates = n;
    }
    if let Some(t) = args.timeout_seconds {
        config.timeout_seconds = t;
    }
    if let Some(n) = args.cold_start {
        config.cold_start = n;
    }
    if let Some(n) = args.namespaces {
        config.namespaces = n.max(1);
    }
    config.cold_start_restart = args.cold_start_restart;
    config.cold_start_args = args.cold_start_arg;
    config.only_cold_start = args.only_cold_start;
    config.heap_profiles = args.heap_profiles;
    config.cpu_profile = args.cpu_profile;
    if let Some(n) = args.host_replicas {
        config.host_replicas = n;
    }
    if (config.only_cold_start || config.cold_start_restart) && config.cold_start == 0 {
        anyhow::bail!("--only-cold-start and --cold-start-restart need --cold-start N (N > 0)");
    }
    config.impls = match args.implementation {
        Which::Rust => vec![Impl::Rust],
        Which::Karmada => vec![Impl::Karmada],
        Which::Both => vec![Impl::Rust, Impl::Karmada],
    };
    let rt = tokio::runtime::Runtime::new().context("start a tokio runtime")?;
    let report = rt.block_on(run(&config, |step| eprintln!("bench: {step}")))?;
    let markdown = report.markdown();
    println!("{markdown}");
    write_file(&args.out, serde_json::to_string_pretty(&report)?.as_bytes())?;
    std::fs::write(args.out.with_extension("md"), &markdown)
        .with_context(|| format!("write {}", args.out.with_extension("md").display()))?;
    eprintln!(
        "bench: wrote {} and {}",
        args.out.display(),
        args.out.with_extension("md").display()
    );
    Ok(())
}
