//! The scheduling benchmark (see `karmada_bench::scheduling`): bindings placed per second and
//! create-to-placed latency, karmada-rs's built-in scheduler beside Karmada's `karmada-scheduler`, with
//! and without the accurate estimator (a Go `karmada-scheduler-estimator` per Cluster).
//! Prints a Markdown table and writes the JSON report (default `target/bench/scheduling.json`).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use karmada_bench::scheduling::{SchedulingConfig, run};
use karmada_bench::session::Impl;
use karmada_bench::write_file;

/// With or without the accurate estimator.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Estimator {
    /// The general estimate only (`--enable-scheduler-estimator=false`).
    Off,
    /// A Go `karmada-scheduler-estimator` per Cluster (`make karmada-binaries` builds it).
    On,
    /// Both, side by side.
    Both,
}

/// Whose scheduler the benchmark measures.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Which {
    /// karmada-rs's controller-manager with `--controllers=scheduler`.
    Rust,
    /// Karmada's `karmada-scheduler` (`make karmada-binaries` builds it).
    Karmada,
    /// Both, one after the other on the same host, side by side in the report.
    Both,
}

#[derive(Parser, Debug)]
#[command(about = "Scheduling benchmark against a real API server and real schedulers")]
struct Args {
    /// The small size the test suite runs.
    #[arg(long)]
    smoke: bool,
    /// Bindings in the backlog.
    #[arg(long)]
    bindings: Option<usize>,
    /// Cluster counts, comma separated.
    #[arg(long, value_delimiter = ',')]
    clusters: Option<Vec<usize>>,
    /// Client QPS of both schedulers (burst: twice as much).
    #[arg(long)]
    qps: Option<f64>,
    /// Bindings per second in the live run.
    #[arg(long)]
    live_rate: Option<f64>,
    /// Length of the live run in seconds.
    #[arg(long)]
    live_seconds: Option<f64>,
    /// Whose scheduler to measure.
    #[arg(long = "impl", value_enum, default_value = "both")]
    implementation: Which,
    /// With or without the accurate estimator (default: both at full size, off with --smoke).
    #[arg(long, value_enum)]
    estimator: Option<Estimator>,
    /// Where to write the JSON report.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/bench/scheduling.json"))]
    out: PathBuf,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut config = if args.smoke {
        SchedulingConfig::smoke()
    } else {
        SchedulingConfig::full()
    };
    if let Some(n) = args.bindings {
        config.bindings = n;
    }
    if let Some(c) = args.clusters {
        config.clusters = c;
    }
    if let Some(q) = args.qps {
        // Karmada's burst-to-QPS ratio at its defaults is 1.5; twice keeps bursts from throttling.
        config.qps = (q, (q * 2.0).ceil() as u32);
    }
    if let Some(r) = args.live_rate {
        config.live_rate = r;
    }
    if let Some(s) = args.live_seconds {
        config.live_seconds = s;
    }
    match args.estimator {
        Some(Estimator::Off) => config.estimator = vec![false],
        Some(Estimator::On) => config.estimator = vec![true],
        Some(Estimator::Both) => config.estimator = vec![false, true],
        None => {}
    }
    let impls = match args.implementation {
        Which::Rust => vec![Impl::Rust],
        Which::Karmada => vec![Impl::Karmada],
        Which::Both => vec![Impl::Rust, Impl::Karmada],
    };
    let rt = tokio::runtime::Runtime::new().context("start a tokio runtime")?;
    let report = rt.block_on(run(&config, &impls))?;
    println!("{}", report.markdown());
    write_file(&args.out, serde_json::to_string_pretty(&report)?.as_bytes())?;
    eprintln!("report written to {}", args.out.display());
    Ok(())
}
