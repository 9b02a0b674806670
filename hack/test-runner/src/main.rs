//! `make test`'s runner: builds every test target of the workspace once (`cargo test --workspace
//! --no-run`), runs the doc-tests, then the test binaries a few at a time, longest first, and ends
//! with the failures and the command that reruns each.
//!
//! Why not plain `cargo test`: CI keeps only the end of the log, and `cargo test` ends with a list of
//! failed targets, not their output; this runner ends with the failures' log tails and the command
//! that reruns each, and stops a binary that runs past `--timeout` instead of hanging CI. Each binary
//! runs exactly as under `cargo test` (its package folder as working directory, `CARGO_MANIFEST_DIR`
//! set, libtest's own arguments). `--jobs N` runs N binaries at once (`make test` runs 4): most of an
//! integration test's time is spent waiting for controllers, API servers and leases, not computing,
//! so four at a time on 2 cores finish sooner (CONTRIBUTING.md, Testing, has the numbers). A test file whose
//! assertions depend on timing (a lease hand-over within seconds, a burst within 2× another one
//! measured earlier in the same file) says so with a comment line `// test-runner: alone` (and why) among
//! its first lines; such files run one at a time on a lane of their own, while the other files run
//! beside them in a CPU group of a low weight ([`cpu_lanes`]): whenever a timed file wants the CPU it
//! gets most of it, and the rest of the suite uses what it leaves. (Before, the timed
//! files ran first with nothing beside them: seven minutes of a mostly idle machine.) A test binary
//! made of modules (`tests/<folder>/main.rs`, as karmada-e2e's `integration`: one link instead of one
//! per file) runs as one job per module, each in its own process, as if each file were its own binary.
//!
//! The binaries the integration tests run (`karmada-controller-manager`, `karmada-agent`,
//! `karmadactl`, `testenv`) come from the same `cargo test --workspace --no-run`: cargo builds a
//! package's binaries for its integration tests, with the whole workspace's test features (the
//! controller-manager with `test-hooks`, which `karmada-e2e` enables). Each job gets their paths in
//! `KARMADA_CONTROLLER_MANAGER_BIN`, `KARMADA_AGENT_BIN`, `KARMADACTL_BIN` and `TESTENV_BIN` (unless
//! already set), so no test builds them itself, with other features, a second time.
//!
//! Usage: `target/debug/test-runner [--jobs N] [--timeout SECONDS] [-- <libtest args>]`.
//! Each binary's output goes to `target/test-logs/<name>.log`; the durations of the last run go to
//! `target/test-durations.tsv` and order the next run, longest first (in a fresh checkout, the
//! committed `hack/test-runner/durations.tsv` does).

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use cpu_lanes::{CpuLanes, Lane};

mod cpu_lanes;

/// Durations that order the jobs of a checkout that has not run them yet (`target/` empty): a copy of
/// a warm run's `target/test-durations.tsv`, refreshed when files are added or change length much.
const SEED_DURATIONS: &str = "hack/test-runner/durations.tsv";

/// `GOGC` for the Go processes the tests start (kube-apiserver, etcd, kube-controller-manager…)
/// unless the caller sets one: the suite is CPU-bound on two cores and the API servers are most of
/// its CPU; collecting at twice Go's default heap growth (100) took a fifth off an API server's
/// start-up CPU, for a larger heap between collections.
const GO_GC_PERCENT: &str = "200";

