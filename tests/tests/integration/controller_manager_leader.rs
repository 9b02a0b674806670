//! Leader election between real `karmada-controller-manager` processes on a real API server: one leader,
//! fail-over after SIGKILL within the lease duration, immediate hand-over after SIGTERM (the lease is
//! released), and a second signal during a slow shutdown exiting 1.
// test-runner: alone. The standby must lead within 3 s of the leader's exit: a second test binary
// beside it on 2 cores stretches that, so make test runs this file by itself.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use karmada_e2e::controller_manager::*;

fn env() -> &'static testenv::TestEnv {
    testenv::shared(testenv::EnvOptions {
        host_controller_manager: false,
        // Real controllers watch Karmada's kinds: a control plane always has the CRDs.
        install_crds: true,
        ..testenv::EnvOptions::default()
    })
}

/// Fast election timings for tests (valid: lease > renew > 1.2 × retry).
const LEASE: Duration = Duration::from_secs(3);
const RENEW: Duration = Duration::from_secs(2);
const RETRY: Duration = Duration::from_millis(500);

fn args(ns: &str) -> Vec<String> {
    vec![
        format!("--leader-elect-resource-namespace={ns}"),
        format!("--leader-elect-lease-duration={}ms", LEASE.as_millis()),
        format!("--leader-elect-renew-deadline={}ms", RENEW.as_millis()),
        format!("--leader-elect-retry-period={}ms", RETRY.as_millis()),
        "--controllers=namespace".into(),
    ]
}

fn start(ns: &str, extra: &[&str], env_vars: &[(&str, &str)]) -> Kcm {
    let mut a = args(ns);
    a.extend(extra.iter().map(ToString::to_string));
    let refs: Vec<&str> = a.iter().map(String::as_str).collect();
    Kcm::start(env().host().kubeconfig_path(), &refs, env_vars)
}

