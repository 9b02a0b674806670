//! After a run settles: does every member hold what its Works say? Lists the Works on the host
//! and the Deployments and ConfigMaps of every member, and names each manifest whose member object
//! lacks it or differs from it where the manifest speaks (labels, annotations, `spec`, `data`).
//! A settled run should show none; one that does left a member behind until something (a
//! restart, a resync) touched it again.
//!
//! "Where the manifest speaks": the member's API server defaults fields the manifest leaves out
//! and the controllers add their own labels, so a member value must contain the manifest's (maps
//! key by key, lists item by item, scalars equal), not equal it.

use std::collections::HashMap;

use anyhow::Context;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use karmada_apis::Work;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

/// The parts of a manifest compared with the member's object.
const COMPARED: [&str; 4] = [
    "/metadata/labels",
    "/metadata/annotations",
    "/spec",
    "/data",
];

/// Up to `limit` manifests the members do not hold as their Works say, as `<member>/<kind>
/// <namespace>/<name>: <first differing path>` (sorted), and how many there are in all.
pub async fn stale_members(
    host: &Client,
    members: &[(String, Client)],
    limit: usize,
) -> anyhow::Result<(usize, Vec<String>)> {
    let mut held: HashMap<(String, String, String, String), Value> = HashMap::new();
    for (member, client) in members {
        for ar in [
            ApiResource::erase::<Deployment>(&()),
            ApiResource::erase::<ConfigMap>(&()),
        ] {
            let kind = ar.kind.as_str();
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            for o in list_all(&api)
                .await
                .with_context(|| format!("list {kind}s in {member}"))?
            {
                let key = (
                    member.clone(),
                    kind.to_owned(),
                    o.namespace().unwrap_or_default(),
                    o.name_any(),
                );
                held.insert(key, serde_json::to_value(&o)?);
            }
        }
    }
    let works: Api<Work> = Api::all(host.clone());
    let mut stale = Vec::new();
    for work in list_all(&works).await.context("list Works on the host")? {
        let namespace = work.namespace().unwrap_or_default();
        let Some(member) = namespace.strip_prefix("karmada-es-") else {
            continue;
        };
        for manifest in &work.spec.workload.manifests {
            let manifest = serde_json::to_value(manifest)?;
            let kind = manifest["kind"].as_str().unwrap_or_default().to_owned();
            if kind != "Deployment" && kind != "ConfigMap" {
                continue;
            }
            let ns = manifest["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default();
            let name = manifest["metadata"]["name"].as_str().unwrap_or_default();
            let key = (
                member.to_owned(),
                kind.clone(),
                ns.to_owned(),
                name.to_owned(),
            );
            let problem = match held.get(&key) {
                None => Some("missing".to_owned()),
                Some(object) => COMPARED.iter().find_map(|p| {
                    let want = manifest.pointer(p)?;
                    first_difference(want, object.pointer(p).unwrap_or(&Value::Null), p)
                }),
            };
            if let Some(problem) = problem {
                stale.push(format!("{member}/{kind} {ns}/{name}: {problem}"));
            }
        }
    }
    stale.sort();
    let total = stale.len();
    stale.truncate(limit);
    Ok((total, stale))
}

/// What the host's Works and ResourceBindings say now (labels, annotations, spec), by `<Kind>
/// <namespace>/<name>`, each as compact JSON (a string holds a 30,000-workload run in a few
/// hundred MiB, where parsed values would take several times that).
pub async fn snapshot_bindings_and_works(host: &Client) -> anyhow::Result<HashMap<String, String>> {
    let mut out = HashMap::new();
    for ar in [
        ApiResource::erase::<Work>(&()),
        ApiResource::erase::<karmada_apis::ResourceBinding>(&()),
    ] {
        let api: Api<DynamicObject> = Api::all_with(host.clone(), &ar);
        for o in list_all(&api)
            .await
            .with_context(|| format!("list {}s on the host", ar.kind))?
        {
            let key = format!(
                "{} {}/{}",
                ar.kind,
                o.namespace().unwrap_or_default(),
                o.name_any()
            );
            let said = serde_json::json!({
                "labels": o.metadata.labels,
                "annotations": o.metadata.annotations,
                "spec": o.data.get("spec"),
            });
            out.insert(key, said.to_string());
        }
    }
    Ok(out)
}

/// Up to `limit` objects of `before` that `after` holds changed, as `<Kind> <namespace>/<name>:
/// <first changed path>: <old> → <new>` (sorted); objects gone or new are left out.
pub fn changed_since(
    before: &HashMap<String, String>,
    after: &HashMap<String, String>,
    limit: usize,
) -> Vec<String> {
    let mut out: Vec<String> = before
        .iter()
        .filter_map(|(key, old)| {
            let new = after.get(key).filter(|new| *new != old)?;
            let old: Value = serde_json::from_str(old).ok()?;
            let new: Value = serde_json::from_str(new).ok()?;
            let change = first_change(&old, &new, "").unwrap_or_else(|| "reordered".to_owned());
            Some(format!("{key}: {change}"))
        })
        .collect();
    out.sort();
    out.truncate(limit);
    out
}

/// The first path where `new` differs from `old`, with both values (values cut at 200
/// characters); `None` when equal.
fn first_change(old: &Value, new: &Value, path: &str) -> Option<String> {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => o
            .keys()
            .chain(n.keys().filter(|k| !o.contains_key(*k)))
            .find_map(|k| {
                first_change(
                    o.get(k).unwrap_or(&Value::Null),
                    n.get(k).unwrap_or(&Value::Null),
                    &format!("{path}/{k}"),
                )
            }),
        (Value::Array(o), Value::Array(n)) if o.len() == n.len() => o
            .iter()
            .zip(n)
            .enumerate()
            .find_map(|(i, (o, n))| first_change(o, n, &format!("{path}/{i}"))),
        _ if old == new => None,
        _ => {
            let cut = |v: &Value| v.to_string().chars().take(200).collect::<String>();
            Some(format!("{path}: {} → {}", cut(old), cut(new)))
        }
    }
}

