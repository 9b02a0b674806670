//! The Event recorder against a real API server: repeats of one Event become one Event object whose
//! `count` is patched, similar Events about one object are combined, an object's Events are capped
//! by the spam filter, and a repeat of a deleted Event creates it again (client-go's
//! `EventCorrelator` semantics). Counted on the API server's objects and on its own request
//! metrics. Tests run one at a time (they count the server's Event writes).
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event, ObjectReference};
use karmada_e2e::in_process::{create_namespace, serial};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use lariat::events::{EventRecorder, EventSink, EventType, SinkOptions, reference_of};
use serde_json::json;
use testenv::{EnvOptions, TestEnv};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(60);

fn env() -> &'static TestEnv {
    // No kube-controller-manager: the recorder under test is the only writer of Events.
    testenv::shared(EnvOptions {
        host_controller_manager: false,
        ..Default::default()
    })
}

async fn client() -> Client {
    env().host().client().await
}

/// A namespace and a ConfigMap in it to record Events about.
async fn object(client: &Client, ns: &str, name: &str) -> ObjectReference {
    create_namespace(client, ns, json!({})).await;
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": ns, "name": name},
    }))
    .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let cm = match api.create(&PostParams::default(), &cm).await {
        Ok(cm) => cm,
        Err(_) => api.get(name).await.unwrap(),
    };
    reference_of(&cm)
}

/// The Events about `name` in `ns`.
async fn events_about(client: &Client, ns: &str, name: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap()
        .items
}

/// Event writes (`POST`, `PATCH`) the API server has served, from its own metrics.
async fn event_writes(client: &Client) -> BTreeMap<String, u64> {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(request).await.unwrap();
    let samples = karmada_e2e::process::parse_metrics(&text);
    karmada_e2e::process::event_writes(&samples)
}

fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, verb: &str) -> u64 {
    after.get(verb).copied().unwrap_or(0) - before.get(verb).copied().unwrap_or(0)
}

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    karmada_e2e::wait::eventually(what, WAIT, Duration::from_millis(100), check).await
}

