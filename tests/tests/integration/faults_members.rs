//! Member faults against the real controller-manager binary (QPS 1000, three members joined with
//! `karmadactl join`): one member's kube-apiserver hung (SIGSTOP: connections accepted, nothing
//! answered), then another one killed (SIGKILL) and started again.
//!
//! Each fault is injected before a burst of templates. What a user cares about is asserted:
//! - the healthy members get the burst within 2× the healthy burst time (measured first, in the
//!   same run) plus a few seconds;
//! - the hung member goes `Ready=False` within the cluster monitor's grace period;
//! - once the member is back, every template reaches it;
//! - no member object was recreated (UIDs unchanged), and no Work or binding is duplicated.
//!
//! The figures are printed (`cargo test -p karmada-e2e --test integration faults_members:: --
//! --nocapture`) and recorded in docs/reliability.md.
// test-runner: alone. The faulted bursts are held to 2x the healthy burst measured first in this
// file: a second test binary starting or ending beside it would change the load between the two.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use karmada_apis::{Cluster, ResourceBinding, Work};
use karmada_bench::observer::ObjectKey;
use karmada_bench::session::{Qps, Session};
use karmada_bench::workload::{Created, Template, create_all, templates};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

/// Templates per burst (Deployments, ConfigMaps).
const BURST: (usize, usize) = (50, 50);
/// Namespaces the templates are spread over.
const NAMESPACES: usize = 2;
/// Karmada's `--cluster-monitor-grace-period` default: a hung member must be `Ready=False` by then.
const GRACE_PERIOD: Duration = Duration::from_secs(40);
/// Slack for a loaded 2-core machine on top of the bounds.
const SLACK: Duration = Duration::from_secs(5);
/// Upper bound of any single wait.
const WAIT: Duration = Duration::from_secs(180);

fn key(member: &str, t: &Template) -> ObjectKey {
    ObjectKey {
        cluster: member.to_string(),
        kind: t.kind.name(),
        namespace: t.namespace.clone(),
        name: t.name.clone(),
    }
}

