//! Finding the test binaries: `$KUBEBUILDER_ASSETS` first (the envtest convention), then the cache folder
//! that `hack/build-test-binaries.sh` fills from the official Go modules.

use std::path::PathBuf;

use crate::Error;

/// The pinned versions, shared with the hack script.
const VERSIONS: &str = include_str!("../../../hack/test-binaries.env");

fn version(key: &str) -> &'static str {
    VERSIONS
        .lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map_or("unknown", |(_, v)| v.trim())
}

/// The Kubernetes version the test binaries are built from (e.g. `v1.37.2`).
pub fn kubernetes_version() -> &'static str {
    version("KUBERNETES_VERSION")
}

/// The folder `hack/build-test-binaries.sh` writes to.
pub fn cache_dir() -> PathBuf {
    let base = std::env::var_os("KARMADA_RS_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("karmada-rs")))
        .or_else(|| std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/karmada-rs")))
        .unwrap_or_else(|| PathBuf::from("/tmp/karmada-rs-cache"));
    base.join("test-binaries").join(format!(
        "k8s-{}_etcd-{}_kwok-{}",
        version("KUBERNETES_VERSION"),
        version("ETCD_VERSION"),
        version("KWOK_VERSION")
    ))
}

/// Locates the executable `name`, or says where it was looked for and how to build it.
pub fn locate(name: &str) -> Result<PathBuf, Error> {
    let mut searched = Vec::new();
    if let Some(assets) = std::env::var_os("KUBEBUILDER_ASSETS") {
        let p = PathBuf::from(assets).join(name);
        if p.is_file() {
            return Ok(p);
        }
        searched.push(p);
    }
    let p = cache_dir().join(name);
    if p.is_file() {
        return Ok(p);
    }
    searched.push(p);
    Err(Error::MissingBinary {
        name: name.to_string(),
        searched: searched
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// The kwok Stage configs (copied from the pinned kwok module by the hack script), sorted by name.
pub fn kwok_stages() -> Result<Vec<PathBuf>, Error> {
    config_files("kwok-stages", "kwok-stages (kwok's Stage configs)")
}

/// kwok's metrics emulation configs (its kubelet resource-metrics `Metric` and the `ClusterResourceUsage`
/// reading each pod's usage from annotations; copied by the hack script), sorted by name.
pub fn kwok_metrics() -> Result<Vec<PathBuf>, Error> {
    config_files(
        "kwok-metrics",
        "kwok-metrics (kwok's Metric and ResourceUsage configs)",
    )
}

/// Cluster API's CRDs (its `Cluster`; copied from the pinned sigs.k8s.io/cluster-api module by the hack
/// script), sorted by name.
pub fn cluster_api_crds() -> Result<Vec<PathBuf>, Error> {
    config_files(
        "cluster-api-crds",
        "cluster-api-crds (Cluster API's Cluster CRD)",
    )
}

/// The `.yaml` files of the folder `folder` in `$KUBEBUILDER_ASSETS` or else the cache, sorted by name.
fn config_files(folder: &str, what: &str) -> Result<Vec<PathBuf>, Error> {
    let mut dirs = Vec::new();
    if let Some(assets) = std::env::var_os("KUBEBUILDER_ASSETS") {
        dirs.push(PathBuf::from(assets).join(folder));
    }
    dirs.push(cache_dir().join(folder));
    for dir in &dirs {
        if let Ok(entries) = std::fs::read_dir(dir) {
            let mut files: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
                .collect();
            if !files.is_empty() {
                files.sort();
                return Ok(files);
            }
        }
    }
    Err(Error::MissingBinary {
        name: what.to_string(),
        searched: dirs
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// The Karmada version whose Go controller-manager, scheduler and webhook the benchmark runs as a peer
/// (e.g. `v1.16.0`).
pub fn karmada_version() -> &'static str {
    version("KARMADA_VERSION")
}

/// The folder `hack/build-test-binaries.sh karmada` (`make karmada-binaries`) writes Karmada's Go
/// binaries (controller-manager, scheduler, webhook, aggregated API server) and Karmada's own CRDs
/// (`crds/`) to, beside the other test binaries.
pub fn karmada_dir() -> PathBuf {
    cache_dir().with_file_name(format!("karmada-{}", karmada_version()))
}

/// Locates Karmada's Go executable `name` (`karmada-controller-manager`, `karmada-scheduler`,
/// `karmada-webhook`, `karmada-aggregated-apiserver`); the error says to run `make karmada-binaries`.
/// Never found in `$KUBEBUILDER_ASSETS`: our own controller-manager has the same name.
pub fn locate_karmada(name: &str) -> Result<PathBuf, Error> {
    let p = karmada_dir().join(name);
    if p.is_file() {
        return Ok(p);
    }
    Err(Error::MissingKarmadaBinary {
        name: format!("{name} ({})", karmada_version()),
        searched: p.display().to_string(),
    })
}