/// One thing to run: a test binary, or the workspace's doc-tests.
struct Job {
    /// What `cargo test` takes to run only this: `-p karmada-e2e --test failover`.
    label: String,
    /// File name of the log under `target/test-logs/`.
    log_name: String,
    program: PathBuf,
    args: Vec<String>,
    /// Working directory (the package folder, as `cargo test` uses).
    dir: PathBuf,
    /// Whether it is a test binary, which `cargo test` runs with `CARGO_MANIFEST_DIR` set to `dir`.
    /// Not the doc-tests: they are cargo itself, and a cargo that sees `CARGO_MANIFEST_DIR` in its
    /// environment reruns the build scripts that watch it (ring's) and rebuilds everything above
    /// them (rustls, kube, the whole workspace), twice: once there and once in the next build
    /// without it.
    test_binary: bool,
    /// Environment variables set for it (on top of the runner's own).
    env: Vec<(String, PathBuf)>,
    /// Whether its timing must not suffer from other jobs (its source says `test-runner: alone`):
    /// it runs on the timed lane, one at a time, with the CPU first ([`cpu_lanes`]).
    alone: bool,
    /// The target's source file, when it is a folder's `main.rs` whose modules run as jobs of
    /// their own ([`split_by_module`]).
    modules_of: Option<PathBuf>,
}

/// How a job ended.
struct Outcome {
    label: String,
    log: PathBuf,
    elapsed: Duration,
    /// CPU time of the test binary and every process it started and waited for (API servers,
    /// controller-managers), as `wait4` reports it: what the job costs the machine.
    cpu: Duration,
    ok: bool,
    /// libtest's `test result:` line, or why there is none.
    summary: String,
}

#[derive(Clone)]
struct Options {
    jobs: usize,
    timeout: Duration,
    libtest_args: Vec<String>,
    /// The lane the jobs run on (see [`cpu_lanes`]).
    lane: Lane,
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("test-runner: {e}");
            ExitCode::from(2)
        }
    }
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        jobs: std::env::var("TEST_JOBS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(4),
        timeout: Duration::from_secs(1200),
        libtest_args: Vec::new(),
        lane: Lane::Timed,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> Result<u64, String> {
            args.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} takes a number"))
        };
        match arg.as_str() {
            "--jobs" => options.jobs = usize::try_from(number("--jobs")?).unwrap_or(1).max(1),
            "--timeout" => options.timeout = Duration::from_secs(number("--timeout")?),
            "--" => {
                options.libtest_args = args.collect();
                break;
            }
            other => {
                return Err(format!(
                    "unknown argument {other} (usage: [--jobs N] [--timeout SECONDS] [-- <libtest args>])"
                ));
            }
        }
    }
    Ok(options)
}