/// Waits until exactly one of `a`, `b` leads (by its own metric), checks the Lease names it, and
/// returns its index.
async fn single_leader(client: &kube::Client, ns: &str, kcms: &mut [Kcm; 2]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m: Vec<Option<bool>> = kcms
            .iter()
            .map(karmada_e2e::controller_manager::Kcm::is_master)
            .collect();
        if let [Some(x), Some(y)] = m[..]
            && x != y
        {
            let leader = usize::from(!x);
            let id = kcms[leader].identity().expect("leader identity in log");
            if lease_holder(client, ns).await.as_deref() == Some(id.as_str()) {
                return leader;
            }
        }
        for k in kcms.iter_mut() {
            if let Some(s) = k.try_exit() {
                panic!("a replica exited early ({s:?}):\n{}", k.log());
            }
        }
        assert!(Instant::now() < deadline, "no single leader; states {m:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn two_replicas_one_leader_and_sigkill_failover() {
    let client = env().host().client().await;
    let ns = fresh_namespace(&client, "kcm-le-kill").await;
    let mut kcms = [start(&ns, &[], &[]), start(&ns, &[], &[])];
    let leader = single_leader(&client, &ns, &mut kcms).await;
    let standby = 1 - leader;
    let standby_id = kcms[standby].identity().expect("standby identity");

    // Only the leader runs controllers; both serve probes; the standby reports ready.
    kcms[leader]
        .wait_for("leader ready", Duration::from_secs(30), |k| {
            k.probe("/readyz").map(|r| r.0) == Some(200)
        })
        .await;
    assert!(kcms[leader].log().contains("starting controllers"));
    assert!(
        !kcms[standby].log().contains("starting controllers"),
        "{}",
        kcms[standby].log()
    );
    assert_eq!(kcms[standby].probe("/healthz").map(|r| r.0), Some(200));
    assert_eq!(kcms[standby].probe("/readyz").map(|r| r.0), Some(200));
    // Stays that way over a few renewals.
    for _ in 0..20 {
        assert_eq!(kcms[leader].is_master(), Some(true));
        assert_eq!(kcms[standby].is_master(), Some(false));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let killed = Instant::now();
    kcms[leader].signal(libc::SIGKILL);
    let deadline = Duration::from_secs(30);
    loop {
        if lease_holder(&client, &ns).await.as_deref() == Some(standby_id.as_str()) {
            break;
        }
        assert!(
            killed.elapsed() < deadline,
            "standby never took over:\n{}",
            kcms[standby].log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = killed.elapsed();
    // client-go semantics: the standby waits one lease duration after it last *saw* a renewal, and
    // tries every retry period (jittered up to 2.2×): bound = lease + observation lag + one try, plus
    // slack for two processes on a shared 2-core machine.
    let bound = LEASE + RETRY.mul_f64(2.2) * 2 + Duration::from_secs(1);
    assert!(took <= bound, "fail-over took {took:?} (bound {bound:?})");
    assert!(
        took >= LEASE.checked_sub(RETRY.mul_f64(2.2)).unwrap(),
        "took over too early: {took:?}"
    );
    kcms[standby]
        .wait_for("new leader's metric", Duration::from_secs(5), |k| {
            k.is_master() == Some(true)
        })
        .await;
    kcms[standby]
        .wait_for(
            "new leader starts controllers",
            Duration::from_secs(5),
            |k| k.log().contains("starting controllers"),
        )
        .await;
}

#[tokio::test]
async fn sigterm_releases_the_lease_for_an_immediate_takeover() {
    let client = env().host().client().await;
    let ns = fresh_namespace(&client, "kcm-le-term").await;
    // A long lease: only a release lets the standby in quickly.
    let long = [
        "--leader-elect-lease-duration=60s",
        "--leader-elect-renew-deadline=10s",
    ];
    let mut kcms = [start(&ns, &long, &[]), start(&ns, &long, &[])];
    let leader = single_leader(&client, &ns, &mut kcms).await;
    let standby = 1 - leader;
    let standby_id = kcms[standby].identity().expect("standby identity");
    kcms[leader]
        .wait_for("leader ready", Duration::from_secs(30), |k| {
            k.probe("/readyz").map(|r| r.0) == Some(200)
        })
        .await;

    let signalled = Instant::now();
    kcms[leader].signal(libc::SIGTERM);
    let status = kcms[leader]
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("leader exits within 10s of SIGTERM");
    assert_eq!(Kcm::code(status), Some(0), "{}", kcms[leader].log());
    let exited = Instant::now();
    assert!(
        kcms[leader].log().contains("released the leader lease"),
        "{}",
        kcms[leader].log()
    );
    loop {
        if lease_holder(&client, &ns).await.as_deref() == Some(standby_id.as_str()) {
            break;
        }
        assert!(
            exited.elapsed() < Duration::from_secs(3),
            "standby did not lead within 3s of the leader's exit:\n{}",
            kcms[standby].log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "hand-over: leader exited {:?} after SIGTERM; standby led {:?} after that",
        exited - signalled,
        exited.elapsed()
    );
}

#[tokio::test]
async fn second_signal_during_slow_shutdown_exits_1() {
    let client = env().host().client().await;
    let ns = fresh_namespace(&client, "kcm-le-slow").await;
    let mut kcm = start(&ns, &[], &[("KARMADA_RS_TEST_SLOW_SHUTDOWN", "60s")]);
    kcm.wait_for("ready leader", Duration::from_secs(30), |k| {
        k.is_master() == Some(true) && k.probe("/readyz").map(|r| r.0) == Some(200)
    })
    .await;
    kcm.signal(libc::SIGTERM);
    kcm.wait_for("slow shutdown to begin", Duration::from_secs(10), |k| {
        k.log().contains("delaying shutdown")
    })
    .await;
    assert!(kcm.try_exit().is_none());
    let second = Instant::now();
    kcm.signal(libc::SIGTERM);
    let status = kcm
        .wait_exit(Duration::from_secs(5))
        .await
        .expect("exits at once");
    assert_eq!(Kcm::code(status), Some(1), "{}", kcm.log());
    assert!(second.elapsed() < Duration::from_secs(2));
}
