//! The benchmark's eyes: watches on the members (managed Deployments and ConfigMaps) and on the host
//! (templates, ResourceBindings, Works) that timestamp every arrival and count every change, so
//! latencies and write counts come from what the API servers actually stored, not from our own
//! metrics.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use karmada_apis::{ResourceBinding, Work};
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::workload::{Kind, TEMPLATE_LABEL};

/// Where an object lives and what it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// `host` or the member's name.
    pub cluster: String,
    /// `Deployment`, `ConfigMap`, `ResourceBinding` or `Work`.
    pub kind: &'static str,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// What was seen of one object.
#[derive(Clone, Debug)]
pub struct Seen {
    /// When it was first seen (for objects that existed before the watch started: when the watch
    /// listed it).
    pub first: Instant,
    /// Last resourceVersion seen.
    pub resource_version: String,
    /// How many times its resourceVersion changed after it was first seen.
    pub changes: u32,
    /// Whether it was deleted.
    pub deleted: bool,
    /// For ResourceBindings: when `FullyApplied=True` was first seen.
    pub fully_applied: Option<Instant>,
}

/// Everything seen so far, by object.
pub type Sightings = HashMap<ObjectKey, Seen>;

/// The running watches. Dropping it stops them.
pub struct Observer {
    seen: Arc<Mutex<Sightings>>,
    synced: Arc<AtomicUsize>,
    streams: usize,
    token: CancellationToken,
    tasks: JoinSet<()>,
}

impl Observer {
    /// Starts watching `host` and every `(name, client)` member.
    pub fn start(host: &Client, members: &[(String, Client)]) -> Observer {
        let mut o = Observer {
            seen: Arc::default(),
            synced: Arc::default(),
            streams: 0,
            token: CancellationToken::new(),
            tasks: JoinSet::new(),
        };
        let managed = "karmada.io/managed=true";
        for (name, client) in members {
            o.watch_metadata::<Deployment>(client, name, Kind::Deployment.name(), managed);
            o.watch_metadata::<ConfigMap>(client, name, Kind::ConfigMap.name(), managed);
        }
        let template = format!("{TEMPLATE_LABEL}=true");
        o.watch_metadata::<Deployment>(host, "host", Kind::Deployment.name(), &template);
        o.watch_metadata::<ConfigMap>(host, "host", Kind::ConfigMap.name(), &template);
        o.watch_metadata::<Work>(host, "host", "Work", "");
        o.watch_bindings(host);
        o
    }

    fn watch_metadata<K>(
        &mut self,
        client: &Client,
        cluster: &str,
        kind: &'static str,
        labels: &str,
    ) where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    {
        let api: Api<PartialObjectMeta<K>> = Api::all(client.clone());
        let stream = watcher(api, config(labels)).default_backoff();
        let sink = self.sink(cluster, kind);
        self.spawn(
            stream.map_ok(|e| map_event(e, |m| (m.metadata, None))),
            sink,
        );
    }

    fn watch_bindings(&mut self, client: &Client) {
        let api: Api<ResourceBinding> = Api::all(client.clone());
        let stream = watcher(api, config("")).default_backoff();
        let sink = self.sink("host", "ResourceBinding");
        self.spawn(
            stream.map_ok(|e| {
                map_event(e, |rb| {
                    let applied = rb.status.as_ref().is_some_and(|s| {
                        s.conditions
                            .iter()
                            .any(|c| c.type_ == "FullyApplied" && c.status == "True")
                    });
                    (rb.metadata, Some(applied))
                })
            }),
            sink,
        );
    }

    fn sink(&self, cluster: &str, kind: &'static str) -> Sink {
        Sink {
            seen: self.seen.clone(),
            synced: self.synced.clone(),
            cluster: cluster.to_string(),
            kind,
        }
    }

    fn spawn<S>(&mut self, stream: S, sink: Sink)
    where
        S: futures::Stream<Item = Result<Event<Observed>, watcher::Error>> + Send + 'static,
    {
        self.streams += 1;
        let token = self.token.clone();
        self.tasks.spawn(async move {
            let mut stream = std::pin::pin!(stream);
            let mut synced_once = false;
            loop {
                let next = tokio::select! {
                    _ = token.cancelled() => return,
                    next = stream.next() => next,
                };
                match next {
                    None => return,
                    Some(Err(e)) => {
                        eprintln!("bench: watch {} {} failed: {e}", sink.cluster, sink.kind);
                    }
                    Some(Ok(Event::InitDone)) => {
                        if !synced_once {
                            synced_once = true;
                            sink.synced.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    Some(Ok(Event::Init)) => {}
                    Some(Ok(Event::Apply(o) | Event::InitApply(o))) => sink.applied(o),
                    Some(Ok(Event::Delete(o))) => sink.deleted(o),
                }
            }
        });
    }

    /// Waits until every watch has listed once.
    pub async fn wait_synced(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        while self.synced.load(Ordering::SeqCst) < self.streams {
            anyhow::ensure!(
                Instant::now() < deadline,
                "the benchmark's watches did not list within {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// The sightings, locked.
    pub fn seen(&self) -> MutexGuard<'_, Sightings> {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A copy of the change counts, to diff against later.
    pub fn snapshot(&self) -> HashMap<ObjectKey, (u32, bool)> {
        self.seen()
            .iter()
            .map(|(k, s)| (k.clone(), (s.changes, s.deleted)))
            .collect()
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

fn map_event<K, T>(e: Event<K>, f: impl Fn(K) -> T) -> Event<T> {
    match e {
        Event::Apply(o) => Event::Apply(f(o)),
        Event::Delete(o) => Event::Delete(f(o)),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(f(o)),
        Event::InitDone => Event::InitDone,
    }
}

/// An object's metadata, and for bindings whether they are FullyApplied.
type Observed = (kube::api::ObjectMeta, Option<bool>);

fn config(labels: &str) -> watcher::Config {
    let c = watcher::Config::default();
    if labels.is_empty() {
        c
    } else {
        c.labels(labels)
    }
}

struct Sink {
    seen: Arc<Mutex<Sightings>>,
    synced: Arc<AtomicUsize>,
    cluster: String,
    kind: &'static str,
}

impl Sink {
    fn key(&self, meta: &kube::api::ObjectMeta) -> ObjectKey {
        ObjectKey {
            cluster: self.cluster.clone(),
            kind: self.kind,
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        }
    }

    fn applied(&self, (meta, applied): Observed) {
        let now = Instant::now();
        let key = self.key(&meta);
        let rv = meta.resource_version.unwrap_or_default();
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = seen.entry(key).or_insert_with(|| Seen {
            first: now,
            resource_version: rv.clone(),
            changes: 0,
            deleted: false,
            fully_applied: None,
        });
        if entry.resource_version != rv {
            entry.resource_version = rv;
            entry.changes += 1;
        }
        if applied == Some(true) && entry.fully_applied.is_none() {
            entry.fully_applied = Some(now);
        }
    }

    fn deleted(&self, (meta, _): Observed) {
        let key = self.key(&meta);
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(s) = seen.get_mut(&key) {
            s.deleted = true;
        }
    }
}