fn run() -> Result<bool, String> {
    let options = parse_options()?;
    let root = workspace_root()?;
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let logs = target.join("test-logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("create {}: {e}", logs.display()))?;

    let mut jobs = build_test_binaries(&options.libtest_args, &target.join("test-bin"))?;
    // The doc-tests go first and alone: `cargo test --doc` builds, and a test may run cargo itself
    // (no_op_build does); two cargo processes writing the same target folder while rustdoc links
    // against it make the doctest fail to find its dependencies.
    let doc = Job {
        label: "--workspace --doc".to_owned(),
        log_name: "doc-tests".to_owned(),
        program: PathBuf::from(cargo()),
        args: ["test", "--workspace", "--doc", "--"]
            .into_iter()
            .map(str::to_owned)
            .chain(options.libtest_args.iter().cloned())
            .collect(),
        dir: root.clone(),
        test_binary: false,
        env: Vec::new(),
        alone: true,
        modules_of: None,
    };

    let durations_file = target.join("test-durations.tsv");
    // A fresh checkout (CI's) has no durations of its own: the committed ones of a warm run order
    // it, or the longest jobs may start last and the machine idles for minutes at the end.
    let mut known = read_durations(&durations_file)
        .or_else(|| read_durations(&root.join(SEED_DURATIONS)))
        .unwrap_or_default();
    // Only jobs that still exist (a file split into one job per test leaves its old label behind).
    known.retain(|label, _| label == &doc.label || jobs.iter().any(|j| &j.label == label));
    // Longest first; never-measured jobs count as long, so a new slow file does not start last.
    jobs.sort_by(|a, b| {
        let d = |j: &Job| known.get(&j.label).copied().unwrap_or(f64::MAX);
        d(b).total_cmp(&d(a))
    });
    // The doc-tests first, by themselves; then the timing-sensitive files one at a time on a lane
    // of their own, beside the rest `--jobs` at once at a low CPU priority. With `--jobs 1`,
    // everything one at a time.
    let (alone, shared): (Vec<Job>, Vec<Job>) = jobs.into_iter().partition(|j| j.alone);
    // Made only when lanes run side by side; removed when the runner returns.
    let lanes = if options.jobs == 1 {
        CpuLanes::Nice {
            why: "one job at a time".to_owned(),
        }
    } else {
        CpuLanes::new()
    };
    println!(
        "test-runner: the doc-tests, then {} timed test binaries one at a time beside {} test \
         binaries {} at a time; {} (logs in {})",
        alone.len(),
        shared.len(),
        options.jobs,
        lanes.describe(),
        logs.display()
    );

    let started = Instant::now();
    let one = Options {
        jobs: 1,
        ..options.clone()
    };
    let mut outcomes = run_jobs(vec![doc], &one, &lanes, &logs);
    if options.jobs == 1 {
        outcomes.extend(run_jobs(alone, &one, &lanes, &logs));
        outcomes.extend(run_jobs(shared, &one, &lanes, &logs));
    } else {
        let beside = Options {
            lane: Lane::Beside,
            ..options.clone()
        };
        let (timed, rest) = std::thread::scope(|scope| {
            let timed = scope.spawn(|| run_jobs(alone, &one, &lanes, &logs));
            let rest = run_jobs(shared, &beside, &lanes, &logs);
            (timed.join(), rest)
        });
        outcomes.extend(timed.map_err(|_| "the timed lane's thread panicked".to_owned())?);
        outcomes.extend(rest);
    }
    outcomes.sort_by(|a, b| a.label.cmp(&b.label));
    write_durations(&durations_file, &known, &outcomes);

    let failed: Vec<&Outcome> = outcomes.iter().filter(|o| !o.ok).collect();
    for o in &failed {
        println!(
            "\n===== FAILED: cargo test {} ({})",
            o.label,
            o.log.display()
        );
        print_tail(&o.log, 300);
    }
    print_costliest(&outcomes);
    // The tails above end with the processes' logs that failing tests dump; the panics that say
    // what failed come last, where CI's truncated excerpt still shows them.
    for o in &failed {
        for panic in panics(&o.log) {
            println!("\n----- panic in cargo test {}:\n{panic}", o.label);
        }
    }
    println!(
        "\ntest-runner: {} jobs in {:.0}s ({:.0} CPU-s), {} failed",
        outcomes.len(),
        started.elapsed().as_secs_f64(),
        outcomes.iter().map(|o| o.cpu.as_secs_f64()).sum::<f64>(),
        failed.len()
    );
    for o in &failed {
        println!("  failed: cargo test {}   ({})", o.label, o.summary);
    }
    Ok(failed.is_empty())
}

/// How many of the costliest jobs the summary names.
const COSTLIEST: usize = 12;

/// The jobs that cost the machine most CPU time: on two cores the suite's wall time follows its
/// CPU time, so these are where a faster `make test` starts.
fn print_costliest(outcomes: &[Outcome]) {
    let mut by_cpu: Vec<&Outcome> = outcomes.iter().collect();
    by_cpu.sort_by_key(|o| std::cmp::Reverse(o.cpu));
    println!(
        "\ntest-runner: the costliest jobs in CPU time (the binary and the processes it waited for):"
    );
    for o in by_cpu.iter().take(COSTLIEST) {
        println!(
            "  {:>7.1} CPU-s {:>6.1}s  cargo test {}",
            o.cpu.as_secs_f64(),
            o.elapsed.as_secs_f64(),
            o.label
        );
    }
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

/// The workspace root: this crate lives in `<root>/hack/test-runner`.
fn workspace_root() -> Result<PathBuf, String> {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .ok_or_else(|| "cannot find the workspace root".to_owned())
}

/// The binaries the integration tests run, and the variable that hands each one's path to them
/// (`tests/src/controller_manager.rs` reads it instead of building the binary).
const TESTED_BINARIES: [(&str, &str); 4] = [
    (
        "karmada-controller-manager",
        "KARMADA_CONTROLLER_MANAGER_BIN",
    ),
    ("karmada-agent", "KARMADA_AGENT_BIN"),
    ("karmadactl", "KARMADACTL_BIN"),
    ("testenv", "TESTENV_BIN"),
];

/// `cargo test --workspace --no-run`, and the test binaries it reports; each job's environment
/// names the [`TESTED_BINARIES`] it built (a variable already set is left to the caller's value),
/// hard-linked into `bin_dir`: cargo replaces `target/debug/<name>` whenever any build of that
/// package runs (another feature set, say), the link keeps this build's file for the whole run.
fn build_test_binaries(libtest_args: &[String], bin_dir: &Path) -> Result<Vec<Job>, String> {
    let mut child = Command::new(cargo())
        .args([
            "test",
            "--workspace",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("run cargo test --no-run: {e}"))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| "cargo's stdout is not captured".to_owned())?;
    let mut jobs = Vec::new();
    let mut env = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| format!("read cargo's output: {e}"))?;
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if let Some(job) = job_of(&msg, libtest_args) {
            jobs.push(job);
        } else if let Some(var) = tested_binary_of(&msg) {
            env.push(var);
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("wait for cargo test --no-run: {e}"))?;
    if !status.success() {
        return Err(format!("cargo test --workspace --no-run failed ({status})"));
    }
    std::fs::create_dir_all(bin_dir).map_err(|e| format!("create {}: {e}", bin_dir.display()))?;
    for (name, var) in TESTED_BINARIES {
        if std::env::var_os(var).is_some() {
            env.retain(|(v, _)| v != var);
        } else if let Some((_, path)) = env.iter_mut().find(|(v, _)| v == var) {
            let kept = bin_dir.join(name);
            let _ = std::fs::remove_file(&kept);
            std::fs::hard_link(&*path, &kept)
                .or_else(|_| std::fs::copy(&*path, &kept).map(|_| ()))
                .map_err(|e| format!("keep {} as {}: {e}", path.display(), kept.display()))?;
            *path = kept;
        } else {
            return Err(format!(
                "cargo test --workspace --no-run built no {name} binary (the integration tests run it; \
                 cargo builds it for its package's own integration tests)"
            ));
        }
    }
    let mut split = Vec::with_capacity(jobs.len());
    for mut job in jobs {
        job.env.clone_from(&env);
        match job.modules_of.take() {
            Some(main) => split.extend(split_by_module(&job, &main, libtest_args)?),
            None => split.push(job),
        }
    }
    Ok(split)
}

/// One job per top-level module of a test binary made of modules (a `tests/<folder>/main.rs`, such
/// as karmada-e2e's `integration`), each running only its own tests (`--exact` and their names, as
/// `--list` gives them with the caller's libtest arguments): the modules run in processes of their
/// own, as separate binaries would. A module file's leading comments can say `test-runner: alone`,
/// or `test-runner: one job per test` when its tests share nothing and one of them is long enough
/// to hold a lane by itself (each then runs in a process of its own, beside the others instead of
/// behind them). Tests outside any module form one more job.
fn split_by_module(job: &Job, main: &Path, libtest_args: &[String]) -> Result<Vec<Job>, String> {
    let out = Command::new(&job.program)
        .args(libtest_args)
        .args(["--list", "--format", "terse"])
        .current_dir(&job.dir)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("run {} --list: {e}", job.program.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} --list failed ({})",
            job.program.display(),
            out.status
        ));
    }
    let folder = main.parent().unwrap_or_else(|| Path::new("."));
    let mut jobs = Vec::new();
    for (module, names) in tests_by_module(&String::from_utf8_lossy(&out.stdout)) {
        let source = [format!("{module}.rs"), format!("{module}/mod.rs")]
            .iter()
            .map(|f| folder.join(f))
            .find(|f| !module.is_empty() && f.is_file())
            .and_then(|f| std::fs::read_to_string(f).ok())
            .unwrap_or_default();
        let alone = job.alone || says(&source, "alone");
        let per_test = says(&source, "one job per test");
        let groups = if per_test {
            names.into_iter().map(|name| vec![name]).collect()
        } else {
            vec![names]
        };
        for names in groups {
            let (label, log_name) = match names.as_slice() {
                _ if module.is_empty() => (job.label.clone(), job.log_name.clone()),
                [one] if per_test => (
                    format!("{} {one}", job.label),
                    format!("{}.{}", job.log_name, one.replace("::", ".")),
                ),
                _ => (
                    format!("{} {module}::", job.label),
                    format!("{}.{module}", job.log_name),
                ),
            };
            jobs.push(Job {
                label,
                log_name,
                program: job.program.clone(),
                args: libtest_args
                    .iter()
                    .cloned()
                    .chain(std::iter::once("--exact".to_owned()))
                    .chain(names)
                    .collect(),
                dir: job.dir.clone(),
                test_binary: true,
                env: job.env.clone(),
                alone,
                modules_of: None,
            });
        }
    }
    Ok(jobs)
}

