//! `make local-up` → `make demo` → `make local-down` (the scripts behind them, in a private state folder
//! and on free ports): the control plane comes up with both members joined and the controller-manager
//! ready, the demo runs its real commands, and afterwards no process of the environment is left.

use std::path::{Path, PathBuf};
use std::process::Command;

use karmada_e2e::controller_manager::free_port;

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../hack")
        .join(name)
}

fn run(name: &str, state: &Path, ports: (u16, u16)) -> (bool, String) {
    let out = Command::new("bash")
        .arg(script(name))
        .env("KARMADA_RS_LOCAL_UP_DIR", state)
        .env("KCM_METRICS_PORT", ports.0.to_string())
        .env("KCM_PROBE_PORT", ports.1.to_string())
        .env("DEMO_TIMEOUT", "30")
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
    let (down_ok, down) = run("local-down.sh", &state, ports);
    assert!(demo_ok, "demo failed:\n{demo}");
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
