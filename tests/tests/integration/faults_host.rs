//! Fault injection on the host side, against real processes only: a fresh testenv per scenario
//! (etcd, host and two member kube-apiservers), the release `karmada-controller-manager` binary,
//! members joined with `karmadactl join`, and a few hundred templates propagated before the fault.
//!
//! Each scenario asserts what a user cares about: every template reaches every eligible member
//! with its latest content, no member object was recreated (UIDs unchanged) or lost, no binding
//! or Work is duplicated, and the time to recover (printed, and recorded in
//! `docs/reliability.md`).
// test-runner: one job per test (each scenario starts its own environment; one after the other
// they took ~430 s as one job)
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karmada_apis::well_known::{
    RESOURCE_BINDING_NAME_ANNOTATION, RESOURCE_BINDING_NAMESPACE_ANNOTATION,
};
use karmada_apis::{Cluster, PropagationPolicy, ResourceBinding, Work};
use karmada_bench::session::{Qps, Session};
use karmada_bench::workload::{self, Kind, TEMPLATE_LABEL, Template};
use karmada_e2e::in_process::{condition, serial};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// Label the scenarios change on templates; its value must reach every member object.
const REV: &str = "faults.karmada-rs.io/rev";
/// Label and annotation the competing writer owns on bindings and Works.
const COMPETITOR: &str = "faults.karmada-rs.io/competitor";
const MEMBERS: [&str; 2] = ["member1", "member2"];
/// Longest wait for any convergence: generous for a loaded 2-core machine; the figures that
/// matter are the measured times, printed and recorded.
const CONVERGE: Duration = Duration::from_secs(120);

/// A fresh environment with `per_kind` Deployments and ConfigMaps over `namespaces` namespaces,
/// propagated to both members.
async fn start(
    per_kind: usize,
    namespaces: usize,
    extra_args: &[&str],
) -> (Session, Vec<Template>) {
    let s = Session::start_with(2, namespaces, Some(Qps::Raised), extra_args)
        .await
        .unwrap_or_else(|e| panic!("start the environment: {e:#}"));
    let templates = workload::templates("f", per_kind, per_kind, &s.namespaces);
    workload::create_all(&s.host, &templates, 8)
        .await
        .unwrap_or_else(|e| panic!("create templates: {e:#}"));
    let took = converge(&s, &templates, &MEMBERS, None, "initial propagation").await;
    eprintln!(
        "{} templates propagated to 2 members in {took:?}",
        templates.len()
    );
    (s, templates)
}

/// What a member holds of a template: its UID and its [`REV`] label.
type Held = BTreeMap<(String, Kind, String, String), (String, Option<String>)>;

/// Every managed Deployment and ConfigMap in every member.
async fn held(s: &Session) -> Held {
    let mut out = Held::new();
    let lp = ListParams::default().labels("karmada.io/managed=true");
    for (member, client) in &s.members {
        let (deployments, configmaps) = (
            Api::<Deployment>::all(client.clone()),
            Api::<ConfigMap>::all(client.clone()),
        );
        let (d, c) = tokio::join!(
            deployments.list_metadata(&lp),
            configmaps.list_metadata(&lp)
        );
        let metas = |kind: Kind, items: Result<Vec<ObjectMeta>, kube::Error>| {
            items.unwrap_or_else(|e| panic!("list {kind:?} in {member}: {e}"))
        };
        let d = metas(
            Kind::Deployment,
            d.map(|l| l.items.into_iter().map(|o| o.metadata).collect()),
        );
        let c = metas(
            Kind::ConfigMap,
            c.map(|l| l.items.into_iter().map(|o| o.metadata).collect()),
        );
        for (kind, list) in [(Kind::Deployment, d), (Kind::ConfigMap, c)] {
            for o in list {
                let key = (
                    member.clone(),
                    kind,
                    o.namespace.clone().unwrap_or_default(),
                    o.name.clone().unwrap_or_default(),
                );
                let rev = o.labels.as_ref().and_then(|l| l.get(REV).cloned());
                out.insert(key, (o.uid.clone().unwrap_or_default(), rev));
            }
        }
    }
    out
}

fn key(member: &str, t: &Template) -> (String, Kind, String, String) {
    (
        member.to_string(),
        t.kind,
        t.namespace.clone(),
        t.name.clone(),
    )
}

