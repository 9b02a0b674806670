//! client-go's `EventCorrelator` (`tools/record/events_cache.go`), so a controller that reports the
//! same thing again and again does not flood the API server with Events:
//!
//! - **Deduplication**: an Event equal to one already written (same source, object, type, reason
//!   and message) becomes a patch of that Event's `count`, `lastTimestamp` and `message` instead of
//!   a new Event.
//! - **Aggregation**: more than [`CorrelatorOptions::aggregate_max_events`] - 1 Events about one
//!   object that differ only in their message, within
//!   [`CorrelatorOptions::aggregate_interval`] of each other, are folded into one Event whose
//!   message is `(combined from similar events): <latest message>`.
//! - **Spam filter**: each source + object + type gets a token bucket (burst 25, one more Event
//!   every 5 minutes); what the bucket refuses is not written at all.
//!
//! The caches are bounded LRU maps (4096 entries each, as client-go). Pure: time is a parameter,
//! so tests drive the clock.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::lru::{Digest, Lru, digest};

/// Prefix of an aggregated Event's message (client-go's `EventAggregatorByReasonMessageFunc`).
pub const AGGREGATED_MESSAGE_PREFIX: &str = "(combined from similar events): ";

/// The correlator's limits; [`Default`] is client-go's `NewEventCorrelator`.
#[derive(Debug, Clone)]
pub struct CorrelatorOptions {
    /// Entries of each cache.
    pub cache_size: usize,
    /// Distinct messages for one source, object, type and reason that start aggregation.
    pub aggregate_max_events: usize,
    /// How long after the last similar Event the aggregation record is forgotten.
    pub aggregate_interval: Duration,
    /// Events a source may write about one object (and type) at once.
    pub spam_burst: u32,
    /// Refill of that budget, in Events per second.
    pub spam_qps: f64,
}

impl Default for CorrelatorOptions {
    fn default() -> Self {
        CorrelatorOptions {
            cache_size: 4096,
            aggregate_max_events: 10,
            aggregate_interval: Duration::from_secs(600),
            spam_burst: 25,
            spam_qps: 1.0 / 300.0,
        }
    }
}

/// What to send to the API server for one recorded Event.
#[derive(Debug, Clone, PartialEq)]
pub enum EventWrite {
    /// A new Event.
    Create(Event),
    /// The Event `event.metadata.name` exists: patch it with `patch` (count, last timestamp,
    /// message). `event` is the whole Event, to create it again if it was deleted meanwhile.
    Patch {
        /// The Event as it should be after the patch.
        event: Event,
        /// The strategic-merge patch.
        patch: Value,
    },
}

impl EventWrite {
    /// The Event as it should be on the API server after the write.
    pub fn event(&self) -> &Event {
        match self {
            EventWrite::Create(e) | EventWrite::Patch { event: e, .. } => e,
        }
    }
}

/// One correlated Event: the write, and the key identifying the Event object it writes (writes
/// with the same key must reach the API server in order).
#[derive(Debug, Clone, PartialEq)]
pub struct Correlation {
    /// Identity of the Event object written.
    pub key: String,
    /// What to write.
    pub write: EventWrite,
}

#[derive(Debug)]
struct Aggregate {
    /// Digests of the messages seen (bounded by the aggregation threshold; only counted).
    messages: BTreeSet<Digest>,
    last: Timestamp,
}

#[derive(Debug, Clone)]
struct Observed {
    count: i32,
    first_timestamp: Option<Time>,
    name: String,
}

/// golang.org/x/time/rate's token bucket as client-go's spam filter uses it: starts full.
#[derive(Debug)]
struct TokenBucket {
    tokens: f64,
    last: Timestamp,
}

/// Filters, aggregates and deduplicates Events before they are written (see the module docs).
#[derive(Debug)]
pub struct Correlator {
    options: CorrelatorOptions,
    aggregates: Lru<Aggregate>,
    observed: Lru<Observed>,
    spam: Lru<TokenBucket>,
}

fn join(parts: &[&str]) -> String {
    // client-go joins with ""; a separator keeps distinct fields from running into each other.
    parts.join("\u{1f}")
}

