//! Worker counts per GroupKind (controller-runtime's `GroupKindConcurrency`), never unbounded.

use std::collections::HashMap;

use crate::gvk::group_kind_string;

/// Upper bound on the workers of one controller, whatever the configuration says.
pub const MAX_WORKERS: usize = 1024;

/// How many workers each shared controller runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerOptions {
    /// Workers of kinds not listed in `group_kind_concurrency` (default 5).
    pub default_workers: usize,
    /// Per-kind worker counts keyed `"Kind.group"` (`"Kind"` for the core group), version-independent.
    pub group_kind_concurrency: HashMap<String, usize>,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            default_workers: 5,
            group_kind_concurrency: HashMap::new(),
        }
    }
}

impl WorkerOptions {
    /// Sets the workers of one GroupKind (builder style).
    pub fn with(mut self, group_kind: impl Into<String>, workers: usize) -> Self {
        self.group_kind_concurrency
            .insert(group_kind.into(), workers);
        self
    }

    /// The worker count for a kind: its entry, else the default; at least 1 and at most
    /// [`MAX_WORKERS`]. Zero means "use the default".
    pub fn workers_for(&self, group: &str, kind: &str) -> usize {
        let n = match self
            .group_kind_concurrency
            .get(&group_kind_string(group, kind))
        {
            Some(&n) if n > 0 => n,
            _ => self.default_workers,
        };
        n.clamp(1, MAX_WORKERS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_group_kind_with_default_and_bounds() {
        let w = WorkerOptions::default()
            .with("Deployment.apps", 3)
            .with("ConfigMap", 0)
            .with("Huge.example.io", 1_000_000);
        assert_eq!(w.workers_for("apps", "Deployment"), 3);
        assert_eq!(w.workers_for("", "ConfigMap"), 5);
        assert_eq!(w.workers_for("", "Secret"), 5);
        assert_eq!(w.workers_for("example.io", "Huge"), MAX_WORKERS);
        let zero = WorkerOptions {
            default_workers: 0,
            ..Default::default()
        };
        assert_eq!(zero.workers_for("", "Pod"), 1);
    }
}
