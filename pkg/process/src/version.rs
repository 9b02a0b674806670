//! Build metadata, one formatter for every binary: the `version` subcommand of
//! `karmada-controller-manager`, `karmada-agent` and `karmadactl` ([`line`]), and the
//! `karmada_build_info` metric (`register_build_info`, with the `process` feature).

use std::fmt;

use serde::Serialize;

/// What this binary was built from (captured by `build.rs`), with Karmada's field names:
/// `goVersion` carries the rustc version, so scripts reading Karmada's fields keep working.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Info {
    /// `git describe` or `v<crate version>`.
    pub git_version: &'static str,
    /// Full commit hash.
    pub git_commit: &'static str,
    /// Short commit hash.
    pub git_short_commit: &'static str,
    /// `clean`, `dirty` or `unknown`.
    pub git_tree_state: &'static str,
    /// ISO 8601 UTC build date (the commit's date, or `SOURCE_DATE_EPOCH`).
    pub build_date: &'static str,
    /// `rustc --version` of the compiler that built this binary.
    pub go_version: &'static str,
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
    go_version: env!("KCM_RUSTC_VERSION"),
    compiler: "rustc",
    platform: env!("KCM_PLATFORM"),
};

/// Go's `%#v` of Karmada's `version.Info`.
impl fmt::Display for Info {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "version.Info{{GitVersion:{:?}, GitCommit:{:?}, GitShortCommit:{:?}, GitTreeState:{:?}, \
             BuildDate:{:?}, GoVersion:{:?}, Compiler:{:?}, Platform:{:?}}}",
            self.git_version,
            self.git_commit,
            self.git_short_commit,
            self.git_tree_state,
            self.build_date,
            self.go_version,
            self.compiler,
            self.platform
        )
    }
}

/// What `<command> version` prints, as Karmada's binaries do: `<command> version: version.Info{…}`.
pub fn line(command: &str) -> String {
    format!("{command} version: {INFO}")
}

/// Registers `karmada_build_info` (value 1, Karmada's label names; `go_version` carries the rustc
/// version so existing dashboards keep their label set).
#[cfg(feature = "process")]
pub fn register_build_info() -> Result<(), prometheus::Error> {
    use prometheus::{IntGauge, Opts};

    let opts = Opts::new(
        "karmada_build_info",
        "Build metadata of this Karmada component, as labels on a constant 1.",
    )
    .const_label("git_version", INFO.git_version)
    .const_label("git_commit", INFO.git_commit)
    .const_label("git_short_commit", INFO.git_short_commit)
    .const_label("git_tree_state", INFO.git_tree_state)
    .const_label("build_date", INFO.build_date)
    .const_label("go_version", INFO.go_version)
    .const_label("compiler", INFO.compiler)
    .const_label("platform", INFO.platform);
    let gauge = IntGauge::with_opts(opts)?;
    gauge.set(1);
    lariat::metrics::registry().register(Box::new(gauge))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_has_karmadas_shape() {
        let text = line("karmada-agent");
        assert!(
            text.starts_with("karmada-agent version: version.Info{GitVersion:\""),
            "{text}"
        );
        let mut at = 0;
        for field in [
            "GitCommit:\"",
            "GitShortCommit:\"",
            "GitTreeState:\"",
            "BuildDate:\"",
            "GoVersion:\"rustc ",
            "Compiler:\"rustc\"",
            "Platform:\"",
        ] {
            let found = text[at..].find(field);
            assert!(found.is_some(), "{field} missing or out of order: {text}");
            at += found.unwrap_or_default();
        }
        assert!(text.ends_with("\"}"), "{text}");
    }

    #[test]
    fn json_uses_karmadas_keys() {
        let json = serde_json::to_value(INFO).unwrap();
        let mut keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "buildDate",
                "compiler",
                "gitCommit",
                "gitShortCommit",
                "gitTreeState",
                "gitVersion",
                "goVersion",
                "platform"
            ]
        );
    }
}
