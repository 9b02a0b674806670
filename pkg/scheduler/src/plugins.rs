//! The scheduler's plugins, by the names of Karmada's in-tree registry, and which of them are
//! enabled (Karmada's `--plugins` list). Each plugin is one check or score of [`crate::filter`] and
//! the score step; a disabled one is skipped.

use std::fmt;

/// A plugin of Karmada's in-tree registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Plugin {
    /// Filter: the cluster serves the resource's API (clusters already scheduled pass).
    ApiEnablement,
    /// Filter: the placement tolerates the cluster's `NoSchedule`/`NoExecute` taints (clusters
    /// already scheduled pass).
    TaintToleration,
    /// Filter: the cluster matches the placement's cluster affinity; its score is always 0.
    ClusterAffinity,
    /// Filter: the cluster has the property the spread constraints group by.
    SpreadConstraint,
    /// Score: 100 for a cluster the binding is already scheduled to.
    ClusterLocality,
    /// Filter: the binding is not being gracefully evicted from the cluster.
    ClusterEviction,
    /// Filter: no other binding of the binding's workload anti-affinity group (same namespace)
    /// is on the cluster (clusters already scheduled pass).
    WorkloadAntiAffinity,
    /// Filter: every other placed binding of the binding's workload affinity group (same
    /// namespace) is on the cluster (clusters already scheduled pass).
    WorkloadAffinity,
}

impl Plugin {
    /// Every in-tree plugin, in the order the filters run.
    pub const ALL: [Plugin; 8] = [
        Plugin::ApiEnablement,
        Plugin::TaintToleration,
        Plugin::ClusterAffinity,
        Plugin::SpreadConstraint,
        Plugin::ClusterEviction,
        Plugin::WorkloadAntiAffinity,
        Plugin::WorkloadAffinity,
        Plugin::ClusterLocality,
    ];

    /// Karmada's plugin name.
    pub fn name(self) -> &'static str {
        match self {
            Self::ApiEnablement => "APIEnablement",
            Self::TaintToleration => "TaintToleration",
            Self::ClusterAffinity => "ClusterAffinity",
            Self::SpreadConstraint => "SpreadConstraint",
            Self::ClusterLocality => "ClusterLocality",
            Self::ClusterEviction => "ClusterEviction",
            Self::WorkloadAntiAffinity => "WorkloadAntiAffinity",
            Self::WorkloadAffinity => "WorkloadAffinity",
        }
    }

    /// The plugin of that name.
    pub fn from_name(name: &str) -> Option<Plugin> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether it has a filter.
    pub fn filters(self) -> bool {
        !matches!(self, Self::ClusterLocality)
    }

    /// Whether it has a score.
    pub fn scores(self) -> bool {
        matches!(self, Self::ClusterAffinity | Self::ClusterLocality)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A `--plugins` entry that names no in-tree plugin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown plugin {name:?} (in-tree plugins: {known})")]
pub struct UnknownPlugin {
    /// The name as given (without a leading `-`).
    pub name: String,
    /// The known names, comma-separated.
    pub known: String,
}

/// A set of enabled plugins. The default enables all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginSet(u8);

impl Default for PluginSet {
    fn default() -> Self {
        Self::all()
    }
}

impl PluginSet {
    /// Every plugin.
    pub fn all() -> Self {
        Self(Plugin::ALL.iter().fold(0, |bits, p| bits | p.bit()))
    }

    /// No plugin.
    pub fn none() -> Self {
        Self(0)
    }

    /// Whether `plugin` is enabled.
    pub fn enabled(self, plugin: Plugin) -> bool {
        self.0 & plugin.bit() != 0
    }

    /// The enabled plugins, in [`Plugin::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Plugin> {
        Plugin::ALL.into_iter().filter(move |p| self.enabled(*p))
    }

    /// Karmada's `--plugins` list (`Registry.Filter`): `*` enables every plugin wherever it
    /// appears; then, in order, `Name` enables a plugin and `-Name` disables one (only once some
    /// plugin is enabled). An empty list enables none. Unlike Karmada, which ignores names it does
    /// not know, an unknown name is an error: out-of-tree plugins cannot be loaded here.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, UnknownPlugin> {
        let unknown = |name: &str| UnknownPlugin {
            name: name.to_owned(),
            known: Plugin::ALL.map(Plugin::name).join(","),
        };
        let mut set = if entries.iter().any(|e| e.as_ref() == "*") {
            Self::all()
        } else {
            Self::none()
        };
        for entry in entries.iter().map(AsRef::as_ref).filter(|e| *e != "*") {
            if let Some(p) = Plugin::from_name(entry) {
                set.0 |= p.bit();
                continue;
            }
            let Some(name) = entry.strip_prefix('-') else {
                return Err(unknown(entry));
            };
            let name = name.trim_start_matches('-');
            let p = Plugin::from_name(name).ok_or_else(|| unknown(name))?;
            if set.0 != 0 {
                set.0 &= !p.bit();
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn karmadas_list_syntax() {
        assert_eq!(PluginSet::parse(&["*"]), Ok(PluginSet::all()));
        let set = PluginSet::parse(&["*", "-ClusterLocality"]).unwrap();
        assert!(!set.enabled(Plugin::ClusterLocality));
        assert!(set.enabled(Plugin::ApiEnablement));
        // `*` counts wherever it is.
        assert_eq!(
            PluginSet::parse(&["-TaintToleration", "*"]),
            PluginSet::parse(&["*", "-TaintToleration"])
        );
        let only = PluginSet::parse(&["APIEnablement", "ClusterAffinity"]).unwrap();
        assert_eq!(
            only.iter().collect::<Vec<_>>(),
            [Plugin::ApiEnablement, Plugin::ClusterAffinity]
        );
        // A removal before anything is enabled does nothing, as in Karmada.
        let set = PluginSet::parse(&["-APIEnablement", "APIEnablement"]).unwrap();
        assert!(set.enabled(Plugin::ApiEnablement));
        assert_eq!(PluginSet::parse::<&str>(&[]), Ok(PluginSet::none()));
    }

    #[test]
    fn unknown_names_are_refused() {
        let e = PluginSet::parse(&["*", "-Nope"]).unwrap_err();
        assert_eq!(e.name, "Nope");
        assert!(
            e.to_string().contains("APIEnablement,TaintToleration"),
            "{e}"
        );
        assert!(PluginSet::parse(&["Foo"]).is_err());
    }
}