/// The tests of libtest's `--list --format terse` output, grouped by their first path segment
/// (`""` for tests at the crate root).
fn tests_by_module(list: &str) -> BTreeMap<String, Vec<String>> {
    let mut modules: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for name in list.lines().filter_map(|l| l.strip_suffix(": test")) {
        let module = name.split_once("::").map_or("", |(m, _)| m);
        modules
            .entry(module.to_owned())
            .or_default()
            .push(name.to_owned());
    }
    modules
}

/// For a `compiler-artifact` message of one of the [`TESTED_BINARIES`] (a plain build, not a test
/// harness), its variable and path.
fn tested_binary_of(msg: &serde_json::Value) -> Option<(String, PathBuf)> {
    if msg["reason"] != "compiler-artifact"
        || msg["profile"]["test"] != false
        || msg["target"]["kind"][0] != "bin"
    {
        return None;
    }
    let name = msg["target"]["name"].as_str()?;
    let (_, var) = TESTED_BINARIES.iter().find(|(n, _)| *n == name)?;
    Some((
        (*var).to_owned(),
        PathBuf::from(msg["executable"].as_str()?),
    ))
}

/// The job of a `compiler-artifact` message for a test binary, `None` for anything else.
fn job_of(msg: &serde_json::Value, libtest_args: &[String]) -> Option<Job> {
    if msg["reason"] != "compiler-artifact" || msg["profile"]["test"] != true {
        return None;
    }
    let program = PathBuf::from(msg["executable"].as_str()?);
    let dir = Path::new(msg["manifest_path"].as_str()?)
        .parent()?
        .to_path_buf();
    let package = package_name(msg["package_id"].as_str()?)?;
    let name = msg["target"]["name"].as_str()?;
    let kind = msg["target"]["kind"][0].as_str()?;
    let source = msg["target"]["src_path"].as_str().map(PathBuf::from);
    let alone = source
        .as_ref()
        .and_then(|src| std::fs::read_to_string(src).ok())
        .is_some_and(|text| says(&text, "alone"));
    let modules_of = source.filter(|src| kind == "test" && src.ends_with("main.rs"));
    let label = match kind {
        "lib" | "rlib" | "proc-macro" => format!("-p {package} --lib"),
        "bin" => format!("-p {package} --bin {name}"),
        "test" => format!("-p {package} --test {name}"),
        "bench" => format!("-p {package} --bench {name}"),
        "example" => format!("-p {package} --example {name}"),
        _ => return None,
    };
    Some(Job {
        log_name: format!("{package}.{kind}.{name}"),
        label,
        program,
        args: libtest_args.to_vec(),
        dir,
        test_binary: true,
        env: Vec::new(),
        alone,
        modules_of,
    })
}

