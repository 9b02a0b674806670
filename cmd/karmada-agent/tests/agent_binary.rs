//! The `karmada-agent` binary's command line, without an API server: an unparsable or unknown flag
//! exits 2 naming it.
//!
//! This file also makes `cargo test --workspace` build the binary (cargo builds a package's binaries
//! for its integration tests), with the workspace's test features: the binary the end-to-end tests
//! run (`tests/src/controller_manager.rs`, `make test`'s runner), compiled once with everything else.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::expect_used)]

use std::process::Command;

/// Runs the binary with `args`; its exit code and stderr.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_karmada-agent"))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run karmada-agent");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn unparsable_and_unknown_flags_exit_2() {
    let (code, err) = run(&[
        "--cluster-name=m1",
        "--cluster-status-update-frequency=soon",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--cluster-status-update-frequency"), "{err}");
    assert!(err.contains("soon"), "{err}");
    let (code, err) = run(&["--no-such-flag"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--no-such-flag"), "{err}");
}
