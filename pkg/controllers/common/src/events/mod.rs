//! Kubernetes Events (`core/v1`, like Karmada's `record.EventRecorder`) on templates and bindings.

pub mod correlator;
mod lru;
mod writer;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::{Client, Resource, ResourceExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Events waiting to be correlated, per recorder. When it is full (the API server is far behind),
/// new Events are dropped with a warning, as client-go's broadcaster does.
const QUEUE_CAPACITY: usize = 8192;

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

/// Writes Events as one component (`source.component`). Recording only queues the Event; a
/// background writer correlates it as client-go does (repeats patch one Event's count, similar
/// Events are combined, a spam filter caps each object: [`correlator`]) and sends it, so a
/// reconcile never waits for an Event (Events are informational, and writing them inline added one
/// API round trip per Event to every sync).
#[derive(Clone)]
pub struct EventRecorder {
    component: &'static str,
    queue: mpsc::Sender<Event>,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("component", &self.component)
            .finish_non_exhaustive()
    }
}

impl EventRecorder {
    /// A recorder writing as `component` (Karmada: `resource-detector`, `default-scheduler`). Its
    /// writer stops when `cancel` fires or the last clone of the recorder is dropped.
    pub fn new(client: Client, component: &'static str, cancel: &CancellationToken) -> Self {
        let (queue, events) = mpsc::channel(QUEUE_CAPACITY);
        writer::spawn(client, events, cancel.clone());
        EventRecorder { component, queue }
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
        if self.queue.try_send(event).is_err() {
            tracing::warn!(
                kind = target.kind.as_deref().unwrap_or_default(),
                namespace = target.namespace.as_deref().unwrap_or_default(),
                name = target.name.as_deref().unwrap_or_default(),
                reason,
                "event dropped: too many events waiting to be written"
            );
        }
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

/// Karmada's event text for a cluster's taints.
pub fn taints_message(taints: &[k8s_openapi::api::core::v1::Taint]) -> String {
    if taints.is_empty() {
        return "cluster now does not have taints".to_string();
    }
    let parts: Vec<String> = taints
        .iter()
        .map(|t| match t.value.as_deref().filter(|v| !v.is_empty()) {
            Some(v) => format!("{{Key:{},Value:{v},Effect:{}}}", t.key, t.effect),
            None => format!("{{Key:{},Effect:{}}}", t.key, t.effect),
        })
        .collect();
    format!("cluster now has taints([{}])", parts.join(","))
}
