//! The background writer of one [`super::EventSink`]: correlates queued Events ([`Correlator`]) and
//! writes them one at a time, in order, as client-go's broadcaster sink does. One sequential writer
//! per process (per rate-limit budget) keeps Events from crowding out the controllers' own requests
//! on a shared token bucket: when the API server budget is the bottleneck, Events wait and, once the
//! queue is full, are dropped — the controllers' writes are not slowed by them. A queued patch made
//! obsolete by a later write of the same Event (which carries the newer absolute count) is skipped,
//! so a burst of repeats costs a few writes, not one per repeat.

use std::collections::HashMap;
use std::sync::Arc;

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

struct Job {
    key: String,
    seq: u64,
    write: EventWrite,
}

/// Sequence number of the latest write queued per Event key (removed once it is written).
type Latest = Arc<Mutex<HashMap<String, u64>>>;

/// Starts the writer: it reads `events` until `cancel` fires or every sender is gone.
pub fn spawn(client: Client, events: mpsc::Receiver<Event>, cancel: CancellationToken) {
    let latest: Latest = Arc::default();
    let (tx, rx) = mpsc::channel(PENDING_CAPACITY);
    tokio::spawn(write_all(client, rx, latest.clone(), cancel.clone()));
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

/// Writes the queued jobs in order.
async fn write_all(
    client: Client,
    mut jobs: mpsc::Receiver<Job>,
    latest: Latest,
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
        let superseded = {
            let mut latest = latest.lock();
            match latest.get(&job.key) {
                Some(&newest) if newest > job.seq => true,
                _ => {
                    latest.remove(&job.key);
                    false
                }
            }
        };
        if superseded && matches!(job.write, EventWrite::Patch { .. }) {
            continue;
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = write(&client, job.write) => {}
        }
    }
}

/// Sends one write; failures are logged (an Event is informational). A patch of an Event that is
/// gone creates it again; a creation that finds the name taken is dropped (client-go does both).
async fn write(client: &Client, write: EventWrite) {
    let event = write.event();
    let namespace = event.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
    let result = match write {
        EventWrite::Create(event) => create(&api, &event).await,
        EventWrite::Patch { mut event, patch } => {
            let name = event.metadata.name.clone().unwrap_or_default();
            match api
                .patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
            {
                Ok(_) => Ok(()),
                Err(e) if is_not_found(&e) => {
                    event.metadata.resource_version = None;
                    create(&api, &event).await
                }
                Err(e) => Err((event, e)),
            }
        }
    };
    if let Err((event, e)) = result {
        let target = &event.involved_object;
        tracing::warn!(
            kind = target.kind.as_deref().unwrap_or_default(),
            namespace = target.namespace.as_deref().unwrap_or_default(),
            name = target.name.as_deref().unwrap_or_default(),
            reason = event.reason.as_deref().unwrap_or_default(),
            error = %e,
            "failed to record event"
        );
    }
}

async fn create(api: &Api<Event>, event: &Event) -> Result<(), (Event, kube::Error)> {
    match api.create(&PostParams::default(), event).await {
        Ok(_) => Ok(()),
        Err(e) if is_already_exists(&e) => {
            tracing::debug!(
                name = event.metadata.name.as_deref().unwrap_or_default(),
                "event already exists; dropped"
            );
            Ok(())
        }
        Err(e) => Err((event.clone(), e)),
    }
}
