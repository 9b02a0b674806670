//! Karmada's Cluster API cluster detector (`--cluster-api-kubeconfig`, `--cluster-api-context`):
//! watches `cluster.x-k8s.io/v1beta1` Clusters in a Cluster API management cluster, joins each one
//! whose `status.phase` is `Provisioned` to the control plane in Push mode under its name (as
//! `karmadactl join` does, with the kubeconfig in its `<name>-kubeconfig` Secret, key `value`), and
//! deletes the Karmada Cluster of that name when the Cluster API Cluster is deleted (the cluster
//! controller then cleans up; its Secrets are owned by it).
//!
//! Like the resource detector it has no `--controllers` name; it runs while the flag is set, under
//! the leader's lease. Differences from Karmada: an already joined cluster is left alone (Karmada's
//! join fails and is retried forever), a Cluster API Cluster deleted without ever having been joined
//! changes nothing (Karmada retries an error), a Pull-mode Cluster of the same name is never deleted
//! (Karmada refuses with an error too), and the deletion does not wait for the Cluster to go.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Secret;
use karmada_apis::Cluster;
use karmada_apis::cluster::v1alpha1::ClusterSyncMode;
use karmada_controllers::{ControllerContext, StartFn};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject};
use kube::config::{KubeConfigOptions, Kubeconfig};
use lariat::{ClusterOptions, HandlerResult, ObjectKey};

/// The name it runs under (logs, readiness).
pub const NAME: &str = "clusterAPIDetector";
/// User-Agent suffix of its clients.
const CONTROLLER_NAME: &str = "cluster-api-cluster-detector";
/// The phase of a Cluster API Cluster whose control plane is ready to join.
const PROVISIONED: &str = "Provisioned";
/// Cluster API's kubeconfig Secret: `<cluster>-kubeconfig`, the kubeconfig under this key.
const KUBECONFIG_SUFFIX: &str = "-kubeconfig";
const KUBECONFIG_KEY: &str = "value";

/// The Cluster API Cluster resource the detector watches (the version Karmada v1.16 reads).
pub fn cluster_api_clusters() -> ApiResource {
    ApiResource {
        group: "cluster.x-k8s.io".into(),
        version: "v1beta1".into(),
        api_version: "cluster.x-k8s.io/v1beta1".into(),
        kind: "Cluster".into(),
        plural: "clusters".into(),
    }
}

/// The detector's start function, for the management cluster in `kubeconfig` (its `context`, else
/// the current one).
pub fn start_fn(kubeconfig: PathBuf, context: String) -> StartFn {
    Arc::new(move |ctx| {
        let kubeconfig = kubeconfig.clone();
        let context = context.clone();
        Box::pin(async move {
            run(ctx, kubeconfig, context)
                .await
                .map_err(|e| format!("{e:#}").into())
        })
    })
}

#[derive(Clone)]
struct Detector {
    /// Reads the kubeconfig Secrets in the management cluster.
    management: kube::Client,
    /// Joins and deletes Clusters on the control plane.
    host: kube::Client,
}

