//! Cold start: the controllers start over a control plane that already holds everything, the shape
//! of Karmada's own large-start reports (v1.14: 5,000 Deployments, each with its own ConfigMap and
//! its own PropagationPolicy with `propagateDeps: true`, over 2 members; v1.17: 30,000 of each) and
//! of Karmada issue 5978 (propagation stalled for many minutes after a restart).
//!
//! Every workload is a Deployment that mounts its own ConfigMap as a volume (Karmada's native
//! dependency interpreter finds it there), selected by name by its own policy, Duplicated to every
//! member. The ConfigMap reaches the members only as the Deployment's dependency: no policy selects
//! it, so its binding is the dependencies distributor's attached binding.
//!
//! The namespaces are created and propagated while the controllers run; then the controllers stop
//! (Karmada's webhook keeps serving: its configurations fail closed, so the host admits policies only
//! through it), every ConfigMap, policy and Deployment is created, and the controllers start again.
//! Times count from that start. With `restart`, once everything has settled the controllers restart
//! and a fresh ConfigMap, policy and Deployment are created one second after the spawn: how long
//! new work waits behind the resync.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{AsyncReadExt, StreamExt};
use karmada_apis::PropagationPolicy;
use kube::Client;
use kube::api::{Api, PostParams};
use serde::Serialize;
use serde_json::{Value, json};

use super::process::{RequestCounts, count_delta, host_writes_by_resource, request_counts, writes};
use super::report::{Changes, Percentiles, change_counts};
use super::scenarios::{wait_arrivals, wait_settled};
use super::session::{Impl, ServerCpu, Session, wait_namespace};
use super::workload::{Created, Kind, Template, create_manifest, create_namespace};

/// One workload of the cold start: a Deployment, the ConfigMap it mounts, the policy selecting it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// The Deployment (its policy has the same name).
    pub deployment: Template,
    /// The ConfigMap it mounts.
    pub configmap: Template,
}

impl Workload {
    /// Workload `name` in namespace `ns`: Deployment and policy `name`, ConfigMap `<name>-config`.
    pub fn new(ns: &str, name: &str) -> Self {
        Workload {
            deployment: Template {
                kind: Kind::Deployment,
                namespace: ns.to_string(),
                name: name.to_string(),
            },
            configmap: Template {
                kind: Kind::ConfigMap,
                namespace: ns.to_string(),
                name: format!("{name}-config"),
            },
        }
    }

    /// The Deployment's manifest: the benchmark's Deployment with the ConfigMap mounted as a volume.
    pub fn deployment_manifest(&self) -> Value {
        let mut m = self.deployment.manifest();
        let pod = &mut m["spec"]["template"]["spec"];
        pod["volumes"] = json!([{"name": "config", "configMap": {"name": self.configmap.name}}]);
        pod["containers"][0]["volumeMounts"] = json!([{"name": "config", "mountPath": "/etc/app"}]);
        m
    }

    /// Its own policy: the Deployment by name, its dependencies with it, Duplicated to `clusters`.
    pub fn policy(&self, clusters: &[String]) -> anyhow::Result<PropagationPolicy> {
        let d = &self.deployment;
        serde_json::from_value(json!({
            "apiVersion": "policy.karmada.io/v1alpha1",
            "kind": "PropagationPolicy",
            "metadata": {"name": d.name, "namespace": d.namespace},
            "spec": {
                "propagateDeps": true,
                "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": d.name}],
                "placement": {
                    "clusterAffinity": {"clusterNames": clusters},
                    "replicaScheduling": {"replicaSchedulingType": "Duplicated"},
                },
            },
        }))
        .with_context(|| format!("build policy {}/{}", d.namespace, d.name))
    }

    /// Creates the ConfigMap, the policy and the Deployment on `host`, in that order.
    pub async fn create(&self, host: &Client, clusters: &[String]) -> anyhow::Result<()> {
        create_manifest(host, &self.configmap, self.configmap.manifest()).await?;
        let d = &self.deployment;
        Api::<PropagationPolicy>::namespaced(host.clone(), &d.namespace)
            .create(&PostParams::default(), &self.policy(clusters)?)
            .await
            .with_context(|| format!("create policy {}/{}", d.namespace, d.name))?;
        create_manifest(host, d, self.deployment_manifest()).await
    }

    /// Both templates, each stamped with `at`.
    fn templates_at(&self, at: Instant) -> [Created; 2] {
        [(self.deployment.clone(), at), (self.configmap.clone(), at)]
    }
}