fn source_parts(e: &Event) -> [&str; 2] {
    let s = e.source.as_ref();
    [
        s.and_then(|s| s.component.as_deref()).unwrap_or_default(),
        s.and_then(|s| s.host.as_deref()).unwrap_or_default(),
    ]
}

fn object_parts(e: &Event) -> [&str; 5] {
    let o = &e.involved_object;
    [
        o.kind.as_deref().unwrap_or_default(),
        o.namespace.as_deref().unwrap_or_default(),
        o.name.as_deref().unwrap_or_default(),
        o.uid.as_deref().unwrap_or_default(),
        o.api_version.as_deref().unwrap_or_default(),
    ]
}

/// client-go's `getEventKey`: source, object (with field path), type, reason and message.
fn event_key(e: &Event) -> String {
    let mut parts: Vec<&str> = source_parts(e).to_vec();
    parts.extend(object_parts(e));
    parts.extend([
        e.involved_object.field_path.as_deref().unwrap_or_default(),
        e.type_.as_deref().unwrap_or_default(),
        e.reason.as_deref().unwrap_or_default(),
        e.message.as_deref().unwrap_or_default(),
    ]);
    join(&parts)
}

/// client-go's `getSpamKey`: source, object and type.
fn spam_key(e: &Event) -> String {
    let mut parts: Vec<&str> = source_parts(e).to_vec();
    parts.extend(object_parts(e));
    parts.push(e.type_.as_deref().unwrap_or_default());
    join(&parts)
}

/// client-go's `EventAggregatorByReasonFunc`: everything but the message.
fn aggregate_key(e: &Event) -> String {
    let mut parts: Vec<&str> = source_parts(e).to_vec();
    parts.extend(object_parts(e));
    parts.extend([
        e.type_.as_deref().unwrap_or_default(),
        e.reason.as_deref().unwrap_or_default(),
        e.reporting_component.as_deref().unwrap_or_default(),
        e.reporting_instance.as_deref().unwrap_or_default(),
    ]);
    join(&parts)
}

/// An Event's name as client-go makes it: `<object name>.<nanoseconds, hex>`.
pub fn event_name(object: &str, at: Timestamp) -> String {
    format!("{object}.{:x}", at.as_nanosecond())
}

impl Correlator {
    /// A correlator with `options`.
    pub fn new(options: CorrelatorOptions) -> Self {
        Correlator {
            aggregates: Lru::new(options.cache_size),
            observed: Lru::new(options.cache_size),
            spam: Lru::new(options.cache_size),
            options,
        }
    }

    /// What to write for `event`, recorded at `now`; `None` when the spam filter drops it.
    pub fn correlate(&mut self, event: Event, now: Timestamp) -> Option<Correlation> {
        let (event, key) = self.aggregate(event, now);
        let write = self.observe(event, &key);
        if !self.allow(write.event(), now) {
            return None;
        }
        Some(Correlation { key, write })
    }

    /// client-go's `EventAggregate`: the Event to write and the key it is counted under.
    fn aggregate(&mut self, event: Event, now: Timestamp) -> (Event, String) {
        let key = event_key(&event);
        let group = aggregate_key(&event);
        let message = event.message.clone().unwrap_or_default();
        let fresh = || Aggregate {
            messages: BTreeSet::new(),
            last: now,
        };
        let interval = self.options.aggregate_interval;
        let record = match self.aggregates.get_mut(&group) {
            Some(r) if now.duration_since(r.last).unsigned_abs() <= interval => r,
            _ => {
                self.aggregates.insert(&group, fresh());
                match self.aggregates.get_mut(&group) {
                    Some(r) => r,
                    None => return (event, key),
                }
            }
        };
        record.messages.insert(digest(&message));
        record.last = now;
        if record.messages.len() < self.options.aggregate_max_events {
            return (event, key);
        }
        // Keep the set from growing past the threshold.
        record.messages.pop_first();
        let at = Time(now);
        let aggregated = Event {
            metadata: ObjectMeta {
                name: Some(event_name(
                    event.involved_object.name.as_deref().unwrap_or("unknown"),
                    now,
                )),
                namespace: event.metadata.namespace.clone(),
                ..Default::default()
            },
            count: Some(1),
            first_timestamp: Some(at.clone()),
            last_timestamp: Some(at),
            message: Some(format!("{AGGREGATED_MESSAGE_PREFIX}{message}")),
            ..event
        };
        (aggregated, group)
    }

