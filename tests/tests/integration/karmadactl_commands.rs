//! `karmadactl cordon`, `uncordon`, `taint`, `token list`/`delete`, `completion` and the dry runs
//! of `unjoin`/`unregister`, run through the real command (library entry point) against a real
//! kube-apiserver with Karmada's CRDs.

// Test helpers fail their test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount, Taint};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use karmada_apis::Cluster;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use testenv::{EnvOptions, TestEnv};

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 1,
        install_crds: true,
        ..Default::default()
    })
}

fn host_flags() -> [String; 2] {
    [
        format!("--kubeconfig={}", env().kubeconfig_path().display()),
        "--karmada-context=host".into(),
    ]
}

/// `karmadactl <args> --kubeconfig=<host>`: what it prints, or its error as text.
async fn ctl(args: &[&str]) -> Result<String, String> {
    let mut all = vec!["karmadactl".to_string()];
    all.extend(args.iter().map(ToString::to_string));
    all.extend(host_flags());
    karmadactl::run_output(all)
        .await
        .map_err(|e| format!("{e:#}"))
}

async fn clusters() -> Api<Cluster> {
    Api::all(env().host().client().await)
}

/// A Cluster object as join would leave it, with `taints`.
async fn cluster(name: &str, sync_mode: &str, taints: serde_json::Value) -> Cluster {
    let c: Cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"syncMode": sync_mode, "apiEndpoint": "https://127.0.0.1:1", "taints": taints},
    }))
    .unwrap();
    clusters()
        .await
        .create(&PostParams::default(), &c)
        .await
        .unwrap()
}

fn taints(c: &Cluster) -> Vec<(String, Option<String>, String)> {
    let mut t: Vec<_> = c
        .spec
        .taints
        .iter()
        .map(|t: &Taint| (t.key.clone(), t.value.clone(), t.effect.clone()))
        .collect();
    t.sort();
    t
}

fn rv(c: &Cluster) -> String {
    c.metadata.resource_version.clone().unwrap()
}

#[tokio::test]
async fn cordon_and_uncordon_keep_other_taints_and_are_idempotent() {
    let name = "cordon-a";
    cluster(
        name,
        "Push",
        json!([{"key": "keep", "value": "me", "effect": "NoExecute"}]),
    )
    .await;

    assert_eq!(
        ctl(&["cordon", name, "--dry-run"]).await.unwrap(),
        "cordon-a cluster cordoned"
    );
    assert_eq!(
        taints(&clusters().await.get(name).await.unwrap()).len(),
        1,
        "dry run changed nothing"
    );

    assert_eq!(
        ctl(&["cordon", name]).await.unwrap(),
        "cordon-a cluster cordoned"
    );
    let c = clusters().await.get(name).await.unwrap();
    assert_eq!(
        taints(&c),
        [
            ("keep".into(), Some("me".into()), "NoExecute".into()),
            (
                karmadactl::UNSCHEDULABLE_TAINT_KEY.into(),
                None,
                "NoSchedule".into()
            ),
        ]
    );
    assert_eq!(
        ctl(&["cordon", name]).await.unwrap(),
        "cordon-a cluster already cordoned"
    );
    assert_eq!(
        rv(&clusters().await.get(name).await.unwrap()),
        rv(&c),
        "no write when already cordoned"
    );

    assert_eq!(
        ctl(&["uncordon", name]).await.unwrap(),
        "cordon-a cluster uncordoned"
    );
    let c = clusters().await.get(name).await.unwrap();
    assert_eq!(
        taints(&c),
        [("keep".into(), Some("me".into()), "NoExecute".into())]
    );
    assert_eq!(
        ctl(&["uncordon", name]).await.unwrap(),
        "cordon-a cluster already uncordoned"
    );
    assert_eq!(rv(&clusters().await.get(name).await.unwrap()), rv(&c));

    let err = ctl(&["cordon", "no-such-cluster"]).await.unwrap_err();
    assert!(
        err.contains("no-such-cluster") && err.contains("not found"),
        "{err}"
    );
}