/// `n` workloads `cold-<i>`, round-robin over `namespaces`.
pub fn workloads(n: usize, namespaces: &[String]) -> Vec<Workload> {
    (0..n)
        .map(|i| Workload::new(&namespaces[i % namespaces.len()], &format!("cold-{i}")))
        .collect()
}

/// The cold start's namespaces: `cold-0` … `cold-<n-1>`.
pub fn namespaces(n: usize) -> Vec<String> {
    (0..n.max(1)).map(|i| format!("cold-{i}")).collect()
}

/// What the controllers' start over `deployments` waiting workloads cost.
#[derive(Clone, Debug, Serialize)]
pub struct ColdStartResult {
    /// Deployments (each with its ConfigMap and policy) waiting when the controllers started.
    pub deployments: usize,
    /// Namespaces they spread over.
    pub namespaces: usize,
    /// Member clusters each went to.
    pub members: usize,
    /// Seconds the benchmark took to create them all, controllers stopped.
    pub create_seconds: f64,
    /// Seconds from the start to ready (ours: `/readyz`; Karmada's: `/healthz` of both processes).
    pub ready_seconds: f64,
    /// Seconds from the start until every member held every Deployment and ConfigMap.
    pub member_objects_seconds: f64,
    /// Seconds from the start until every ResourceBinding (the Deployments' and the ConfigMaps'
    /// attached ones) was FullyApplied.
    pub fully_applied_seconds: f64,
    /// Seconds from the start until every work queue was empty.
    pub settled_seconds: f64,
    /// Per object and member: from the start to its arrival.
    pub arrival: Percentiles,
    /// The controllers' API requests from the start until settled, by target and method.
    pub requests: RequestCounts,
    /// Of those, writes to the host.
    pub host_writes: u64,
    /// Of those, writes to the members.
    pub member_writes: u64,
    /// Writes the host API server served meanwhile, by resource (everyone's).
    pub host_writes_by_resource: BTreeMap<String, u64>,
    /// Events recorded meanwhile, by reason (repeats included).
    pub events_by_reason: BTreeMap<String, u64>,
    /// CPU seconds the controllers used until settled.
    pub cpu_seconds: f64,
    /// CPU seconds the API servers and etcd used meanwhile.
    pub server_cpu: ServerCpu,
    /// The controllers' peak RSS (MiB; Karmada's: the sum of each process's peak, its webhook's
    /// included, which admitted the policies before the start).
    pub peak_rss_mib: f64,
    /// Their RSS when settled (MiB).
    pub rss_mib: f64,
    /// Manifests of Works the members did not hold as the Works say once settled (see
    /// [`super::audit`]); a converged run has none.
    pub stale_members: usize,
    /// The first of them, with the first difference of each.
    pub stale_examples: Vec<String>,
}

