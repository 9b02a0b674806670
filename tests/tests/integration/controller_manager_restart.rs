//! The host API server restarted under a running leader: with a renew deadline longer than the outage
//! the leader survives, keeps its lease and its watches resume; with a shorter one it gives up
//! leadership and exits non-zero (a restart is the safe way back), as client-go's rules say.
// test-runner: alone. Leadership must be given up between 2.4 s and 10 s after the host stops
// (wall clock): a second test binary beside it on 2 cores stretches that.

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

fn namespace_adds(kcm: &Kcm) -> u64 {
    kcm.metrics()
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("workqueue_adds_total{") && l.contains("name=\"Namespace\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

#[tokio::test]
async fn host_api_server_restart_under_a_running_leader() {
    let env = env();
    let client = env.host().client().await;

    // 1. Renew deadline (45s) longer than the outage: the leader survives and keeps the lease.
    let ns = fresh_namespace(&client, "kcm-restart").await;
    let mut kcm = Kcm::start(
        env.host().kubeconfig_path(),
        &[
            &format!("--leader-elect-resource-namespace={ns}"),
            "--leader-elect-lease-duration=60s",
            "--leader-elect-renew-deadline=45s",
            "--leader-elect-retry-period=1s",
            "--controllers=namespace",
        ],
        &[],
    );
    kcm.wait_for("ready leader", Duration::from_secs(30), |k| {
        k.is_master() == Some(true) && k.probe("/readyz").map(|r| r.0) == Some(200)
    })
    .await;
    let id = kcm.identity().expect("identity");
    assert_eq!(
        lease_holder(&client, &ns).await.as_deref(),
        Some(id.as_str())
    );
    let adds_before = namespace_adds(&kcm);
    assert!(adds_before > 0, "the namespace queue saw no keys");

    env.host().stop();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        kcm.try_exit().is_none(),
        "exited while the API server was down:\n{}",
        kcm.log()
    );
    assert_eq!(kcm.probe("/healthz").map(|r| r.0), Some(200));
    env.host()
        .start()
        .await
        .expect("restart the host API server");
    let client = env.host().client().await;

    // Still leading, same identity on the Lease, renewing again.
    kcm.wait_for("renewals after the restart", Duration::from_secs(20), |k| {
        k.is_master() == Some(true)
    })
    .await;
    assert_eq!(
        lease_holder(&client, &ns).await.as_deref(),
        Some(id.as_str())
    );
    // Its watches resumed: a namespace created now reaches the queue.
    let created = fresh_namespace(&client, "kcm-restart-new").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while namespace_adds(&kcm) <= adds_before {
        assert!(
            Instant::now() < deadline,
            "namespace {created} never reached the queue after the restart:\n{}",
            kcm.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(kcm.probe("/readyz").map(|r| r.0), Some(200));
    assert!(kcm.try_exit().is_none());
    kcm.signal(libc::SIGTERM);
    let status = kcm.wait_exit(Duration::from_secs(10)).await.expect("exits");
    assert_eq!(Kcm::code(status), Some(0), "{}", kcm.log());

    // 2. Renew deadline (3s) shorter than the outage: leadership is lost, the process exits 1.
    let ns = fresh_namespace(&client, "kcm-restart-lost").await;
    let mut kcm = Kcm::start(
        env.host().kubeconfig_path(),
        &[
            &format!("--leader-elect-resource-namespace={ns}"),
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=500ms",
            "--controllers=namespace",
        ],
        &[],
    );
    kcm.wait_for("ready leader", Duration::from_secs(30), |k| {
        k.is_master() == Some(true) && k.probe("/readyz").map(|r| r.0) == Some(200)
    })
    .await;
    let stopped = Instant::now();
    env.host().stop();
    let status = kcm
        .wait_exit(Duration::from_secs(20))
        .await
        .unwrap_or_else(|| panic!("still running without its lease:\n{}", kcm.log()));
    let took = stopped.elapsed();
    env.host()
        .start()
        .await
        .expect("restart the host API server");
    assert_eq!(Kcm::code(status), Some(1), "{}", kcm.log());
    assert!(kcm.log().contains("leader election lost"), "{}", kcm.log());
    // Gave up the renew deadline after the last successful renewal was sent (at most one retry period
    // before the stop), not before.
    assert!(
        took >= Duration::from_millis(2400),
        "gave up too early: {took:?}"
    );
    assert!(
        took <= Duration::from_secs(10),
        "gave up too late: {took:?}"
    );
}
