//! A build with nothing changed does nothing: the build script's inputs (git files it watches, the
//! build date) must be stable, or every `cargo build` recompiles this crate and relinks every binary
//! (minutes with the release profile's fat LTO).
//!
//! Builds the controller-manager twice, exactly as the integration tests do, and requires the second
//! build to find every artifact fresh (a rerun build script makes its crate and the binary stale).

// A test helper fails its test by panicking.
#![allow(clippy::expect_used)]

use std::process::Command;

/// The integration tests' build of the controller-manager (`tests/src/controller_manager.rs`: the
/// workspace's test build of its own integration test, which builds the binary with the features
/// `make test` uses, so the binary they run is not swapped for another variant); returns stdout.
fn build() -> String {
    let mut cargo = Command::new(env!("CARGO"));
    // Without the variables cargo sets for this test process (as `tests/src/controller_manager.rs`
    // runs cargo): ring's build script reruns when `CARGO_MANIFEST_DIR` or `CARGO_PKG_*` differ
    // from the last build's, and the shell's `cargo test` that built this test had none of them.
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        if key == "OUT_DIR"
            || key == "CARGO_CRATE_NAME"
            || key == "CARGO_PRIMARY_PACKAGE"
            || key == "CARGO_TARGET_TMPDIR"
            || [
                "CARGO_PKG_",
                "CARGO_MANIFEST_",
                "CARGO_BIN_",
                "CARGO_CFG_",
                "CARGO_FEATURE_",
            ]
            .iter()
            .any(|p| key.starts_with(p))
        {
            cargo.env_remove(key);
        }
    }
    let out = cargo
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args([
            "test",
            "-q",
            "--workspace",
            "--no-run",
            "--test",
            "controller_manager_binary",
            "--message-format=json",
        ])
        .output()
        .expect("run cargo build");
    assert!(
        out.status.success(),
        "cargo build failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_second_build_with_nothing_changed_does_nothing() {
    build();
    let second = build();
    let rerun: Vec<&str> = second
        .lines()
        .filter(|l| l.contains(r#""reason":"compiler-artifact""#) && l.contains(r#""fresh":false"#))
        .collect();
    assert!(
        rerun.is_empty(),
        "the second build with nothing changed did work again:\n{}",
        rerun.join("\n")
    );
}