/// Waits until every template of `created` is in every one of `members`; returns the time from
/// `t0` to the last arrival.
async fn arrivals(s: &Session, created: &[Created], members: &[&str], t0: Instant) -> Duration {
    let deadline = Instant::now() + WAIT;
    loop {
        {
            let seen = s.observer.seen();
            let mut last = t0;
            let mut missing = 0;
            for (t, _) in created {
                for m in members {
                    match seen.get(&key(m, t)) {
                        Some(o) => last = last.max(o.first),
                        None => missing += 1,
                    }
                }
            }
            if missing == 0 {
                return last.duration_since(t0);
            }
            assert!(
                Instant::now() < deadline,
                "{missing} member objects missing in {members:?} after {WAIT:?}; log:\n{}",
                s.log_tail(60)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates a burst of templates named `prefix-*` and returns them.
async fn burst(s: &Session, prefix: &str) -> (Vec<Created>, Instant) {
    let ts = templates(prefix, BURST.0, BURST.1, &s.namespaces);
    let t0 = Instant::now();
    let created = create_all(&s.host, &ts, 32)
        .await
        .expect("create templates");
    (created, t0)
}

/// The Ready status of cluster `name`.
async fn ready(host: &Client, name: &str) -> Option<String> {
    let c = Api::<Cluster>::all(host.clone()).get(name).await.ok()?;
    c.status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status)
}

/// Polls, in the background, until cluster `name` is Ready=`status`; yields when it was first
/// seen (`None` if not within [`WAIT`]).
fn when_ready(s: &Session, name: &str, status: &str) -> tokio::task::JoinHandle<Option<Instant>> {
    let (host, name, status) = (s.host.clone(), name.to_string(), status.to_string());
    tokio::spawn(async move {
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            if ready(&host, &name).await.as_deref() == Some(status.as_str()) {
                return Some(Instant::now());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        None
    })
}

/// The time from `since` until [`when_ready`] saw the status.
async fn ready_after(
    s: &Session,
    seen: tokio::task::JoinHandle<Option<Instant>>,
    what: &str,
    since: Instant,
) -> Duration {
    match seen.await.expect("poller") {
        Some(at) => at.duration_since(since),
        None => panic!("{what} not seen within {WAIT:?}; log:\n{}", s.log_tail(60)),
    }
}

/// UIDs of every managed Deployment and ConfigMap in every member.
async fn member_uids(s: &Session) -> BTreeMap<(String, String, String, String), String> {
    let lp = ListParams::default().labels("karmada.io/managed=true");
    let mut out = BTreeMap::new();
    for (name, client) in &s.members {
        for d in Api::<Deployment>::all(client.clone())
            .list(&lp)
            .await
            .unwrap()
        {
            let k = (
                name.clone(),
                "Deployment".into(),
                d.namespace().unwrap(),
                d.name_any(),
            );
            out.insert(k, d.uid().unwrap());
        }
        for c in Api::<ConfigMap>::all(client.clone())
            .list(&lp)
            .await
            .unwrap()
        {
            let k = (
                name.clone(),
                "ConfigMap".into(),
                c.namespace().unwrap(),
                c.name_any(),
            );
            out.insert(k, c.uid().unwrap());
        }
    }
    out
}

/// Every object seen before is still there with the same UID (none lost, none recreated).
async fn assert_not_recreated(
    s: &Session,
    before: &BTreeMap<(String, String, String, String), String>,
) {
    let now = member_uids(s).await;
    let mut changed = Vec::new();
    for (k, uid) in before {
        if now.get(k) != Some(uid) {
            changed.push(k.clone());
        }
    }
    assert!(
        changed.is_empty(),
        "{} member objects lost or recreated, e.g. {:?}",
        changed.len(),
        &changed[..changed.len().min(5)]
    );
}

/// One binding per template and one Work per template and member, no more.
async fn assert_no_duplicates(s: &Session, all: &[Template]) {
    let wanted: BTreeSet<(String, String, String)> = all
        .iter()
        .map(|t| {
            (
                t.kind.name().to_string(),
                t.namespace.clone(),
                t.name.clone(),
            )
        })
        .collect();
    let mut bindings = BTreeMap::<(String, String, String), usize>::new();
    for rb in Api::<ResourceBinding>::all(s.host.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
    {
        let r = &rb.spec.resource;
        *bindings
            .entry((r.kind.clone(), r.namespace.clone(), r.name.clone()))
            .or_default() += 1;
    }
    for w in &wanted {
        assert_eq!(bindings.get(w), Some(&1), "bindings of {w:?}");
    }
    for m in &s.member_names {
        let works = Api::<Work>::namespaced(s.host.clone(), &format!("karmada-es-{m}"))
            .list(&ListParams::default())
            .await
            .unwrap();
        let mut per = BTreeMap::<(String, String, String), usize>::new();
        for w in works {
            for manifest in &w.spec.workload.manifests {
                let v = &manifest.to_value().unwrap();
                let text = |p: &str| {
                    v.pointer(p)
                        .and_then(|x| x.as_str())
                        .unwrap_or("")
                        .to_string()
                };
                *per.entry((
                    text("/kind"),
                    text("/metadata/namespace"),
                    text("/metadata/name"),
                ))
                .or_default() += 1;
            }
        }
        for w in &wanted {
            assert_eq!(per.get(w), Some(&1), "Works for {w:?} in {m}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hung_or_dead_member_stalls_nobody_and_catches_up() {
    let started = Instant::now();
    let s = Session::start(3, NAMESPACES, Some(Qps::Raised))
        .await
        .expect("start the environment");
    let mut all: Vec<Template> = Vec::new();

    // Healthy: the reference time to reach member1 and member2.
    let (created, t0) = burst(&s, "healthy").await;
    let healthy = arrivals(&s, &created, &["member1", "member2"], t0).await;
    arrivals(&s, &created, &["member3"], t0).await;
    all.extend(created.iter().map(|(t, _)| t.clone()));
    let bound = healthy * 2 + SLACK;
    println!(
        "healthy: {} templates reached member1+2 in {healthy:.1?}",
        created.len()
    );

    // Hung member3: member1 and member2 keep their pace; member3 goes Ready=False.
    let before = member_uids(&s).await;
    let member3 = s.env().member("member3").expect("member3");
    member3.pause();
    let paused = Instant::now();
    let not_ready = when_ready(&s, "member3", "False");
    let (created, t0) = burst(&s, "hung").await;
    let hung = arrivals(&s, &created, &["member1", "member2"], t0).await;
    all.extend(created.iter().map(|(t, _)| t.clone()));
    println!(
        "member3 hung: {} templates reached member1+2 in {hung:.1?} (bound {bound:.1?})",
        created.len()
    );
    let not_ready = ready_after(&s, not_ready, "member3 Ready=False", paused).await;
    println!("member3 hung: Ready=False after {not_ready:.1?}");
    assert!(
        hung <= bound,
        "with member3 hung, member1+2 took {hung:?}; healthy {healthy:?}"
    );
    assert!(
        not_ready <= GRACE_PERIOD + SLACK,
        "member3 Ready=False only after {not_ready:?}"
    );
    member3.resume();
    let resumed = Instant::now();
    let back = when_ready(&s, "member3", "True");
    let caught_up = arrivals(&s, &created, &["member3"], resumed).await;
    let back = ready_after(&s, back, "member3 Ready=True", resumed).await;
    println!(
        "member3 resumed: Ready=True after {back:.1?}, every template in member3 after {caught_up:.1?}"
    );
    assert_not_recreated(&s, &before).await;

    // Dead member2: member1 and member3 keep their pace; member2 catches up when it is back.
    let before = member_uids(&s).await;
    let member2 = s.env().member("member2").expect("member2");
    member2.kill();
    let (created, t0) = burst(&s, "dead").await;
    let dead = arrivals(&s, &created, &["member1", "member3"], t0).await;
    all.extend(created.iter().map(|(t, _)| t.clone()));
    println!(
        "member2 dead: {} templates reached member1+3 in {dead:.1?} (bound {bound:.1?})",
        created.len()
    );
    assert!(
        dead <= bound,
        "with member2 dead, member1+3 took {dead:?}; healthy {healthy:?}"
    );
    member2
        .start()
        .await
        .expect("restart member2's kube-apiserver");
    let restarted = Instant::now();
    let caught_up = arrivals(&s, &created, &["member2"], restarted).await;
    println!("member2 restarted: every template in member2 after {caught_up:.1?}");
    assert_not_recreated(&s, &before).await;
    assert_no_duplicates(&s, &all).await;
    println!("total {:.1?}", started.elapsed());
}
