//! The staged-rollout benchmark (see `karmada_bench::rollout`): 1,000 workloads rolled out
//! through 3 one-member stages at once, the time each stage takes beyond its soak time, the host
//! writes per workload and the controller-manager's memory. Prints Markdown and writes the JSON
//! report (default `target/bench/rollout.json`).

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use karmada_bench::rollout::{RolloutConfig, run};
use karmada_bench::write_file;

#[derive(Parser, Debug)]
#[command(
    about = "Staged-rollout benchmark against real API servers and the real controller-manager"
)]
struct Args {
    /// The small size the test suite runs.
    #[arg(long)]
    smoke: bool,
    /// Workloads (ConfigMap templates).
    #[arg(long)]
    workloads: Option<usize>,
    /// Namespaces they spread over.
    #[arg(long)]
    namespaces: Option<usize>,
    /// `minSuccessSeconds` of every stage.
    #[arg(long)]
    soak_seconds: Option<u32>,
    /// Where to write the JSON report.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/bench/rollout.json"))]
    out: PathBuf,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut config = if args.smoke {
        RolloutConfig::smoke()
    } else {
        RolloutConfig::full()
    };
    if let Some(n) = args.workloads {
        config.workloads = n;
    }
    if let Some(n) = args.namespaces {
        config.namespaces = n;
    }
    if let Some(s) = args.soak_seconds {
        config.soak_seconds = s;
    }
    let rt = tokio::runtime::Runtime::new().context("start a tokio runtime")?;
    let report = rt.block_on(run(&config, |step| eprintln!("rollout bench: {step}")))?;
    println!("{}", report.markdown());
    write_file(&args.out, serde_json::to_string_pretty(&report)?.as_bytes())?;
    eprintln!("report written to {}", args.out.display());
    Ok(())
}
