//! Karmada flags and feature gates that karmada-rs accepts, so existing manifests keep working, but
//! does not act on yet. They must not pretend: one startup warning names those the user changed from
//! their defaults, `--help` marks each flag "no effect", and docs/compatibility.md's "Accepted, no
//! effect yet" table lists them all (unit tests keep the three in step with these lists).

use clap::ArgMatches;
use clap::parser::ValueSource;
use lariat::runtime::GoDuration;
use lariat::runtime::features::FeatureGates;

use karmada_process::flags::parse_go_bool;

/// Flags (long names) that are parsed and validated but change nothing.
pub const FLAGS: &[&str] = &[
    // klog / component-base logging: logs always go unbuffered to stderr (text) or stdout (JSON).
    "add-dir-header",
    "alsologtostderr",
    "log-backtrace-at",
    "log-dir",
    "log-file",
    "log-file-max-size",
    "log-flush-frequency",
    "log-json-info-buffer-size",
    "log-json-split-stream",
    "log-text-info-buffer-size",
    "log-text-split-stream",
    "logtostderr",
    "one-output",
    "skip-headers",
    "skip-log-headers",
    "stderrthreshold",
    "vmodule",
    // Cache resyncs.
    "resync-period",
    // FederatedHPA: accepted by Karmada too, and used by none of its controllers.
    "horizontal-pod-autoscaler-upscale-delay",
    "horizontal-pod-autoscaler-downscale-delay",
];

/// Feature gates that are accepted (and reported by their value) but change nothing.
pub const GATES: &[&str] = &[
    "LoggingAlphaOptions",
    "LoggingBetaOptions",
    "ContextualLogging",
    karmada_process::features::CONTROLLER_PRIORITY_QUEUE,
    "SchedulingOvercommitProtection",
];

/// The no-effect settings the user changed: each flag of [FLAGS] given on the command line with a
/// value other than its default (`--flag=value`), then each gate of [GATES] whose value differs from
/// its default (`Gate=value`). Flags left at their defaults are not listed: Karmada's manifests pass
/// many flags with default values, and those ask for nothing karmada-rs lacks beyond its defaults.
pub fn changed(command: &clap::Command, matches: &ArgMatches, gates: &FeatureGates) -> Vec<String> {
    let mut out = Vec::new();
    for long in FLAGS {
        let Some(arg) = command.get_arguments().find(|a| a.get_long() == Some(long)) else {
            continue;
        };
        let id = arg.get_id().as_str();
        if matches.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let Ok(Some(value)) = matches.try_get_one::<String>(id) else {
            continue;
        };
        let default = arg
            .get_default_values()
            .first()
            .map(|d| d.to_string_lossy().into_owned());
        if default.is_none_or(|d| !same_value(value, &d)) {
            out.push(format!("--{long}={value}"));
        }
    }
    for spec in gates.specs().iter().filter(|s| GATES.contains(&s.name)) {
        let value = gates.enabled(spec.name);
        if value != spec.default {
            out.push(format!("{}={value}", spec.name));
        }
    }
    out
}

/// The one startup warning about [changed] settings, or `None` when there are none.
pub fn warning(changed: &[String]) -> Option<String> {
    (!changed.is_empty()).then(|| {
        format!(
            "accepted for compatibility but not acted on yet, so these settings change nothing: {} \
             (docs/compatibility.md's \"Accepted, no effect yet\" table lists every such flag, \
             feature gate and controller)",
            changed.join(", ")
        )
    })
}

