//! Karmada's own Go controller-manager, scheduler and webhook (the benchmark's peer) propagate on a
//! `testenv` host exactly as the benchmark runs them: the harness works, and the numbers the
//! benchmark reads off the three processes are real. And a user can swap between Karmada's
//! controllers and ours on one control plane, both ways, without either recreating what the other
//! propagated.
//!
//! Needs the binaries `make karmada-binaries` builds; without them it fails saying so. It only
//! compiles with the `karmada-go` feature, so plain `make test` (which does not build them) does not
//! run it: `make test-karmada-peer` builds the binaries and runs it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use karmada_apis::{PropagationPolicy, ResourceBinding, Work};
use karmada_bench::scenarios;
use karmada_bench::session::{Impl, Qps, Session};
use karmada_bench::workload::{Kind, TEMPLATE_LABEL, Template, create, create_all, templates};
use karmada_e2e::process::parse_metrics;
use karmada_e2e::wait::eventually_showing;
use kube::api::{Api, ListParams};

const TIMEOUT: Duration = Duration::from_secs(120);

/// Polls `f` every 200 ms until it returns `Some`, or panics naming `what` (with the trio's log
/// tail) after [`TIMEOUT`].
async fn eventually<T>(s: &Session, what: &str, f: impl AsyncFnMut() -> Option<T>) -> T {
    let logs = || format!("logs:\n{}", s.log_tail(30));
    eventually_showing(what, TIMEOUT, Duration::from_millis(200), logs, f).await
}

fn condition_true(rb: &ResourceBinding, type_: &str) -> bool {
    rb.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    })
}

fn label<'a>(meta: &'a kube::api::ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn karmada_go_trio_propagates_a_deployment_and_the_bench_measures_it() {
    let s = Session::start_impl(Impl::Karmada, 1, 1, Some(Qps::Raised), &[])
        .await
        .unwrap_or_else(|e| panic!("start host + 1 member + Karmada's Go trio: {e:#}"));
    let ns = s.namespaces[0].clone();
    let member = s.members[0].1.clone();

    // The webhook stamped the policy the session created.
    let policy = Api::<PropagationPolicy>::namespaced(s.host.clone(), &ns)
        .get("bench")
        .await
        .expect("read the bench policy");
    assert!(
        label(
            &policy.metadata,
            "propagationpolicy.karmada.io/permanent-id"
        )
        .is_some(),
        "the webhook stamps the policy's permanent id: {:?}",
        policy.metadata.labels
    );

    let t = Template {
        kind: Kind::Deployment,
        namespace: ns.clone(),
        name: "peer-smoke".to_string(),
    };
    create(&s.host, &t).await.expect("create the Deployment");

    let members: Api<Deployment> = Api::namespaced(member.clone(), &ns);
    eventually(&s, "the Deployment in member1", || {
        let members = members.clone();
        async move { members.get_opt("peer-smoke").await.ok().flatten() }
    })
    .await;

    let bindings: Api<ResourceBinding> = Api::namespaced(s.host.clone(), &ns);
    let rb = eventually(
        &s,
        "binding peer-smoke-deployment Scheduled and FullyApplied",
        || {
            let bindings = bindings.clone();
            async move {
                bindings
                    .get_opt("peer-smoke-deployment")
                    .await
                    .ok()
                    .flatten()
                    .filter(|rb| {
                        condition_true(rb, "Scheduled") && condition_true(rb, "FullyApplied")
                    })
            }
        },
    )
    .await;
    let rb_id = label(&rb.metadata, "resourcebinding.karmada.io/permanent-id")
        .unwrap_or_else(|| {
            panic!(
                "the webhook stamps the binding's permanent id: {:?}",
                rb.metadata.labels
            )
        })
        .to_string();

    let works: Api<Work> = Api::namespaced(s.host.clone(), "karmada-es-member1");
    let selector = format!("resourcebinding.karmada.io/permanent-id={rb_id}");
    let listed = works
        .list(&ListParams::default().labels(&selector))
        .await
        .expect("list Works");
    assert_eq!(listed.items.len(), 1, "one Work for the binding in member1");
    assert!(
        label(&listed.items[0].metadata, "work.karmada.io/permanent-id").is_some(),
        "the webhook stamps the Work's permanent id: {:?}",
        listed.items[0].metadata.labels
    );

    // The benchmark's burst reads the three processes: requests to both targets, CPU, memory.
    let burst = scenarios::burst(&s, "peer", 3, 3, 4, TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("burst: {e:#}"));
    eprintln!("burst: {burst:#?}");
    // The burst waited for empty work queues: the scheduler's and the controller-manager's are read.
    let queues: Vec<String> = s
        .metrics()
        .expect("scrape the trio")
        .into_iter()
        .filter(|m| m.name == "workqueue_depth")
        .filter_map(|m| m.labels.get("name").cloned())
        .collect();
    for q in [
        "scheduler-queue",
        "resource detector",
        "binding-controller",
        "execution-controller",
    ] {
        assert!(
            queues.iter().any(|n| n == q),
            "work queue {q} in {queues:?}"
        );
    }
    // The webhook keeps serving across a restart of the other two; its counters stay out of the
    // restart's writes because it writes nothing.
    let webhook = s
        .karmada
        .as_ref()
        .expect("a Karmada session")
        .webhook
        .metrics();
    let webhook_writes: f64 = parse_metrics(&webhook.unwrap_or_default())
        .iter()
        .filter(|m| m.name == "rest_client_requests_total")
        .filter(|m| {
            m.labels
                .get("method")
                .is_some_and(|v| matches!(v.as_str(), "POST" | "PUT" | "PATCH" | "DELETE"))
        })
        .map(|m| m.value)
        .sum();
    assert_eq!(webhook_writes, 0.0, "karmada-webhook writes nothing");
    assert_eq!(burst.arrival.count, 6, "{burst:?}");
    assert!(
        burst.member_writes >= 6,
        "one member create per template: {burst:?}"
    );
    assert!(
        burst.host_writes >= 12,
        "at least a binding and a Work per template on the host: {burst:?}"
    );
    assert!(
        burst.cpu_seconds > 0.0 && burst.rss_mib > 0.0 && burst.peak_rss_mib >= burst.rss_mib,
        "{burst:?}"
    );
}

