//! Karmada's own Go controller-manager, scheduler and webhook (the benchmark's peer) propagate on a
//! `testenv` host exactly as the benchmark runs them: the harness works, and the numbers the
//! benchmark reads off the three processes are real.
//!
//! Needs the binaries `make karmada-binaries` builds; without them it fails saying so. It only
//! compiles with the `karmada-go` feature, so plain `make test` (which does not build them) does not
//! run it: `make test-karmada-peer` builds the binaries and runs it.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use karmada_apis::{PropagationPolicy, ResourceBinding, Work};
use karmada_e2e::bench::process::parse_metrics;
use karmada_e2e::bench::scenarios;
use karmada_e2e::bench::session::{Impl, Qps, Session};
use karmada_e2e::bench::workload::{Kind, Template, create};
use kube::api::{Api, ListParams};

const TIMEOUT: Duration = Duration::from_secs(120);

/// Polls `f` every 200 ms until it returns `Some`, or panics naming `what` (with the trio's log
/// tail) after [`TIMEOUT`].
async fn eventually<T, F, Fut>(s: &Session, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {TIMEOUT:?} waiting for {what}; logs:\n{}",
            s.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
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
