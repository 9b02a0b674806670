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
/// `test-hooks` feature, so the binary they run is not swapped for another variant); returns stdout.
fn build() -> String {
    let out = Command::new(env!("CARGO"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args([
            "build",
            "-q",
            "-p",
            "karmada-controller-manager",
            "--bin",
            "karmada-controller-manager",
            "--features",
            "test-hooks",
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