/// Whether one of a test file's leading comment lines is `// test-runner: <marker>` (and why): a
/// plain comment line that starts so, not a doc comment that mentions the marker.
fn says(source: &str, marker: &str) -> bool {
    let line = format!("// test-runner: {marker}");
    source
        .lines()
        .map(str::trim_start)
        .take_while(|l| l.starts_with("//") || l.is_empty())
        .any(|l| l.starts_with(&line))
}

/// The package name in a cargo package id: `path+file:///w/tests#karmada-e2e@0.1.0` or
/// `path+file:///w/pkg/testenv#0.1.0` (folder named as the package).
fn package_name(id: &str) -> Option<String> {
    let (url, fragment) = id.split_once('#')?;
    match fragment.split_once('@') {
        Some((name, _)) => Some(name.to_owned()),
        None => Some(url.rsplit('/').next()?.to_owned()),
    }
}

/// Runs `jobs` on `options.jobs` threads; each outcome is printed as it ends.
fn run_jobs(jobs: Vec<Job>, options: &Options, lanes: &CpuLanes, logs: &Path) -> Vec<Outcome> {
    let queue = Arc::new(Mutex::new(VecDeque::from(jobs)));
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    std::thread::scope(|scope| {
        for _ in 0..options.jobs {
            let queue = Arc::clone(&queue);
            let outcomes = Arc::clone(&outcomes);
            scope.spawn(move || {
                loop {
                    let next = queue
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .pop_front();
                    let Some(job) = next else { break };
                    let outcome = run_job(&job, options, lanes, logs);
                    println!(
                        "{} {:>6.1}s {:>6.1} CPU-s  cargo test {}  ({})",
                        if outcome.ok { "ok    " } else { "FAILED" },
                        outcome.elapsed.as_secs_f64(),
                        outcome.cpu.as_secs_f64(),
                        outcome.label,
                        outcome.summary
                    );
                    let _ = std::io::stdout().flush();
                    outcomes
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(outcome);
                }
            });
        }
    });
    std::mem::take(&mut *outcomes.lock().unwrap_or_else(PoisonError::into_inner))
}

