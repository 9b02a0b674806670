//! Which kinds and namespaces the detector never propagates: Karmada's default skip list plus
//! `--skipped-propagating-apis`, the reserved namespaces and `--skipped-propagating-namespaces`.

use std::collections::HashSet;

use karmada_apis::names::is_reserved_namespace;
use regex::Regex;

/// API groups that are always skipped: Karmada's own groups and `events.k8s.io`.
const DEFAULT_SKIPPED_GROUPS: &[&str] = &[
    "cluster.karmada.io",
    "policy.karmada.io",
    "work.karmada.io",
    "config.karmada.io",
    "networking.karmada.io",
    "autoscaling.karmada.io",
    "remedy.karmada.io",
    "apps.karmada.io",
    "events.k8s.io",
];

/// A `--skipped-propagating-apis` entry that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parse --skipped-propagating-apis: invalid parameter: {0}")]
pub struct SkipParseError(pub String);

/// The kinds the detector does not watch (Karmada's `SkippedResourceConfig`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkippedResources {
    groups: HashSet<String>,
    group_versions: HashSet<(String, String)>,
    group_version_kinds: HashSet<(String, String, String)>,
}

impl SkippedResources {
    /// Karmada's defaults: its own groups, `events.k8s.io`, core `v1/Event` and
    /// `coordination.k8s.io/v1` (Leases).
    pub fn with_defaults() -> Self {
        let mut s = Self::default();
        for g in DEFAULT_SKIPPED_GROUPS {
            s.groups.insert((*g).to_owned());
        }
        s.group_version_kinds
            .insert((String::new(), "v1".to_owned(), "Event".to_owned()));
        s.group_versions
            .insert(("coordination.k8s.io".to_owned(), "v1".to_owned()));
        s
    }

    /// The defaults plus a `--skipped-propagating-apis` value: `;`-separated entries, each
    /// `<group>`, `<group>/<version>`, `v1/<kind>[,<kind>…]` or `<group>/<version>/<kind>[,<kind>…]`.
    pub fn parse(value: &str) -> Result<Self, SkipParseError> {
        let mut s = Self::with_defaults();
        if value.is_empty() {
            return Ok(s);
        }
        for token in value.split(';') {
            s.add_token(token)?;
        }
        Ok(s)
    }

    fn add_token(&mut self, token: &str) -> Result<(), SkipParseError> {
        match token.matches('/').count() {
            0 => {
                self.groups.insert(token.to_owned());
            }
            1 if token.starts_with("v1") => {
                for part in token.split(',') {
                    let kind = part.split_once('/').map_or(part, |(_, k)| k);
                    self.group_version_kinds.insert((
                        String::new(),
                        "v1".to_owned(),
                        kind.to_owned(),
                    ));
                }
            }
            1 => {
                let (g, v) = token
                    .split_once('/')
                    .ok_or_else(|| SkipParseError(token.to_owned()))?;
                self.group_versions.insert((g.to_owned(), v.to_owned()));
            }
            2 => {
                let (mut group, mut version) = (String::new(), String::new());
                for part in token.split(',') {
                    let kind = match part.split('/').collect::<Vec<_>>().as_slice() {
                        [g, v, k] => {
                            group = (*g).to_owned();
                            version = (*v).to_owned();
                            (*k).to_owned()
                        }
                        [k] => (*k).to_owned(),
                        _ => return Err(SkipParseError(token.to_owned())),
                    };
                    self.group_version_kinds
                        .insert((group.clone(), version.clone(), kind));
                }
            }
            _ => return Err(SkipParseError(token.to_owned())),
        }
        Ok(())
    }

    /// Whether the kind `group/version/kind` is skipped.
    pub fn is_skipped(&self, group: &str, version: &str, kind: &str) -> bool {
        self.groups.contains(group)
            || self
                .group_versions
                .contains(&(group.to_owned(), version.to_owned()))
            || self.group_version_kinds.contains(&(
                group.to_owned(),
                version.to_owned(),
                kind.to_owned(),
            ))
    }
}

/// Whether the detector ignores objects of `kind` named `namespace/name` (Karmada's `EventFilter`):
/// reserved namespaces, namespaces matching `--skipped-propagating-namespaces`, and the
/// `kube-system/extension-apiserver-authentication` ConfigMap.
pub fn is_ignored_object(skipped: &[Regex], kind: &str, namespace: &str, name: &str) -> bool {
    if is_reserved_namespace(namespace) {
        return true;
    }
    if skipped.iter().any(|re| re.is_match(namespace)) {
        return true;
    }
    namespace == "kube-system"
        && kind == "ConfigMap"
        && name == "extension-apiserver-authentication"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_skip_karmada_groups_events_and_leases() {
        let s = SkippedResources::with_defaults();
        assert!(s.is_skipped("policy.karmada.io", "v1alpha1", "PropagationPolicy"));
        assert!(s.is_skipped("work.karmada.io", "v1alpha2", "ResourceBinding"));
        assert!(s.is_skipped("events.k8s.io", "v1", "Event"));
        assert!(s.is_skipped("", "v1", "Event"));
        assert!(s.is_skipped("coordination.k8s.io", "v1", "Lease"));
        assert!(!s.is_skipped("apps", "v1", "Deployment"));
        assert!(!s.is_skipped("", "v1", "ConfigMap"));
    }

    #[test]
    fn parses_every_form() {
        let s = SkippedResources::parse(
            "example.io;batch/v1;v1/Secret,ConfigMap;networking.k8s.io/v1/Ingress,IngressClass",
        )
        .unwrap();
        assert!(s.is_skipped("example.io", "v9", "Anything"));
        assert!(s.is_skipped("batch", "v1", "Job"));
        assert!(!s.is_skipped("batch", "v2", "Job"));
        assert!(s.is_skipped("", "v1", "Secret"));
        assert!(s.is_skipped("", "v1", "ConfigMap"));
        assert!(!s.is_skipped("", "v1", "Service"));
        assert!(s.is_skipped("networking.k8s.io", "v1", "Ingress"));
        assert!(s.is_skipped("networking.k8s.io", "v1", "IngressClass"));
        assert!(!s.is_skipped("networking.k8s.io", "v1", "NetworkPolicy"));
        assert_eq!(
            SkippedResources::parse("").unwrap(),
            SkippedResources::with_defaults()
        );
        assert!(SkippedResources::parse("a/b/c/d").is_err());
    }

    #[test]
    fn ignores_reserved_and_skipped_namespaces() {
        let skipped = vec![Regex::new("^(?:kube-.*)$").unwrap()];
        assert!(is_ignored_object(
            &skipped,
            "ConfigMap",
            "karmada-system",
            "a"
        ));
        assert!(is_ignored_object(
            &skipped,
            "ConfigMap",
            "karmada-cluster",
            "a"
        ));
        assert!(is_ignored_object(
            &skipped,
            "ConfigMap",
            "karmada-es-member1",
            "a"
        ));
        assert!(is_ignored_object(&skipped, "ConfigMap", "kube-public", "a"));
        assert!(!is_ignored_object(&skipped, "ConfigMap", "default", "a"));
        assert!(!is_ignored_object(&skipped, "Namespace", "", "kube-system"));
        assert!(is_ignored_object(
            &[],
            "ConfigMap",
            "kube-system",
            "extension-apiserver-authentication"
        ));
        assert!(!is_ignored_object(&[], "ConfigMap", "kube-system", "other"));
    }
}
