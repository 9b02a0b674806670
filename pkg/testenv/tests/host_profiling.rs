//! `host_profiling`: the host's kube-apiserver serves Go's CPU profile on `/debug/pprof/profile`
//! (what the propagation benchmark's `--cpu-profile` reads), while the members keep profiling off.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use testenv::{EnvOptions, TestEnv};

/// GETs `path` through `client`: the body, or the API error.
async fn get_bytes(client: &kube::Client, path: &str) -> Result<Vec<u8>, kube::Error> {
    use futures::AsyncReadExt;
    let request = http::Request::get(path).body(Vec::new()).unwrap();
    let mut stream = client.request_stream(request).await?;
    let mut body = Vec::new();
    stream.read_to_end(&mut body).await.unwrap();
    Ok(body)
}

#[tokio::test]
async fn the_host_serves_cpu_profiles_and_members_do_not() {
    let env = TestEnv::start(EnvOptions {
        members: 1,
        host_controller_manager: false,
        host_profiling: true,
        ..Default::default()
    })
    .await
    .expect("start a host and a member (hack/build-test-binaries.sh builds them)");
    let path = "/debug/pprof/profile?seconds=1";
    let profile = get_bytes(&env.host().client().await, path)
        .await
        .expect("the host serves its CPU profile");
    assert!(
        profile.starts_with(&[0x1f, 0x8b]),
        "a gzipped pprof profile, got {} bytes starting {:?}",
        profile.len(),
        &profile[..profile.len().min(16)]
    );
    let member = env.members()[0].client().await;
    match get_bytes(&member, path).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 404, "{e:?}"),
        other => panic!("a member without profiling answered {other:?}"),
    }
}
