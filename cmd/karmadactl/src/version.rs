//! `karmadactl version`: the same `version.Info` line and stamp as the controller-manager and the
//! agent (`karmada_process::version`, stamped by `pkg/process/build.rs`), plus `-o json|yaml`.

use karmada_process::version::{INFO, line};

use crate::cli::{VersionArgs, VersionOutput};

/// What `karmadactl version` prints.
pub fn run(args: &VersionArgs) -> anyhow::Result<String> {
    Ok(match args.output {
        None => line("karmadactl"),
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
