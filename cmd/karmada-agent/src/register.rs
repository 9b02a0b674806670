//! Registration of the agent's cluster with the control plane, as Karmada's agent does it before
//! its controllers start: the cluster ID is the UID of the member's `kube-system` namespace; a
//! Cluster that has the same name but another ID (a Push cluster joined by `karmadactl join`, or
//! another member), or another Cluster with the same ID, is refused; the `--cluster-namespace` is
//! created if missing (read first, so an agent allowed only to read it registers); then the Cluster is created, or its spec brought up to date, in Pull mode.
//!
//! Unlike Karmada (default `--report-secrets=KubeCredentials,KubeImpersonator`), no member
//! credentials are written to the control plane: it never contacts a Pull member.

use std::time::Duration;

use apimachinery::{is_already_exists, is_not_found};
use k8s_openapi::api::core::v1::Namespace;
use karmada_apis::Cluster;
use karmada_apis::cluster::v1alpha1::ClusterSyncMode;
use karmada_apis::well_known::{KARMADA_SYSTEM_LABEL, KARMADA_SYSTEM_LABEL_VALUE};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

use crate::options::Options;

/// Deadline of each registration request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Why registration failed.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// A request failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A request did not answer in time.
    #[error("{0}: no answer within {REQUEST_TIMEOUT:?}")]
    Timeout(String),
    /// The name or ID belongs to another cluster.
    #[error(
        "the cluster ID {id} or the cluster name {name} has been registered{detail}; refusing to \
         take it over"
    )]
    Taken {
        /// Cluster name.
        name: String,
        /// This member's ID.
        id: String,
        /// Which Cluster holds it.
        detail: String,
    },
}

