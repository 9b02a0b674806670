//! `karmadactl version`: Karmada's `version.Info` print-out, stamped by the shared build script
//! (`pkg/process/build.rs`, included by this crate's `build.rs`).

use serde::Serialize;

use crate::cli::{VersionArgs, VersionOutput};

/// What this binary was built from, with Karmada's field names (`goVersion` carries the rustc
/// version, so scripts reading Karmada's fields keep working).
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

impl std::fmt::Display for Info {
    /// Go's `%#v` of Karmada's `version.Info`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
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

/// What `karmadactl version` prints.
pub fn run(args: &VersionArgs) -> anyhow::Result<String> {
    Ok(match args.output {
        None => format!("karmadactl version: {INFO}"),
        Some(VersionOutput::Json) => serde_json::to_string_pretty(&INFO)?,
        Some(VersionOutput::Yaml) => crate::yaml::to_string(&serde_json::to_value(INFO)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_has_karmadas_shape() {
        let text = run(&VersionArgs { output: None }).unwrap();
        assert!(
            text.starts_with("karmadactl version: version.Info{GitVersion:\""),
            "{text}"
        );
        for field in [
            "GitCommit:\"",
            "GitShortCommit:\"",
            "GitTreeState:\"",
            "BuildDate:\"",
            "GoVersion:\"rustc ",
            "Compiler:\"rustc\"",
            "Platform:\"",
        ] {
            assert!(text.contains(field), "{field} missing: {text}");
        }
        assert!(text.ends_with("\"}"), "{text}");
    }

    #[test]
    fn json_and_yaml_use_karmadas_keys() {
        let json: serde_json::Value = serde_json::from_str(
            &run(&VersionArgs {
                output: Some(VersionOutput::Json),
            })
            .unwrap(),
        )
        .unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
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
        let yaml = run(&VersionArgs {
            output: Some(VersionOutput::Yaml),
        })
        .unwrap();
        assert!(yaml.contains("\ncompiler: rustc\n"), "{yaml}");
        assert!(yaml.starts_with("buildDate: "), "{yaml}");
    }
}