/// Where an object lives and what it is: `(cluster, kind, namespace, name)`, `cluster` being `host`
/// or a member's name.
type Key = (String, &'static str, String, String);

/// What a swap must keep of an object, and what shows a rewrite.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Meta {
    uid: String,
    resource_version: String,
    /// The whole object, to tell what a rewrite changed.
    object: serde_json::Value,
}

/// The objects a swap must keep: member objects (the bench namespaces and the propagated templates),
/// and on the host the templates, every ResourceBinding in the bench namespaces and every Work in the
/// `karmada-es-*` namespaces.
type Snapshot = BTreeMap<Key, Meta>;

async fn list_meta<K>(
    snap: &mut Snapshot,
    api: Api<K>,
    cluster: &str,
    kind: &'static str,
    lp: &ListParams,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let list = api
        .list(lp)
        .await
        .unwrap_or_else(|e| panic!("list {kind} in {cluster}: {e}"));
    for o in list.items {
        let object = serde_json::to_value(&o).unwrap_or_default();
        let m = o.meta().clone();
        snap.insert(
            (
                cluster.to_string(),
                kind,
                m.namespace.unwrap_or_default(),
                m.name.unwrap_or_default(),
            ),
            Meta {
                uid: m.uid.unwrap_or_default(),
                resource_version: m.resource_version.unwrap_or_default(),
                object,
            },
        );
    }
}

async fn snapshot(s: &Session) -> Snapshot {
    let mut snap = Snapshot::new();
    let managed = ListParams::default().labels("karmada.io/managed=true");
    for (member, client) in &s.members {
        for ns in &s.namespaces {
            let namespaces: Api<Namespace> = Api::all(client.clone());
            let field = ListParams::default().fields(&format!("metadata.name={ns}"));
            list_meta(&mut snap, namespaces, member, "Namespace", &field).await;
            let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
            list_meta(&mut snap, deployments, member, "Deployment", &managed).await;
            let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
            list_meta(&mut snap, configmaps, member, "ConfigMap", &managed).await;
        }
        let works: Api<Work> = Api::namespaced(s.host.clone(), &format!("karmada-es-{member}"));
        list_meta(&mut snap, works, "host", "Work", &ListParams::default()).await;
    }
    let templates = ListParams::default().labels(TEMPLATE_LABEL);
    for ns in &s.namespaces {
        let deployments: Api<Deployment> = Api::namespaced(s.host.clone(), ns);
        list_meta(&mut snap, deployments, "host", "Deployment", &templates).await;
        let configmaps: Api<ConfigMap> = Api::namespaced(s.host.clone(), ns);
        list_meta(&mut snap, configmaps, "host", "ConfigMap", &templates).await;
        let bindings: Api<ResourceBinding> = Api::namespaced(s.host.clone(), ns);
        list_meta(
            &mut snap,
            bindings,
            "host",
            "ResourceBinding",
            &ListParams::default(),
        )
        .await;
    }
    snap
}

