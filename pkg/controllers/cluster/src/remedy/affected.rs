//! Which Clusters a Remedy change concerns. Karmada's event handler compares a Remedy's old and new
//! `clusterAffinity`; a handler here sees only the object as it now is (or nothing once it is
//! deleted), so [`AffinityMemory`] remembers the affinity last seen for each Remedy.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use karmada_apis::remedy::v1alpha1::ClusterAffinity;

/// The Clusters to reconcile after a Remedy change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Affected {
    /// Every Cluster: the Remedy applies (or applied) to all clusters.
    All,
    /// Only the Clusters with these names.
    Named(BTreeSet<String>),
}

impl Affected {
    fn of(affinity: Option<&ClusterAffinity>) -> Self {
        match affinity {
            None => Affected::All,
            Some(a) => Affected::Named(a.cluster_names.iter().cloned().collect()),
        }
    }

    fn union(self, other: Affected) -> Self {
        match (self, other) {
            (Affected::Named(mut a), Affected::Named(b)) => {
                a.extend(b);
                Affected::Named(a)
            }
            _ => Affected::All,
        }
    }

    /// Whether the Cluster called `name` is concerned.
    pub fn contains(&self, name: &str) -> bool {
        match self {
            Affected::All => true,
            Affected::Named(names) => names.contains(name),
        }
    }
}

/// The `clusterAffinity` last seen for each Remedy (by name), so that an update also reconciles
/// the clusters the Remedy no longer selects and a deletion the clusters it selected.
#[derive(Debug, Default)]
pub struct AffinityMemory {
    seen: Mutex<HashMap<String, Option<ClusterAffinity>>>,
}

impl AffinityMemory {
    /// Records that the Remedy `name` now has `affinity` (`None` in the outer option: it was
    /// deleted) and returns the Clusters concerned: for a new Remedy those it selects, for a changed
    /// one those it selected or selects, for a deleted one those it selected. A deletion of a Remedy
    /// never seen concerns every Cluster.
    pub fn changed(&self, name: &str, affinity: Option<Option<&ClusterAffinity>>) -> Affected {
        let mut seen = match self.seen.lock() {
            Ok(seen) => seen,
            Err(poisoned) => poisoned.into_inner(),
        };
        match affinity {
            Some(now) => {
                let current = Affected::of(now);
                match seen.insert(name.to_owned(), now.cloned()) {
                    None => current,
                    Some(before) => Affected::of(before.as_ref()).union(current),
                }
            }
            None => match seen.remove(name) {
                Some(before) => Affected::of(before.as_ref()),
                None => Affected::All,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(names: &[&str]) -> ClusterAffinity {
        ClusterAffinity {
            cluster_names: names.iter().map(ToString::to_string).collect(),
        }
    }

    fn named(names: &[&str]) -> Affected {
        Affected::Named(names.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn create_update_delete_follow_karmada() {
        let memory = AffinityMemory::default();
        let a = names(&["member1", "member2"]);
        assert_eq!(
            memory.changed("r", Some(Some(&a))),
            named(&["member1", "member2"])
        );
        // An update reconciles the clusters selected before and after.
        let b = names(&["member3"]);
        assert_eq!(
            memory.changed("r", Some(Some(&b))),
            named(&["member1", "member2", "member3"])
        );
        // Deleting reconciles the clusters it selected last.
        assert_eq!(memory.changed("r", None), named(&["member3"]));
        // Without an affinity, before or after: every cluster.
        assert_eq!(memory.changed("s", Some(None)), Affected::All);
        assert_eq!(memory.changed("s", Some(Some(&a))), Affected::All);
        assert_eq!(
            memory.changed("s", Some(Some(&a))),
            named(&["member1", "member2"])
        );
        // A deletion of a Remedy never seen: every cluster, to be safe.
        assert_eq!(memory.changed("unknown", None), Affected::All);
        assert!(Affected::All.contains("x"));
        assert!(!named(&["member1"]).contains("member2"));
    }
}
