//! "Nothing changed" checks that can fail: instead of sleeping and comparing two reads (which
//! misses a change that was undone, and says nothing about what happened in between), watch the
//! objects from a known resourceVersion and fail on any change event within the window.

use std::fmt::Debug;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

/// Which objects of an [`Api`] a check watches.
#[derive(Clone, Copy, Debug)]
pub enum Watched<'a> {
    /// The object called this.
    Name(&'a str),
    /// The objects matching this label selector.
    Labels(&'a str),
    /// Every object the `Api` sees.
    All,
}

impl Watched<'_> {
    fn list_params(self) -> ListParams {
        match self {
            Watched::Name(n) => ListParams::default().fields(&format!("metadata.name={n}")),
            Watched::Labels(l) => ListParams::default().labels(l),
            Watched::All => ListParams::default(),
        }
    }

    fn watch_params(self) -> WatchParams {
        match self {
            Watched::Name(n) => WatchParams::default().fields(&format!("metadata.name={n}")),
            Watched::Labels(l) => WatchParams::default().labels(l),
            Watched::All => WatchParams::default(),
        }
    }
}

/// One change seen by a watch: the event type and the object as it was after it.
#[derive(Debug, Clone)]
pub struct Change<K> {
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub kind: &'static str,
    /// The object after the change (its last state for a deletion).
    pub object: K,
}

impl<K: Resource> Change<K> {
    /// `ADDED ns/name@rv`, for messages.
    pub fn describe(&self) -> String {
        format!(
            "{} {}/{}@{}",
            self.kind,
            self.object.meta().namespace.clone().unwrap_or_default(),
            self.object.meta().name.clone().unwrap_or_default(),
            self.object
                .meta()
                .resource_version
                .clone()
                .unwrap_or_default()
        )
    }
}

/// [`Change::describe`] of each change.
pub fn names<K: Resource>(changes: Vec<Change<K>>) -> Vec<String> {
    changes.iter().map(Change::describe).collect()
}

/// The resourceVersion to start a check from: the list's version, so that any later change to
/// the watched objects (including a creation) is an event.
pub async fn current_version<K>(api: &Api<K>, watched: Watched<'_>) -> String
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    api.list(&watched.list_params())
        .await
        .expect("list to start a watch from")
        .metadata
        .resource_version
        .expect("a list has a resourceVersion")
}

/// Every change to the `watched` objects after `resource_version`, for `window`.
///
/// # Panics
/// If the watch cannot be opened or fails (including `410 Gone`: the window would have a gap).
pub async fn changes_within<K>(
    api: &Api<K>,
    watched: Watched<'_>,
    resource_version: &str,
    window: Duration,
) -> Vec<Change<K>>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let deadline = Instant::now() + window;
    let mut version = resource_version.to_string();
    let mut changes = Vec::new();
    // The server may end a watch early; resume from the last version seen until the window ends.
    while Instant::now() < deadline {
        let left = deadline.saturating_duration_since(Instant::now());
        let params = watched
            .watch_params()
            .timeout(u32::try_from(left.as_secs() + 1).unwrap_or(290).min(290));
        let mut stream = api
            .watch(&params, &version)
            .await
            .unwrap_or_else(|e| panic!("watch from {version}: {e}"))
            .boxed();
        loop {
            let next = match tokio::time::timeout_at(deadline, stream.try_next()).await {
                Err(_) => return changes,
                Ok(next) => next.unwrap_or_else(|e| panic!("watch from {version}: {e}")),
            };
            let (kind, object) = match next {
                None => break,
                Some(WatchEvent::Added(o)) => ("ADDED", o),
                Some(WatchEvent::Modified(o)) => ("MODIFIED", o),
                Some(WatchEvent::Deleted(o)) => ("DELETED", o),
                Some(WatchEvent::Bookmark(b)) => {
                    version = b.metadata.resource_version;
                    continue;
                }
                Some(WatchEvent::Error(e)) => {
                    panic!("watch from {version} failed, the window has a gap: {e:?}")
                }
            };
            version = object.resource_version().unwrap_or(version);
            changes.push(Change { kind, object });
        }
    }
    changes
}

/// Fails if any of the `watched` objects changes (is created, modified or deleted) after
/// `resource_version` within `window`.
pub async fn assert_no_change_for<K>(
    api: &Api<K>,
    watched: Watched<'_>,
    resource_version: &str,
    window: Duration,
) where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let changes = changes_within(api, watched, resource_version, window).await;
    assert!(
        changes.is_empty(),
        "{watched:?} changed within {window:?} after resourceVersion {resource_version}: {:?}",
        changes.iter().map(Change::describe).collect::<Vec<_>>()
    );
}

/// Fails if a change to the `watched` objects after `resource_version` within `window` leaves
/// one for which `holds` says no (with its reason).
pub async fn assert_holds_for<K>(
    api: &Api<K>,
    watched: Watched<'_>,
    resource_version: &str,
    window: Duration,
    holds: impl Fn(&K) -> Result<(), String>,
) where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    for c in changes_within(api, watched, resource_version, window).await {
        if let Err(why) = holds(&c.object) {
            panic!("{watched:?} within {window:?}: {}: {why}", c.describe());
        }
    }
}