/// How the objects of `before` fared in `after`.
#[derive(Debug, Default)]
struct Fate {
    /// Gone, or there under a new UID.
    recreated: Vec<String>,
    /// Same UID, new resourceVersion: the object and the fields that changed.
    rewritten: Vec<String>,
}

/// The fields that differ between `a` and `b` (under `path`), as `path: a → b`; metadata the API
/// server maintains is left out.
fn diff(path: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    const SERVER_SET: &[&str] = &[
        "/metadata/resourceVersion",
        "/metadata/managedFields",
        "/metadata/generation",
    ];
    if a == b || SERVER_SET.contains(&path) {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let null = Value::Null;
                let p = format!("{path}/{k}");
                diff(
                    &p,
                    x.get(k).unwrap_or(&null),
                    y.get(k).unwrap_or(&null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                // Conditions are named by type, not position.
                let at = match (x.get("type"), y.get("type")) {
                    (Some(Value::String(t)), Some(Value::String(u))) if t == u => t.clone(),
                    _ => i.to_string(),
                };
                diff(&format!("{path}/{at}"), x, y, out);
            }
        }
        _ => out.push(format!("{path}: {a} → {b}")),
    }
}

fn fate(before: &Snapshot, after: &Snapshot, cluster: impl Fn(&str) -> bool) -> Fate {
    let mut out = Fate::default();
    for (key @ (c, kind, ns, name), was) in before.iter().filter(|(k, _)| cluster(&k.0)) {
        let what = format!("{kind} {ns}/{name} in {c}");
        match after.get(key) {
            None => out.recreated.push(format!("{what}: gone")),
            Some(now) if now.uid != was.uid => out
                .recreated
                .push(format!("{what}: uid {} → {}", was.uid, now.uid)),
            Some(now) if now.resource_version != was.resource_version => {
                let mut fields = Vec::new();
                diff("", &was.object, &now.object, &mut fields);
                out.rewritten.push(format!(
                    "{what}: resourceVersion {} → {}: {}",
                    was.resource_version,
                    now.resource_version,
                    fields.join("; ")
                ));
            }
            Some(_) => {}
        }
    }
    out
}

/// Creates `templates` (a Deployment among them), waits until each is in every member and its
/// binding FullyApplied, then until the running controllers' work queues stay empty.
async fn propagate(s: &Session, templates: &[Template]) {
    let t0 = Instant::now();
    let created = create_all(&s.host, templates, 4)
        .await
        .unwrap_or_else(|e| panic!("create {templates:?}: {e:#}"));
    scenarios::wait_arrivals(s, &created, t0, TIMEOUT, true)
        .await
        .unwrap_or_else(|e| panic!("{templates:?} under {:?}: {e:#}", s.running()));
    scenarios::wait_settled(s, TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("settle under {:?}: {e:#}", s.running()));
}

/// Stops the running controllers, snapshots what they left, starts `to`'s, propagates fresh
/// templates with them and waits until they settle: the snapshot then and what `to` did to it.
async fn swap(s: &mut Session, to: Impl, prefix: &str) -> (Snapshot, Fate, Fate) {
    let from = s.running();
    s.stop_controllers()
        .await
        .unwrap_or_else(|e| panic!("stop {from:?}: {e:#}"));
    // Nothing writes these objects while no controllers run: the snapshot is what `from` left.
    let before = snapshot(s).await;
    s.start_controllers(to)
        .await
        .unwrap_or_else(|e| panic!("start {to:?} after {from:?}: {e:#}"));
    propagate(s, &templates(prefix, 1, 1, &s.namespaces)).await;
    let after = snapshot(s).await;
    let members = fate(&before, &after, |c| c != "host");
    let host = fate(&before, &after, |c| c == "host");
    eprintln!(
        "{from:?} → {to:?}: {} objects kept\n  members: {members:#?}\n  host: {host:#?}",
        before.len()
    );
    (before, members, host)
}

