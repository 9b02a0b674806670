//! The benchmark's workload: namespaces, one Duplicated PropagationPolicy per namespace, and resource
//! templates (Deployments and ConfigMaps) created all at once or at a fixed rate.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use karmada_apis::PropagationPolicy;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

/// Label on every template the benchmark creates (the observer watches templates by it).
pub const TEMPLATE_LABEL: &str = "bench.karmada-rs.io/template";

/// The kinds of template the benchmark propagates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `apps/v1` Deployment, one replica.
    Deployment,
    /// `v1` ConfigMap with two small keys.
    ConfigMap,
}

impl Kind {
    /// The kind's name as the API spells it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Deployment => "Deployment",
            Kind::ConfigMap => "ConfigMap",
        }
    }
}

/// One resource template.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Template {
    /// Its kind.
    pub kind: Kind,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl Template {
    /// The name of the ResourceBinding Karmada gives it: `<name>-<kind, lowercase>`.
    pub fn binding_name(&self) -> String {
        format!("{}-{}", self.name, self.kind.name().to_lowercase())
    }

    /// The object as JSON (metadata carries [`TEMPLATE_LABEL`]).
    pub fn manifest(&self) -> Value {
        let metadata = json!({
            "name": self.name,
            "namespace": self.namespace,
            "labels": {TEMPLATE_LABEL: "true", "app": self.name},
        });
        match self.kind {
            Kind::Deployment => json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": metadata,
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": self.name}},
                    "template": {
                        "metadata": {"labels": {"app": self.name}},
                        "spec": {"containers": [{
                            "name": "app",
                            "image": "nginx:1.27",
                            "ports": [{"containerPort": 80}],
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                        }]},
                    },
                },
            }),
            Kind::ConfigMap => json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": metadata,
                "data": {
                    "app.properties": "mode=bench\nreplicas=1\nlog.level=info\n",
                    "owner": self.name,
                },
            }),
        }
    }
}

/// `deployments` + `configmaps` templates named `<prefix>-<kind>-<i>`, the kinds alternating while
/// both last, spread round-robin over `namespaces`.
pub fn templates(
    prefix: &str,
    deployments: usize,
    configmaps: usize,
    namespaces: &[String],
) -> Vec<Template> {
    let mut out = Vec::with_capacity(deployments + configmaps);
    let (mut d, mut c) = (0, 0);
    while d < deployments || c < configmaps {
        for (kind, n, total) in [
            (Kind::Deployment, &mut d, deployments),
            (Kind::ConfigMap, &mut c, configmaps),
        ] {
            if *n < total {
                let i = out.len();
                out.push(Template {
                    kind,
                    namespace: namespaces[i % namespaces.len()].clone(),
                    name: format!("{prefix}-{}-{}", kind.name().to_lowercase(), *n),
                });
                *n += 1;
            }
        }
    }
    out
}

/// Creates template `t` on the host.
pub async fn create(client: &Client, t: &Template) -> anyhow::Result<()> {
    create_manifest(client, t, t.manifest()).await
}

/// Creates `manifest`, an object of `t`'s kind, on `client` (a host or a member).
pub async fn create_manifest(client: &Client, t: &Template, manifest: Value) -> anyhow::Result<()> {
    let pp = PostParams::default();
    let result = match t.kind {
        Kind::Deployment => Api::<Deployment>::namespaced(client.clone(), &t.namespace)
            .create(&pp, &serde_json::from_value(manifest)?)
            .await
            .map(drop),
        Kind::ConfigMap => Api::<ConfigMap>::namespaced(client.clone(), &t.namespace)
            .create(&pp, &serde_json::from_value(manifest)?)
            .await
            .map(drop),
    };
    result.with_context(|| format!("create {} {}/{}", t.kind.name(), t.namespace, t.name))
}

/// A template and the moment its create request was sent.
pub type Created = (Template, Instant);

/// Creates every template with up to `concurrency` requests in flight; returns when all are created.
pub async fn create_all(
    client: &Client,
    templates: &[Template],
    concurrency: usize,
) -> anyhow::Result<Vec<Created>> {
    futures::stream::iter(templates.iter().cloned())
        .map(|t| async move {
            let at = Instant::now();
            create(client, &t).await.map(|()| (t, at))
        })
        .buffer_unordered(concurrency.max(1))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

/// Creates the templates at `rate` per second, each on its own task at its tick (a slow request
/// does not delay the next one); returns when all are created.
pub async fn create_at_rate(
    client: &Client,
    templates: &[Template],
    rate: f64,
) -> anyhow::Result<Vec<Created>> {
    let period = Duration::from_secs_f64(1.0 / rate.max(0.001));
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut tasks = tokio::task::JoinSet::new();
    let client = Arc::new(client.clone());
    for t in templates.iter().cloned() {
        ticks.tick().await;
        let client = client.clone();
        tasks.spawn(async move {
            let at = Instant::now();
            create(&client, &t).await.map(|()| (t, at))
        });
    }
    let mut out = Vec::with_capacity(templates.len());
    while let Some(r) = tasks.join_next().await {
        out.push(r??);
    }
    Ok(out)
}

/// Creates namespace `name` on `client`.
pub async fn create_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .with_context(|| format!("create namespace {name}"))?;
    Ok(())
}