/// Waits until every template is in every one of `members` with [`REV`] = `rev`; returns how
/// long that took.
async fn converge(
    s: &Session,
    templates: &[Template],
    members: &[&str],
    rev: Option<&str>,
    what: &str,
) -> Duration {
    let t0 = Instant::now();
    loop {
        let now = held(s).await;
        let missing: Vec<String> = members
            .iter()
            .flat_map(|m| templates.iter().map(move |t| (m, t)))
            .filter(|(m, t)| now.get(&key(m, t)).map(|h| h.1.as_deref()) != Some(rev))
            .map(|(m, t)| format!("{m}/{}/{}", t.namespace, t.name))
            .collect();
        if missing.is_empty() {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < CONVERGE,
            "{what}: {} member objects missing or without {REV}={rev:?} after {CONVERGE:?}, e.g. \
             {:?}\nlog tail:\n{}",
            missing.len(),
            &missing[..missing.len().min(5)],
            s.log_tail(40)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Sets [`REV`] = `rev` on every template (a merge patch of the label, as a user's change).
async fn set_rev(host: &Client, templates: &[Template], rev: &str) {
    let patch = json!({"metadata": {"labels": {REV: rev}}});
    futures::stream::iter(templates)
        .map(|t| {
            let patch = patch.clone();
            async move {
                let pp = PatchParams::default();
                let r = match t.kind {
                    Kind::Deployment => Api::<Deployment>::namespaced(host.clone(), &t.namespace)
                        .patch(&t.name, &pp, &Patch::Merge(&patch))
                        .await
                        .map(drop),
                    Kind::ConfigMap => Api::<ConfigMap>::namespaced(host.clone(), &t.namespace)
                        .patch(&t.name, &pp, &Patch::Merge(&patch))
                        .await
                        .map(drop),
                };
                r.unwrap_or_else(|e| panic!("patch {}/{}: {e}", t.namespace, t.name));
            }
        })
        .buffer_unordered(8)
        .collect::<Vec<()>>()
        .await;
}

/// Member objects of `before` that were lost or recreated in `after` (for the members and
/// templates given).
fn recreated(before: &Held, after: &Held, members: &[&str], templates: &[Template]) -> Vec<String> {
    let mut out = Vec::new();
    for m in members {
        for t in templates {
            let k = key(m, t);
            let (Some(b), a) = (before.get(&k), after.get(&k)) else {
                continue;
            };
            if a.map(|a| &a.0) != Some(&b.0) {
                out.push(format!(
                    "{m}/{}/{}: {:?} -> {:?}",
                    t.namespace,
                    t.name,
                    b.0,
                    a.map(|a| &a.0)
                ));
            }
        }
    }
    out
}

/// One binding per template and, per member in `members`, one Work per binding; nothing else
/// refers to these bindings.
async fn assert_no_duplicates(s: &Session, templates: &[Template], members: &[&str]) {
    let want: BTreeSet<(String, String)> = templates
        .iter()
        .map(|t| (t.namespace.clone(), t.binding_name()))
        .collect();
    let mut bindings = BTreeMap::<(String, String), usize>::new();
    for ns in &s.namespaces {
        for rb in Api::<ResourceBinding>::namespaced(s.host.clone(), ns)
            .list_metadata(&ListParams::default())
            .await
            .unwrap()
        {
            *bindings.entry((ns.clone(), rb.name_any())).or_default() += 1;
        }
    }
    let extra: Vec<_> = bindings.keys().filter(|k| !want.contains(*k)).collect();
    assert!(extra.is_empty(), "bindings for no template: {extra:?}");
    assert_eq!(bindings.len(), want.len(), "one binding per template");
    for m in members {
        let mut works = BTreeMap::<(String, String), Vec<String>>::new();
        for w in Api::<Work>::namespaced(s.host.clone(), &format!("karmada-es-{m}"))
            .list_metadata(&ListParams::default())
            .await
            .unwrap()
        {
            let a = w.annotations();
            if let (Some(ns), Some(name)) = (
                a.get(RESOURCE_BINDING_NAMESPACE_ANNOTATION),
                a.get(RESOURCE_BINDING_NAME_ANNOTATION),
            ) {
                works
                    .entry((ns.clone(), name.clone()))
                    .or_default()
                    .push(w.name_any());
            }
        }
        let dup: Vec<_> = works.iter().filter(|(_, v)| v.len() > 1).collect();
        assert!(dup.is_empty(), "{m}: bindings with several Works: {dup:?}");
        let missing: Vec<_> = want.iter().filter(|k| !works.contains_key(*k)).collect();
        assert!(
            missing.is_empty(),
            "{m}: bindings without a Work: {missing:?}"
        );
        let stray: Vec<_> = works
            .keys()
            .filter(|k| s.namespaces.contains(&k.0) && !want.contains(*k))
            .collect();
        assert!(
            stray.is_empty(),
            "{m}: Works of no template's binding: {stray:?}"
        );
    }
}

/// The client URL of the environment's etcd, from its command line.
fn etcd_url(s: &Session) -> String {
    let pid = s.env().etcd_pid();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("etcd's command line");
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let mut urls = args.iter().enumerate().filter_map(|(i, a)| {
        a.strip_prefix("--advertise-client-urls=")
            .or_else(|| a.strip_prefix("--listen-client-urls="))
            .map(str::to_string)
            .or_else(|| {
                (a == "--advertise-client-urls" || a == "--listen-client-urls")
                    .then(|| args.get(i + 1).cloned())
                    .flatten()
            })
    });
    let url = urls
        .next()
        .unwrap_or_else(|| panic!("no client URL in etcd's arguments {args:?}"));
    url.split(',')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string()
}

/// POSTs `body` to etcd's v3 JSON gateway at `path`.
async fn etcd_post(url: &str, path: &str, body: Value) -> Value {
    let addr = url.trim_start_matches("http://").to_string();
    let body = body.to_string();
    let path = path.to_string();
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut conn = std::net::TcpStream::connect(&addr).expect("connect to etcd");
        conn.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        write!(
            conn,
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        conn.read_to_string(&mut out).expect("etcd's answer");
        let (head, rest) = out.split_once("\r\n\r\n").expect("an HTTP answer");
        assert!(head.starts_with("HTTP/1.1 200"), "etcd {path}: {out}");
        // Chunked or not: the JSON object is between the first '{' and the last '}'.
        let json = &rest[rest.find('{').unwrap_or(0)..=rest.rfind('}').unwrap_or(0)];
        serde_json::from_str(json).unwrap_or_else(|e| panic!("etcd {path}: {e}: {out}"))
    })
    .await
    .unwrap()
}

/// Compacts etcd's history up to its current revision (physically); returns that revision.
async fn compact_etcd(url: &str) -> i64 {
    // A range read of one key reports the store's current revision in its header.
    let range = etcd_post(url, "/v3/kv/range", json!({"key": "AA==", "limit": 1})).await;
    let revision: i64 = range["header"]["revision"]
        .as_str()
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no revision in {range}"));
    etcd_post(
        url,
        "/v3/kv/compaction",
        json!({"revision": revision.to_string(), "physical": true}),
    )
    .await;
    revision
}

/// Lines of the controller-manager's log that report a `410 Gone` / expired watch.
fn gone_lines(s: &Session) -> Vec<String> {
    s.kcm()
        .unwrap()
        .log()
        .lines()
        .filter(|l| {
            l.contains("too old resource version")
                || l.contains("code: 410")
                || l.contains("410 Gone")
                || l.contains("reason: \"Expired\"")
        })
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_that_expire_relist_and_miss_no_change() {
    let _serial = serial().lock().await;
    let (s, templates) = start(40, 2, &[]).await;
    let before = held(&s).await;
    let gone_before = gone_lines(&s).len();

    // The controller-manager is frozen with its watches open; meanwhile every template changes,
    // a few are deleted and new ones created. Then etcd's history is compacted to now and the
    // host API server restarts with an empty watch cache: the watches cannot resume from the
    // resourceVersion they last saw (410 Gone) and must relist.
    let kcm = s.kcm().unwrap();
    kcm.signal(libc::SIGSTOP);
    set_rev(&s.host, &templates, "1").await;
    let (deleted, kept): (Vec<Template>, Vec<Template>) = templates
        .iter()
        .cloned()
        .partition(|t| t.kind == Kind::ConfigMap && t.name.ends_with('7'));
    for t in &deleted {
        Api::<ConfigMap>::namespaced(s.host.clone(), &t.namespace)
            .delete(&t.name, &Default::default())
            .await
            .unwrap();
    }
    let added = workload::templates("g", 5, 5, &s.namespaces);
    workload::create_all(&s.host, &added, 8).await.unwrap();
    set_rev(&s.host, &added, "1").await;
    let revision = compact_etcd(&etcd_url(&s)).await;
    s.env().host().stop();
    s.env()
        .host()
        .start()
        .await
        .expect("restart the host API server");
    let t0 = Instant::now();
    kcm.signal(libc::SIGCONT);

    let mut all = kept.clone();
    all.extend(added.iter().cloned());
    let took = converge(&s, &all, &MEMBERS, Some("1"), "after the relist").await;
    // The deleted templates are gone from the members too (a relist reports them deleted), and
    // so are their bindings.
    let gone_from_members = async {
        loop {
            let now = held(&s).await;
            let mut left: Vec<_> = MEMBERS
                .iter()
                .flat_map(|m| deleted.iter().map(move |t| key(m, t)))
                .filter(|k| now.contains_key(k))
                .map(|k| format!("{k:?}"))
                .collect();
            for t in &deleted {
                let rbs = Api::<ResourceBinding>::namespaced(s.host.clone(), &t.namespace);
                if rbs.get_opt(&t.binding_name()).await.unwrap().is_some() {
                    left.push(format!("binding {}/{}", t.namespace, t.binding_name()));
                }
            }
            if left.is_empty() {
                return t0.elapsed();
            }
            assert!(
                t0.elapsed() < CONVERGE,
                "deleted templates still in members: {left:?}\n{}",
                s.log_tail(40)
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    .await;
    let gone = gone_lines(&s);
    assert!(
        gone.len() > gone_before,
        "no watch got 410 Gone after compacting etcd to {revision} and restarting the API \
         server; watch lines of the log:\n{}",
        s.kcm()
            .unwrap()
            .log()
            .lines()
            .filter(|l| l.contains("watch"))
            .take(40)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let after = held(&s).await;
    let lost = recreated(&before, &after, &MEMBERS, &kept);
    assert!(
        lost.is_empty(),
        "member objects recreated or lost: {lost:?}"
    );
    assert_no_duplicates(&s, &all, &MEMBERS).await;
    eprintln!(
        "FIGURE compaction: 410s logged {}, {} changes + {} deletions + {} creations reached both \
         members {took:?} after SIGCONT (deletions {gone_from_members:?}); e.g. {:?}",
        gone.len() - gone_before,
        kept.len(),
        deleted.len(),
        added.len(),
        gone.first()
    );
}

/// Stamps [`COMPETITOR`] = `value` on every object of `api` as a read-modify-write PUT with the
/// resourceVersion read (so it conflicts with the controllers); records the values that landed.
async fn compete<K>(
    api: Api<K>,
    value: u64,
    landed: &mut HashMap<String, u64>,
    conflicts: &AtomicU64,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let Ok(list) = api.list(&ListParams::default()).await else {
        return;
    };
    for mut o in list {
        let name = o.name_any();
        let ns = o.namespace().unwrap_or_default();
        o.labels_mut().insert(COMPETITOR.into(), value.to_string());
        o.annotations_mut()
            .insert(COMPETITOR.into(), value.to_string());
        match api.replace(&name, &PostParams::default(), &o).await {
            Ok(_) => {
                landed.insert(format!("{ns}/{name}"), value);
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                conflicts.fetch_add(1, Ordering::Relaxed);
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            // The environment going away under a stopped test; anything else is a failure.
            Err(e) => panic!("competitor on {ns}/{name}: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn a_competing_writer_causes_conflicts_and_loses_nothing() {
    let _serial = serial().lock().await;
    let (s, templates) = start(30, 2, &[]).await;
    let before = held(&s).await;

    // The competitor rewrites every binding's and Work's labels and annotations, as fast as it
    // can, with the resourceVersion it read: the controllers' writes and its own conflict.
    let stop = Arc::new(AtomicBool::new(false));
    let conflicts = Arc::new(AtomicU64::new(0));
    let competitor = {
        let (stop, conflicts) = (stop.clone(), conflicts.clone());
        let host = s.host.clone();
        let namespaces = s.namespaces.clone();
        tokio::spawn(async move {
            let mut landed: HashMap<String, u64> = HashMap::new();
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) {
                round += 1;
                for ns in &namespaces {
                    let rbs = Api::<ResourceBinding>::namespaced(host.clone(), ns);
                    compete(rbs, round, &mut landed, &conflicts).await;
                }
                for m in MEMBERS {
                    let works = Api::<Work>::namespaced(host.clone(), &format!("karmada-es-{m}"));
                    compete(works, round, &mut landed, &conflicts).await;
                }
            }
            (round, landed)
        })
    };
    // Let it run a round, then change every template while it keeps going.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let t0 = Instant::now();
    set_rev(&s.host, &templates, "1").await;
    let took = converge(
        &s,
        &templates,
        &MEMBERS,
        Some("1"),
        "under a competing writer",
    )
    .await;
    // And a second wave, to be sure the conflicts did not stall anything.
    set_rev(&s.host, &templates, "2").await;
    let took2 = converge(&s, &templates, &MEMBERS, Some("2"), "second wave").await;
    stop.store(true, Ordering::Relaxed);
    let (rounds, landed) = competitor.await.unwrap();
    let conflicts = conflicts.load(Ordering::Relaxed);
    assert!(
        conflicts > 0,
        "the competitor never conflicted: the test proves nothing"
    );

    // Give the controllers time to finish what the last wave started, then check that every
    // value the competitor wrote is still there: no controller write dropped it.
    let settled = converge(&s, &templates, &MEMBERS, Some("2"), "settled").await;
    let mut lost = Vec::new();
    let mut check = |kind: &str,
                     ns: &str,
                     name: &str,
                     labels: &BTreeMap<String, String>,
                     annotations: &BTreeMap<String, String>| {
        if let Some(v) = landed.get(&format!("{ns}/{name}")) {
            let v = v.to_string();
            if labels.get(COMPETITOR) != Some(&v) || annotations.get(COMPETITOR) != Some(&v) {
                lost.push(format!(
                    "{kind} {ns}/{name}: wrote {v}, now label {:?} annotation {:?}",
                    labels.get(COMPETITOR),
                    annotations.get(COMPETITOR)
                ));
            }
        }
    };
    let mut fully_applied = 0;
    for ns in &s.namespaces {
        for rb in Api::<ResourceBinding>::namespaced(s.host.clone(), ns)
            .list(&ListParams::default())
            .await
            .unwrap()
        {
            check("binding", ns, &rb.name_any(), rb.labels(), rb.annotations());
            // The controllers' own fields are right: both clusters, FullyApplied.
            let clusters: Vec<&str> = rb.spec.clusters.iter().map(|c| c.name.as_str()).collect();
            assert_eq!(clusters, MEMBERS, "{ns}/{}", rb.name_any());
            let status = rb
                .status
                .as_ref()
                .map(|s| &s.conditions[..])
                .unwrap_or_default();
            if condition(status, "FullyApplied").is_some_and(|c| c.0 == "True") {
                fully_applied += 1;
            }
        }
    }
    for m in MEMBERS {
        let ns = format!("karmada-es-{m}");
        for w in Api::<Work>::namespaced(s.host.clone(), &ns)
            .list(&ListParams::default())
            .await
            .unwrap()
        {
            check("work", &ns, &w.name_any(), w.labels(), w.annotations());
            if w.annotations()
                .contains_key(RESOURCE_BINDING_NAME_ANNOTATION)
            {
                let rev = w.spec.workload.manifests[0].to_value().unwrap()["metadata"]["labels"]
                    [REV]
                    .clone();
                assert_eq!(
                    rev,
                    json!("2"),
                    "Work {ns}/{} holds an old manifest",
                    w.name_any()
                );
            }
        }
    }
    assert!(lost.is_empty(), "competitor's updates lost: {lost:#?}");
    assert!(
        landed.len() >= templates.len(),
        "the competitor wrote too little: {}",
        landed.len()
    );
    let after = held(&s).await;
    let recreated = recreated(&before, &after, &MEMBERS, &templates);
    assert!(
        recreated.is_empty(),
        "member objects recreated or lost: {recreated:?}"
    );
    assert_no_duplicates(&s, &templates, &MEMBERS).await;
    eprintln!(
        "FIGURE conflicts: competitor {rounds} rounds, {conflicts} of its PUTs conflicted, {} \
         objects kept its last value; wave 1 converged in {took:?} (from {:?} before), wave 2 in \
         {took2:?}; {fully_applied} of {} bindings FullyApplied at the end (settle {settled:?})",
        landed.len(),
        t0.elapsed(),
        templates.len()
    );
}

/// The `Ready` condition of Cluster `name` as (status, reason, message).
async fn ready(host: &Client, name: &str) -> Option<(String, String, String)> {
    let c = Api::<Cluster>::all(host.clone()).get(name).await.unwrap();
    condition(&c.status?.conditions, "Ready")
}

/// Waits until `check` gives a value; returns it and how long that took.
async fn until<T>(
    what: &str,
    s: &Session,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> (T, Duration) {
    let t0 = Instant::now();
    loop {
        if let Some(v) = check().await {
            return (v, t0.elapsed());
        }
        assert!(
            t0.elapsed() < CONVERGE,
            "timed out waiting for {what}\n{}",
            s.log_tail(40)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A namespace with a policy placing this namespace's labelled templates by `placement`, and
/// one ConfigMap template there; returns the template.
async fn placed(s: &Session, ns: &str, placement: Value) -> Template {
    workload::create_namespace(&s.host, ns).await.unwrap();
    let policy: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "faults", "namespace": ns},
        "spec": {
            "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap",
                "labelSelector": {"matchLabels": {TEMPLATE_LABEL: "true"}}}],
            "placement": placement}}))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(s.host.clone(), ns)
        .create(&PostParams::default(), &policy)
        .await
        .unwrap_or_else(|e| panic!("create policy in {ns}: {e}"));
    // The template waits for its namespace in the members (the namespace controller).
    until(&format!("namespace {ns} in the members"), s, async || {
        for (_, c) in &s.members {
            Api::<k8s_openapi::api::core::v1::Namespace>::all(c.clone())
                .get_opt(ns)
                .await
                .unwrap()?;
        }
        Some(())
    })
    .await;
    let t = Template {
        kind: Kind::ConfigMap,
        namespace: ns.into(),
        name: "placed".into(),
    };
    workload::create(&s.host, &t).await.unwrap();
    t
}

/// The `Scheduled` condition of `t`'s binding, once it has one.
async fn scheduled(s: &Session, t: &Template) -> ((String, String, String), Vec<String>) {
    let rbs = Api::<ResourceBinding>::namespaced(s.host.clone(), &t.namespace);
    until(
        &format!("Scheduled on {}", t.binding_name()),
        s,
        async || {
            let rb = rbs.get_opt(&t.binding_name()).await.unwrap()?;
            let c = condition(&rb.status.as_ref()?.conditions, "Scheduled")?;
            Some((c, rb.spec.clusters.iter().map(|c| c.name.clone()).collect()))
        },
    )
    .await
    .0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn bad_credentials_unknown_clusters_and_unsatisfiable_policies_disturb_nothing() {
    let _serial = serial().lock().await;
    let (s, templates) = start(
        10,
        2,
        &[
            "--cluster-status-update-frequency=1s",
            "--cluster-failure-threshold=3s",
            "--cluster-success-threshold=3s",
        ],
    )
    .await;
    let before = held(&s).await;

    // 1. member2's token is replaced by a wrong one: Ready=False with a reason that says so.
    let secrets: Api<Secret> = Api::namespaced(s.host.clone(), "karmada-cluster");
    let good = secrets.get("member2").await.unwrap().data.unwrap()["token"].clone();
    let set_token = async |token: &[u8]| {
        let token = k8s_openapi::ByteString(token.to_vec());
        secrets
            .patch(
                "member2",
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"token": token}})),
            )
            .await
            .unwrap();
    };
    set_token(b"not-a-valid-token").await;
    let (why, not_ready_after) = until("member2 Ready=False", &s, async || {
        ready(&s.host, "member2").await.filter(|c| c.0 == "False")
    })
    .await;
    assert_eq!(why.1, "ClusterAuthenticationFailed", "{why:?}");
    assert!(!why.2.is_empty(), "a message says what failed: {why:?}");
    assert_eq!(ready(&s.host, "member1").await.unwrap().0, "True");
    // member1 keeps working at its usual pace: a change reaches it.
    let t1 = Instant::now();
    set_rev(&s.host, &templates, "1").await;
    let to_member1 = converge(
        &s,
        &templates,
        &["member1"],
        Some("1"),
        "member1 while member2 is refused",
    )
    .await;
    let during = held(&s).await;
    // Nothing of member2 was touched while it refused us.
    let member2_now: Vec<_> = during.iter().filter(|(k, _)| k.0 == "member2").collect();
    let member2_before: Vec<_> = before.iter().filter(|(k, _)| k.0 == "member2").collect();
    assert_eq!(
        member2_now, member2_before,
        "member2's objects changed while refused"
    );
    // The right token again: member2 is Ready and catches up.
    set_token(&good.0).await;
    let t2 = Instant::now();
    until("member2 Ready=True", &s, async || {
        ready(&s.host, "member2").await.filter(|c| c.0 == "True")
    })
    .await;
    let member2_back = converge(&s, &templates, &MEMBERS, Some("1"), "member2 caught up").await;
    let member2_back = t2.elapsed().max(member2_back);

    // 2. A policy naming a cluster that does not exist: the template goes where it can.
    let partly = placed(
        &s,
        "f-unknown",
        json!({"clusterAffinity": {"clusterNames": ["member1", "no-such-cluster"]}}),
    )
    .await;
    let (cond, clusters) = scheduled(&s, &partly).await;
    assert_eq!(
        (cond.0.as_str(), clusters),
        ("True", vec!["member1".to_string()]),
        "{cond:?}"
    );
    converge(
        &s,
        std::slice::from_ref(&partly),
        &["member1"],
        None,
        "partly placed",
    )
    .await;
    // Only a cluster that does not exist: nothing propagates, and the binding says why.
    let nowhere = placed(
        &s,
        "f-nowhere",
        json!({"clusterAffinity": {"clusterNames": ["no-such-cluster"]}}),
    )
    .await;
    let (cond, clusters) = scheduled(&s, &nowhere).await;
    assert_eq!(cond.0, "False", "{cond:?}");
    assert!(clusters.is_empty(), "{clusters:?}");
    eprintln!("unknown cluster only: Scheduled {cond:?}");

    // 3. A policy the CRD accepts but nothing can satisfy: three clusters wanted, two exist.
    let unsatisfiable = placed(
        &s,
        "f-unsatisfiable",
        json!({"clusterAffinity": {"clusterNames": ["member1", "member2"]},
            "spreadConstraints": [{"spreadByField": "cluster", "minGroups": 3, "maxGroups": 3}]}),
    )
    .await;
    let (cond3, clusters) = scheduled(&s, &unsatisfiable).await;
    assert_eq!(cond3.0, "False", "{cond3:?}");
    assert!(clusters.is_empty(), "{clusters:?}");
    assert!(!cond3.2.is_empty(), "the message says why: {cond3:?}");
    eprintln!("unsatisfiable spread: Scheduled {cond3:?}");
    for t in [&nowhere, &unsatisfiable] {
        for m in MEMBERS {
            let works = Api::<Work>::namespaced(s.host.clone(), &format!("karmada-es-{m}"));
            let refs = works
                .list_metadata(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|w| {
                    w.annotations().get(RESOURCE_BINDING_NAMESPACE_ANNOTATION) == Some(&t.namespace)
                })
                .count();
            assert_eq!(refs, 0, "a Work for {}/{} in {m}", t.namespace, t.name);
            let cm = Api::<ConfigMap>::namespaced(
                s.members[usize::from(m != "member1")].1.clone(),
                &t.namespace,
            )
            .get_opt(&t.name)
            .await
            .unwrap();
            assert!(cm.is_none(), "{}/{} reached {m}", t.namespace, t.name);
        }
    }

    // Nothing else was disturbed: every template in both members, same objects, no duplicates.
    converge(&s, &templates, &MEMBERS, Some("1"), "at the end").await;
    let after = held(&s).await;
    let lost = recreated(&before, &after, &MEMBERS, &templates);
    assert!(
        lost.is_empty(),
        "member objects recreated or lost: {lost:?}"
    );
    assert_no_duplicates(&s, &templates, &MEMBERS).await;
    eprintln!(
        "FIGURE credentials: Ready=False ({}) {not_ready_after:?} after the bad token; member1 got \
         {} changes in {to_member1:?} (from {:?}); member2 Ready and caught up {member2_back:?} after \
         the fix",
        why.1,
        templates.len(),
        t1.elapsed(),
    );
}
