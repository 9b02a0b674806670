//! Renders the CRDs of `karmada-apis` as YAML files and compares them with a directory, so the
//! generated `crds/` can be written (`cargo run -p crdgen`) and checked (`--check`, and the test).

#![warn(missing_docs)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// First lines of every generated file.
const HEADER: &str =
    "# Generated from pkg/apis by `cargo run -p crdgen` (make crds). Do not edit.\n---\n";

/// Group prefixes of the files this generator owns in the output directory.
const OWNED_PREFIXES: &[&str] = &[
    "cluster.karmada.io_",
    "policy.karmada.io_",
    "work.karmada.io_",
];

/// The workspace's `crds/` directory.
pub fn default_out_dir() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    // cmd/crdgen → workspace root.
    manifest_dir
        .ancestors()
        .nth(2)
        .unwrap_or(manifest_dir)
        .join("crds")
}

/// Every CRD as (file name, YAML text), ordered by file name.
pub fn render() -> anyhow::Result<BTreeMap<String, String>> {
    let mut files = BTreeMap::new();
    for crd in karmada_apis::crds::all() {
        let name = karmada_apis::crds::file_name(&crd);
        let yaml = serde_saphyr::to_string(&crd).with_context(|| format!("rendering {name}"))?;
        files.insert(name, format!("{HEADER}{yaml}"));
    }
    Ok(files)
}

/// How a directory differs from the rendered CRDs.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Drift {
    /// Files that should exist but don't.
    pub missing: Vec<String>,
    /// Files whose content differs.
    pub changed: Vec<String>,
    /// Generated-looking files (owned group prefix) that the types no longer produce.
    pub extra: Vec<String>,
}

impl Drift {
    /// Whether the directory is up to date.
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.changed.is_empty() && self.extra.is_empty()
    }
}

impl std::fmt::Display for Drift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (what, files) in [
            ("missing", &self.missing),
            ("out of date", &self.changed),
            ("no longer generated", &self.extra),
        ] {
            for file in files {
                writeln!(f, "{file}: {what}")?;
            }
        }
        Ok(())
    }
}

/// Generated files present in `dir` (those with an owned group prefix).
fn owned_files(dir: &Path) -> anyhow::Result<Vec<String>> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if std::path::Path::new(&name)
            .extension()
            .is_some_and(|e| e == "yaml")
            && OWNED_PREFIXES.iter().any(|p| name.starts_with(p))
        {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Compares `dir` with the rendered CRDs.
pub fn check(dir: &Path) -> anyhow::Result<Drift> {
    let files = render()?;
    let mut drift = Drift::default();
    for (name, text) in &files {
        let path = dir.join(name);
        match std::fs::read_to_string(&path) {
            Ok(current) if current == *text => {}
            Ok(_) => drift.changed.push(name.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => drift.missing.push(name.clone()),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }
    drift.extra = owned_files(dir)?
        .into_iter()
        .filter(|name| !files.contains_key(name))
        .collect();
    Ok(drift)
}

/// Writes the rendered CRDs into `dir` (creating it) and removes generated files the types no longer
/// produce. Returns the names of the files written.
pub fn write(dir: &Path) -> anyhow::Result<Vec<String>> {
    let files = render()?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for stale in owned_files(dir)?
        .into_iter()
        .filter(|n| !files.contains_key(n))
    {
        let path = dir.join(&stale);
        std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    }
    let mut written = Vec::new();
    for (name, text) in files {
        let path = dir.join(&name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(name);
    }
    Ok(written)
}
