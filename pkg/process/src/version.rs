//! Build metadata: the `version` subcommand and the `karmada_build_info` metric.

use std::fmt;

use prometheus::{IntGauge, Opts};

/// What this binary was built from (captured by `build.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Info {
    /// `git describe` or `v<crate version>`.
    pub git_version: &'static str,
    /// Full commit hash.
    pub git_commit: &'static str,
    /// Short commit hash.
    pub git_short_commit: &'static str,
    /// `clean`, `dirty` or `unknown`.
    pub git_tree_state: &'static str,
    /// ISO 8601 UTC build time.
    pub build_date: &'static str,
    /// `rustc --version`.
    pub rust_version: &'static str,
    /// Always `rustc`.
    pub compiler: &'static str,
    /// `os/arch` in Go's spelling (`linux/amd64`).
    pub platform: &'static str,
}

/// This binary's build info.
pub const INFO: Info = Info {
    git_version: env!("KCM_GIT_VERSION"),
    git_commit: env!("KCM_GIT_COMMIT"),
    git_short_commit: env!("KCM_GIT_SHORT_COMMIT"),
    git_tree_state: env!("KCM_GIT_TREE_STATE"),
    build_date: env!("KCM_BUILD_DATE"),
    rust_version: env!("KCM_RUSTC_VERSION"),
    compiler: "rustc",
    platform: env!("KCM_PLATFORM"),
};

/// Same shape as Karmada's `version.Info` print-out.
impl fmt::Display for Info {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "version.Info{{GitVersion:{:?}, GitCommit:{:?}, GitShortCommit:{:?}, GitTreeState:{:?}, \
             BuildDate:{:?}, RustVersion:{:?}, Compiler:{:?}, Platform:{:?}}}",
            self.git_version,
            self.git_commit,
            self.git_short_commit,
            self.git_tree_state,
            self.build_date,
            self.rust_version,
            self.compiler,
            self.platform
        )
    }
}

/// Registers `karmada_build_info` (value 1, Karmada's label names; `go_version` carries the rustc
/// version so existing dashboards keep their label set).
pub fn register_build_info() -> Result<(), prometheus::Error> {
    let opts = Opts::new(
        "karmada_build_info",
        "Build metadata of this Karmada component, as labels on a constant 1.",
    )
    .const_label("git_version", INFO.git_version)
    .const_label("git_commit", INFO.git_commit)
    .const_label("git_short_commit", INFO.git_short_commit)
    .const_label("git_tree_state", INFO.git_tree_state)
    .const_label("build_date", INFO.build_date)
    .const_label("go_version", INFO.rust_version)
    .const_label("compiler", INFO.compiler)
    .const_label("platform", INFO.platform);
    let gauge = IntGauge::with_opts(opts)?;
    gauge.set(1);
    lariat::metrics::registry().register(Box::new(gauge))
}