fn run_job(job: &Job, options: &Options, lanes: &CpuLanes, logs: &Path) -> Outcome {
    let log = logs.join(format!("{}.log", job.log_name));
    let started = Instant::now();
    let result = spawn_logged(job, &log, lanes, options.lane)
        .and_then(|child| wait_with_timeout(child, options.timeout));
    let elapsed = started.elapsed();
    let cpu = match &result {
        Ok(Some(exit)) => exit.cpu,
        _ => Duration::ZERO,
    };
    let (ok, summary) = match result {
        Ok(Some(Exit { status, .. })) => (
            status.success(),
            test_result_line(&log).unwrap_or_else(|| status.to_string()),
        ),
        Ok(None) => (
            false,
            format!("killed after {}s (--timeout)", options.timeout.as_secs()),
        ),
        Err(e) => (false, e),
    };
    Outcome {
        label: job.label.clone(),
        log,
        elapsed,
        cpu,
        ok,
        summary,
    }
}

/// Starts `job` with its output in `log`, on `lane` (as is every process the test starts).
fn spawn_logged(job: &Job, log: &Path, lanes: &CpuLanes, lane: Lane) -> Result<Child, String> {
    let out = File::create(log).map_err(|e| format!("create {}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("open {}: {e}", log.display()))?;
    let mut command = Command::new(&job.program);
    let _group = lanes.place(&mut command, lane)?;
    if job.test_binary {
        command.env("CARGO_MANIFEST_DIR", &job.dir);
    }
    if std::env::var_os("GOGC").is_none() {
        command.env("GOGC", GO_GC_PERCENT);
    }
    command
        .args(&job.args)
        .current_dir(&job.dir)
        .envs(job.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("run {}: {e}", job.program.display()))
}

/// How a job's process ended.
struct Exit {
    status: std::process::ExitStatus,
    /// User plus system time of the process and of the descendants it waited for.
    cpu: Duration,
}

/// The exit status and CPU time, or `None` when the child ran past `timeout` and was killed.
///
/// `wait4` rather than `Child::try_wait`: it also returns the resource usage, which std does not.
fn wait_with_timeout(mut child: Child, timeout: Duration) -> Result<Option<Exit>, String> {
    let deadline = Instant::now() + timeout;
    let pid = libc::pid_t::try_from(child.id()).map_err(|e| format!("child pid: {e}"))?;
    loop {
        let mut raw_status: libc::c_int = 0;
        // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our own unreaped child (only this function waits for it), and both
        // out-pointers point to live locals of the right types.
        let reaped =
            unsafe { libc::wait4(pid, &raw mut raw_status, libc::WNOHANG, &raw mut usage) };
        if reaped == pid {
            let tv = |t: libc::timeval| {
                Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
                    + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
            };
            return Ok(Some(Exit {
                status: std::os::unix::process::ExitStatusExt::from_raw(raw_status),
                cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
            }));
        }
        if reaped < 0 {
            return Err(format!("wait: {}", std::io::Error::last_os_error()));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The last `test result:` line of a log (the doc-tests print one per crate; the last failing one
/// is the interesting one, so a failing line wins).
fn test_result_line(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    let results: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("test result:"))
        .collect();
    let line = results
        .iter()
        .find(|l| l.contains("FAILED"))
        .or_else(|| results.last())?;
    Some(line.trim_start_matches("test result: ").to_owned())
}

/// The most lines kept of one panic message.
const PANIC_LINES: usize = 12;

/// Each `thread '…' panicked at` block of a log: the location line and the message below it, up to
/// the `note:`/`stack backtrace:` line, a blank line, or [`PANIC_LINES`] lines.
fn panics(log: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(log) else {
        return Vec::new();
    };
    panic_blocks(&text)
}

fn panic_blocks(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        // `thread 'name' panicked at …`, or since Rust 1.88 `thread 'name' (tid) panicked at …`.
        if !(line.starts_with("thread '") && line.contains(" panicked at ")) {
            continue;
        }
        let mut block = vec![*line];
        for next in lines.iter().skip(i + 1).take(PANIC_LINES - 1) {
            if next.is_empty()
                || next.starts_with("note: ")
                || next.starts_with("stack backtrace:")
                || next.starts_with("thread '")
            {
                break;
            }
            block.push(next);
        }
        out.push(block.join("\n"));
    }
    out
}

fn print_tail(log: &Path, lines: usize) {
    let Ok(text) = std::fs::read_to_string(log) else {
        println!("(no log at {})", log.display());
        return;
    };
    let all: Vec<&str> = text.lines().collect();
    if all.len() > lines {
        println!("[… {} earlier lines in the log]", all.len() - lines);
    }
    for line in &all[all.len().saturating_sub(lines)..] {
        println!("{line}");
    }
}

fn read_durations(path: &Path) -> Option<BTreeMap<String, f64>> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(
        text.lines()
            .filter_map(|l| {
                let (secs, label) = l.split_once('\t')?;
                Some((label.to_owned(), secs.parse().ok()?))
            })
            .collect(),
    )
}

/// Keeps the durations of this run (and the older ones of jobs that did not run).
fn write_durations(path: &Path, known: &BTreeMap<String, f64>, outcomes: &[Outcome]) {
    let mut all = known.clone();
    for o in outcomes {
        all.insert(o.label.clone(), o.elapsed.as_secs_f64());
    }
    let mut rows: Vec<(&String, &f64)> = all.iter().collect();
    rows.sort_by(|a, b| b.1.total_cmp(a.1));
    let mut text = String::new();
    for (label, secs) in rows {
        let _ = writeln!(text, "{secs:.1}\t{label}");
    }
    if let Err(e) = std::fs::write(path, text) {
        eprintln!("test-runner: write {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names_from_ids() {
        assert_eq!(
            package_name("path+file:///w/tests#karmada-e2e@0.1.0").as_deref(),
            Some("karmada-e2e")
        );
        assert_eq!(
            package_name("path+file:///w/pkg/testenv#0.1.0").as_deref(),
            Some("testenv")
        );
    }

    #[test]
    fn a_test_artifact_becomes_a_job_and_a_plain_build_does_not() {
        let msg = serde_json::json!({
            "reason": "compiler-artifact",
            "package_id": "path+file:///w/tests#karmada-e2e@0.1.0",
            "manifest_path": "/w/tests/Cargo.toml",
            "target": {"kind": ["test"], "name": "failover"},
            "profile": {"test": true},
            "executable": "/w/target/debug/deps/failover-123",
        });
        let job = job_of(&msg, &[]).unwrap();
        assert_eq!(job.label, "-p karmada-e2e --test failover");
        assert_eq!(job.dir, PathBuf::from("/w/tests"));
        let mut build = msg.clone();
        build["profile"]["test"] = serde_json::json!(false);
        assert!(job_of(&build, &[]).is_none());
    }

    #[test]
    fn a_binary_of_modules_splits_by_first_path_segment() {
        let list = "drift::repair: test\ndrift::report::only: test\ndrift_pull::pull: test\n\
                    root_test: test\nbench_x: bench\n";
        let modules = tests_by_module(list);
        assert_eq!(modules["drift"], ["drift::repair", "drift::report::only"]);
        assert_eq!(modules["drift_pull"], ["drift_pull::pull"]);
        assert_eq!(modules[""], ["root_test"]);
        assert_eq!(modules.len(), 3);
    }

    #[test]
    fn a_file_runs_alone_when_its_leading_comments_say_so() {
        let alone = |source| says(source, "alone");
        assert!(alone(
            "//! Leases.\n\n// test-runner: alone (lease timing)\nuse std::time;\n"
        ));
        assert!(!alone(
            "//! Leases.\nuse std::time;\n// test-runner: alone\n"
        ));
        assert!(!alone("//! Propagation.\nuse std::time;\n"));
        // A doc comment that only names the marker (a folder's main.rs explaining it) is not it.
        assert!(!alone(
            "//! Modules whose comments say `// test-runner: alone` run alone.\nmod a;\n"
        ));
        assert!(says(
            "//! Benchmarks.\n// test-runner: one job per test (each is long)\n",
            "one job per test"
        ));
    }

    #[test]
    fn a_tested_binary_is_named_by_its_variable_and_its_test_harness_is_not() {
        let msg = serde_json::json!({
            "reason": "compiler-artifact",
            "package_id": "path+file:///w/cmd/karmada-agent#0.1.0",
            "target": {"kind": ["bin"], "name": "karmada-agent"},
            "profile": {"test": false},
            "executable": "/w/target/debug/karmada-agent",
        });
        assert_eq!(
            tested_binary_of(&msg),
            Some((
                "KARMADA_AGENT_BIN".to_owned(),
                PathBuf::from("/w/target/debug/karmada-agent")
            ))
        );
        let mut harness = msg.clone();
        harness["profile"]["test"] = serde_json::json!(true);
        assert!(tested_binary_of(&harness).is_none());
        let mut other = msg.clone();
        other["target"]["name"] = serde_json::json!("crdgen");
        assert!(tested_binary_of(&other).is_none());
    }

    #[test]
    fn panic_blocks_keep_the_location_and_message() {
        let log = "running 2 tests\n\
            thread 'a' panicked at tests/x.rs:3:5:\n\
            assertion failed: late.is_empty()\n\
            2 writes\n\
            note: run with `RUST_BACKTRACE=1`\n\
            --- log ---\n\
            thread 'b' (4242) panicked at tests/y.rs:9:1:\n\
            boom\n\
            \n\
            test result: FAILED.\n";
        assert_eq!(
            panic_blocks(log),
            vec![
                "thread 'a' panicked at tests/x.rs:3:5:\nassertion failed: late.is_empty()\n2 writes",
                "thread 'b' (4242) panicked at tests/y.rs:9:1:\nboom",
            ]
        );
    }
}
