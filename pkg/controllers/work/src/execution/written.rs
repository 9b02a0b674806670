//! The Work statuses this process wrote while its Work cache had not caught up yet.
//!
//! The execution controller decides what to write by comparing the wanted status with the cached
//! Work. Right after its own status patch the cache still holds the older version (its watch lags
//! behind the API server, by seconds after a leader change or an API-server restart, when every
//! Work is written at once). A retry in that window, e.g. after `Dispatching` was written alone
//! because the member was not connected yet, would see no `Dispatching`, write it again with a new
//! `lastTransitionTime` and record another Event. So each successful write is remembered with the
//! resourceVersion of the cached Work it was computed from; while the cache still shows that
//! version, the remembered status stands in for the cached one. The first cached version that
//! differs includes the write (the API server orders versions), and the entry is dropped: entries
//! live only while the cache lags.

use std::borrow::Cow;
use std::collections::HashMap;

use karmada_apis::Work;
use karmada_apis::work::v1alpha1::WorkStatus;
use kube::ResourceExt;
use parking_lot::Mutex;

/// The last status written per Work (`namespace/name`), with the cached resourceVersion it was
/// computed from.
#[derive(Default)]
pub(super) struct WrittenStatuses {
    entries: Mutex<HashMap<String, (String, WorkStatus)>>,
}

fn key_of(work: &Work) -> String {
    format!(
        "{}/{}",
        work.namespace().unwrap_or_default(),
        work.name_any()
    )
}

impl WrittenStatuses {
    /// The Work's status as last known: what this process wrote from this very cached version, or
    /// else the cached status.
    pub(super) fn status<'a>(&self, work: &'a Work) -> Option<Cow<'a, WorkStatus>> {
        let mut entries = self.entries.lock();
        if !entries.is_empty() {
            let key = key_of(work);
            match entries.get(&key) {
                Some((from, status))
                    if Some(from.as_str()) == work.resource_version().as_deref() =>
                {
                    return Some(Cow::Owned(status.clone()));
                }
                Some(_) => {
                    // The cache has caught up with the write.
                    entries.remove(&key);
                }
                None => {}
            }
        }
        work.status.as_ref().map(Cow::Borrowed)
    }

    /// Remembers that `status` was written to `work` (the cached version it was computed from).
    pub(super) fn wrote(&self, work: &Work, status: WorkStatus) {
        if let Some(rv) = work.resource_version() {
            self.entries.lock().insert(key_of(work), (rv, status));
        }
    }

    /// Forgets the Work (deleted).
    pub(super) fn forget(&self, work: &Work) {
        let mut entries = self.entries.lock();
        if !entries.is_empty() {
            entries.remove(&key_of(work));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(rv: &str, conditions: &[&str]) -> Work {
        let mut w = Work::new("w", Default::default());
        w.metadata.namespace = Some("karmada-es-m".into());
        w.metadata.resource_version = Some(rv.into());
        w.status = Some(WorkStatus {
            conditions: conditions
                .iter()
                .map(|t| super::super::status::condition(t, true, "R", "m"))
                .collect(),
            ..Default::default()
        });
        w
    }

    fn types(s: Option<Cow<'_, WorkStatus>>) -> Vec<String> {
        s.map(|s| s.conditions.iter().map(|c| c.type_.clone()).collect())
            .unwrap_or_default()
    }

    #[test]
    fn a_write_stands_in_until_the_cache_moves_on() {
        let written = WrittenStatuses::default();
        let cached = work("10", &[]);
        assert!(types(written.status(&cached)).is_empty());
        written.wrote(
            &cached,
            work("0", &["Dispatching"]).status.unwrap_or_default(),
        );
        // The cache still holds version 10: the write stands in for it.
        assert_eq!(types(written.status(&cached)), ["Dispatching"]);
        // Version 11 includes the write: the cache is the truth again, and the entry is gone.
        let caught_up = work("11", &["Dispatching", "Applied"]);
        assert_eq!(
            types(written.status(&caught_up)),
            ["Dispatching", "Applied"]
        );
        assert!(written.entries.lock().is_empty());
    }

    #[test]
    fn forgetting_a_deleted_work_drops_its_entry() {
        let written = WrittenStatuses::default();
        let cached = work("10", &[]);
        written.wrote(&cached, WorkStatus::default());
        written.forget(&cached);
        assert!(written.entries.lock().is_empty());
    }
}