#[tokio::test]
async fn taint_adds_overwrites_and_removes_like_karmada() {
    let (a, b) = ("taint-a", "taint-b");
    cluster(a, "Push", json!([])).await;
    cluster(
        b,
        "Push",
        json!([{"key": "other", "effect": "PreferNoSchedule"}]),
    )
    .await;

    let out = ctl(&["taint", "clusters", a, b, "dedicated=gpu:NoSchedule"])
        .await
        .unwrap();
    assert_eq!(out, "cluster/taint-a tainted\ncluster/taint-b tainted");
    assert_eq!(
        taints(&clusters().await.get(b).await.unwrap()),
        [
            ("dedicated".into(), Some("gpu".into()), "NoSchedule".into()),
            ("other".into(), None, "PreferNoSchedule".into()),
        ]
    );

    let err = ctl(&["taint", "cluster", a, "dedicated=cpu:NoSchedule"])
        .await
        .unwrap_err();
    assert!(
        err.contains("already has dedicated taint(s)") && err.contains("--overwrite"),
        "{err}"
    );
    let out = ctl(&[
        "taint",
        "cluster",
        a,
        "dedicated=cpu:NoSchedule",
        "--overwrite",
    ])
    .await
    .unwrap();
    assert_eq!(out, "cluster/taint-a modified");
    assert_eq!(
        taints(&clusters().await.get(a).await.unwrap()),
        [("dedicated".into(), Some("cpu".into()), "NoSchedule".into())]
    );

    // Dry run: the message, no write.
    let before = rv(&clusters().await.get(a).await.unwrap());
    let out = ctl(&["taint", "cluster", a, "dedicated-", "--dry-run"])
        .await
        .unwrap();
    assert_eq!(out, "cluster/taint-a untainted");
    assert_eq!(rv(&clusters().await.get(a).await.unwrap()), before);

    let out = ctl(&["taint", "cluster", a, "dedicated:NoSchedule-"])
        .await
        .unwrap();
    assert_eq!(out, "cluster/taint-a untainted");
    assert!(
        clusters()
            .await
            .get(a)
            .await
            .unwrap()
            .spec
            .taints
            .is_empty()
    );
    let err = ctl(&["taint", "cluster", a, "dedicated-"])
        .await
        .unwrap_err();
    assert!(err.contains("taint \"dedicated\" not found"), "{err}");

    // Validation, before any request.
    for (args, wanted) in [
        (
            vec!["taint", "cluster", a, "k=v:Sometimes"],
            "invalid taint effect",
        ),
        (vec!["taint", "cluster", a, "k=v"], "invalid taint spec"),
        (
            vec!["taint", "node", a, "k:NoSchedule"],
            "invalid resource type",
        ),
        (
            vec!["taint", "cluster", a, "k:NoSchedule", "k-"],
            "can not both modify and remove",
        ),
    ] {
        let err = ctl(&args).await.unwrap_err();
        assert!(err.contains(wanted), "{args:?}: {err}");
    }
    assert!(
        ctl(&["taint", "cluster", a, "-k:NoSchedule"])
            .await
            .is_err()
    );
    // The API server's own schema accepts what we write (NoExecute included).
    ctl(&["taint", "cluster", b, "x.example.com/y=z:NoExecute"])
        .await
        .unwrap();
}

