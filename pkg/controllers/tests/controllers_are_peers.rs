//! Controllers are peers. Each domain crate under `pkg/controllers/<domain>/` holds one folder per
//! controller; what two controllers share lives in the `common` crate. So:
//! - a controller folder never names another controller folder of its crate (`crate::other::…`);
//! - a domain crate never depends on, or names, another domain crate;
//! - `common` depends on no domain crate.
//!
//! This reads the sources and manifests, so a new controller folder or domain crate is covered without
//! being listed here.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};

const COMMON: &str = "common";

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn subdirs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The crates under `pkg/controllers/` (folders with a `Cargo.toml`): `common` and the domains.
fn crates() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    subdirs(root)
        .into_iter()
        .filter(|d| root.join(d).join("Cargo.toml").is_file())
        .collect()
}

/// Lines of the files under `dir` that contain one of `needles`, as `path:line: text`.
fn lines_naming(dir: &Path, needles: &[String]) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    let mut found = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if needles.iter().any(|needle| line.contains(needle.as_str())) {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn no_controller_imports_another() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut violations = Vec::new();
    let mut controllers_seen = 0;
    for krate in crates().iter().filter(|c| *c != COMMON) {
        let src = root.join(krate).join("src");
        let controllers = subdirs(&src);
        controllers_seen += controllers.len();
        for own in &controllers {
            let needles: Vec<String> = controllers
                .iter()
                .filter(|c| *c != own)
                .flat_map(|other| {
                    [
                        format!("crate::{other}::"),
                        format!("crate::{other};"),
                        format!("crate::{{{other}"),
                    ]
                })
                .collect();
            violations.extend(lines_naming(&src.join(own), &needles));
        }
    }
    assert!(
        controllers_seen >= 9,
        "expected the controller folders under {}/<domain>/src, found {controllers_seen}",
        root.display()
    );
    assert!(
        violations.is_empty(),
        "controllers import each other (move what they share to pkg/controllers/common):\n{}",
        violations.join("\n")
    );
}

#[test]
fn no_domain_crate_depends_on_another() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let crates = crates();
    assert!(
        crates.len() >= 4 && crates.iter().any(|c| c == COMMON),
        "expected common and the domain crates under {}, found {crates:?}",
        root.display()
    );
    let mut violations = Vec::new();
    for own in &crates {
        // `common` may name no domain; a domain may name only `common`.
        let others: Vec<&String> = crates
            .iter()
            .filter(|c| *c != own && *c != COMMON)
            .collect();
        let manifest = fs::read_to_string(root.join(own).join("Cargo.toml")).unwrap();
        for other in &others {
            let package = format!("karmada-controllers-{other}");
            if manifest.contains(&package) {
                violations.push(format!("{own}/Cargo.toml depends on {package}"));
            }
        }
        let needles: Vec<String> = others
            .iter()
            .map(|other| format!("karmada_controllers_{other}"))
            .collect();
        violations.extend(lines_naming(&root.join(own).join("src"), &needles));
    }
    assert!(
        violations.is_empty(),
        "domain crates depend on each other (move what they share to pkg/controllers/common):\n{}",
        violations.join("\n")
    );
}
