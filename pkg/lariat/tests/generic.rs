//! lariat is a generic controller framework: no file of the crate (code, defaults, docs, tests,
//! benches, manifest) names the product built on it. Product values (label selectors, User-Agents,
//! log targets) are passed in by the callers.

use std::fs;
use std::path::{Path, PathBuf};

/// The product name, spelled in two halves so this file does not match itself.
fn product() -> String {
    ["kar", "mada"].concat()
}

/// Every file under `dir`, skipping build output.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn the_crate_names_no_product() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    files(root, &mut all);
    assert!(
        all.iter().any(|p| p.ends_with("src/lib.rs")),
        "walked the wrong directory: {}",
        root.display()
    );
    let needle = product();
    let mut hits = Vec::new();
    for path in all {
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if line.to_lowercase().contains(&needle) {
                let rel = path.strip_prefix(root).unwrap_or(&path);
                hits.push(format!("{}:{}: {}", rel.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "lariat must not name {needle:?} (pass product values in from the caller):\n{}",
        hits.join("\n")
    );
}
