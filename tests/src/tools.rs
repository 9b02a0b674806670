//! The `helm` and `kubectl` binaries the tests run: `$HELM` / `$KUBECTL`, else the cache folder
//! `hack/install-helm.sh` (`make test-tools`) fills with the versions it pins, and the two ways the
//! tests use them outside a chart test: rendering a chart and applying manifests.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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

/// Runs `program args` with `input` on stdin and `$KUBECONFIG` unset; stdout, or the command and
/// its stderr.
fn run(program: &Path, args: &[&str], input: &str) -> Result<String, String> {
    let mut child = Command::new(program)
        .args(args)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.as_bytes())
            .map_err(|e| format!("writing to {}: {e}", program.display()))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("waiting for {}: {e}", program.display()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{} {} failed: {}",
            program.display(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// `helm template <release> <chart> --namespace <namespace> --set <each of sets>`: the rendered
/// manifests. helm's cache and configuration go to a temporary folder, never the user's.
pub fn helm_template(
    chart: &Path,
    release: &str,
    namespace: &str,
    sets: &[&str],
) -> Result<String, String> {
    let args: Vec<&str> = sets.iter().flat_map(|s| ["--set", s]).collect();
    helm_template_args(chart, release, namespace, &args)
}

/// [`helm_template`] with any further arguments of `helm template` (`--set-file key=path`, `-f
/// values.yaml`), as a user passes them.
pub fn helm_template_args(
    chart: &Path,
    release: &str,
    namespace: &str,
    extra: &[&str],
) -> Result<String, String> {
    let home = std::env::temp_dir().join(format!("karmada-rs-helm-{}", std::process::id()));
    let chart = chart.display().to_string();
    let mut args = vec!["template", release, &chart, "--namespace", namespace];
    args.extend(extra);
    let mut cmd_args: Vec<String> = args.iter().map(ToString::to_string).collect();
    for (flag, sub) in [
        ("--repository-cache", "cache"),
        ("--repository-config", "repositories.yaml"),
    ] {
        cmd_args.push(flag.to_owned());
        cmd_args.push(home.join(sub).display().to_string());
    }
    let refs: Vec<&str> = cmd_args.iter().map(String::as_str).collect();
    run(&tool("helm"), &refs, "")
}

/// `kubectl apply -f -` of `manifests` with `kubeconfig`.
pub fn kubectl_apply(kubeconfig: &Path, manifests: &str) -> Result<String, String> {
    let kc = kubeconfig.display().to_string();
    run(
        &tool("kubectl"),
        &["--kubeconfig", &kc, "apply", "-f", "-"],
        manifests,
    )
}