    /// client-go's `eventObserve`: a patch of the Event already written under `key`, or a new one.
    fn observe(&mut self, mut event: Event, key: &str) -> EventWrite {
        let previous = self.observed.get_mut(key).cloned();
        let write = match previous {
            Some(p) if p.count > 0 => {
                event.metadata.name = Some(p.name);
                event.first_timestamp = p.first_timestamp;
                event.count = Some(p.count.saturating_add(1));
                let patch = json!({
                    "count": event.count,
                    "lastTimestamp": event.last_timestamp,
                    "message": event.message,
                });
                EventWrite::Patch { event, patch }
            }
            _ => EventWrite::Create(event),
        };
        let e = write.event();
        self.observed.insert(
            key,
            Observed {
                count: e.count.unwrap_or(1),
                first_timestamp: e.first_timestamp.clone(),
                name: e.metadata.name.clone().unwrap_or_default(),
            },
        );
        write
    }

    /// client-go's `EventSourceObjectSpamFilter`: whether the source may write about the object.
    fn allow(&mut self, event: &Event, now: Timestamp) -> bool {
        let key = spam_key(event);
        let burst = f64::from(self.options.spam_burst);
        let qps = self.options.spam_qps;
        let bucket = match self.spam.get_mut(&key) {
            Some(b) => b,
            None => {
                self.spam.insert(
                    &key,
                    TokenBucket {
                        tokens: burst,
                        last: now,
                    },
                );
                match self.spam.get_mut(&key) {
                    Some(b) => b,
                    None => return true,
                }
            }
        };
        let elapsed = now.duration_since(bucket.last).as_secs_f64().max(0.0);
        bucket.tokens = (bucket.tokens + elapsed * qps).min(burst);
        bucket.last = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EventSource, ObjectReference};

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + seconds).unwrap()
    }

    fn event(object: &str, reason: &str, message: &str, now: Timestamp) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(event_name(object, now)),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some("apps/v1".into()),
                kind: Some("Deployment".into()),
                namespace: Some("ns".into()),
                name: Some(object.into()),
                uid: Some(format!("uid-{object}")),
                ..Default::default()
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some("Normal".into()),
            source: Some(EventSource {
                component: Some("test".into()),
                host: None,
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            ..Default::default()
        }
    }

    fn name(c: &Correlation) -> &str {
        c.write.event().metadata.name.as_deref().unwrap()
    }

    #[test]
    fn the_same_event_again_patches_the_first_ones_count() {
        let mut c = Correlator::new(CorrelatorOptions::default());
        let first = c.correlate(event("a", "R", "m", at(0)), at(0)).unwrap();
        assert!(matches!(first.write, EventWrite::Create(_)));
        let first_name = name(&first).to_owned();
        for n in 2..=5 {
            let again = c.correlate(event("a", "R", "m", at(n)), at(n)).unwrap();
            assert_eq!(again.key, first.key);
            let EventWrite::Patch { event, patch } = &again.write else {
                panic!("expected a patch, got {again:?}");
            };
            assert_eq!(event.metadata.name.as_deref(), Some(first_name.as_str()));
            assert_eq!(event.count, Some(n as i32));
            assert_eq!(event.first_timestamp, Some(Time(at(0))));
            assert_eq!(patch["count"], json!(n));
            assert_eq!(patch["lastTimestamp"], json!(Time(at(n))));
            assert_eq!(patch["message"], json!("m"));
        }
        // Another object, reason or message is another Event.
        for other in [
            event("b", "R", "m", at(9)),
            event("a", "S", "m", at(9)),
            event("a", "R", "other", at(9)),
        ] {
            let o = c.correlate(other, at(9)).unwrap();
            assert!(matches!(o.write, EventWrite::Create(_)), "{o:?}");
            assert_ne!(o.key, first.key);
        }
    }

    #[test]
    fn similar_events_differing_in_message_are_aggregated() {
        let mut c = Correlator::new(CorrelatorOptions::default());
        // Nine distinct messages are written as they are.
        for i in 0..9 {
            let e = c
                .correlate(event("a", "R", &format!("m{i}"), at(i)), at(i))
                .unwrap();
            assert!(matches!(e.write, EventWrite::Create(_)));
            assert_eq!(
                e.write.event().message.as_deref(),
                Some(format!("m{i}").as_str())
            );
        }
        // The tenth starts one combined Event; later ones patch it.
        let tenth = c.correlate(event("a", "R", "m9", at(9)), at(9)).unwrap();
        let EventWrite::Create(combined) = &tenth.write else {
            panic!("expected a new combined event, got {tenth:?}");
        };
        assert_eq!(
            combined.message.as_deref(),
            Some("(combined from similar events): m9")
        );
        assert_eq!(combined.count, Some(1));
        assert_eq!(combined.reason.as_deref(), Some("R"));
        let eleventh = c.correlate(event("a", "R", "m10", at(10)), at(10)).unwrap();
        assert_eq!(eleventh.key, tenth.key);
        let EventWrite::Patch { event: e, patch } = &eleventh.write else {
            panic!("expected a patch, got {eleventh:?}");
        };
        assert_eq!(e.metadata.name, combined.metadata.name);
        assert_eq!(e.count, Some(2));
        assert_eq!(
            patch["message"],
            json!("(combined from similar events): m10")
        );
        // Another reason is not aggregated with them.
        let other = c.correlate(event("a", "S", "x", at(11)), at(11)).unwrap();
        assert_eq!(other.write.event().message.as_deref(), Some("x"));
    }

    #[test]
    fn aggregation_forgets_after_the_interval() {
        let mut c = Correlator::new(CorrelatorOptions::default());
        for i in 0..9 {
            c.correlate(event("a", "R", &format!("m{i}"), at(i)), at(i))
                .unwrap();
        }
        // Eleven minutes later the record starts afresh: the message is written as it is.
        let later = at(9 + 660);
        let e = c.correlate(event("a", "R", "m9", later), later).unwrap();
        assert_eq!(e.write.event().message.as_deref(), Some("m9"));
        assert!(matches!(e.write, EventWrite::Create(_)));
    }

    #[test]
    fn spam_filter_allows_a_burst_then_one_per_five_minutes() {
        let mut c = Correlator::new(CorrelatorOptions::default());
        let written = (0..30)
            .filter(|_| c.correlate(event("a", "R", "m", at(0)), at(0)).is_some())
            .count();
        assert_eq!(written, 25);
        // Another object has its own budget.
        assert!(c.correlate(event("b", "R", "m", at(0)), at(0)).is_some());
        // One token back after five minutes, not before.
        assert!(
            c.correlate(event("a", "R", "m", at(299)), at(299))
                .is_none()
        );
        let back = c.correlate(event("a", "R", "m", at(301)), at(301)).unwrap();
        assert!(
            c.correlate(event("a", "R", "m", at(302)), at(302))
                .is_none()
        );
        // The count includes the Events the filter dropped (client-go counts before filtering).
        assert_eq!(back.write.event().count, Some(32));
    }

    #[test]
    fn caches_are_bounded() {
        let mut c = Correlator::new(CorrelatorOptions {
            cache_size: 8,
            ..Default::default()
        });
        for i in 0..100 {
            c.correlate(event(&format!("o{i}"), "R", "m", at(i)), at(i))
                .unwrap();
        }
        assert_eq!(c.observed.len(), 8);
        assert_eq!(c.aggregates.len(), 8);
        assert_eq!(c.spam.len(), 8);
        // A forgotten Event is written anew.
        let e = c
            .correlate(event("o0", "R", "m", at(200)), at(200))
            .unwrap();
        assert!(matches!(e.write, EventWrite::Create(_)));
    }
}
