//! Hostile ResourceInterpreterCustomizations against the real `karmada-controller-manager`: eight
//! customizations whose scripts attack the Lua VM (a backtracking pattern, a huge
//! `string.rep`, a concatenation loop, an endless loop, deep recursion, a `gsub` explosion,
//! table growth and a precompiled binary chunk) are installed at once, each with templates to
//! interpret. Meanwhile ordinary templates still propagate to the member, the leader renews its
//! Lease on every retry period (never a gap near the renew deadline), the process's peak
//! memory stays bounded, and the bad scripts are reported: Events on the customizations and the
//! templates, and `resource_interpreter_script_failures_total`.
// test-runner: alone. Lease renewals under hostile scripts must stay within the renew deadline
// (wall clock): a second test binary beside it on 2 cores stretches the gaps.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use karmada_apis::config::v1alpha1::ResourceInterpreterCustomization;
use karmada_apis::well_known::event_reasons;
use karmada_apis::{Cluster, PropagationPolicy};
use karmada_e2e::controller_manager::{Kcm, LEASE, fresh_namespace, install_minimal_crd};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 1,
        install_crds: true,
        host_controller_manager: false,
        ..Default::default()
    })
}

const GROUP: &str = "hostile.example.io";
const NS: &str = "lua-hostile";

/// Election timings: renewals every 500 ms, and a renewal missing for 2 s loses the lease.
const LEASE_DURATION: Duration = Duration::from_secs(3);
const RENEW_DEADLINE: Duration = Duration::from_secs(2);
const RETRY: Duration = Duration::from_millis(500);

/// Peak resident memory the process may reach (a debug build: the Lua threads hold at most
/// their memory limit each, 64 MiB).
const MAX_HWM_KIB: u64 = 600 * 1024;

/// The hostile `GetReplicas` scripts, one kind each.
fn hostile() -> Vec<(&'static str, String)> {
    vec![
        (
            "Backtrack",
            "function GetReplicas(o) local s = 'a' for i = 1, 15 do s = s .. s end \
             return string.find(s, 'a*a*a*a*a*a*b') and 1 or 0 end"
                .into(),
        ),
        (
            "Rep",
            "function GetReplicas(o) return #string.rep('x', 2^31) end".into(),
        ),
        (
            "Concat",
            "function GetReplicas(o) local s = 'x' for i = 1, 23 do s = s .. s end \
             while true do local t = s .. s end end"
                .into(),
        ),
        (
            "Loop",
            "function GetReplicas(o) while true do end end".into(),
        ),
        (
            "Recurse",
            "local function f(n) return 1 + f(n + 1) end function GetReplicas(o) return f(1) end"
                .into(),
        ),
        (
            "Gsub",
            "function GetReplicas(o) local s = 'x' for i = 1, 20 do s = s .. s end \
             return #string.gsub(s, 'x', 'xxxxxxxxxxxxxxxx') end"
                .into(),
        ),
        (
            "Grow",
            "function GetReplicas(o) local t = {} local i = 0 \
             while true do i = i + 1 t[i] = {i, i, i} end end"
                .into(),
        ),
        (
            "Binary",
            "\x1bLua\x51\x00\x01\x04\x08\x04\x08\x00garbage".into(),
        ),
    ]
}

fn plural(kind: &str) -> String {
    format!("{}s", kind.to_lowercase())
}

fn resource(kind: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", kind), &plural(kind))
}

async fn apply<K>(api: &Api<K>, name: &str, value: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::apply("lua-hostile-test").force(),
        &Patch::Apply(&value),
    )
    .await
    .unwrap_or_else(|e| panic!("apply {name}: {e}"));
}

