//! Captures what `version` and `karmada_build_info` report: git version/commit/tree state, build date,
//! compiler and platform. Everything falls back to "unknown" outside a git checkout.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// ISO 8601 UTC (`2026-01-02T03:04:05Z`) for seconds since the epoch.
fn iso8601(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Prints the stamp as `cargo:rustc-env` lines.
fn main() {
    let pkg_version = std::env::var("CARGO_PKG_VERSION").unwrap_or_else(|_| "0.0.0".into());
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let short = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let tree_state = match git(&["status", "--porcelain", "--untracked-files=no"]) {
        _ if commit == "unknown" => "unknown".to_string(),
        Some(_) => "dirty".to_string(),
        None => "clean".to_string(),
    };
    let git_version = git(&["describe", "--tags", "--match", "v*", "--abbrev=7"])
        .unwrap_or_else(|| format!("v{pkg_version}"));
    // Reproducible: the build date is SOURCE_DATE_EPOCH, else the commit's date, never the clock (a
    // clock date would change the binary on every build and make a no-op build relink everything).
    let now = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .or_else(|| git(&["log", "-1", "--format=%ct"]).and_then(|s| s.parse::<i64>().ok()))
        .unwrap_or(0);
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc_version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "unknown".into(), |s| s.trim().to_string());
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH")
        .unwrap_or_default()
        .as_str()
    {
        "x86_64" => "amd64".to_string(),
        "aarch64" => "arm64".to_string(),
        "x86" => "386".to_string(),
        other => other.to_string(),
    };

    println!("cargo:rustc-env=KCM_GIT_VERSION={git_version}");
    println!("cargo:rustc-env=KCM_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=KCM_GIT_SHORT_COMMIT={short}");
    println!("cargo:rustc-env=KCM_GIT_TREE_STATE={tree_state}");
    println!("cargo:rustc-env=KCM_BUILD_DATE={}", iso8601(now));
    println!("cargo:rustc-env=KCM_RUSTC_VERSION={rustc_version}");
    println!("cargo:rustc-env=KCM_PLATFORM={os}/{arch}");

    // Rebuild when the checked-out commit changes. Only files that exist are watched: cargo reruns a
    // build script on every build while a watched path is missing (a checkout need not have
    // `packed-refs`, and a packed branch has no loose ref file).
    // In a linked worktree HEAD is in the worktree's git dir but refs and packed-refs are in the
    // common dir.
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let common = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"])
            .unwrap_or_else(|| git_dir.clone());
        let mut watched = vec![format!("{git_dir}/HEAD"), format!("{common}/packed-refs")];
        if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watched.push(format!("{common}/{head_ref}"));
        }
        for path in watched.iter().filter(|p| std::path::Path::new(p).exists()) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    println!("cargo:rerun-if-changed=build.rs");
}