/// What a restart over the cold start's settled workloads cost, and how long fresh work waited.
#[derive(Clone, Debug, Serialize)]
pub struct ColdRestartResult {
    /// Deployments and ConfigMaps propagated before the restart.
    pub objects: usize,
    /// Seconds from SIGTERM to the new processes' spawn.
    pub stop_seconds: f64,
    /// Seconds from the spawn to ready.
    pub ready_seconds: f64,
    /// Seconds from the spawn to empty work queues.
    pub settled_seconds: f64,
    /// Seconds from the fresh ConfigMap's create (1 s after the spawn) until the fresh Deployment and
    /// ConfigMap were in every member.
    pub fresh_seconds: f64,
    /// Per fresh object and member, from the first fresh create to its arrival.
    pub fresh_latency: Percentiles,
    /// Changes the watches saw on pre-existing objects from the restart until settled.
    pub changes: BTreeMap<String, Changes>,
    /// Which pre-existing objects changed (`<cluster>/<kind> <namespace>/<name>`, sorted, the
    /// first [`CHANGED_LISTED`]): a restart should change none, and these say where to look.
    pub changed_objects: Vec<String>,
    /// Which pre-existing Works and ResourceBindings the restart changed and how (`<Kind>
    /// <namespace>/<name>: <first changed path>: <old> → <new>`, sorted, the first
    /// [`CHANGED_LISTED`]), from lists before the stop and once settled.
    pub changed_fields: Vec<String>,
    /// Manifests the members did not hold as their Works say once the restart settled.
    pub stale_members: usize,
    /// The first of them, with the first difference of each.
    pub stale_examples: Vec<String>,
    /// The new processes' requests until settled (the fresh workload's included).
    pub requests: RequestCounts,
    /// Of those, writes to the host.
    pub host_writes: u64,
    /// Of those, writes to the members.
    pub member_writes: u64,
    /// CPU seconds the new processes used until settled.
    pub cpu_seconds: f64,
    /// Their peak RSS (MiB).
    pub peak_rss_mib: f64,
}

/// The workload the restart creates 1 s after the spawn.
const FRESH: &str = "fresh-cold";

/// Creates the namespaces (propagated while the controllers run), stops the controllers, creates
/// `deployments` workloads with up to `concurrency` in flight, starts the controllers of `imp`
/// again and measures until everything is propagated and settled.
pub async fn cold_start(
    s: &mut Session,
    imp: Impl,
    deployments: usize,
    namespace_count: usize,
    concurrency: usize,
    timeout: Duration,
    profiles: &Profiles,
) -> anyhow::Result<ColdStartResult> {
    let ns = namespaces(namespace_count);
    for n in &ns {
        create_namespace(&s.host, n).await?;
    }
    for (name, client) in &s.members {
        for n in &ns {
            wait_namespace(client, name, n, Duration::from_secs(120)).await?;
        }
    }
    s.stop_controllers().await?;
    let work = workloads(deployments, &ns);
    let created = Instant::now();
    let host = s.host.clone();
    let clusters = s.member_names.clone();
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(&work)
        .map(|w| w.create(&host, &clusters))
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    results.into_iter().collect::<anyhow::Result<()>>()?;
    let create_seconds = created.elapsed().as_secs_f64();
    // Karmada's webhook keeps running while its controllers are stopped: its CPU and requests
    // until now are not the start's.
    let cpu_before = match imp {
        Impl::Rust => 0.0,
        Impl::Karmada => s.karmada()?.sample()?.cpu_seconds,
    };
    let requests_before = match imp {
        Impl::Rust => RequestCounts::new(),
        Impl::Karmada => request_counts(&s.karmada()?.metrics()?),
    };
    let host_before = host_writes_by_resource(&s.host_apiserver_metrics().await?);
    let reasons_before = s.events_by_reason().await?;
    let servers_before = s.server_cpu();

    let t0 = Instant::now();
    s.start_controllers(imp).await?;
    let ready_seconds = t0.elapsed().as_secs_f64();
    // Profiled from ready on, awaited once the start settled (the profile ends first or then).
    let profiling = profiles.start(&s.host, CPU_PROFILE_SECONDS);
    let expected: Vec<Created> = work.iter().flat_map(|w| w.templates_at(t0)).collect();
    let conv = match wait_arrivals(s, &expected, t0, timeout, true).await {
        Ok(conv) => conv,
        Err(e) => {
            return Err(e.context(format!(
                "cold start: not every workload propagated; first missing: {}",
                missing(s, &expected, 10).join(", ")
            )));
        }
    };
    let settled = wait_settled(s, timeout).await?;
    profiling.finish().await?;
    let requests = super::process::request_delta(&requests_before, &request_counts(&s.metrics()?));
    let host_after = host_writes_by_resource(&s.host_apiserver_metrics().await?);
    let after = s.sample()?;
    let (stale_members, stale_examples) =
        super::audit::stale_members(&s.host, &s.members, CHANGED_LISTED)
            .await
            .context("cold start: compare the members with the Works")?;
    Ok(ColdStartResult {
        deployments,
        namespaces: ns.len(),
        members: s.members.len(),
        create_seconds,
        ready_seconds,
        member_objects_seconds: conv.member_objects.as_secs_f64(),
        fully_applied_seconds: conv.fully_applied.as_secs_f64(),
        settled_seconds: settled.duration_since(t0).as_secs_f64(),
        arrival: conv.arrival,
        host_writes: writes(&requests, "host"),
        member_writes: writes(&requests, "members"),
        requests,
        host_writes_by_resource: count_delta(&host_before, &host_after),
        events_by_reason: count_delta(&reasons_before, &s.events_by_reason().await?),
        cpu_seconds: after.cpu_seconds - cpu_before,
        server_cpu: s.server_cpu().since(&servers_before),
        peak_rss_mib: after.peak_rss_mib,
        rss_mib: after.rss_mib,
        stale_members,
        stale_examples,
    })
}

