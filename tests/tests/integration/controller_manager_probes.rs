//! `karmada-controller-manager` probes and metrics against a real API server: `/healthz` answers at once,
//! `/readyz` is 503 until the leader's caches have synced and 200 after, `/metrics` is Prometheus text.

use std::time::Duration;

use karmada_e2e::controller_manager::*;

fn env() -> &'static testenv::TestEnv {
    testenv::shared(testenv::EnvOptions {
        host_controller_manager: false,
        // Real controllers watch Karmada's kinds: a control plane always has the CRDs.
        install_crds: true,
        ..testenv::EnvOptions::default()
    })
}

#[tokio::test]
async fn healthz_at_once_and_metrics_are_prometheus_text() {
    let env = env();
    let client = env.host().client().await;
    let ns = fresh_namespace(&client, "kcm-probes").await;
    let mut kcm = Kcm::start(
        env.host().kubeconfig_path(),
        &[
            &format!("--leader-elect-resource-namespace={ns}"),
            "--controllers=namespace",
        ],
        &[],
    );
    kcm.wait_for("/healthz to answer", Duration::from_secs(10), |k| {
        k.probe("/healthz").is_some()
    })
    .await;
    let (status, body) = kcm.probe("/healthz").unwrap();
    assert_eq!((status, body.as_str()), (200, "ok"));
    let elapsed = kcm.started.elapsed();
    assert!(elapsed < Duration::from_secs(5), "healthz took {elapsed:?}");
    let (status, body) = kcm.probe("/healthz?verbose").unwrap();
    assert_eq!(status, 200);
    assert!(body.contains("[+]ping ok"), "{body}");
    assert_eq!(kcm.probe("/healthz/ping").map(|r| r.0), Some(200));
    assert_eq!(kcm.probe("/healthz/nope").map(|r| r.0), Some(404));

    kcm.wait_for("leadership", Duration::from_secs(30), |k| {
        k.is_master() == Some(true)
    })
    .await;
    kcm.wait_for("/readyz 200", Duration::from_secs(30), |k| {
        k.probe("/readyz").map(|r| r.0) == Some(200)
    })
    .await;

    let text = kcm.metrics().expect("metrics served");
    assert_prometheus_text(&text);
    for family in [
        "leader_election_master_status",
        "karmada_build_info",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "workqueue_depth",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(family)),
            "{family} missing from /metrics:\n{text}"
        );
    }
    assert!(text.contains("git_commit=\""), "{text}");

    kcm.signal(libc::SIGTERM);
    let status = kcm.wait_exit(Duration::from_secs(10)).await.expect("exits");
    assert_eq!(Kcm::code(status), Some(0), "{}", kcm.log());
}