/// Every object `api` lists, page by page.
async fn list_all<K>(api: &Api<K>) -> Result<Vec<K>, kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut out = Vec::new();
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await?;
        out.extend(page.items);
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => params = params.continue_token(&c),
            _ => return Ok(out),
        }
    }
}

/// The first path under `path` where `have` does not contain `want` (see the module's doc), with
/// both values; `None` when it does.
fn first_difference(want: &Value, have: &Value, path: &str) -> Option<String> {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => w.iter().find_map(|(k, v)| {
            first_difference(v, h.get(k).unwrap_or(&Value::Null), &format!("{path}/{k}"))
        }),
        (Value::Array(w), Value::Array(h)) if w.len() == h.len() => w
            .iter()
            .zip(h)
            .enumerate()
            .find_map(|(i, (w, h))| first_difference(w, h, &format!("{path}/{i}"))),
        // An empty map or list the server drops is no difference.
        (Value::Object(w), Value::Null) if w.is_empty() => None,
        (Value::Array(w), Value::Null) if w.is_empty() => None,
        (Value::Null, _) => None,
        _ if want == have => None,
        _ => Some(format!("{path} is {have}, the Work says {want}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_member_object_holds_a_manifest_where_the_manifest_speaks() {
        let want = json!({"replicas": 2, "template": {"spec": {"containers": [{"name": "c"}]}}});
        let defaulted = json!({"replicas": 2, "revisionHistoryLimit": 10,
            "template": {"spec": {"containers": [{"name": "c", "imagePullPolicy": "Always"}]}}});
        assert_eq!(first_difference(&want, &defaulted, "/spec"), None);
        let scaled = json!({"replicas": 3, "template": {"spec": {"containers": [{"name": "c"}]}}});
        assert_eq!(
            first_difference(&want, &scaled, "/spec").as_deref(),
            Some("/spec/replicas is 3, the Work says 2")
        );
        let renamed = json!({"replicas": 2, "template": {"spec": {"containers": [{"name": "d"}]}}});
        assert!(
            first_difference(&want, &renamed, "/spec")
                .unwrap()
                .starts_with("/spec/template/spec/containers/0/name")
        );
        assert!(first_difference(&json!({"a": "1"}), &Value::Null, "/metadata/labels").is_some());
        assert_eq!(first_difference(&json!({}), &Value::Null, "/data"), None);
    }

    #[test]
    fn a_change_is_named_by_its_first_path_with_both_values() {
        let old = json!({"labels": {"a": "1"}, "spec": {"clusters": [{"name": "m1"}]}});
        let relabelled =
            json!({"labels": {"a": "1", "b": "2"}, "spec": {"clusters": [{"name": "m1"}]}});
        assert_eq!(
            first_change(&old, &relabelled, "").as_deref(),
            Some("/labels/b: null → \"2\"")
        );
        let moved = json!({"labels": {"a": "1"}, "spec": {"clusters": [{"name": "m2"}]}});
        assert_eq!(
            first_change(&old, &moved, "").as_deref(),
            Some("/spec/clusters/0/name: \"m1\" → \"m2\"")
        );
        assert_eq!(first_change(&old, &old.clone(), ""), None);
        let before = HashMap::from([
            ("Work a/w".to_owned(), old.to_string()),
            ("Work a/gone".to_owned(), old.to_string()),
        ]);
        let after = HashMap::from([("Work a/w".to_owned(), moved.to_string())]);
        assert_eq!(
            changed_since(&before, &after, 10),
            vec!["Work a/w: /spec/clusters/0/name: \"m1\" → \"m2\"".to_owned()]
        );
    }
}