/// How many changed objects a restart's result names.
pub const CHANGED_LISTED: usize = 40;

/// Up to `limit` pre-existing objects (in `before`) modified or deleted since, the fresh
/// workload's left out; sorted.
fn changed(
    before: &HashMap<super::observer::ObjectKey, (u32, bool)>,
    after: &super::observer::Sightings,
    limit: usize,
) -> Vec<String> {
    let mut out: Vec<String> = after
        .iter()
        .filter(|(k, _)| !k.name.starts_with(FRESH))
        .filter(|(k, seen)| {
            before.get(*k).is_some_and(|&(changes, deleted)| {
                seen.changes > changes || seen.deleted != deleted
            })
        })
        .map(|(k, _)| format!("{}/{} {}/{}", k.cluster, k.kind, k.namespace, k.name))
        .collect();
    out.sort();
    out.truncate(limit);
    out
}

/// How long the cold start's CPU profile samples (the profiling endpoint's limit).
pub const CPU_PROFILE_SECONDS: u64 = 300;

/// How long the restart's CPU profile samples, from the spawn: the caches' lists and the
/// resync that follows at the largest shapes.
pub const RESTART_PROFILE_SECONDS: u64 = 180;

/// What a cold start or a restart profiles (the benchmark's `--cpu-profile`).
#[derive(Clone, Debug, Default)]
pub struct Profiles {
    /// Our controller-manager's profiling port and the file its CPU profile goes to.
    pub controller: Option<(u16, PathBuf)>,
    /// Where the host API server's CPU profiles go: `<this>.<k>.pb.gz`, one per
    /// [`HOST_PROFILE_CHUNK_SECONDS`], because its requests time out after a minute (`go tool
    /// pprof` merges the files it is given).
    pub host_apiserver: Option<PathBuf>,
}

/// How long each of the host API server's CPU profiles samples: under its one-minute request
/// timeout.
pub const HOST_PROFILE_CHUNK_SECONDS: u64 = 50;

/// The profiles being taken, awaited with [`Profiling::finish`].
pub struct Profiling(Vec<tokio::task::JoinHandle<anyhow::Result<()>>>);