#[tokio::test]
async fn token_list_and_delete() {
    let token = ctl(&["token", "create", "--description=for list", "--ttl=2h"])
        .await
        .unwrap();
    let forever = ctl(&["token", "create", "--ttl=0"]).await.unwrap();
    let id = token.split('.').next().unwrap().to_string();
    // A Secret of the bootstrap type that is not a valid token is skipped.
    let secrets: Api<Secret> = Api::namespaced(env().host().client().await, "kube-system");
    let bad: Secret = serde_json::from_value(json!({
        "metadata": {"name": "bootstrap-token-zzzzzz"},
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {"token-id": "yyyyyy", "token-secret": "0123456789abcdef"},
    }))
    .unwrap();
    secrets.create(&PostParams::default(), &bad).await.unwrap();

    let list = ctl(&["token", "list"]).await.unwrap();
    let mut lines = list.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap()
        .split("   ")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    assert_eq!(
        header,
        [
            "TOKEN",
            "TTL",
            "EXPIRES",
            "USAGES",
            "DESCRIPTION",
            "EXTRA GROUPS"
        ]
    );
    let row = list
        .lines()
        .find(|l| l.starts_with(&token))
        .unwrap_or_else(|| panic!("{list}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert!(cells[1] == "1h" || cells[1] == "2h", "{row}");
    assert!(cells[2].ends_with('Z'), "{row}");
    assert_eq!(cells[3], "authentication,signing");
    assert!(
        row.contains("for list") && row.ends_with(karmadactl::bootstrap::DEFAULT_TOKEN_GROUP),
        "{row}"
    );
    let row = list
        .lines()
        .find(|l| l.starts_with(&forever))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(
        row.contains("<forever>") && row.contains("<never>") && row.contains("<none>"),
        "{row}"
    );
    assert!(!list.contains("yyyyyy"), "{list}");

    assert_eq!(
        ctl(&["token", "delete", &id, &forever]).await.unwrap(),
        format!(
            "bootstrap token {id:?} deleted\nbootstrap token {:?} deleted",
            forever.split('.').next().unwrap()
        )
    );
    assert!(
        secrets
            .get_opt(&format!("bootstrap-token-{id}"))
            .await
            .unwrap()
            .is_none()
    );
    let list = ctl(&["token", "list"]).await.unwrap();
    assert!(!list.contains(&token) && !list.contains(&forever), "{list}");
    let err = ctl(&["token", "delete", "NOT-A-TOKEN"]).await.unwrap_err();
    assert!(err.contains("didn't match pattern"), "{err}");
    let err = ctl(&["token", "delete", &id]).await.unwrap_err();
    assert!(err.contains(&format!("bootstrap-token-{id}")), "{err}");
}

#[tokio::test]
async fn unjoin_and_unregister_dry_runs_remove_nothing() {
    let member = &env().members()[0];
    let name = "dry-joined";
    let mut join = vec![
        "join".to_string(),
        name.into(),
        format!(
            "--cluster-kubeconfig={}",
            member.kubeconfig_path().display()
        ),
        format!("--cluster-context={}", member.name()),
        "--token-wait=3s".into(),
    ];
    join.extend(host_flags());
    join.insert(0, "karmadactl".into());
    karmadactl::run(join).await.unwrap();

    let args = [
        "unjoin",
        name,
        "--dry-run",
        &format!(
            "--cluster-kubeconfig={}",
            member.kubeconfig_path().display()
        ),
        &format!("--cluster-context={}", member.name()),
    ];
    ctl(&args).await.unwrap();
    clusters().await.get(name).await.unwrap();
    let host_secrets: Api<Secret> = Api::namespaced(env().host().client().await, "karmada-cluster");
    host_secrets.get(name).await.unwrap();
    host_secrets
        .get(&format!("{name}-impersonator"))
        .await
        .unwrap();
    let m = member.client().await;
    let sa = format!("karmada-{name}");
    Api::<ServiceAccount>::namespaced(m.clone(), "karmada-cluster")
        .get(&sa)
        .await
        .unwrap();
    let role = format!("karmada-controller-manager:{sa}");
    Api::<ClusterRole>::all(m.clone()).get(&role).await.unwrap();
    Api::<ClusterRoleBinding>::all(m.clone())
        .get(&role)
        .await
        .unwrap();
    Api::<Namespace>::all(m.clone())
        .get("karmada-cluster")
        .await
        .unwrap();

    // A Pull cluster: unregister --dry-run, given the control plane's kubeconfig.
    let pulled = "dry-pulled";
    cluster(pulled, "Pull", json!([])).await;
    let c = clusters().await.get(pulled).await.unwrap();
    let before = rv(&c);
    let mut un = vec![
        "karmadactl".to_string(),
        "unregister".into(),
        pulled.into(),
        "--dry-run".into(),
        format!(
            "--cluster-kubeconfig={}",
            member.kubeconfig_path().display()
        ),
        format!("--cluster-context={}", member.name()),
        format!("--karmada-config={}", env().kubeconfig_path().display()),
        "--karmada-context=host".into(),
    ];
    karmadactl::run(un.drain(..)).await.unwrap();
    assert_eq!(rv(&clusters().await.get(pulled).await.unwrap()), before);
    Api::<ServiceAccount>::namespaced(m.clone(), "karmada-cluster")
        .get(&sa)
        .await
        .unwrap();
    // Leave the Pull cluster in place; patching proves it is still a live object.
    clusters()
        .await
        .patch(
            pulled,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"t": "1"}}})),
        )
        .await
        .unwrap();
}

#[test]
fn completion_scripts_name_the_commands() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let out = rt
            .block_on(karmadactl::run_output(["karmadactl", "completion", shell]))
            .unwrap();
        for word in [
            "karmadactl",
            "cordon",
            "uncordon",
            "taint",
            "unjoin",
            "list",
        ] {
            assert!(out.contains(word), "{shell}: no {word}");
        }
    }
    assert!(
        rt.block_on(karmadactl::run_output(["karmadactl", "completion", "tcsh"]))
            .is_err()
    );
}