/// A user moves between Karmada's Go controllers and ours on one control plane (Karmada's webhook
/// serving throughout), both ways: neither side recreates what the other propagated (member
/// objects, Works and ResourceBindings keep their UIDs), ours rewrites no member object it takes over,
/// and each side propagates templates created after it took over.
///
/// What each side rewrites on the host is printed (with the fields that changed), not asserted;
/// seen with Karmada v1.16:
/// - member objects: neither side rewrites any (Karmada's execution controller compares the member
///   object with the manifest before it updates);
/// - Karmada, on taking over: its scheduler re-schedules every Duplicated binding on start
///   (`status.lastScheduledTime`), its binding status moves `FullyApplied`'s `lastTransitionTime`,
///   its work-status controller rewrites each Work's `Applied` condition time and
///   `manifestStatuses`, and its detector refreshes a binding's `spec.resource.resourceVersion`
///   when the template changed in ways it ignores while running (the scheduler then re-schedules it);
/// - two differences of ours this test found are fixed: ours wrote the plural into every Work's
///   `status.manifestStatuses[].identifier.resource` (Karmada leaves it `""`) and `false` into the
///   namespace Works' `spec.suspendDispatching`/`preserveResourcesOnDeletion` (Karmada's namespace
///   controller leaves them unset), so both flipped at every swap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_swap_between_karmada_go_and_ours_recreates_and_rewrites_nothing() {
    let mut s = Session::start_impl(Impl::Karmada, 2, 1, Some(Qps::Raised), &[])
        .await
        .unwrap_or_else(|e| panic!("start host + 2 members + Karmada's Go trio: {e:#}"));
    propagate(&s, &templates("karmada-first", 1, 1, &s.namespaces)).await;

    let mut all = Vec::new();
    let mut go_families = families(&s);
    let mut our_families = Families::new();
    for (to, prefix) in [
        (Impl::Rust, "ours-first"),
        (Impl::Karmada, "karmada-again"),
        (Impl::Rust, "ours-again"),
    ] {
        let (before, members, host) = swap(&mut s, to, prefix).await;
        let seen = if to == Impl::Rust {
            &mut our_families
        } else {
            &mut go_families
        };
        for (family, labels) in families(&s) {
            seen.entry(family).or_default().extend(labels);
        }
        assert!(
            before.keys().filter(|k| k.0 != "host").count() >= 2 * 3,
            "a namespace and two templates in each member before the swap to {to:?}: {before:#?}"
        );
        assert!(
            members.recreated.is_empty() && host.recreated.is_empty(),
            "{to:?} recreated what it took over:\n{:#?}\n{:#?}\nlogs:\n{}",
            members.recreated,
            host.recreated,
            s.log_tail(40)
        );
        if to == Impl::Rust {
            assert!(
                members.rewritten.is_empty(),
                "ours rewrote member objects it took over:\n{:#?}\nlog:\n{}",
                members.rewritten,
                s.log_tail(40)
            );
        }
        all.push((to, members.rewritten.len(), host.rewritten.len()));
    }
    eprintln!("rewrites after each swap (to, member objects, host objects): {all:?}");
    assert_same_metrics(&go_families, &our_families);
}

/// Metric families by name (histogram series folded into their family), each with its label names
/// (`le` and `quantile` left out).
type Families = BTreeMap<String, BTreeSet<String>>;

/// The families the running controllers serve now: ours, or Karmada's controller-manager and
/// scheduler (its webhook, which serves throughout, is not among what ours replaces).
fn families(s: &Session) -> Families {
    let samples = match s
        .karmada
        .as_ref()
        .filter(|_| s.running() == Some(Impl::Karmada))
    {
        Some(k) => [k.controller_manager.as_ref(), k.scheduler.as_ref()]
            .into_iter()
            .flatten()
            .flat_map(|p| {
                let text = p.metrics();
                assert!(text.is_some(), "Karmada's process serves /metrics");
                parse_metrics(&text.unwrap_or_default())
            })
            .collect(),
        None => s
            .metrics()
            .unwrap_or_else(|e| panic!("scrape the running controllers: {e:#}")),
    };
    let mut out = Families::new();
    for sample in samples {
        let name = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| sample.name.strip_suffix(suffix))
            .filter(|base| !base.is_empty())
            .unwrap_or(&sample.name);
        // A histogram's `_count` and a counter named `..._count` fold alike; Karmada has neither
        // shape twice, so the fold is unambiguous here.
        let labels = out.entry(name.to_owned()).or_default();
        labels.extend(
            sample
                .labels
                .keys()
                .filter(|k| !matches!(k.as_str(), "le" | "quantile"))
                .cloned(),
        );
    }
    out
}

