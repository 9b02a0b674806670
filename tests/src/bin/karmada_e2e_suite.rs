//! `make test-karmada-e2e`: Karmada's own e2e suite (v1.16, `test/e2e/suites/base`) against
//! karmada-rs, or with `--impl karmada` against Karmada's Go controller-manager, scheduler and
//! webhook on the same environment (the baseline). See `karmada_e2e::karmada_suite`.
//!
//! Writes to `--out` (default `target/karmada-e2e/`): `report-<impl>.json` (Ginkgo's JSON report),
//! `summary-<impl>.md` (per-file table and failures), `suite-<impl>.log`, the controllers' logs, and
//! `compare.md` once both implementations have a report.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use karmada_e2e::karmada_go::Impl;
use karmada_e2e::karmada_suite::{Environment, SuiteOptions, Summary, compare, run_suite};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Which {
    /// karmada-rs's controller-manager and agent.
    Rust,
    /// Karmada's Go controller-manager, scheduler, webhook and agent.
    Karmada,
}

#[derive(Parser, Debug)]
#[command(about = "Run Karmada's e2e suite against karmada-rs or Karmada's Go controllers")]
struct Args {
    /// Whose controllers run.
    #[arg(long = "impl", value_enum, default_value = "rust")]
    which: Which,
    /// Ginkgo focus: a regular expression over the specs' full text.
    #[arg(long)]
    focus: Option<String>,
    /// Ginkgo skip: a regular expression over the specs' full text.
    #[arg(long)]
    skip: Option<String>,
    /// Only specs of these files (e.g. `propagationpolicy_test.go`); repeatable.
    #[arg(long = "focus-file")]
    focus_file: Vec<String>,
    /// Deadline of the whole suite run, in minutes.
    #[arg(long, default_value_t = 120)]
    timeout_minutes: u64,
    /// The suite's own poll timeout (each wait), in seconds.
    #[arg(long, default_value_t = 300)]
    poll_timeout_seconds: u64,
    /// Output folder.
    #[arg(long, default_value = "target/karmada-e2e")]
    out: PathBuf,
    /// Only rebuild `compare.md` from the reports already in `--out`.
    #[arg(long)]
    compare_only: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.out).with_context(|| format!("create {}", args.out.display()))?;
    let out = std::fs::canonicalize(&args.out)?;
    if !args.compare_only {
        let (imp, label) = match args.which {
            Which::Rust => (Impl::Rust, "karmada-rs"),
            Which::Karmada => (Impl::Karmada, "karmada-go"),
        };
        let dir = out.join(format!("env-{label}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        eprintln!("karmada-e2e: starting the environment with {label}'s controllers");
        let env = Environment::start(imp, &dir).await?;
        let options = SuiteOptions {
            focus: args.focus.clone(),
            skip: args.skip.clone(),
            focus_file: args.focus_file.clone(),
            timeout: Duration::from_secs(args.timeout_minutes * 60),
            poll_timeout: Duration::from_secs(args.poll_timeout_seconds),
        };
        let report = out.join(format!("report-{label}.json"));
        let log = out.join(format!("suite-{label}.log"));
        let _ = std::fs::remove_file(&report);
        eprintln!(
            "karmada-e2e: running the suite (output: {}; KUBECONFIG={})",
            log.display(),
            env.kubeconfig.display()
        );
        let ran = run_suite(&env, &options, &report, &log);
        env.save_logs(&out)?;
        ran?;
        let summary = Summary::from_report(&std::fs::read_to_string(&report)?)?;
        let md = summary.markdown(label);
        std::fs::write(out.join(format!("summary-{label}.md")), &md)?;
        println!("{md}");
    }
    let read = |label: &str| -> anyhow::Result<Option<Summary>> {
        let p = out.join(format!("report-{label}.json"));
        if !p.is_file() {
            return Ok(None);
        }
        Ok(Some(Summary::from_report(&std::fs::read_to_string(&p)?)?))
    };
    if let (Some(ours), Some(theirs)) = (read("karmada-rs")?, read("karmada-go")?) {
        let table = compare(&ours, &theirs);
        std::fs::write(out.join("compare.md"), &table)?;
        println!("{table}");
    }
    Ok(())
}
