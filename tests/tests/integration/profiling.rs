//! `--enable-pprof`: the real `karmada-controller-manager` against a real API server serves a CPU
//! profile and a heap profile on `--profiling-bind-address` that `go tool pprof` reads and finds
//! this process's functions in; one profile is taken at a time, and a profile longer than the cap
//! is refused. Needs `go` (the test binaries' build needs it too).
#![allow(
    clippy::expect_used,
    reason = "a test harness file: its helpers panic on a broken fixture"
)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use karmada_e2e::controller_manager::*;

fn env() -> &'static testenv::TestEnv {
    testenv::shared(testenv::EnvOptions {
        host_controller_manager: false,
        install_crds: true,
        ..testenv::EnvOptions::default()
    })
}

/// `go tool pprof -top` on `source` (a URL or a file); its output, or the failure.
fn pprof_top(source: &str, tmp: &Path) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof", "-top", "-nodecount=500", source])
        // Where pprof saves what it fetched (default $HOME/pprof).
        .env("PPROF_TMPDIR", tmp)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `go tool pprof` (Go is needed for this test): {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "go tool pprof -top {source} failed:\n{text}"
    );
    text
}

/// A GET whose body may be binary and slow to come (a profile): status and body.
fn get_bytes(port: u16, path: &str) -> (u16, Vec<u8>) {
    http_get_bytes(port, path, Duration::from_secs(120))
        .unwrap_or_else(|| panic!("no answer to GET {path} on port {port}"))
}

/// The first lines of a `-top` listing, for the log.
fn head(top: &str) -> String {
    top.lines().take(20).collect::<Vec<_>>().join("\n")
}

/// Lines of `-top` naming a function of this workspace or of the crates its controllers run on
/// (not the profiler's own).
fn own_functions(top: &str) -> Vec<&str> {
    const CRATES: &[&str] = &[
        "karmada", "lariat", "kube", "hyper", "rustls", "serde", "tokio::",
    ];
    top.lines()
        .filter(|l| l.contains('%') && CRATES.iter().any(|c| l.contains(c)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_and_heap_profiles_read_by_go_tool_pprof() {
    let env = env();
    let client = env.host().client().await;
    let ns = fresh_namespace(&client, "kcm-pprof").await;
    let port = free_port();
    let mut kcm = Kcm::start(
        env.host().kubeconfig_path(),
        &[
            &format!("--leader-elect-resource-namespace={ns}"),
            "--controllers=namespace,cluster",
            "--enable-pprof",
            &format!("--profiling-bind-address=127.0.0.1:{port}"),
        ],
        &[],
    );
    kcm.wait_for("the profiling server", Duration::from_secs(10), |_| {
        http_get(port, "/debug/pprof/").is_some()
    })
    .await;
    let (status, index) = http_get(port, "/debug/pprof/").expect("profiling server answers");
    assert_eq!(status, 200, "{index}");
    assert!(index.contains("/debug/pprof/heap"), "{index}");
    let tmp = tempfile::tempdir().expect("temp dir");

    // CPU work to sample whatever the controllers are doing: the metrics endpoint scraped in a loop
    // while the profile runs (an idle process gives a profile with no samples).
    let metrics_port = kcm.metrics_port;
    let scraping = Arc::new(AtomicBool::new(true));
    let scraper = {
        let scraping = Arc::clone(&scraping);
        std::thread::spawn(move || {
            while scraping.load(Ordering::Relaxed) {
                let _ = http_get(metrics_port, "/metrics");
            }
        })
    };
    let cpu = std::thread::spawn(move || get_bytes(port, "/debug/pprof/profile?seconds=1"));
    // While it runs, a second profile is refused (one at a time).
    kcm.wait_for("the CPU profile to start", Duration::from_secs(10), |k| {
        k.log().contains("starting cpu profiler")
    })
    .await;
    let (status, body) = http_get(port, "/debug/pprof/profile?seconds=1").expect("answers");
    assert_eq!(status, 500, "a second CPU profile while one runs: {body}");
    assert!(body.contains("another profile"), "{body}");
    let (status, profile) = cpu.join().expect("profile thread");
    scraping.store(false, Ordering::Relaxed);
    scraper.join().expect("scraper thread");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&profile));
    let file = tmp.path().join("cpu.pb");
    std::fs::write(&file, &profile).expect("write the profile");
    let cpu = pprof_top(&file.to_string_lossy(), tmp.path());
    eprintln!("CPU profile (head):\n{}", head(&cpu));
    assert!(cpu.contains("Type: cpu"), "{cpu}");
    // pprof prints the profile's own length: "1s", or "1.01s" when the timer ran late.
    let seconds: f64 = cpu
        .lines()
        .find_map(|l| l.strip_prefix("Duration: "))
        .and_then(|d| d.split([',', 's']).next())
        .and_then(|d| d.trim().parse().ok())
        .unwrap_or_else(|| panic!("no duration in the CPU profile:\n{cpu}"));
    assert!(
        (1.0..1.5).contains(&seconds),
        "a 1 s profile lasted {seconds} s:\n{cpu}"
    );
    assert!(
        !own_functions(&cpu).is_empty(),
        "no Rust function in the CPU profile:\n{cpu}"
    );

    kcm.wait_for("/readyz 200", Duration::from_secs(60), |k| {
        k.probe("/readyz").map(|r| r.0) == Some(200)
    })
    .await;
    // The heap profile: symbolized in the process, so pprof needs no binary.
    let heap = pprof_top(
        &format!("http://127.0.0.1:{port}/debug/pprof/heap"),
        tmp.path(),
    );
    eprintln!("heap profile (head):\n{}", head(&heap));
    assert!(heap.contains("Type: inuse_space"), "{heap}");
    assert!(
        !own_functions(&heap).is_empty(),
        "no Rust function in the heap profile:\n{heap}"
    );

    // Longer than the cap: refused, as Karmada's server refuses a profile past its write timeout.
    let (status, body) = http_get(port, "/debug/pprof/profile?seconds=301").expect("answers");
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        http_get(port, "/debug/pprof/goroutine").map(|r| r.0),
        Some(404)
    );

    kcm.signal(libc::SIGTERM);
    let status = kcm.wait_exit(Duration::from_secs(10)).await.expect("exits");
    assert_eq!(Kcm::code(status), Some(0), "{}", kcm.log());
}

#[tokio::test]
async fn without_enable_pprof_nothing_listens() {
    let env = env();
    let port = free_port();
    let client = env.host().client().await;
    let ns = fresh_namespace(&client, "kcm-nopprof").await;
    let mut kcm = Kcm::start(
        env.host().kubeconfig_path(),
        &[
            &format!("--leader-elect-resource-namespace={ns}"),
            "--controllers=namespace",
            &format!("--profiling-bind-address=127.0.0.1:{port}"),
        ],
        &[],
    );
    kcm.wait_for("/healthz to answer", Duration::from_secs(10), |k| {
        k.probe("/healthz").is_some()
    })
    .await;
    assert!(http_get(port, "/debug/pprof/").is_none());
    assert!(
        !kcm.log().contains("profiling-bind-address"),
        "no no-effect warning about the profiling flags: {}",
        kcm.log()
    );
    kcm.signal(libc::SIGTERM);
    kcm.wait_exit(Duration::from_secs(10)).await.expect("exits");
}
