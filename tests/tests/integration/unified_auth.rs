//! The unifiedAuth controller with the execution controller against real API servers: control-plane
//! RBAC that lets subjects through the cluster proxy becomes a `karmada-impersonator` ClusterRole
//! and ClusterRoleBinding in the member, kept in step as ClusterRoles and ClusterRoleBindings come
//! and go; a cluster without an `impersonatorSecretRef` gets nothing.
//!
//! member1 has an impersonator secret reference, member2 has none. A ClusterRole opening
//! `clusters/proxy` of member1 is bound to a user and a group; a second one opening karmada-search's
//! `proxying/proxy` (every cluster) to a ServiceAccount; then the first binding is deleted.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use karmada_apis::names::{execution_space_name, work_name};
use karmada_apis::{Cluster, Work};
use karmada_controllers::members::member_cluster_options;
use karmada_e2e::in_process::{self, Harness, create_namespace, serial};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(60);
const MEMBERS: [&str; 2] = ["member1", "member2"];
const IMPERSONATOR: &str = "karmada-impersonator";

fn env() -> &'static TestEnv {
    in_process::init_tracing();
    testenv::shared(EnvOptions {
        members: 2,
        install_crds: true,
        ..Default::default()
    })
}

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Result<T, String>) -> T {
    karmada_e2e::wait::eventually(what, WAIT, Duration::from_millis(200), check).await
}

/// Cluster objects for both members, Ready, and their execution namespaces; member1 with an
/// impersonator secret reference.
async fn clusters_ready(client: &Client) {
    let api: Api<Cluster> = Api::all(client.clone());
    for (i, name) in MEMBERS.iter().enumerate() {
        create_namespace(
            client,
            &execution_space_name(name),
            json!({"karmada.io/system": "true"}),
        )
        .await;
        let mut spec = json!({"syncMode": "Push", "apiEndpoint": env().members()[i].url()});
        if *name == "member1" {
            spec["impersonatorSecretRef"] =
                json!({"namespace": "karmada-cluster", "name": "member1-impersonator"});
        }
        let c: Cluster = serde_json::from_value(json!({
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name}, "spec": spec,
        }))
        .unwrap();
        api.create(&PostParams::default(), &c).await.unwrap();
        in_process::set_cluster_ready(client, name, true, "ready", json!({})).await;
    }
}

async fn create<K>(client: &Client, object: Value) -> K
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let o: K = serde_json::from_value(object).unwrap();
    Api::<K>::all(client.clone())
        .create(&PostParams::default(), &o)
        .await
        .unwrap()
}

fn role(name: &str, group: &str, resource: &str, names: Option<&[&str]>) -> Value {
    let mut rule = json!({"apiGroups": [group], "resources": [resource], "verbs": ["*"]});
    if let Some(names) = names {
        rule["resourceNames"] = json!(names);
    }
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name}, "rules": [rule]})
}

fn binding(name: &str, role: &str, subjects: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects})
}

/// Who may be impersonated: resource (`users`, `serviceaccounts`, `groups`) → names.
type Allowed = BTreeMap<String, BTreeSet<String>>;

/// What the member's impersonator ClusterRole allows; its rules come in the order users, service
/// accounts, groups, with sorted names.
fn impersonated(role: &ClusterRole) -> Allowed {
    let rules = role.rules.clone().unwrap_or_default();
    let order: Vec<String> = rules
        .iter()
        .map(|r| r.resources.clone().unwrap_or_default().join(","))
        .collect();
    let mut expected_order = order.clone();
    expected_order.sort_by_key(|r| {
        ["users", "serviceaccounts", "groups"]
            .iter()
            .position(|k| k == r)
    });
    assert_eq!(order, expected_order);
    rules
        .into_iter()
        .map(|r| {
            assert_eq!(r.verbs, ["impersonate"]);
            let names = r.resource_names.clone().unwrap_or_default();
            assert!(names.is_sorted(), "{names:?}");
            (
                r.resources.unwrap_or_default().join(","),
                names.into_iter().collect(),
            )
        })
        .collect()
}