/// Families Karmada serves and ours does not, by name prefix, with why (docs/reference.md lists
/// them too).
const KARMADA_ONLY: &[(&str, &str)] = &[
    ("go_", "the Go runtime's"),
    (
        "certwatcher_",
        "controller-runtime's certificate watcher: no TLS serving here",
    ),
    (
        "controller_runtime_webhook_",
        "controller-runtime's webhook server: none runs in the controller-manager",
    ),
    (
        "controller_runtime_conversion_webhook_",
        "controller-runtime's conversion webhook: none runs in the controller-manager",
    ),
];

/// Families only ours serves: karmada-rs's own.
const OURS_ONLY: &[&str] = &[
    // Objects held in the shared caches, per cluster and kind.
    "lariat_cached_objects",
    // Member objects that drifted from their manifests (only once one did).
    "karmada_rs_work_drift_total",
    // The `prometheus` crate's process collector has it; Go's does not.
    "process_threads",
];

/// Families whose labels differ: ours adds `cluster` (one queue and one client per member;
/// empty, which Prometheus reads as absent, for the control plane).
const EXTRA_CLUSTER_LABEL: &[&str] = &["workqueue_", "controller_runtime_", "rest_client_"];

/// Ours serves every family Karmada's controller-manager and scheduler served in the same
/// scenario, with the same label names, but for the differences listed above (and in
/// docs/reference.md); families only ours serves are karmada-rs's own and listed too.
fn assert_same_metrics(go: &Families, ours: &Families) {
    let mut problems = Vec::new();
    for (family, labels) in go {
        if KARMADA_ONLY.iter().any(|(p, _)| family.starts_with(p)) {
            continue;
        }
        let Some(our_labels) = ours.get(family) else {
            problems.push(format!("{family}: Karmada serves it, ours does not"));
            continue;
        };
        let mut expected = labels.clone();
        if EXTRA_CLUSTER_LABEL.iter().any(|p| family.starts_with(p)) {
            expected.insert("cluster".to_owned());
        }
        if *our_labels != expected {
            problems.push(format!(
                "{family}: labels {labels:?} in Karmada's, {our_labels:?} in ours"
            ));
        }
    }
    for family in ours.keys().filter(|f| !go.contains_key(*f)) {
        if !OURS_ONLY.contains(&family.as_str()) {
            problems.push(format!("{family}: ours serves it, Karmada's does not"));
        }
    }
    assert!(
        problems.is_empty(),
        "metric families differ:\n{}",
        problems.join("\n")
    );
}

/// Every flag of a `--help` text with its default as printed (`None` when none is).
fn help_flags(help: &str, default_of: impl Fn(&str) -> Option<String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    let finish = |c: Option<(String, String)>, out: &mut BTreeMap<String, String>| {
        if let Some((name, block)) = c {
            out.insert(name, zero_as_empty(default_of(&block).unwrap_or_default()));
        }
    };
    for line in help.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let flag = (2..=8).contains(&indent)
            && (trimmed.starts_with("--")
                || (trimmed.starts_with('-') && trimmed.get(2..4) == Some(", ")));
        if flag {
            finish(current.take(), &mut out);
            let at = trimmed.find("--").unwrap_or(0) + 2;
            let name: String = trimmed[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            current = Some((name, trimmed.to_owned()));
        } else if let Some((_, block)) = current.as_mut() {
            if indent > 8 {
                block.push(' ');
                block.push_str(trimmed);
            } else if !trimmed.is_empty() {
                finish(current.take(), &mut out);
            }
        }
    }
    finish(current, &mut out);
    out
}

/// Go's flag package prints no default for a zero value; ours prints one: compare them as "".
fn zero_as_empty(value: String) -> String {
    let value = value.trim_matches('"').to_owned();
    match value.as_str() {
        "false" | "0" | "0s" | "[]" | "\"\"" => String::new(),
        _ => match value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
            // Go prints a list's default in brackets.
            Some(list) => list.to_owned(),
            None => value,
        },
    }
}

