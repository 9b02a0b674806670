//! Feature gates with Kubernetes' `--feature-gates` syntax (`A=true,B=false`, `AllAlpha`, `AllBeta`).
//!
//! The list of known gates belongs to the binary; this module only knows how to parse and query them.

use std::collections::BTreeMap;
use std::fmt;

/// Maturity of a feature, shown in `--help` and used by `AllAlpha` / `AllBeta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreRelease {
    /// Off by default, may change or go away.
    Alpha,
    /// Usually on by default.
    Beta,
    /// Generally available.
    Ga,
    /// Going away.
    Deprecated,
}

impl fmt::Display for PreRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PreRelease::Alpha => "ALPHA",
            PreRelease::Beta => "BETA",
            PreRelease::Ga => "GA",
            PreRelease::Deprecated => "DEPRECATED",
        })
    }
}

/// One known feature gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureSpec {
    /// The gate's name as written on the command line.
    pub name: &'static str,
    /// Whether it is on when not mentioned.
    pub default: bool,
    /// Its maturity.
    pub pre_release: PreRelease,
    /// If true, it cannot be set to anything but its default.
    pub lock_to_default: bool,
}

/// A problem in a `--feature-gates` value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    /// The name is not a known gate.
    #[error("unrecognized feature gate: {0}")]
    Unrecognized(String),
    /// `Name` without `=value`.
    #[error("missing bool value for {0}")]
    MissingValue(String),
    /// The value is not a boolean.
    #[error("invalid value of {name}={value}, err: expected true or false")]
    InvalidValue {
        /// Gate name.
        name: String,
        /// What was given.
        value: String,
    },
    /// The gate is locked to its default.
    #[error("cannot set feature gate {name} to {value}, feature is locked to {locked}")]
    Locked {
        /// Gate name.
        name: String,
        /// What was asked.
        value: bool,
        /// Its only allowed value.
        locked: bool,
    },
}

/// The set of known gates and their current values.
#[derive(Debug, Clone)]
pub struct FeatureGates {
    specs: &'static [FeatureSpec],
    overrides: BTreeMap<&'static str, bool>,
}

const ALL_ALPHA: &str = "AllAlpha";
const ALL_BETA: &str = "AllBeta";

impl FeatureGates {
    /// All gates at their defaults.
    pub fn new(specs: &'static [FeatureSpec]) -> Self {
        FeatureGates {
            specs,
            overrides: BTreeMap::new(),
        }
    }

    /// Applies a `--feature-gates` value. Every problem is reported; valid entries are applied even
    /// when others are not.
    pub fn set_from_str(&mut self, value: &str) -> Result<(), Vec<FeatureGateError>> {
        let mut errors = Vec::new();
        let mut all_alpha = None;
        let mut all_beta = None;
        for part in value.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let Some((name, raw)) = part.split_once('=') else {
                errors.push(FeatureGateError::MissingValue(part.to_string()));
                continue;
            };
            let (name, raw) = (name.trim(), raw.trim());
            let Some(enabled) = parse_bool(raw) else {
                errors.push(FeatureGateError::InvalidValue {
                    name: name.to_string(),
                    value: raw.to_string(),
                });
                continue;
            };
            match name {
                ALL_ALPHA => all_alpha = Some(enabled),
                ALL_BETA => all_beta = Some(enabled),
                _ => match self.specs.iter().find(|s| s.name == name) {
                    None => errors.push(FeatureGateError::Unrecognized(name.to_string())),
                    Some(spec) if spec.lock_to_default && enabled != spec.default => {
                        errors.push(FeatureGateError::Locked {
                            name: name.to_string(),
                            value: enabled,
                            locked: spec.default,
                        });
                    }
                    Some(spec) => {
                        self.overrides.insert(spec.name, enabled);
                    }
                },
            }
        }
        // AllAlpha / AllBeta apply to every gate of that maturity not named explicitly.
        for (flag, maturity) in [(all_alpha, PreRelease::Alpha), (all_beta, PreRelease::Beta)] {
            if let Some(enabled) = flag {
                for spec in self.specs.iter().filter(|s| s.pre_release == maturity) {
                    if !spec.lock_to_default {
                        self.overrides.entry(spec.name).or_insert(enabled);
                    }
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// Whether `name` is on. Unknown names are off.
    pub fn enabled(&self, name: &str) -> bool {
        match self.overrides.get(name) {
            Some(v) => *v,
            None => self
                .specs
                .iter()
                .find(|s| s.name == name)
                .is_some_and(|s| s.default),
        }
    }

    /// The known gates.
    pub fn specs(&self) -> &'static [FeatureSpec] {
        self.specs
    }

    /// One help line per gate, like Kubernetes' `--feature-gates` usage
    /// (`Name=true|false (BETA - default=true)`), sorted, with `AllAlpha` and `AllBeta` first.
    pub fn help_lines(specs: &[FeatureSpec]) -> Vec<String> {
        let mut lines = vec![
            format!("{ALL_ALPHA}=true|false (ALPHA - default=false)"),
            format!("{ALL_BETA}=true|false (BETA - default=false)"),
        ];
        let mut known: Vec<_> = specs
            .iter()
            .filter(|s| s.pre_release != PreRelease::Ga)
            .map(|s| {
                format!(
                    "{}=true|false ({} - default={})",
                    s.name, s.pre_release, s.default
                )
            })
            .collect();
        known.sort();
        lines.extend(known);
        lines
    }
}

fn parse_bool(s: &str) -> Option<bool> {
    // Go's strconv.ParseBool.
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static SPECS: &[FeatureSpec] = &[
        FeatureSpec {
            name: "Alpha1",
            default: false,
            pre_release: PreRelease::Alpha,
            lock_to_default: false,
        },
        FeatureSpec {
            name: "Beta1",
            default: true,
            pre_release: PreRelease::Beta,
            lock_to_default: false,
        },
        FeatureSpec {
            name: "Locked",
            default: true,
            pre_release: PreRelease::Ga,
            lock_to_default: true,
        },
    ];

    #[test]
    fn defaults_and_overrides() {
        let mut g = FeatureGates::new(SPECS);
        assert!(!g.enabled("Alpha1"));
        assert!(g.enabled("Beta1"));
        g.set_from_str("Alpha1=true, Beta1=false").unwrap();
        assert!(g.enabled("Alpha1"));
        assert!(!g.enabled("Beta1"));
        assert!(!g.enabled("Nope"));
    }

    #[test]
    fn all_alpha_does_not_override_explicit() {
        let mut g = FeatureGates::new(SPECS);
        g.set_from_str("AllAlpha=true,AllBeta=false,Beta1=true")
            .unwrap();
        assert!(g.enabled("Alpha1"));
        assert!(g.enabled("Beta1"));
    }

    #[test]
    fn reports_every_problem() {
        let mut g = FeatureGates::new(SPECS);
        let errs = g
            .set_from_str("Nope=true,Alpha1,Beta1=maybe,Locked=false")
            .unwrap_err();
        assert_eq!(errs.len(), 4);
        assert_eq!(errs[0].to_string(), "unrecognized feature gate: Nope");
        assert_eq!(errs[1].to_string(), "missing bool value for Alpha1");
    }
}