/// Whether two spellings of a flag value mean the same (`0` and `0s`, `0.50` and `0.5`, `t` and
/// `true`).
fn same_value(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    if let (Ok(x), Ok(y)) = (GoDuration::parse(a), GoDuration::parse(b)) {
        return x == y;
    }
    if let (Ok(x), Ok(y)) = (a.parse::<f64>(), b.parse::<f64>()) {
        return x == y;
    }
    matches!((parse_go_bool(a), parse_go_bool(b)), (Some(x), Some(y)) if x == y)
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches};

    use super::*;
    use crate::options::{Cli, normalize_args};
    use karmada_process::features::KARMADA_FEATURES;

    fn changed_for(args: &[&str]) -> Vec<String> {
        let mut all = vec!["karmada-controller-manager".to_string()];
        all.extend(args.iter().map(ToString::to_string));
        let matches = Cli::command()
            .try_get_matches_from(normalize_args(all))
            .expect("flags parse");
        let cli = Cli::from_arg_matches(&matches).expect("cli");
        let mut gates = FeatureGates::new(KARMADA_FEATURES);
        gates
            .set_from_str(&cli.generic.shared.feature_gates)
            .expect("gates parse");
        changed(&Cli::command(), &matches, &gates)
    }

    #[test]
    fn lists_only_settings_changed_from_their_defaults() {
        assert!(changed_for(&[]).is_empty());
        // Given, but at the default (as Karmada's manifests often do): nothing to say.
        assert!(
            changed_for(&[
                "--enable-taint-manager",
                "--resync-period=0",
                "--resource-eviction-rate=0.50",
                "--graceful-eviction-timeout=10m",
                "--feature-gates=PropagateDeps=true,Failover=false",
                "--cluster-status-update-frequency=20s",
            ])
            .is_empty()
        );
        let c = changed_for(&[
            "--resync-period=1m",
            "--enable-taint-manager=false",
            "--log_dir=/tmp",
            "--horizontal-pod-autoscaler-upscale-delay=1m",
            "--kube-api-qps=100",
            "--feature-gates=Failover=true,SchedulingOvercommitProtection=true,PropagationPolicyPreemption=true",
        ]);
        assert_eq!(
            c,
            vec![
                "--log-dir=/tmp",
                "--resync-period=1m",
                "--horizontal-pod-autoscaler-upscale-delay=1m",
                "SchedulingOvercommitProtection=true",
            ]
        );
        // AllAlpha turns on no-effect alpha gates too.
        let c = changed_for(&["--feature-gates=AllAlpha=true"]);
        assert!(
            c.contains(&"SchedulingOvercommitProtection=true".to_string()),
            "{c:?}"
        );
        assert!(
            !c.iter().any(|s| s.starts_with("WorkloadAffinity")),
            "{c:?}"
        );
    }

    #[test]
    fn one_warning_naming_each_changed_setting() {
        assert_eq!(warning(&[]), None);
        let w = warning(&["--resync-period=1m".into(), "Failover=true".into()]).expect("warning");
        assert!(w.contains("--resync-period=1m, Failover=true"), "{w}");
        assert!(w.contains("Accepted, no effect yet"), "{w}");
    }

    #[test]
    fn every_listed_flag_and_gate_exists_and_help_says_so() {
        let command = Cli::command();
        for long in FLAGS {
            let arg = command
                .get_arguments()
                .find(|a| a.get_long() == Some(long))
                .unwrap_or_else(|| panic!("--{long} is not a flag"));
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            assert!(
                help.contains("no effect"),
                "--{long}'s help does not say it has no effect: {help}"
            );
        }
        for gate in GATES {
            assert!(
                KARMADA_FEATURES.iter().any(|s| s.name == *gate),
                "{gate} is not a gate"
            );
        }
    }

    /// Every gate is read by some code (by the constant it reads it with) or listed as having no
    /// effect, never both: an accepted gate is never silently ignored.
    #[test]
    fn every_gate_is_read_or_listed_as_no_effect() {
        use std::collections::BTreeSet;
        let read: BTreeSet<&str> = karmada_controllers::READ_GATES
            .iter()
            .copied()
            // The controller-manager itself: which controllers run.
            .chain([karmada_process::features::PROPAGATE_DEPS])
            .collect();
        let listed: BTreeSet<&str> = GATES.iter().copied().collect();
        assert_eq!(
            read.intersection(&listed).collect::<Vec<_>>(),
            Vec::<&&str>::new(),
            "gates read by code and listed as having no effect"
        );
        let accepted: BTreeSet<&str> = KARMADA_FEATURES.iter().map(|s| s.name).collect();
        let known: BTreeSet<&str> = read.union(&listed).copied().collect();
        assert_eq!(
            accepted, known,
            "every accepted gate is read by code (karmada_controllers::READ_GATES) or listed in GATES"
        );
    }

    /// docs/compatibility.md's "Accepted, no effect yet" section names exactly these flags, gates
    /// and the controllers karmada-rs does not implement.
    #[test]
    fn compatibility_table_matches_the_lists() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/compatibility.md"),
        )
        .expect("read docs/compatibility.md");
        let start = doc
            .find("\n## Accepted, no effect yet\n")
            .expect("docs/compatibility.md has an \"Accepted, no effect yet\" section")
            + 1;
        let section = &doc[start..];
        let section = &section[..section[4..].find("\n#").map_or(section.len(), |i| i + 4)];
        let mut expected: Vec<String> = FLAGS.iter().map(|f| format!("--{f}")).collect();
        expected.extend(GATES.iter().map(ToString::to_string));
        expected.extend(
            crate::controllers::not_implemented()
                .iter()
                .map(ToString::to_string),
        );
        expected.sort();
        let mut named: Vec<String> = section
            .lines()
            .filter(|l| l.starts_with('|') && !l.starts_with("|---"))
            .skip(1)
            .filter_map(|l| l.split('|').nth(1))
            .flat_map(|cell| {
                cell.split('`')
                    .skip(1)
                    .step_by(2)
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect();
        named.sort();
        assert_eq!(
            named, expected,
            "docs/compatibility.md's \"Accepted, no effect yet\" table (first column, in backticks) \
             must name exactly the flags and gates in no_effect.rs and the controllers not implemented"
        );
    }
}
