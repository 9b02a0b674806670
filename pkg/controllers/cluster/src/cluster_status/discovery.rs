//! `status.apiEnablements`: every group-version the member serves with its resources (subresources
//! skipped), sorted by group-version and by resource name, as Karmada collects them.
//!
//! Uses aggregated discovery (two requests) when the member offers it, else the per-group
//! endpoints.

use std::time::Duration;

use karmada_apis::cluster::v1alpha1::{ApiEnablement, ApiResource};
use serde_json::Value;

const AGGREGATED_ACCEPT: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
const TIMEOUT: Duration = Duration::from_secs(10);

async fn get_json(client: &kube::Client, path: &str, accept: &str) -> Result<Value, String> {
    let req = http::Request::get(path)
        .header(http::header::ACCEPT, accept)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    let text = tokio::time::timeout(TIMEOUT, client.request_text(req))
        .await
        .map_err(|_| format!("GET {path} timed out"))?
        .map_err(|e| format!("GET {path}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("GET {path}: {e}"))
}

fn resources_of(
    list: &[Value],
    name_key: &str,
    kind_of: impl Fn(&Value) -> Option<String>,
) -> Vec<ApiResource> {
    let mut out: Vec<ApiResource> = list
        .iter()
        .filter_map(|r| {
            let name = r.get(name_key)?.as_str()?;
            if name.contains('/') {
                return None;
            }
            Some(ApiResource {
                name: name.to_string(),
                kind: kind_of(r).unwrap_or_default(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// Aggregated discovery of one root (`/api` or `/apis`): `None` if the member does not offer it.
async fn aggregated(
    client: &kube::Client,
    root: &str,
    out: &mut Vec<ApiEnablement>,
    errors: &mut Vec<String>,
) -> Option<()> {
    let doc = match get_json(client, root, AGGREGATED_ACCEPT).await {
        Ok(d) => d,
        Err(e) => {
            errors.push(e);
            return Some(());
        }
    };
    if doc.get("kind").and_then(Value::as_str) != Some("APIGroupDiscoveryList") {
        return None;
    }
    for group in doc
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let gname = group
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        for v in group
            .get("versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let version = v.get("version").and_then(Value::as_str).unwrap_or_default();
            if v.get("freshness").and_then(Value::as_str) == Some("Stale") {
                errors.push(format!(
                    "discovery of {} is stale",
                    group_version(gname, version)
                ));
                continue;
            }
            let resources = v
                .get("resources")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            out.push(ApiEnablement {
                group_version: group_version(gname, version),
                resources: resources_of(resources, "resource", |r| {
                    r.pointer("/responseKind/kind")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                }),
            });
        }
    }
    Some(())
}

async fn legacy_list(
    client: &kube::Client,
    path: &str,
    gv: &str,
    out: &mut Vec<ApiEnablement>,
    errors: &mut Vec<String>,
) {
    match get_json(client, path, "application/json").await {
        Ok(doc) => {
            let resources = doc
                .get("resources")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            out.push(ApiEnablement {
                group_version: gv.to_string(),
                resources: resources_of(resources, "name", |r| {
                    r.get("kind").and_then(Value::as_str).map(str::to_string)
                }),
            });
        }
        Err(e) => errors.push(e),
    }
}

async fn legacy(
    client: &kube::Client,
    root: &str,
    out: &mut Vec<ApiEnablement>,
    errors: &mut Vec<String>,
) {
    let doc = match get_json(client, root, "application/json").await {
        Ok(d) => d,
        Err(e) => {
            errors.push(e);
            return;
        }
    };
    if root == "/api" {
        for v in doc
            .get("versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(v) = v.as_str() {
                legacy_list(client, &format!("/api/{v}"), v, out, errors).await;
            }
        }
        return;
    }
    for g in doc
        .get("groups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for v in g
            .get("versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(gv) = v.get("groupVersion").and_then(Value::as_str) {
                legacy_list(client, &format!("/apis/{gv}"), gv, out, errors).await;
            }
        }
    }
}

/// The member's API enablements, sorted, and the error that made them partial (if any).
pub async fn api_enablements(client: &kube::Client) -> (Vec<ApiEnablement>, Option<String>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for root in ["/api", "/apis"] {
        if aggregated(client, root, &mut out, &mut errors)
            .await
            .is_none()
        {
            legacy(client, root, &mut out, &mut errors).await;
        }
    }
    out.sort_by(|a, b| a.group_version.cmp(&b.group_version));
    let err = if errors.is_empty() {
        None
    } else {
        Some(errors.join("; "))
    };
    (out, err)
}
