//! The clusters this process has written a Work to, per binding: with the Work cache, a complete
//! view of a binding's Works even before the cache has seen the newest (see `works_to_reconcile`).
//!
//! Every binding names the same few clusters, so each name is kept once and shared: a binding's
//! entry is a pointer per cluster (at 10,000 bindings × 10 members, a `BTreeSet<String>` per
//! binding held a B-tree node and ten strings, about 400 bytes, against 160 here).

use std::collections::HashMap;
use std::sync::Arc;

use karmada_controllers_common::shared_values::SharedValues;

/// The clusters written to, per binding (`Kind/key`, as the binding controller's memo keys).
#[derive(Default)]
pub(super) struct WrittenClusters {
    bindings: HashMap<String, Box<[Arc<str>]>>,
    /// The cluster names the bindings hold; none leaves this struct.
    names: SharedValues<str>,
}

impl WrittenClusters {
    /// Records that a Work of `binding` was written to `cluster`.
    pub(super) fn insert(&mut self, binding: &str, cluster: &str) {
        if self.any(binding, |c| c == cluster) {
            return;
        }
        let name = self.names.share(cluster);
        let clusters = self.bindings.entry(binding.to_owned()).or_default();
        let mut all = std::mem::take(clusters).into_vec();
        all.push(name);
        *clusters = all.into_boxed_slice();
    }

    /// Whether `f` holds for a cluster written to for `binding`.
    pub(super) fn any(&self, binding: &str, f: impl Fn(&str) -> bool) -> bool {
        self.bindings
            .get(binding)
            .is_some_and(|clusters| clusters.iter().any(|c| f(c)))
    }

    /// Forgets `binding` (deleted), and the cluster names no other binding holds.
    pub(super) fn remove(&mut self, binding: &str) {
        let Some(clusters) = self.bindings.remove(binding) else {
            return;
        };
        for name in clusters {
            self.names.release(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clusters(w: &WrittenClusters, binding: &str) -> Vec<String> {
        let mut all: Vec<String> = w
            .bindings
            .get(binding)
            .map(|c| c.iter().map(|n| String::from(&**n)).collect())
            .unwrap_or_default();
        all.sort();
        all
    }

    #[test]
    fn bindings_share_the_cluster_names_and_release_them_with_the_last() {
        let mut w = WrittenClusters::default();
        for b in ["ResourceBinding/default/a", "ResourceBinding/default/b"] {
            for c in ["member1", "member2", "member1"] {
                w.insert(b, c);
            }
        }
        w.insert("ResourceBinding/default/b", "member3");
        assert_eq!(
            clusters(&w, "ResourceBinding/default/a"),
            ["member1", "member2"]
        );
        assert_eq!(
            clusters(&w, "ResourceBinding/default/b"),
            ["member1", "member2", "member3"]
        );
        assert_eq!(w.names.len(), 3);
        let shared = |name: &str| w.names.get(name).map(|n| Arc::strong_count(n) - 1);
        // The set's `Arc`, and one clone per binding naming it.
        assert_eq!(shared("member1"), Some(2));
        assert_eq!(shared("member3"), Some(1));
        let a = &w.bindings["ResourceBinding/default/a"];
        let b = &w.bindings["ResourceBinding/default/b"];
        assert!(Arc::ptr_eq(&a[0], &b[0]));

        assert!(w.any("ResourceBinding/default/b", |c| c == "member3"));
        assert!(!w.any("ResourceBinding/default/a", |c| c == "member3"));
        assert!(!w.any("ResourceBinding/default/c", |_| true));

        w.remove("ResourceBinding/default/b");
        w.remove("ResourceBinding/default/b");
        assert_eq!(
            w.names.len(),
            2,
            "member3 went with the last binding naming it"
        );
        assert_eq!(w.names.get("member1").map(Arc::strong_count), Some(2));
        w.remove("ResourceBinding/default/a");
        assert!(w.names.is_empty());
        assert!(w.bindings.is_empty());
    }
}