/// Flags of Karmada's controller-manager ours does not take, and ours that Karmada's lacks, each
/// with why (docs/compatibility.md lists them).
const KARMADA_ONLY_FLAGS: &[&str] = &[
    // Declared by v1.16's controller-manager, used by no controller there; the agent takes them.
    "cluster-lease-duration",
    "cluster-lease-renew-interval-fraction",
];
/// klog flags that have no effect here (docs/compatibility.md, "Accepted, no effect yet"): ours
/// takes them without a default, so that giving one is noticed and warned about.
const NO_DEFAULT_HERE: &[&str] = &[
    "log-backtrace-at",
    "log-file-max-size",
    "logtostderr",
    "stderrthreshold",
];
const OURS_ONLY_FLAGS: &[&str] = &[
    // clap prints --help and --version itself (Go's cobra has -h, hidden, and a `version` command).
    "help",
    "version",
    // Deprecated spellings of --health-probe-bind-address older Karmada versions took.
    "bind-address",
    "secure-port",
    // Karmada's karmada-scheduler flags: the scheduler runs inside this process ("Scheduler flags").
    "scheduler-name",
    "enable-empty-workload-propagation",
    "plugins",
    // karmada-scheduler's accurate estimator flags: the scheduler runs in this process, so they are
    // taken here (checked against karmada-scheduler's --help below).
    "enable-scheduler-estimator",
    "disable-scheduler-estimator-in-pull-mode",
    "scheduler-estimator-timeout",
    "scheduler-estimator-port",
    "scheduler-estimator-service-prefix",
    "scheduler-estimator-service-namespace",
    "scheduler-estimator-ca-file",
    "scheduler-estimator-cert-file",
    "scheduler-estimator-key-file",
    "insecure-skip-estimator-verify",
];

/// The flags ours took from karmada-scheduler (the end of [`OURS_ONLY_FLAGS`]).
const FROM_KARMADA_SCHEDULER: std::ops::RangeFrom<usize> = 4..;

/// The flags `karmada-controller-manager --help` lists are Karmada v1.16's, with its defaults, but
/// for the differences listed above: what docs/reference.md says of them.
#[test]
fn controller_manager_flags_and_defaults_are_karmadas() {
    let go = testenv::binaries::locate_karmada("karmada-controller-manager")
        .unwrap_or_else(|e| panic!("{e}"));
    let help = |bin: &std::path::Path| {
        let out = std::process::Command::new(bin)
            .arg("--help")
            .output()
            .unwrap_or_else(|e| panic!("run {} --help: {e}", bin.display()));
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    let go_default = |block: &str| {
        let at = block.rfind("(default ")?;
        let rest = &block[at + "(default ".len()..];
        Some(rest[..rest.rfind(')')?].to_owned())
    };
    let our_default = |block: &str| {
        let at = block.rfind("[default: ")?;
        let rest = &block[at + "[default: ".len()..];
        Some(rest[..rest.find(']')?].to_owned())
    };
    let karmada = help_flags(&help(&go), go_default);
    let ours = help_flags(
        &help(karmada_e2e::controller_manager::binary()),
        our_default,
    );
    assert!(karmada.len() > 60, "parsed Karmada's --help: {karmada:?}");
    let mut problems = Vec::new();
    for (flag, default) in &karmada {
        match ours.get(flag) {
            None if KARMADA_ONLY_FLAGS.contains(&flag.as_str()) => {}
            None => problems.push(format!("--{flag}: Karmada's, not ours")),
            Some(d) if d.is_empty() && NO_DEFAULT_HERE.contains(&flag.as_str()) => {}
            Some(d) if d != default => problems.push(format!(
                "--{flag}: default {default:?} in Karmada's, {d:?} in ours"
            )),
            Some(_) => {}
        }
    }
    for flag in ours.keys().filter(|f| !karmada.contains_key(*f)) {
        if !OURS_ONLY_FLAGS.contains(&flag.as_str()) {
            problems.push(format!("--{flag}: ours, not Karmada's"));
        }
    }
    let scheduler =
        testenv::binaries::locate_karmada("karmada-scheduler").unwrap_or_else(|e| panic!("{e}"));
    let scheduler = help_flags(&help(&scheduler), go_default);
    for flag in &OURS_ONLY_FLAGS[FROM_KARMADA_SCHEDULER] {
        match (scheduler.get(*flag), ours.get(*flag)) {
            (Some(theirs), Some(d)) if theirs != d => problems.push(format!(
                "--{flag}: default {theirs:?} in karmada-scheduler's, {d:?} in ours"
            )),
            (Some(_), Some(_)) => {}
            (None, _) => problems.push(format!("--{flag}: not karmada-scheduler's")),
            (_, None) => problems.push(format!("--{flag}: karmada-scheduler's, not ours")),
        }
    }
    assert!(
        problems.is_empty(),
        "flags differ:\n{}",
        problems.join("\n")
    );
}