/// The benchmark's policy for namespace `ns`: the benchmark's Deployments and ConfigMaps there (by
/// [`TEMPLATE_LABEL`], so `kube-root-ca.crt` stays home), Duplicated to `clusters`.
pub fn policy(ns: &str, clusters: &[String]) -> anyhow::Result<PropagationPolicy> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "bench", "namespace": ns},
        "spec": {
            "resourceSelectors": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchLabels": {TEMPLATE_LABEL: "true"}}},
                {"apiVersion": "v1", "kind": "ConfigMap", "labelSelector": {"matchLabels": {TEMPLATE_LABEL: "true"}}},
            ],
            "placement": {
                "clusterAffinity": {"clusterNames": clusters},
                "replicaScheduling": {"replicaSchedulingType": "Duplicated"},
            },
        },
    }))?)
}

/// The ResourceInterpreterCustomization the customized run installs: every Deployment operation the
/// benchmark exercises (replicas, revision, health, status aggregation) in Lua, written as Karmada's
/// users write them. Its health rule differs from the native one on purpose: a Deployment no
/// controller has reconciled (the benchmark's API-server-only members) is healthy here, unhealthy
/// natively, so the report can show the scripts ran ([`healthy_deployment_bindings`]).
pub fn deployment_customization() -> Value {
    json!({
        "apiVersion": "config.karmada.io/v1alpha1",
        "kind": "ResourceInterpreterCustomization",
        "metadata": {"name": "bench-deployment"},
        "spec": {
            "target": {"apiVersion": "apps/v1", "kind": "Deployment"},
            "customizations": {
                "replicaResource": {"luaScript": r#"
local kube = require("kube")
function GetReplicas(obj)
  local replica = obj.spec.replicas
  local requirement = kube.accuratePodRequirements(obj.spec.template)
  return replica, requirement
end"#},
                "replicaRevision": {"luaScript": r"
function ReviseReplica(obj, desiredReplica)
  obj.spec.replicas = desiredReplica
  return obj
end"},
                "healthInterpretation": {"luaScript": r"
function InterpretHealth(observedObj)
  if observedObj.status == nil or observedObj.status.observedGeneration == nil then
    return true
  end
  return observedObj.status.updatedReplicas == observedObj.spec.replicas
    and observedObj.status.availableReplicas == observedObj.spec.replicas
end"},
                "statusAggregation": {"luaScript": r"
function AggregateStatus(desiredObj, statusItems)
  if statusItems == nil then
    return desiredObj
  end
  if desiredObj.status == nil then
    desiredObj.status = {}
  end
  local replicas, ready, updated, available = 0, 0, 0, 0
  for i = 1, #statusItems do
    local s = statusItems[i].status
    if s ~= nil then
      replicas = replicas + (s.replicas or 0)
      ready = ready + (s.readyReplicas or 0)
      updated = updated + (s.updatedReplicas or 0)
      available = available + (s.availableReplicas or 0)
    end
  end
  desiredObj.status.replicas = replicas
  desiredObj.status.readyReplicas = ready
  desiredObj.status.updatedReplicas = updated
  desiredObj.status.availableReplicas = available
  return desiredObj
end"},
            },
        },
    })
}

/// How many Deployment bindings in `namespaces` report every member's object `Healthy`.
pub async fn healthy_deployment_bindings(
    host: &Client,
    namespaces: &[String],
) -> anyhow::Result<usize> {
    let mut healthy = 0;
    for ns in namespaces {
        let rbs: Api<karmada_apis::ResourceBinding> = Api::namespaced(host.clone(), ns);
        for rb in rbs.list(&Default::default()).await?.items {
            let items = rb.status.map(|s| s.aggregated_status).unwrap_or_default();
            if rb.spec.resource.kind == "Deployment"
                && !items.is_empty()
                && items.iter().all(|i| {
                    i.health == Some(karmada_apis::work::v1alpha2::ResourceHealth::Healthy)
                })
            {
                healthy += 1;
            }
        }
    }
    Ok(healthy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_alternate_kinds_and_spread_over_namespaces() {
        let ns = vec!["a".to_string(), "b".to_string()];
        let t = templates("burst", 3, 1, &ns);
        let names: Vec<_> = t
            .iter()
            .map(|t| (t.namespace.as_str(), t.name.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("a", "burst-deployment-0"),
                ("b", "burst-configmap-0"),
                ("a", "burst-deployment-1"),
                ("b", "burst-deployment-2"),
            ]
        );
        assert_eq!(t[1].binding_name(), "burst-configmap-0-configmap");
        let m = t[0].manifest();
        assert_eq!(m["metadata"]["labels"][TEMPLATE_LABEL], "true");
        let _: Deployment = serde_json::from_value(m).unwrap();
        let _: ConfigMap = serde_json::from_value(t[1].manifest()).unwrap();
    }
}
