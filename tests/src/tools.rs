//! The `helm` and `kubectl` binaries the tests run: `$HELM` / `$KUBECTL`, else the cache folder
//! `hack/install-helm.sh` (`make test-tools`) fills with the versions it pins.

use std::path::PathBuf;

const INSTALL_SCRIPT: &str = include_str!("../../hack/install-helm.sh");

/// A `KEY=value` pinned in `hack/install-helm.sh`.
///
/// # Panics
/// If the script does not set `key`.
pub fn pinned(key: &str) -> &'static str {
    INSTALL_SCRIPT
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("{key} not found in hack/install-helm.sh"))
}

/// `helm` or `kubectl`: `$HELM`/`$KUBECTL`, else the cache folder hack/install-helm.sh fills.
///
/// # Panics
/// If the binary is missing, naming the command that installs it.
pub fn tool(name: &str) -> PathBuf {
    let var = name.to_uppercase();
    if let Some(p) = std::env::var_os(&var) {
        return PathBuf::from(p);
    }
    let base = std::env::var_os("KARMADA_RS_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("karmada-rs")))
        .or_else(|| std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/karmada-rs")))
        .expect("HOME is set");
    let p = base.join("tools").join(format!(
        "helm-{}_kubectl-{}",
        pinned("HELM_VERSION"),
        pinned("KUBECTL_VERSION")
    ));
    let p = p.join(name);
    assert!(
        p.is_file(),
        "{name} is not installed at {}: run `make test-tools` (hack/install-helm.sh), or set {var} to a {name} binary",
        p.display()
    );
    p
}
