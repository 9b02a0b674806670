//! `/readyz` is 503 until the leader's caches have synced, and 200 after: here the Karmada CRDs are
//! missing at first, so the controllers' caches cannot sync until they are installed.

use std::time::Duration;

use karmada_e2e::controller_manager::*;

fn env() -> &'static testenv::TestEnv {
    testenv::shared(testenv::EnvOptions {
        host_controller_manager: false,
        ..testenv::EnvOptions::default()
    })
}

#[tokio::test]
async fn readyz_fails_until_caches_sync() {
    let env = env();
    let client = env.host().client().await;
    // The cluster controller (and the resource detector) watch Karmada's kinds, whose CRDs are not
    // installed yet: their caches cannot sync, so the process must not report ready.
    let mut kcm = Kcm::start(
        env.host().kubeconfig_path(),
        &["--leader-elect=false", "--controllers=cluster"],
        &[],
    );
    kcm.wait_for("controllers to start", Duration::from_secs(30), |k| {
        k.log().contains("starting controllers")
    })
    .await;
    for _ in 0..10 {
        let (status, body) = kcm.probe("/readyz").expect("probe served");
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("[-]informer-sync failed"), "{body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(kcm.probe("/healthz").map(|r| r.0), Some(200));

    testenv::install_crds(&client)
        .await
        .expect("install the CRDs");
    kcm.wait_for(
        "/readyz 200 after the CRD exists",
        Duration::from_secs(30),
        |k| k.probe("/readyz").map(|r| r.0) == Some(200),
    )
    .await;
    let (_, body) = kcm.probe("/readyz?verbose").unwrap();
    assert!(body.contains("[+]informer-sync ok"), "{body}");

    kcm.signal(libc::SIGINT);
    let status = kcm.wait_exit(Duration::from_secs(10)).await.expect("exits");
    assert_eq!(Kcm::code(status), Some(0), "{}", kcm.log());
}
