//! Kubernetes Events (`core/v1`), recorded as client-go's `record.EventRecorder` records them:
//! correlated, aggregated, rate-limited per object, written by one sequential writer per client budget.

pub mod correlator;
mod lru;
mod writer;

pub use writer::SinkOptions;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::{Client, Resource, ResourceExt};
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Events waiting to be correlated, per sink: client-go's broadcaster queue length
/// (`maxQueuedEvents`). When it is full (the API server budget is spent on the controllers' own
/// requests), new Events are dropped, as client-go's broadcaster does.
const QUEUE_CAPACITY: usize = 1000;

/// How often a sink that keeps dropping Events says so.
const DROP_WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Something happened as expected.
    Normal,
    /// Something went wrong.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Where a process's Events go: one queue and one sequential writer per API server budget (rate
/// limiter), shared by every recorder of that budget — the shape of controller-runtime's
/// manager-wide broadcaster. Queued Events are correlated as
/// client-go does (repeats patch one Event's count, similar Events are combined, a spam filter caps
/// each object: [`correlator`]) and written in order. Events are informational: a reconcile never
/// waits for one, and when the queue is full they are dropped (counted and logged every
/// [`DROP_WARNING_INTERVAL`]) rather than slowing the controllers that share the budget.
#[derive(Clone)]
pub struct EventSink {
    queue: mpsc::Sender<Event>,
    drops: Arc<Drops>,
}

/// Dropped Events of a sink, and when that was last logged.
#[derive(Default)]
struct Drops {
    total: AtomicU64,
    last_warning: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink")
            .field("dropped", &self.drops.total.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl EventSink {
    /// Starts a sink writing with `client` (and so spending that client's request budget: give it
    /// a background client, `lariat::ClientFactory::background_client`, so Events take only what
    /// the controllers leave spare). Its writer stops when `cancel` fires or the last clone of the
    /// sink (and its recorders) is dropped.
    pub fn start(client: Client, cancel: &CancellationToken) -> Self {
        Self::start_with(client, SinkOptions::default(), cancel)
    }

    /// [`Self::start`] with other retry `options` than client-go's.
    pub fn start_with(client: Client, options: SinkOptions, cancel: &CancellationToken) -> Self {
        let (queue, events) = mpsc::channel(QUEUE_CAPACITY);
        writer::spawn(client, events, options, cancel.clone());
        EventSink {
            queue,
            drops: Arc::default(),
        }
    }

    /// A recorder writing as `component` (`source.component`, e.g. `resource-detector`,
    /// `default-scheduler`) into this sink.
    pub fn recorder(&self, component: &'static str) -> EventRecorder {
        EventRecorder {
            component,
            sink: self.clone(),
        }
    }

    fn send(&self, event: Event) {
        let Err(e) = self.queue.try_send(event) else {
            return;
        };
        let total = self.drops.total.fetch_add(1, Ordering::Relaxed) + 1;
        let now = Instant::now();
        let mut last = self.drops.last_warning.lock();
        if last.is_some_and(|t| now.duration_since(t) < DROP_WARNING_INTERVAL) {
            return;
        }
        *last = Some(now);
        let event = match &e {
            mpsc::error::TrySendError::Full(e) | mpsc::error::TrySendError::Closed(e) => e,
        };
        let target = &event.involved_object;
        tracing::warn!(
            kind = target.kind.as_deref().unwrap_or_default(),
            namespace = target.namespace.as_deref().unwrap_or_default(),
            name = target.name.as_deref().unwrap_or_default(),
            reason = event.reason.as_deref().unwrap_or_default(),
            dropped_total = total,
            "events dropped: too many events waiting to be written"
        );
    }
}

/// Records Events as one component into an [`EventSink`]. Recording only queues the Event.
#[derive(Clone)]
pub struct EventRecorder {
    component: &'static str,
    sink: EventSink,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("component", &self.component)
            .finish_non_exhaustive()
    }
}

impl EventRecorder {
    /// A recorder with a sink of its own on `client`: for a component that has a request budget of
    /// its own. Components sharing a process's budget record through one [`EventSink`] instead.
    pub fn new(client: Client, component: &'static str, cancel: &CancellationToken) -> Self {
        EventSink::start(client, cancel).recorder(component)
    }

    /// Records an Event about the object `target`. Failures are logged, never returned: an Event is
    /// informational and must not fail the reconcile that reports it.
    pub async fn record(
        &self,
        target: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        self.record_now(target, type_, reason, message);
    }

    /// [`Self::record`] for synchronous code: recording only queues the Event.
    pub fn record_now(
        &self,
        target: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        let namespace = target
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        let now = Timestamp::now();
        let name = correlator::event_name(target.name.as_deref().unwrap_or("unknown"), now);
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            involved_object: target.clone(),
            reason: Some(reason.to_owned()),
            message: Some(message.into()),
            type_: Some(type_.as_str().to_owned()),
            source: Some(EventSource {
                component: Some(self.component.to_owned()),
                host: None,
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            reporting_component: Some(self.component.to_owned()),
            reporting_instance: Some(self.component.to_owned()),
            ..Default::default()
        };
        self.sink.send(event);
    }
}

/// The reference of a typed object for an Event.
pub fn reference_of<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        namespace: obj.namespace(),
        name: Some(obj.name_any()),
        uid: obj.uid(),
        resource_version: obj.resource_version(),
        field_path: None,
    }
}
