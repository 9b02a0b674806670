//! The minimal-writes floor: a client that performs only the writes propagation cannot avoid — the
//! templates, one ResourceBinding per template, one Work per template and member, one object per
//! template in each member — in a pipeline with the controller-manager's default worker counts, and
//! nothing else (no reads, no status). What it takes on this machine bounds what any controller can do.

use std::time::{Duration, Instant};

use anyhow::Context;
use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use karmada_apis::{ResourceBinding, Work};
use kube::Client;
use kube::api::{Api, PostParams};
use serde::Serialize;
use serde_json::{Value, json};

use super::scenarios::wait_arrivals;
use super::session::{ServerCpu, Session};
use super::workload::{Created, Kind, Template, create, create_manifest, templates};

/// How long the floor took.
#[derive(Clone, Debug, Serialize)]
pub struct FloorResult {
    /// Templates.
    pub templates: usize,
    /// Members.
    pub members: usize,
    /// Template creates in flight.
    pub create_concurrency: usize,
    /// Binding creators (the detector's role).
    pub binding_concurrency: usize,
    /// Work creators (the binding controller's role).
    pub work_concurrency: usize,
    /// Member object creators (the execution controller's role).
    pub member_concurrency: usize,
    /// Writes made.
    pub writes: usize,
    /// Seconds from the first template create until every member object existed.
    pub seconds: f64,
    /// CPU seconds the API servers and etcd used meanwhile.
    pub server_cpu: ServerCpu,
}

/// Runs the floor on a session without a controller-manager.
pub async fn floor(
    s: &Session,
    deployments: usize,
    configmaps: usize,
    create_concurrency: usize,
    syncs: usize,
    timeout: Duration,
) -> anyhow::Result<FloorResult> {
    let templates = templates("floor", deployments, configmaps, &s.namespaces);
    let members: Vec<(String, Client)> = s.members.clone();
    let (to_bindings, bindings) = mpsc::unbounded::<Template>();
    let (to_works, works) = mpsc::unbounded::<Template>();
    let (to_members, member_creates) = mpsc::unbounded::<(usize, Template)>();
    let servers_before = s.server_cpu();
    let t0 = Instant::now();

    let host = &s.host;
    let creator = async {
        let mut to_bindings = to_bindings;
        let mut created: Vec<Created> = Vec::with_capacity(templates.len());
        let mut stream = futures::stream::iter(templates.iter().cloned())
            .map(|t| async move {
                let at = Instant::now();
                create(host, &t).await.map(|()| (t, at))
            })
            .buffer_unordered(create_concurrency.max(1));
        while let Some(c) = stream.next().await {
            let c = c?;
            to_bindings.send(c.0.clone()).await?;
            created.push(c);
        }
        anyhow::Ok(created)
    };
    // Each stage owns the sender to the next one, so a stage's stream ends when the stage before it
    // is done (its future, and with it the sender, is dropped on completion).
    let binder = bindings
        .map(move |t| {
            let mut to_works = to_works.clone();
            async move {
                create_binding(host, &t).await?;
                to_works.send(t).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(syncs.max(1))
        .collect::<Vec<_>>();
    let member_names: Vec<String> = members.iter().map(|(n, _)| n.clone()).collect();
    let names = &member_names;
    let worker = works
        .map(move |t| {
            let mut to_members = to_members.clone();
            async move {
                for (i, m) in names.iter().enumerate() {
                    create_work(host, m, &t).await?;
                    to_members.send((i, t.clone())).await?;
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(syncs.max(1))
        .collect::<Vec<_>>();
    let executor = member_creates
        .map(|(i, t)| {
            let client = &members[i].1;
            let manifest = member_manifest(&t);
            async move { create_manifest(client, &t, manifest).await }
        })
        .buffer_unordered(syncs.max(1))
        .collect::<Vec<_>>();
    let (created, b, w, e) = futures::join!(creator, binder, worker, executor);
    let created = created?;
    for r in b.into_iter().chain(w).chain(e) {
        r?;
    }
    let conv = wait_arrivals(s, &created, t0, timeout, false).await?;
    Ok(FloorResult {
        templates: templates.len(),
        members: members.len(),
        create_concurrency,
        binding_concurrency: syncs,
        work_concurrency: syncs,
        member_concurrency: syncs,
        writes: templates.len() * (2 + 2 * members.len()),
        seconds: conv.member_objects.as_secs_f64(),
        server_cpu: s.server_cpu().since(&servers_before),
    })
}

fn member_manifest(t: &Template) -> Value {
    let mut m = t.manifest();
    m["metadata"]["labels"]["karmada.io/managed"] = json!("true");
    m
}

async fn create_binding(host: &Client, t: &Template) -> anyhow::Result<()> {
    let api_version = match t.kind {
        Kind::Deployment => "apps/v1",
        Kind::ConfigMap => "v1",
    };
    let rb: ResourceBinding = serde_json::from_value(json!({
        "apiVersion": "work.karmada.io/v1alpha2",
        "kind": "ResourceBinding",
        "metadata": {"name": t.binding_name(), "namespace": t.namespace},
        "spec": {"resource": {"apiVersion": api_version, "kind": t.kind.name(), "namespace": t.namespace, "name": t.name}},
    }))?;
    Api::<ResourceBinding>::namespaced(host.clone(), &t.namespace)
        .create(&PostParams::default(), &rb)
        .await
        .with_context(|| format!("create binding {}/{}", t.namespace, t.binding_name()))?;
    Ok(())
}

async fn create_work(host: &Client, member: &str, t: &Template) -> anyhow::Result<()> {
    let ns = format!("karmada-es-{member}");
    let work: Work = serde_json::from_value(json!({
        "apiVersion": "work.karmada.io/v1alpha1",
        "kind": "Work",
        "metadata": {"name": format!("{}-{}", t.namespace, t.binding_name()), "namespace": ns},
        "spec": {"workload": {"manifests": [member_manifest(t)]}},
    }))?;
    Api::<Work>::namespaced(host.clone(), &ns)
        .create(&PostParams::default(), &work)
        .await
        .with_context(|| format!("create work for {}/{} in {ns}", t.namespace, t.name))?;
    Ok(())
}