async fn call<T>(
    what: impl Fn() -> String,
    f: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, RegisterError> {
    match tokio::time::timeout(REQUEST_TIMEOUT, f).await {
        Ok(r) => r.map_err(|source| RegisterError::Api {
            what: what(),
            source,
        }),
        Err(_) => Err(RegisterError::Timeout(what())),
    }
}

/// The member's cluster ID: its `kube-system` namespace's UID (Karmada's `ObtainClusterID`).
pub async fn cluster_id(member: &kube::Client) -> Result<String, RegisterError> {
    let namespaces: Api<Namespace> = Api::all(member.clone());
    let ns = call(
        || "reading namespace kube-system of the member cluster".to_owned(),
        namespaces.get("kube-system"),
    )
    .await?;
    Ok(ns.metadata.uid.unwrap_or_default())
}

/// The Cluster's spec fields the agent owns, as a merge patch body.
fn spec_patch(opts: &Options, id: &str, insecure: bool) -> serde_json::Value {
    let mut spec = serde_json::json!({
        "syncMode": ClusterSyncMode::Pull,
        "apiEndpoint": opts.cluster_api_endpoint,
        "id": id,
        "insecureSkipTLSVerification": insecure,
    });
    if !opts.proxy_server_address.is_empty() {
        spec["proxyURL"] = serde_json::json!(opts.proxy_server_address);
    }
    if !opts.cluster_provider.is_empty() {
        spec["provider"] = serde_json::json!(opts.cluster_provider);
    }
    if !opts.cluster_region.is_empty() {
        spec["region"] = serde_json::json!(opts.cluster_region);
    }
    if !opts.cluster_zones.is_empty() {
        spec["zones"] = serde_json::json!(opts.cluster_zones);
    }
    serde_json::json!({ "spec": spec })
}

/// Whether `cluster`'s spec already has every field of `patch` (a [`spec_patch`]).
fn spec_up_to_date(cluster: &Cluster, patch: &serde_json::Value) -> bool {
    let Ok(current) = serde_json::to_value(&cluster.spec) else {
        return false;
    };
    let Some(fields) = patch.get("spec").and_then(|s| s.as_object()) else {
        return false;
    };
    fields.iter().all(|(k, v)| {
        let have = current.get(k).unwrap_or(&serde_json::Value::Null);
        have == v || (*v == serde_json::json!(false) && have.is_null())
    })
}

/// Registers the cluster (see the module docs); returns its ID.
#[allow(
    clippy::too_many_lines,
    reason = "the registration steps in order (namespace, Secret, Cluster create or update), each a few lines"
)]
pub async fn register(
    control_plane: &kube::Client,
    member: &kube::Client,
    member_insecure: bool,
    opts: &Options,
) -> Result<String, RegisterError> {
    let name = &opts.cluster_name;
    let id = cluster_id(member).await?;
    let clusters: Api<Cluster> = Api::all(control_plane.clone());
    let list = call(
        || "listing Clusters on the Karmada API server".to_owned(),
        clusters.list(&ListParams::default()),
    )
    .await?;
    let mut same = false;
    let mut taken = Vec::new();
    for c in &list.items {
        let c_name = c.metadata.name.as_deref().unwrap_or_default();
        if c_name == name && c.spec.id == id {
            same = true;
            break;
        }
        if c_name == name {
            taken.push(format!(
                "Cluster {c_name} exists (syncMode {:?}, id {:?})",
                c.spec.sync_mode, c.spec.id
            ));
        } else if c.spec.id == id {
            taken.push(format!("Cluster {c_name} has this ID"));
        }
    }
    if !same && !taken.is_empty() {
        return Err(RegisterError::Taken {
            name: name.clone(),
            id,
            detail: format!(" ({})", taken.join("; ")),
        });
    }

    let namespaces: Api<Namespace> = Api::all(control_plane.clone());
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": opts.cluster_namespace,
            "labels": {KARMADA_SYSTEM_LABEL: KARMADA_SYSTEM_LABEL_VALUE},
        }
    }))
    .map_err(|e| RegisterError::Api {
        what: "building the cluster namespace".to_owned(),
        source: kube::Error::SerdeError(e),
    })?;
    // Created only when missing: the agent's RBAC (Karmada's, from `karmadactl register`) lets it
    // read namespaces, not create them; register created this one.
    let exists = call(
        || format!("reading namespace {}", opts.cluster_namespace),
        namespaces.get_opt(&opts.cluster_namespace),
    )
    .await?
    .is_some();
    if !exists {
        match call(
            || format!("creating namespace {}", opts.cluster_namespace),
            namespaces.create(&PostParams::default(), &ns),
        )
        .await
        {
            Ok(_) => {}
            Err(RegisterError::Api { source, .. }) if is_already_exists(&source) => {}
            Err(e) => return Err(e),
        }
    }

    let patch = spec_patch(opts, &id, member_insecure);
    let unchanged = list
        .items
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(name.as_str()))
        .is_some_and(|c| spec_up_to_date(c, &patch));
    if same && unchanged {
        // Nothing to write (Karmada's agent, too, updates only a changed Cluster; its RBAC has no
        // update on clusters).
        tracing::info!(cluster = %name, id = %id, "cluster already registered");
        return Ok(id);
    }
    if same {
        call(
            || format!("updating Cluster {name}"),
            clusters.patch(name, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .await?;
        tracing::info!(cluster = %name, id = %id, "cluster already registered; spec updated");
        return Ok(id);
    }
    let mut obj = patch;
    obj["apiVersion"] = serde_json::json!("cluster.karmada.io/v1alpha1");
    obj["kind"] = serde_json::json!("Cluster");
    obj["metadata"] = serde_json::json!({"name": name});
    let cluster: Cluster = serde_json::from_value(obj).map_err(|e| RegisterError::Api {
        what: format!("building Cluster {name}"),
        source: kube::Error::SerdeError(e),
    })?;
    match tokio::time::timeout(
        REQUEST_TIMEOUT,
        clusters.create(&PostParams::default(), &cluster),
    )
    .await
    {
        Ok(Ok(_)) => {
            tracing::info!(cluster = %name, id = %id, "cluster registered (Pull mode)");
            Ok(id)
        }
        // Registered by someone else meanwhile: refuse rather than guess.
        Ok(Err(e)) if is_already_exists(&e) || is_not_found(&e) => Err(RegisterError::Taken {
            name: name.clone(),
            id,
            detail: " (created concurrently)".to_owned(),
        }),
        Ok(Err(source)) => Err(RegisterError::Api {
            what: format!("creating Cluster {name}"),
            source,
        }),
        Err(_) => Err(RegisterError::Timeout(format!("creating Cluster {name}"))),
    }
}