async fn run(ctx: ControllerContext, path: PathBuf, context: String) -> anyhow::Result<()> {
    let kubeconfig = Kubeconfig::read_from(&path).with_context(|| {
        format!(
            "--cluster-api-kubeconfig: cannot read the Cluster API management cluster's kubeconfig {}",
            path.display()
        )
    })?;
    let options = KubeConfigOptions {
        context: (!context.is_empty()).then_some(context.clone()),
        ..KubeConfigOptions::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .with_context(|| {
            format!(
                "--cluster-api-kubeconfig {} (context {:?}): invalid kubeconfig",
                path.display(),
                if context.is_empty() {
                    "current"
                } else {
                    &context
                }
            )
        })?;
    let management = lariat::Cluster::new(
        "cluster-api",
        config,
        ClusterOptions::default(),
        &ctx.cancel,
    )?;
    management.controllers().start();
    let clusters = management
        .controllers()
        .for_resource(&cluster_api_clusters())?;
    let detector = Detector {
        management: management
            .clients()
            .client_for_controller(CONTROLLER_NAME)?,
        host: ctx
            .control_plane
            .clients()
            .client_for_controller(CONTROLLER_NAME)?,
    };
    tracing::info!(kubeconfig = %path.display(), "starting the Cluster API cluster detector");
    let served = ctx
        .wiring(NAME, &detector)
        .handles(&clusters, NAME, |d: Detector, key, obj| async move {
            d.reconcile(key, obj).await
        })
        .run()
        .await;
    management.stop(Duration::from_secs(10)).await;
    served?;
    Ok(())
}

impl Detector {
    async fn reconcile(
        &self,
        key: ObjectKey,
        obj: Option<Arc<DynamicObject>>,
    ) -> HandlerResult<DynamicObject> {
        let name = key.name().to_owned();
        let result = match obj {
            None => self.unjoin(&name).await,
            Some(o) if phase(&o) == Some(PROVISIONED) => {
                self.join(key.namespace().unwrap_or_default(), &name).await
            }
            Some(_) => Ok(()),
        };
        match result {
            Ok(()) => HandlerResult::Success,
            Err(e) => {
                tracing::warn!(cluster = %name, error = format!("{e:#}"), "Cluster API cluster not synced");
                HandlerResult::error(format!("{e:#}"))
            }
        }
    }

    async fn join(&self, namespace: &str, name: &str) -> anyhow::Result<()> {
        let clusters: Api<Cluster> = Api::all(self.host.clone());
        if clusters.get_opt(name).await?.is_some() {
            return Ok(());
        }
        let secret_name = format!("{name}{KUBECONFIG_SUFFIX}");
        let secret = Api::<Secret>::namespaced(self.management.clone(), namespace)
            .get(&secret_name)
            .await
            .with_context(|| {
                format!("Cluster API cluster {namespace}/{name}: reading Secret {namespace}/{secret_name}")
            })?;
        let kubeconfig = secret
            .data
            .as_ref()
            .and_then(|d| d.get(KUBECONFIG_KEY))
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .with_context(|| {
                format!("Secret {namespace}/{secret_name} has no {KUBECONFIG_KEY:?} key")
            })?;
        tracing::info!(cluster = %name, "joining a provisioned Cluster API cluster");
        karmadactl::join_from_kubeconfig(self.host.clone(), name, &kubeconfig)
            .await
            .with_context(|| format!("joining Cluster API cluster {namespace}/{name}"))?;
        tracing::info!(cluster = %name, "joined a Cluster API cluster");
        Ok(())
    }

    async fn unjoin(&self, name: &str) -> anyhow::Result<()> {
        let clusters: Api<Cluster> = Api::all(self.host.clone());
        let Some(cluster) = clusters.get_opt(name).await? else {
            return Ok(());
        };
        if cluster.spec.sync_mode == ClusterSyncMode::Pull {
            tracing::warn!(cluster = %name, "a Cluster API cluster was deleted, but the Karmada cluster of its name is in Pull mode: left alone");
            return Ok(());
        }
        tracing::info!(cluster = %name, "unjoining a deleted Cluster API cluster");
        match clusters.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e).with_context(|| format!("deleting cluster {name}")),
        }
    }
}

/// `status.phase` of a Cluster API Cluster.
fn phase(cluster: &DynamicObject) -> Option<&str> {
    cluster.data.pointer("/status/phase")?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_provisioned_phase_counts() {
        let mut o = DynamicObject::new("c", &cluster_api_clusters());
        assert_eq!(phase(&o), None);
        o.data = serde_json::json!({"status": {"phase": "Provisioning"}});
        assert_eq!(phase(&o), Some("Provisioning"));
        o.data = serde_json::json!({"status": {"phase": PROVISIONED}});
        assert_eq!(phase(&o), Some(PROVISIONED));
    }
}