/// Waits until the only Event about `name` has `count`; returns it.
async fn single_event_with_count(client: &Client, ns: &str, name: &str, count: i32) -> Event {
    eventually(
        &format!("one Event about {name} with count {count}"),
        || async {
            let events = events_about(client, ns, name).await;
            match events.as_slice() {
                [e] if e.count == Some(count) => Some(e.clone()),
                _ => None,
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_event_recorded_n_times_is_one_event_with_count_n() {
    let _g = serial().lock().await;
    let client = client().await;
    let ns = "events-repeat";
    let target = object(&client, ns, "repeated").await;
    let before = event_writes(&client).await;
    let cancel = CancellationToken::new();
    let recorder = EventRecorder::new(client.clone(), "events-test", &cancel);
    const N: i32 = 20;
    let record = async || {
        recorder
            .record(
                &target,
                EventType::Warning,
                "SyncFailed",
                "the same failure",
            )
            .await;
    };
    for _ in 0..N {
        record().await;
    }
    let e = single_event_with_count(&client, ns, "repeated", N).await;
    assert!(e.name_any().starts_with("repeated."), "{}", e.name_any());
    assert_eq!(e.reason.as_deref(), Some("SyncFailed"));
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(e.message.as_deref(), Some("the same failure"));
    assert_eq!(
        e.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("events-test")
    );
    assert!(e.last_timestamp >= e.first_timestamp);
    let after = event_writes(&client).await;
    assert_eq!(delta(&before, &after, "POST"), 1, "one Event created");
    let patches = delta(&before, &after, "PATCH");
    assert!(
        (1..N as u64).contains(&patches),
        "at most one patch per repeat, got {patches}"
    );

    // A repeat of an Event someone deleted creates it again, with the count so far.
    Api::<Event>::namespaced(client.clone(), ns)
        .delete(&e.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    record().await;
    let again = single_event_with_count(&client, ns, "repeated", N + 1).await;
    assert_eq!(again.name_any(), e.name_any());
    cancel.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn similar_events_are_combined_and_each_object_is_capped() {
    let _g = serial().lock().await;
    let client = client().await;
    let ns = "events-similar";
    let similar = object(&client, ns, "similar").await;
    let spammy = object(&client, ns, "spammy").await;
    let cancel = CancellationToken::new();
    let recorder = EventRecorder::new(client.clone(), "events-test", &cancel);

    // Twelve messages for one reason: nine Events as they are, then one combined Event counting
    // the tenth to the twelfth.
    for i in 0..12 {
        recorder
            .record(&similar, EventType::Normal, "Progress", format!("step {i}"))
            .await;
    }
    let events = eventually(
        "nine plain Events and one combined with count 3",
        || async {
            let events = events_about(&client, ns, "similar").await;
            let combined = events
                .iter()
                .filter(|e| e.count == Some(3))
                .filter(|e| e.message.as_deref() == Some("(combined from similar events): step 11"))
                .count();
            (events.len() == 10 && combined == 1).then_some(events)
        },
    )
    .await;
    let mut plain: Vec<String> = events
        .iter()
        .filter(|e| e.count == Some(1))
        .filter_map(|e| e.message.clone())
        .collect();
    plain.sort();
    let expected: Vec<String> = {
        let mut v: Vec<String> = (0..9).map(|i| format!("step {i}")).collect();
        v.sort();
        v
    };
    assert_eq!(plain, expected);

    // Forty repeats about one object: the spam filter lets 25 through (client-go's burst), so the
    // one Event stops at count 25.
    for _ in 0..40 {
        recorder
            .record(&spammy, EventType::Normal, "Tick", "again")
            .await;
    }
    single_event_with_count(&client, ns, "spammy", 25).await;
    cancel.cancel();
}

/// Writes that do not reach the API server are tried again, as client-go's `recordToSink` does;
/// writes the API server refuses are not. On an environment of its own: the test stops its API
/// server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_recorded_while_the_api_server_is_down_is_written_when_it_is_back() {
    let env = TestEnv::start(EnvOptions {
        host_controller_manager: false,
        ..Default::default()
    })
    .await
    .unwrap_or_else(|e| panic!("start an environment: {e}"));
    let client = env.host().client().await;
    let ns = "events-outage";
    let target = object(&client, ns, "outage").await;
    let cancel = CancellationToken::new();
    // A short interval keeps the test short; the attempts (30 s in all) outlast an API server
    // restart on a loaded machine.
    let options = SinkOptions {
        max_tries: 30,
        retry_interval: Duration::from_secs(1),
    };
    let recorder = EventSink::start_with(client.clone(), options, &cancel).recorder("events-test");

    // Refused by the API server (its namespace does not exist): one POST, never repeated.
    let before = event_writes(&client).await;
    let mut nowhere = target.clone();
    nowhere.namespace = Some("events-no-such-namespace".to_owned());
    recorder
        .record(&nowhere, EventType::Warning, "SyncFailed", "refused")
        .await;
    eventually("the refused Event's POST", || async {
        let after = event_writes(&client).await;
        (delta(&before, &after, "POST") >= 1).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = event_writes(&client).await;
    assert_eq!(
        delta(&before, &after, "POST"),
        1,
        "a refused Event was tried again"
    );

    // Recorded while the API server is down: written after it is back.
    tokio::task::block_in_place(|| env.host().stop());
    recorder
        .record(
            &target,
            EventType::Warning,
            "SyncFailed",
            "recorded during the outage",
        )
        .await;
    // At least two attempts fail against the stopped server.
    tokio::time::sleep(Duration::from_secs(3)).await;
    env.host()
        .start()
        .await
        .unwrap_or_else(|e| panic!("restart the API server: {e}"));
    let client = env.host().client().await;
    let e = single_event_with_count(&client, ns, "outage", 1).await;
    assert_eq!(e.message.as_deref(), Some("recorded during the outage"));
    cancel.cancel();
}
