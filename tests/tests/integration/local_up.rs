//! `make local-up` → `make demo` → `make local-down` (the scripts behind them, in a private state folder
//! and on free ports): the control plane comes up with both members joined and the controller-manager
//! ready, the demo runs its real commands and exits 0 only when everything propagated (and 1 when
//! something did not: checked with the controller-manager stopped), and afterwards no process of the
//! environment is left.
// test-runner: alone. The controller-manager local-up starts leads with Karmada's lease timings (a
// 10 s renew deadline): beside the timed lane, at a ninth of a contended machine, its host API
// server once answered nothing for longer than that and the controller-manager exited, as it must.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use karmada_e2e::controller_manager::{
    agent_binary, binary, free_port, karmadactl_binary, testenv_binary,
};

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../hack")
        .join(name)
}

fn run(name: &str, state: &Path, ports: (u16, u16)) -> (bool, String) {
    run_with_timeout(name, state, ports, 30)
}

/// Runs a hack/ script; `demo_timeout` is the demo's DEMO_TIMEOUT in seconds.
fn run_with_timeout(
    name: &str,
    state: &Path,
    ports: (u16, u16),
    demo_timeout: u32,
) -> (bool, String) {
    let out = Command::new("bash")
        .arg(script(name))
        .env("KARMADA_RS_LOCAL_UP_DIR", state)
        .env("KCM_METRICS_PORT", ports.0.to_string())
        .env("KCM_PROBE_PORT", ports.1.to_string())
        .env("DEMO_TIMEOUT", demo_timeout.to_string())
        // The binaries this test's `cargo test` built: local-up does not build them again.
        .env("TESTENV_BIN", testenv_binary())
        .env("KARMADACTL_BIN", karmadactl_binary())
        .env("KARMADA_CONTROLLER_MANAGER_BIN", binary())
        .env("KARMADA_AGENT_BIN", agent_binary())
        .env_remove("KUBECONFIG")
        .output()
        .unwrap_or_else(|e| panic!("run {name}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The pinned kubectl (hack/install-helm.sh prints its folder).
fn kubectl() -> PathBuf {
    let out = Command::new("bash")
        .arg(script("install-helm.sh"))
        .output()
        .expect("run hack/install-helm.sh");
    assert!(out.status.success(), "hack/install-helm.sh failed");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("kubectl")
}

/// Pids of live processes whose command line mentions `dir`.
fn processes_mentioning(dir: &Path) -> Vec<String> {
    let needle = dir.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.parse::<u32>().is_err() || name == std::process::id().to_string() {
            continue;
        }
        if let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(&needle) {
                found.push(format!("{name}: {cmd}"));
            }
        }
    }
    found
}

#[test]
fn local_up_demo_local_down_leaves_no_process() {
    let state = std::env::temp_dir().join(format!("karmada-rs-local-up-{}", std::process::id()));
    let ports = (free_port(), free_port());
    let (ok, up) = run("local-up.sh", &state, ports);
    if !ok {
        let (_, down) = run("local-down.sh", &state, ports);
        panic!("local-up failed:\n{up}\nlocal-down:\n{down}");
    }
    assert!(up.contains("karmada-rs is running"), "{up}");
    assert!(up.contains("make local-down"), "{up}");
    assert!(state.join("env/kubeconfig").is_file());

    let (demo_ok, demo) = run("demo.sh", &state, ports);

    // Something that does not propagate fails the demo: with the controller-manager stopped
    // (SIGSTOP, so nothing can repair it), member2's copy of the Deployment is deleted and the demo
    // run again with a short timeout.
    let kcm_pid = std::fs::read_to_string(state.join("controller-manager.pid"))
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok());
    let mut broken = None;
    if demo_ok && let Some(pid) = kcm_pid {
        // SAFETY: plain kill(2) on the pid local-up started.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        let kubectl = kubectl();
        let deleted = Command::new(&kubectl)
            .args(["--kubeconfig"])
            .arg(state.join("env/kubeconfig"))
            .args([
                "--context",
                "member2",
                "delete",
                "deployment",
                "nginx",
                "-n",
                "default",
            ])
            .output()
            .map(|o| o.status.success());
        let rerun = run_with_timeout("demo.sh", &state, ports, 5);
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGCONT) };
        broken = Some((deleted, rerun));
    }

    let (down_ok, down) = run("local-down.sh", &state, ports);
    assert!(demo_ok, "demo failed:\n{demo}");
    assert!(demo.contains("demo: everything propagated"), "{demo}");
    assert!(!demo.contains("not propagated yet"), "{demo}");
    let Some((deleted, (rerun_ok, rerun))) = broken else {
        panic!("no controller-manager pid in {}", state.display());
    };
    assert!(
        matches!(deleted, Ok(true)),
        "kubectl delete in member2: {deleted:?}"
    );
    assert!(
        !rerun_ok,
        "the demo exits 0 although member2 lost its Deployment:\n{rerun}"
    );
    assert!(
        rerun.contains("(nginx Deployment and Service in member2: not propagated yet)")
            && rerun.contains("demo: FAILED"),
        "{rerun}"
    );
    for expected in [
        "member1   ",
        "deployment.apps/nginx created",
        "== Works",
        "== member1",
        "== Aggregated status",
    ] {
        assert!(
            demo.contains(expected),
            "{expected:?} missing from the demo:\n{demo}"
        );
    }
    assert!(down_ok, "local-down failed:\n{down}");
    assert!(down.contains("no process left"), "{down}");
    let left = processes_mentioning(&state);
    assert!(
        left.is_empty(),
        "processes left after local-down: {left:#?}"
    );
    assert!(!state.exists(), "local-down removes the state folder");
}
