//! The `karmadactl` binary: usage errors, and errors that name what is wrong, with exit codes.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn karmadactl(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_karmadactl"))
        .args(args)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("run karmadactl");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_lists_join_and_unjoin() {
    let (code, out, _) = karmadactl(&["--help"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("join") && out.contains("unjoin"), "{out}");
    let (code, out, _) = karmadactl(&["join", "--help"]);
    assert_eq!(code, Some(0));
    for flag in [
        "--kubeconfig",
        "--karmada-context",
        "--cluster-kubeconfig",
        "--cluster-context",
        "--cluster-namespace",
        "--cluster-provider",
        "--cluster-region",
        "--cluster-zones",
        "--dry-run",
    ] {
        assert!(out.contains(flag), "join --help lacks {flag}: {out}");
    }
}

#[test]
fn missing_cluster_name_is_a_usage_error() {
    let (code, _, err) = karmadactl(&["join"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("CLUSTER_NAME"), "{err}");
}

#[test]
fn unreadable_kubeconfig_is_named() {
    let (code, _, err) = karmadactl(&["unjoin", "member1", "--kubeconfig=/nonexistent/k"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("cannot read the control plane kubeconfig /nonexistent/k"),
        "{err}"
    );
}

#[test]
fn invalid_cluster_name_is_rejected_before_any_request() {
    let (code, _, err) = karmadactl(&["join", "Not_Valid", "--cluster-kubeconfig=/x"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("invalid cluster name(Not_Valid)"), "{err}");
}

/// `karmadactl version` prints Karmada's `version.Info` shape with the build script's stamp: the
/// commit of this checkout when built from git.
#[test]
fn version_prints_the_build_stamp() {
    let (code, out, err) = karmadactl(&["version"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with("karmadactl version: version.Info{GitVersion:\""),
        "{out}"
    );
    let commit = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("git");
    if commit.status.success() {
        let commit = String::from_utf8_lossy(&commit.stdout).trim().to_owned();
        // The build script reruns when HEAD moves, so the binary under test names this commit.
        assert!(out.contains(&format!("GitCommit:\"{commit}\"")), "{out}");
    } else {
        assert!(out.contains("GitCommit:\"unknown\""), "{out}");
    }
    let (code, out, err) = karmadactl(&["version", "-o", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(json["compiler"], "rustc");
    assert!(
        json["gitVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with('v')),
        "{out}"
    );
    let (code, _, err) = karmadactl(&["version", "-o", "wide"]);
    assert_eq!(code, Some(2), "{err}");
}