fn status_line(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The Lease's renewals as seen by polling: (holder, renewTime) whenever either changed.
async fn watch_lease(client: kube::Client, ns: String, seen: Arc<Mutex<Vec<(Instant, String)>>>) {
    let api: Api<Lease> = Api::namespaced(client, &ns);
    let mut last = String::new();
    loop {
        if let Ok(Some(l)) = api.get_opt(LEASE).await
            && let Some(spec) = l.spec
        {
            let now = format!(
                "{} {:?}",
                spec.holder_identity.unwrap_or_default(),
                spec.renew_time.map(|t| t.0.to_string())
            );
            if now != last {
                seen.lock().unwrap().push((Instant::now(), now.clone()));
                last = now;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn hostile_customizations_never_stall_the_controller_manager() {
    let env = env();
    let host = env.host().client().await;
    let member = env.members()[0].client().await;
    let lease_ns = fresh_namespace(&host, "lua-hostile-lease").await;
    for (kind, _) in hostile() {
        install_minimal_crd(&host, GROUP, "v1", kind, &plural(kind), true).await;
    }
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}});
    let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(host.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(namespace).unwrap(),
        )
        .await;

    // All eight customizations at once.
    let rics: Api<ResourceInterpreterCustomization> = Api::all(host.clone());
    for (kind, script) in hostile() {
        let name = format!("{}-rules", kind.to_lowercase());
        apply(
            &rics,
            &name,
            json!({"apiVersion": "config.karmada.io/v1alpha1",
                "kind": "ResourceInterpreterCustomization",
                "metadata": {"name": name},
                "spec": {"target": {"apiVersion": format!("{GROUP}/v1"), "kind": kind},
                    "customizations": {"replicaResource": {"luaScript": script}}}}),
        )
        .await;
    }
    // Policies for every hostile kind and for ConfigMaps.
    let policies: Api<PropagationPolicy> = Api::namespaced(host.clone(), NS);
    let mut selectors: Vec<Value> = hostile()
        .iter()
        .map(|(kind, _)| json!({"apiVersion": format!("{GROUP}/v1"), "kind": kind}))
        .collect();
    selectors.push(json!({"apiVersion": "v1", "kind": "ConfigMap"}));
    apply(
        &policies,
        "everything",
        json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "everything", "namespace": NS},
            "spec": {"resourceSelectors": selectors,
                "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}}),
    )
    .await;

    let mut kcm = Kcm::start(
        env.host().kubeconfig_path(),
        &[
            &format!("--leader-elect-resource-namespace={lease_ns}"),
            &format!(
                "--leader-elect-lease-duration={}ms",
                LEASE_DURATION.as_millis()
            ),
            &format!(
                "--leader-elect-renew-deadline={}ms",
                RENEW_DEADLINE.as_millis()
            ),
            &format!("--leader-elect-retry-period={}ms", RETRY.as_millis()),
            "--cluster-status-update-frequency=1s",
        ],
        &[],
    );
    karmada_e2e::karmadactl::join(env.host(), &env.members()[0], &[])
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let clusters: Api<Cluster> = Api::all(host.clone());
    kcm.eventually("member1 Ready", Duration::from_secs(90), async || {
        let c = clusters.get("member1").await.map_err(|e| e.to_string())?;
        c.status
            .as_ref()
            .is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
            .then_some(())
            .ok_or_else(|| "not Ready".to_owned())
    })
    .await;
    kcm.wait_for("leadership", Duration::from_secs(30), |k| {
        k.is_master() == Some(true)
    })
    .await;

    let seen = Arc::new(Mutex::new(Vec::new()));
    let watcher = tokio::spawn(watch_lease(host.clone(), lease_ns.clone(), seen.clone()));
    let watch_from = Instant::now();

    // Hostile templates, three of each kind.
    for (kind, _) in hostile() {
        let api: Api<DynamicObject> = Api::namespaced_with(host.clone(), NS, &resource(kind));
        for i in 0..3 {
            let obj: DynamicObject = serde_json::from_value(json!({
                "apiVersion": format!("{GROUP}/v1"), "kind": kind,
                "metadata": {"name": format!("bad-{i}"), "namespace": NS},
                "spec": {"size": 2}
            }))
            .unwrap();
            api.create(&PostParams::default(), &obj).await.unwrap();
        }
    }
    // Ordinary templates, created while the hostile ones are being interpreted.
    let configmaps: Api<ConfigMap> = Api::namespaced(host.clone(), NS);
    for i in 0..5 {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": format!("plain-{i}"), "namespace": NS},
            "data": {"n": i.to_string()}
        }))
        .unwrap();
        configmaps
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    let in_member: Api<ConfigMap> = Api::namespaced(member.clone(), NS);
    kcm.eventually(
        "every plain ConfigMap in member1",
        Duration::from_secs(60),
        async || {
            let mut missing = Vec::new();
            for i in 0..5 {
                let name = format!("plain-{i}");
                if in_member
                    .get_opt(&name)
                    .await
                    .map_err(|e| e.to_string())?
                    .is_none()
                {
                    missing.push(name);
                }
            }
            missing
                .is_empty()
                .then_some(())
                .ok_or_else(|| format!("missing {missing:?}"))
        },
    )
    .await;

    // Every bad script is reported on its customization, naming the cause; the binary chunk
    // also on its templates.
    let events: Api<Event> = Api::all(host.clone());
    kcm.eventually(
        "Events on every hostile customization",
        Duration::from_secs(60),
        async || {
            let list = events
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            let mut missing = Vec::new();
            for (kind, _) in hostile() {
                let name = format!("{}-rules", kind.to_lowercase());
                let found = list.items.iter().any(|e| {
                    e.involved_object.kind.as_deref() == Some("ResourceInterpreterCustomization")
                        && e.involved_object.name.as_deref() == Some(name.as_str())
                        && e.type_.as_deref() == Some("Warning")
                });
                if !found {
                    missing.push(name);
                }
            }
            missing
                .is_empty()
                .then_some(())
                .ok_or_else(|| format!("no Event for {missing:?}"))
        },
    )
    .await;
    let list = events.list(&ListParams::default()).await.unwrap();
    let about = |name: &str, reason: &str| -> Vec<String> {
        list.items
            .iter()
            .filter(|e| {
                e.involved_object.name.as_deref() == Some(name)
                    && e.reason.as_deref() == Some(reason)
            })
            .filter_map(|e| e.message.clone())
            .collect()
    };
    let binary = about("binary-rules", event_reasons::INTERPRETER_SCRIPT_FAILED);
    assert!(
        binary.iter().any(|m| m.contains("binary Lua chunk")),
        "{binary:?}"
    );
    let on_template = about("bad-0", event_reasons::GET_REPLICAS_FAILED);
    assert!(
        on_template
            .iter()
            .any(|m| m.contains("binary-rules") && m.contains("binary Lua chunk")),
        "{on_template:?}"
    );
    let limited: Vec<String> = [
        "backtrack-rules",
        "concat-rules",
        "loop-rules",
        "grow-rules",
    ]
    .iter()
    .flat_map(|n| {
        let mut v = about(n, event_reasons::INTERPRETER_SCRIPT_LIMIT_EXCEEDED);
        v.extend(about(n, event_reasons::INTERPRETER_SCRIPT_SUSPENDED));
        v
    })
    .collect();
    assert!(limited.len() >= 4, "{limited:?}");

    // The hostile scripts end up suspended (failing fast), counted by the metric.
    kcm.eventually(
        "a suspended script in the metrics",
        Duration::from_secs(60),
        async || {
            let text = kcm.metrics().ok_or("no metrics")?;
            let has = |reason: &str| {
                text.lines().any(|l| {
                    l.starts_with("resource_interpreter_script_failures_total{")
                        && l.contains(&format!("reason=\"{reason}\""))
                })
            };
            (has("suspended") && has("timeout") && has("binary_chunk"))
                .then_some(())
                .ok_or_else(|| "not yet".to_owned())
        },
    )
    .await;

    // Keep the pressure on for a while: touch the hostile templates again.
    for (kind, _) in hostile() {
        let api: Api<DynamicObject> = Api::namespaced_with(host.clone(), NS, &resource(kind));
        for i in 0..3 {
            let _ = api
                .patch(
                    &format!("bad-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"size": 3}})),
                )
                .await;
        }
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(kcm.is_master(), Some(true), "still the leader");
    watcher.abort();

    // The leader renewed on every retry period: no gap near the renew deadline, one holder.
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() > 10, "renewals seen: {seen:?}");
    let holders: std::collections::BTreeSet<&str> = seen
        .iter()
        .map(|(_, s)| s.split(' ').next().unwrap_or_default())
        .collect();
    assert_eq!(holders.len(), 1, "one holder throughout: {holders:?}");
    let mut worst = Duration::ZERO;
    for w in seen.windows(2) {
        worst = worst.max(w[1].0.saturating_duration_since(w[0].0));
    }
    assert!(
        worst < RENEW_DEADLINE.saturating_sub(RETRY),
        "a renewal gap of {worst:?} over {:?}",
        watch_from.elapsed()
    );

    // Memory stayed bounded.
    let hwm = status_line(kcm.pid(), "VmHWM:");
    let rss = status_line(kcm.pid(), "VmRSS:");
    eprintln!("controller-manager VmHWM {hwm} KiB, VmRSS {rss} KiB, worst renewal gap {worst:?}");
    assert!(hwm > 0 && hwm < MAX_HWM_KIB, "VmHWM {hwm} KiB");
}
