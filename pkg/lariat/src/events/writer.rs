//! The background writer of one [`super::EventSink`]: correlates queued Events ([`Correlator`]) and
//! writes them one at a time, in order, as client-go's broadcaster sink does. One sequential writer
//! per process (per rate-limit budget) keeps Events from crowding out the controllers' own requests
//! on a shared token bucket: when the API server budget is the bottleneck, Events wait and, once the
//! queue is full, are dropped — the controllers' writes are not slowed by them. A queued patch made
//! obsolete by a later write of the same Event (which carries the newer absolute count) is skipped,
//! so a burst of repeats costs a few writes, not one per repeat.
//!
//! A write that cannot reach the API server (connection refused or reset, timeout) is tried again,
//! as client-go's `recordToSink` does: up to [`SinkOptions::max_tries`] attempts, waiting
//! [`SinkOptions::retry_interval`] between them (the first wait a random part of it, so processes do
//! not retry in step after an outage), holding the Events behind it. A write the API server answered
//! with an error status (invalid, forbidden, namespace terminating…) is not tried again: it would be
//! refused the same way.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::{is_already_exists, is_not_found};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::correlator::{Correlator, CorrelatorOptions, EventWrite};

/// Correlated writes waiting for the writer. While they wait, later writes of the same Event
/// supersede queued patches.
const PENDING_CAPACITY: usize = 256;

/// How the writer of an [`super::EventSink`] retries a write the API server did not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SinkOptions {
    /// Attempts per write, the first included (client-go's `maxTriesPerEvent`: 12).
    pub max_tries: u32,
    /// Wait between attempts (client-go's default sleep duration: 10 s).
    pub retry_interval: Duration,
}

impl Default for SinkOptions {
    fn default() -> Self {
        SinkOptions {
            max_tries: 12,
            retry_interval: Duration::from_secs(10),
        }
    }
}

struct Job {
    key: String,
    seq: u64,
    write: EventWrite,
}

/// Sequence number of the latest write queued per Event key (removed once it is written).
type Latest = Arc<Mutex<HashMap<String, u64>>>;

/// Starts the writer: it reads `events` until `cancel` fires or every sender is gone.
pub fn spawn(
    client: Client,
    events: mpsc::Receiver<Event>,
    options: SinkOptions,
    cancel: CancellationToken,
) {
    let latest: Latest = Arc::default();
    let (tx, rx) = mpsc::channel(PENDING_CAPACITY);
    tokio::spawn(write_all(
        client,
        rx,
        latest.clone(),
        options,
        cancel.clone(),
    ));
    tokio::spawn(correlate(events, tx, latest, cancel));
}

/// Correlates each Event and queues its write.
async fn correlate(
    mut events: mpsc::Receiver<Event>,
    pending: mpsc::Sender<Job>,
    latest: Latest,
    cancel: CancellationToken,
) {
    let mut correlator = Correlator::new(CorrelatorOptions::default());
    let mut seq = 0u64;
    loop {
        let event = tokio::select! {
            _ = cancel.cancelled() => return,
            e = events.recv() => match e {
                Some(e) => e,
                None => return,
            },
        };
        let Some(c) = correlator.correlate(event, Timestamp::now()) else {
            continue;
        };
        seq += 1;
        latest.lock().insert(c.key.clone(), seq);
        let job = Job {
            key: c.key,
            seq,
            write: c.write,
        };
        tokio::select! {
            _ = cancel.cancelled() => return,
            r = pending.send(job) => if r.is_err() { return },
        }
    }
}

/// Whether a newer write of `job`'s Event is queued; forgets the job's key when it is the newest.
fn superseded(latest: &Latest, job: &Job) -> bool {
    let mut latest = latest.lock();
    match latest.get(&job.key) {
        Some(&newest) if newest > job.seq => true,
        _ => {
            latest.remove(&job.key);
            false
        }
    }
}

/// Writes the queued jobs in order.
async fn write_all(
    client: Client,
    mut jobs: mpsc::Receiver<Job>,
    latest: Latest,
    options: SinkOptions,
    cancel: CancellationToken,
) {
    loop {
        let job = tokio::select! {
            _ = cancel.cancelled() => return,
            j = jobs.recv() => match j {
                Some(j) => j,
                None => return,
            },
        };
        let is_patch = matches!(job.write, EventWrite::Patch { .. });
        if superseded(&latest, &job) && is_patch {
            continue;
        }
        let mut tries = 0u32;
        loop {
            let result = tokio::select! {
                _ = cancel.cancelled() => return,
                r = write(&client, &job.write) => r,
            };
            let Err(e) = result else { break };
            tries += 1;
            // An error status is the API server's answer; anything else (connection refused or
            // reset, timeout) may succeed later.
            let retry = !matches!(e, kube::Error::Api(_)) && tries < options.max_tries;
            warn_failed(job.write.event(), &e, tries, retry);
            if !retry {
                break;
            }
            let wait = if tries == 1 {
                options.retry_interval.mul_f64(fastrand::f64())
            } else {
                options.retry_interval
            };
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
            // A newer write of the same Event carries the newer count: this patch is not needed.
            if is_patch && superseded(&latest, &job) {
                break;
            }
        }
    }
}

fn warn_failed(event: &Event, e: &kube::Error, tries: u32, retry: bool) {
    let target = &event.involved_object;
    tracing::warn!(
        kind = target.kind.as_deref().unwrap_or_default(),
        namespace = target.namespace.as_deref().unwrap_or_default(),
        name = target.name.as_deref().unwrap_or_default(),
        reason = event.reason.as_deref().unwrap_or_default(),
        attempt = tries,
        will_retry = retry,
        error = %e,
        "failed to record event"
    );
}

/// Sends one write. A patch of an Event that is gone creates it again; a creation that finds the
/// name taken is dropped (client-go does both).
async fn write(client: &Client, write: &EventWrite) -> Result<(), kube::Error> {
    let event = write.event();
    let namespace = event.metadata.namespace.as_deref().unwrap_or_default();
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    match write {
        EventWrite::Create(event) => create(&api, event).await,
        EventWrite::Patch { event, patch } => {
            let name = event.metadata.name.as_deref().unwrap_or_default();
            match api
                .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
                .await
            {
                Ok(_) => Ok(()),
                Err(e) if is_not_found(&e) => {
                    let mut event = event.clone();
                    event.metadata.resource_version = None;
                    create(&api, &event).await
                }
                Err(e) => Err(e),
            }
        }
    }
}

async fn create(api: &Api<Event>, event: &Event) -> Result<(), kube::Error> {
    match api.create(&PostParams::default(), event).await {
        Ok(_) => Ok(()),
        Err(e) if is_already_exists(&e) => {
            tracing::debug!(
                name = event.metadata.name.as_deref().unwrap_or_default(),
                "event already exists; dropped"
            );
            Ok(())
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_like_client_go_by_default() {
        // client-go's maxTriesPerEvent and defaultSleepDuration (tools/record/event.go).
        let o = SinkOptions::default();
        assert_eq!(
            (o.max_tries, o.retry_interval),
            (12, Duration::from_secs(10))
        );
    }
}