/// `base` plus `extra`.
fn with(base: &Allowed, extra: &[(&str, &str)]) -> Allowed {
    let mut allowed = base.clone();
    for (resource, name) in extra {
        allowed
            .entry((*resource).to_owned())
            .or_default()
            .insert((*name).to_owned());
    }
    allowed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn proxy_rbac_becomes_impersonation_rbac_in_the_members() {
    let _serial = serial().lock().await;
    let client = env().host().client().await;
    clusters_ready(&client).await;
    let controllers = Harness::new(in_process::implemented(&["unifiedAuth", "execution"]))
        .members(&MEMBERS, member_cluster_options())
        .start(env())
        .await;
    let member1 = env().members()[0].client().await;
    let member2 = env().members()[1].client().await;
    let member_roles: Api<ClusterRole> = Api::all(member1.clone());

    let role_in_member1 = async |want: Allowed| {
        let member_roles = member_roles.clone();
        eventually(&format!("member1's {IMPERSONATOR} allows {want:?}"), || {
            let member_roles = member_roles.clone();
            let want = want.clone();
            async move {
                let role = member_roles
                    .get_opt(IMPERSONATOR)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or("no ClusterRole yet")?;
                let got = impersonated(&role);
                (got == want)
                    .then_some(role)
                    .ok_or(format!("allows {got:?}"))
            }
        })
        .await
    };

    // Before any binding of the test: the host's built-in subjects whose roles cover every
    // resource (cluster-admin: system:masters, …), as in Karmada.
    let baseline = eventually("member1's impersonator ClusterRole", || {
        let member_roles = member_roles.clone();
        async move {
            member_roles
                .get_opt(IMPERSONATOR)
                .await
                .map_err(|e| e.to_string())?
                .map(|r| impersonated(&r))
                .ok_or("not yet".to_owned())
        }
    })
    .await;
    assert!(
        baseline["groups"].contains("system:masters"),
        "{baseline:?}"
    );
    assert!(
        !baseline
            .values()
            .flatten()
            .any(|n| ["alice", "devs", "ci"].contains(&n.as_str()))
    );

    // A user and a group may use member1's proxy.
    create::<ClusterRole>(
        &client,
        role(
            "proxy-member1",
            "cluster.karmada.io",
            "clusters/proxy",
            Some(&["member1"]),
        ),
    )
    .await;
    create::<ClusterRoleBinding>(
        &client,
        binding(
            "proxy-member1",
            "proxy-member1",
            json!([{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"},
                   {"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.k8s.io"}]),
        ),
    )
    .await;
    let written = role_in_member1(with(&baseline, &[("users", "alice"), ("groups", "devs")])).await;
    assert_eq!(
        written
            .labels()
            .get("karmada.io/system")
            .map(String::as_str),
        Some("true")
    );
    let bound = eventually("member1's impersonator ClusterRoleBinding", || {
        let api: Api<ClusterRoleBinding> = Api::all(member1.clone());
        async move {
            api.get_opt(IMPERSONATOR)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("not yet".to_owned())
        }
    })
    .await;
    assert_eq!(bound.role_ref.name, IMPERSONATOR);
    let subject = &bound.subjects.unwrap()[0];
    assert_eq!(
        (
            subject.kind.as_str(),
            subject.namespace.as_deref(),
            subject.name.as_str()
        ),
        ("ServiceAccount", Some("karmada-cluster"), IMPERSONATOR)
    );
    // The Works are owned by the Cluster; member2 (no impersonator secret) gets none.
    let work = Api::<Work>::namespaced(client.clone(), &execution_space_name("member1"))
        .get(&work_name("ClusterRole", IMPERSONATOR, ""))
        .await
        .unwrap();
    let owner = &work.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Cluster", "member1")
    );
    assert!(
        Api::<Work>::namespaced(client.clone(), &execution_space_name("member2"))
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // karmada-search's proxy opens every cluster: a ServiceAccount joins.
    create::<ClusterRole>(
        &client,
        role("search-all", "search.karmada.io", "proxying/proxy", None),
    )
    .await;
    create::<ClusterRoleBinding>(
        &client,
        binding(
            "search-all",
            "search-all",
            json!([{"kind": "ServiceAccount", "name": "ci", "namespace": "default"}]),
        ),
    )
    .await;
    role_in_member1(with(
        &baseline,
        &[
            ("users", "alice"),
            ("groups", "devs"),
            ("serviceaccounts", "ci"),
        ],
    ))
    .await;

    // The first binding goes: its subjects go.
    Api::<ClusterRoleBinding>::all(client.clone())
        .delete("proxy-member1", &DeleteParams::default())
        .await
        .unwrap();
    role_in_member1(with(&baseline, &[("serviceaccounts", "ci")])).await;
    assert!(
        Api::<ClusterRole>::all(member2.clone())
            .get_opt(IMPERSONATOR)
            .await
            .unwrap()
            .is_none()
    );
    // Each write of the Works is reported on the Cluster, and nothing is written without a change:
    // at most four states (built-in subjects only, plus alice and devs, plus ci, ci without the
    // first two).
    let count = eventually("SyncImpersonationConfigSucceed Events", || {
        let events: Api<Event> = Api::namespaced(client.clone(), "default");
        async move {
            let count: i32 = events
                .list(&ListParams::default().fields("involvedObject.name=member1"))
                .await
                .map_err(|e| e.to_string())?
                .items
                .iter()
                .filter(|e| e.reason.as_deref() == Some("SyncImpersonationConfigSucceed"))
                .map(|e| e.count.unwrap_or(1))
                .sum();
            (count >= 3)
                .then_some(count)
                .ok_or(format!("{count} so far"))
        }
    })
    .await;
    assert!(count <= 4, "{count} Events for at most four states");

    controllers.stop().await;
}