impl Profiles {
    /// Starts every profile for `seconds` from now (the controller's once its endpoint listens:
    /// a process just spawned opens it a moment later).
    fn start(&self, host: &Client, seconds: u64) -> Profiling {
        let mut tasks = Vec::new();
        if let Some((port, path)) = self.controller.clone() {
            tasks.push(tokio::task::spawn_blocking(move || {
                wait_listening(port, Duration::from_secs(30))?;
                super::fetch_profile(
                    port,
                    &format!("/debug/pprof/profile?seconds={seconds}"),
                    Duration::from_secs(seconds + 60),
                    &path,
                )
            }));
        }
        if let Some(prefix) = self.host_apiserver.clone() {
            let host = host.clone();
            tasks.push(tokio::spawn(async move {
                let chunks = seconds.div_ceil(HOST_PROFILE_CHUNK_SECONDS);
                for k in 0..chunks {
                    let chunk =
                        HOST_PROFILE_CHUNK_SECONDS.min(seconds - k * HOST_PROFILE_CHUNK_SECONDS);
                    let path = PathBuf::from(format!("{}.{k}.pb.gz", prefix.display()));
                    host_profile(&host, chunk, &path).await?;
                }
                Ok(())
            }));
        }
        Profiling(tasks)
    }
}

impl Profiling {
    /// Waits for every profile to be written; the first error.
    async fn finish(self) -> anyhow::Result<()> {
        for task in self.0 {
            task.await.context("a profiling task")??;
        }
        Ok(())
    }
}

/// Writes a CPU profile of the host API server over the next `seconds` (`/debug/pprof/profile`,
/// served with `--profiling`) to `path`.
async fn host_profile(host: &Client, seconds: u64, path: &Path) -> anyhow::Result<()> {
    let endpoint = format!("/debug/pprof/profile?seconds={seconds}");
    let request = http::Request::get(&endpoint)
        .body(Vec::new())
        .context("build the profile request")?;
    let mut body = Vec::new();
    tokio::time::timeout(Duration::from_secs(seconds + 30), async {
        let mut stream = host.request_stream(request).await?;
        stream.read_to_end(&mut body).await?;
        anyhow::Ok(())
    })
    .await
    .with_context(|| format!("the host API server's {endpoint}: no answer in time"))?
    .with_context(|| format!("the host API server's {endpoint}"))?;
    super::write_file(path, &body)
}

/// Waits until something accepts connections on 127.0.0.1:`port` (a process just spawned
/// opens its profiling endpoint a moment later). Blocking.
fn wait_listening(port: u16, timeout: Duration) -> anyhow::Result<()> {
    let until = Instant::now() + timeout;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    while std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err() {
        if Instant::now() >= until {
            anyhow::bail!("nothing listens on {addr} within {timeout:?} of the spawn");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// Up to `limit` of what `expected` still lacks: member objects not seen (`<member>/<kind>
/// <namespace>/<name>`) and bindings not FullyApplied (`binding <namespace>/<name>`).
fn missing(s: &Session, expected: &[Created], limit: usize) -> Vec<String> {
    let seen = s.observer.seen();
    let mut out = Vec::new();
    for (t, _) in expected {
        for m in &s.member_names {
            let key = super::observer::ObjectKey {
                cluster: m.clone(),
                kind: t.kind.name(),
                namespace: t.namespace.clone(),
                name: t.name.clone(),
            };
            if !seen.contains_key(&key) {
                out.push(format!("{m}/{} {}/{}", t.kind.name(), t.namespace, t.name));
            }
        }
        let binding = super::observer::ObjectKey {
            cluster: "host".to_string(),
            kind: "ResourceBinding",
            namespace: t.namespace.clone(),
            name: t.binding_name(),
        };
        if seen.get(&binding).and_then(|b| b.fully_applied).is_none() {
            out.push(format!("binding {}/{}", t.namespace, t.binding_name()));
        }
        if out.len() >= limit {
            break;
        }
    }
    out.truncate(limit);
    out
}

/// Restarts the controllers over the settled cold start; 1 s after the spawn creates a fresh
/// ConfigMap, policy and Deployment in the first cold namespace and measures until they are in
/// every member, then until the resync settles.
///
/// `profiles` are taken from the spawn for [`RESTART_PROFILE_SECONDS`]: the caches' lists and
/// the resync are in that window.
pub async fn restart(
    s: &mut Session,
    timeout: Duration,
    profiles: &Profiles,
) -> anyhow::Result<ColdRestartResult> {
    let objects = s
        .observer
        .seen()
        .keys()
        .filter(|k| k.cluster == "host" && (k.kind == "Deployment" || k.kind == "ConfigMap"))
        .count();
    let before = s.observer.snapshot();
    let said_before = super::audit::snapshot_bindings_and_works(&s.host)
        .await
        .context("restart: list the bindings and Works before it")?;
    let stop = Instant::now();
    let spawned = s.restart_kcm().await?;
    let stop_seconds = spawned.duration_since(stop).as_secs_f64();
    let profiling = profiles.start(&s.host, RESTART_PROFILE_SECONDS);
    let fresh = Workload::new(&namespaces(1)[0], FRESH);
    let host = s.host.clone();
    let clusters = s.member_names.clone();
    let fresh_create = {
        let fresh = fresh.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until((spawned + Duration::from_secs(1)).into()).await;
            let at = Instant::now();
            fresh.create(&host, &clusters).await.map(|()| at)
        })
    };
    s.wait_ready(timeout).await?;
    let ready_seconds = spawned.elapsed().as_secs_f64();
    let at = fresh_create
        .await
        .context("the task creating the fresh workload")??;
    let conv = wait_arrivals(s, &fresh.templates_at(at), at, timeout, false)
        .await
        .context("restart under the cold-start load: wait for the fresh workload")?;
    let settled = wait_settled(s, timeout).await?;
    profiling.finish().await?;
    // Changes surface through the watches a moment after they are made.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let changes = change_counts(&before, &s.observer.seen(), |k| !k.name.starts_with(FRESH));
    let changed_objects = changed(&before, &s.observer.seen(), CHANGED_LISTED);
    let said_after = super::audit::snapshot_bindings_and_works(&s.host)
        .await
        .context("restart: list the bindings and Works after it")?;
    let changed_fields = super::audit::changed_since(&said_before, &said_after, CHANGED_LISTED);
    let requests = request_counts(&s.metrics()?);
    let sample = s.sample()?;
    let (stale_members, stale_examples) =
        super::audit::stale_members(&s.host, &s.members, CHANGED_LISTED)
            .await
            .context("restart: compare the members with the Works")?;
    Ok(ColdRestartResult {
        objects,
        stop_seconds,
        ready_seconds,
        settled_seconds: settled.duration_since(spawned).as_secs_f64(),
        fresh_seconds: conv.member_objects.as_secs_f64(),
        fresh_latency: conv.arrival,
        changes,
        changed_objects,
        changed_fields,
        stale_members,
        stale_examples,
        host_writes: writes(&requests, "host"),
        member_writes: writes(&requests, "members"),
        requests,
        cpu_seconds: sample.cpu_seconds,
        peak_rss_mib: sample.peak_rss_mib,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_deployment_mounts_its_own_configmap_and_has_its_own_policy() {
        let ns = namespaces(2);
        let w = workloads(3, &ns);
        assert_eq!(
            w.iter()
                .map(|w| (w.deployment.namespace.as_str(), w.deployment.name.as_str()))
                .collect::<Vec<_>>(),
            [
                ("cold-0", "cold-0"),
                ("cold-1", "cold-1"),
                ("cold-0", "cold-2")
            ]
        );
        assert_eq!(w[1].configmap.name, "cold-1-config");
        assert_eq!(w[1].configmap.binding_name(), "cold-1-config-configmap");
        let d: k8s_openapi::api::apps::v1::Deployment =
            serde_json::from_value(w[1].deployment_manifest()).unwrap();
        let pod = d.spec.template.spec.unwrap();
        let volume = &pod.volumes.unwrap()[0];
        assert_eq!(
            volume.config_map.as_ref().map(|c| c.name.as_str()),
            Some("cold-1-config")
        );
        assert_eq!(
            pod.containers[0].volume_mounts.as_ref().unwrap()[0].name,
            "config"
        );
        let p = w[1].policy(&["member1".into(), "member2".into()]).unwrap();
        assert!(p.spec.propagate_deps);
        assert_eq!(p.spec.resource_selectors[0].name, "cold-1");
        assert_eq!(namespaces(0), ["cold-0"]);
    }
}
