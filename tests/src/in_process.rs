//! The in-process control plane the integration tests share: Karmada controllers from
//! `karmada-controllers` started in the test process against a [`TestEnv`] host (and, when asked,
//! its member API servers), with the settings, polling, namespace, cluster-status and metric
//! helpers every such test needs. What differs between test files (which controllers run, feature
//! gates, settings and client limits, connected members) is a parameter of [`Harness`].

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use karmada_apis::well_known::KARMADA_CONTROLLER_MANAGER_NAME;
use karmada_apis::{Cluster, ClusterResourceBinding};
use karmada_controllers::common::template::control_plane_cache_options;
use karmada_controllers::members::member_cluster_options;
use karmada_controllers::{ControllerContext, MemberClusters, Settings, StartFn, SyncReporter};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use lariat::events::EventSink;
use lariat::{ClientOptions, ClusterOptions};
use prometheus::proto::Metric;
use serde_json::{Value, json};
use testenv::TestEnv;
use tokio_util::sync::CancellationToken;

/// Logs to the test writer, filtered by `RUST_LOG` (once per process).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// One test at a time in this test binary: each test runs its own controllers.
pub fn serial() -> &'static tokio::sync::Mutex<()> {
    static LOCK: OnceLock<tokio::sync::Mutex<()>> = OnceLock::new();
    LOCK.get_or_init(|| tokio::sync::Mutex::new(()))
}

/// The controller-manager flags the tests start from: Karmada's defaults, with a one-minute cache
/// sync timeout and no resource modeling. Tests change fields with struct update syntax.
pub fn settings() -> Settings {
    Settings {
        cluster_cache_sync_timeout: Duration::from_secs(60),
        enable_cluster_resource_modeling: false,
        ..Settings::default()
    }
}

/// `(name, start)` of the implemented controllers called `names`, in the registry's order.
///
/// # Panics
/// If a name is not an implemented controller.
pub fn implemented(names: &[&str]) -> Vec<(&'static str, StartFn)> {
    for n in names {
        assert!(
            karmada_controllers::registry::implemented()
                .iter()
                .any(|(name, _)| name == n),
            "no implemented controller called {n}"
        );
    }
    karmada_controllers::registry::implemented()
        .into_iter()
        .filter(|(name, _)| names.contains(name))
        .collect()
}

/// What to run in-process: controllers, their settings, and the clusters they see.
pub struct Harness {
    controllers: Vec<(&'static str, StartFn)>,
    settings: Settings,
    host: ClusterOptions,
    members: Vec<(&'static str, usize)>,
    member_options: ClusterOptions,
}

impl Harness {
    /// Runs `controllers` with [`settings()`], default host client options and no member connected
    /// up front (members connected at run time use the settings' client limits).
    pub fn new(controllers: Vec<(&'static str, StartFn)>) -> Harness {
        Harness {
            controllers,
            settings: settings(),
            host: ClusterOptions {
                clients: ClientOptions {
                    user_agent: KARMADA_CONTROLLER_MANAGER_NAME.to_owned(),
                    ..ClientOptions::default()
                },
                caches: control_plane_cache_options(),
                ..ClusterOptions::default()
            },
            members: Vec::new(),
            member_options: member_cluster_options(),
        }
    }

    /// The controller-manager flags.
    pub fn settings(mut self, settings: Settings) -> Harness {
        self.settings = settings;
        self
    }

    /// Client, cache and queue options of the host.
    pub fn host_options(mut self, options: ClusterOptions) -> Harness {
        self.host = options;
        self
    }

    /// Connects the environment's member API servers up front: the `i`th as `names[i]`, with
    /// `options`.
    pub fn members(mut self, names: &[&'static str], options: ClusterOptions) -> Harness {
        self.members = names.iter().copied().zip(0..).collect();
        self.member_options = options;
        self
    }

    /// Connects to `env`, starts the members and the controllers.
    pub async fn start(self, env: &TestEnv) -> Controllers {
        let token = CancellationToken::new();
        let config = env.host().kube_config().await.unwrap();
        let control_plane = lariat::Cluster::new("", config, self.host, &token).unwrap();
        let settings = Arc::new(self.settings);
        let members = Arc::new(MemberClusters::from_settings(
            token.child_token(),
            &settings,
        ));
        for (name, i) in self.members {
            let config = env.members()[i].kube_config().await.unwrap();
            members
                .registry()
                .add(name, config, self.member_options.clone())
                .unwrap();
        }
        members.start();
        control_plane.controllers().start();
        let events = EventSink::start(control_plane.clients().background_client().unwrap(), &token);
        let mut tasks = Vec::new();
        for (name, start) in self.controllers {
            let ctx = ControllerContext {
                name,
                control_plane: control_plane.clone(),
                members: members.clone(),
                events: events.clone(),
                settings: settings.clone(),
                cancel: token.child_token(),
                synced: SyncReporter::new().0,
            };
            let fut = start(ctx);
            tasks.push(tokio::spawn(async move {
                if let Err(e) = fut.await {
                    panic!("controller {name} failed: {e}");
                }
            }));
        }
        Controllers {
            token,
            control_plane,
            members,
            tasks,
        }
    }
}

/// Controllers running in this process (see [`Harness`]).
pub struct Controllers {
    token: CancellationToken,
    control_plane: lariat::Cluster,
    /// The member clusters the controllers see.
    pub members: Arc<MemberClusters>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Controllers {
    /// Cancels the controllers, waits for them, stops the host and disconnects the members.
    pub async fn stop(self) {
        self.token.cancel();
        for t in self.tasks {
            t.await.unwrap();
        }
        self.control_plane.stop(Duration::from_secs(10)).await;
        self.members.shutdown(Duration::from_secs(10)).await;
    }
}

/// The condition of type `type_` among `conditions`, as `(status, reason, message)`.
pub fn condition(conditions: &[Condition], type_: &str) -> Option<(String, String, String)> {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// `Some(())` once object `name` is gone from `api` (a check for [`crate::wait::eventually`]).
pub async fn gone<K>(api: &Api<K>, name: &str) -> Option<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.unwrap().is_none().then_some(())
}

/// Creates namespace `name` with `labels`; errors (such as "already exists") are ignored.
pub async fn create_namespace(client: &Client, name: &str, labels: Value) {
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    let _ = Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await;
}

/// Creates namespace `name` unless it exists.
///
/// # Panics
/// On any other error.
pub async fn ensure_namespace(client: &Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create namespace {name}: {e}"),
    }
}

/// Writes the `Ready` condition of Cluster `name` as the clusterStatus controller would, merging
/// the fields of `status` (such as `apiEnablements`) into the status.
pub async fn set_cluster_ready(
    client: &Client,
    name: &str,
    ready: bool,
    message: &str,
    status: Value,
) {
    let mut status = match status {
        Value::Object(fields) => fields,
        _ => serde_json::Map::new(),
    };
    status.insert(
        "conditions".into(),
        json!([{
            "type": "Ready", "status": if ready { "True" } else { "False" },
            "reason": if ready { "ClusterReady" } else { "ClusterNotReady" }, "message": message,
            "lastTransitionTime": "2026-01-01T00:00:00Z"
        }]),
    );
    Api::<Cluster>::all(client.clone())
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "status": status })),
        )
        .await
        .unwrap();
}

/// A ResourceBinding `ns/name` as the detector writes one for the template `kind` `ns/name` of
/// `api_version` (with a permanent-id label and the resource reference), `spec` merged over it
/// (placement, replicas, groups, ...), for tests that run only the scheduler.
///
/// # Panics
/// When `spec` does not make a valid ResourceBinding spec.
pub fn resource_binding(
    ns: &str,
    name: &str,
    (api_version, kind): (&str, &str),
    spec: Value,
) -> karmada_apis::ResourceBinding {
    let mut full = json!({
        "resource": {"apiVersion": api_version, "kind": kind, "namespace": ns, "name": name,
            "uid": format!("uid-{name}")},
    });
    if let (Some(full), Value::Object(extra)) = (full.as_object_mut(), spec) {
        full.extend(extra);
    }
    serde_json::from_value(json!({
        "apiVersion": "work.karmada.io/v1alpha2",
        "kind": "ResourceBinding",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"propagationpolicy.karmada.io/permanent-id": format!("id-{name}")},
        },
        "spec": full,
    }))
    .unwrap_or_else(|e| panic!("ResourceBinding {ns}/{name}: {e}"))
}

/// Creates a Push Cluster `name` no one serves and marks it Ready with `apis` (its
/// `apiEnablements` status), for tests that run only the scheduler.
pub async fn create_ready_cluster(client: &Client, name: &str, apis: Value) {
    let c: Cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"apiEndpoint": "https://127.0.0.1:1", "syncMode": "Push"},
    }))
    .unwrap_or_else(|e| panic!("Cluster {name}: {e}"));
    Api::<Cluster>::all(client.clone())
        .create(&kube::api::PostParams::default(), &c)
        .await
        .unwrap_or_else(|e| panic!("create Cluster {name}: {e}"));
    set_cluster_ready(client, name, true, "ready", apis).await;
}

/// The series of metric `name` in the process registry whose labels include every `filter` pair.
fn series(name: &str, filter: &[(&str, &str)]) -> Vec<Metric> {
    lariat::metrics::registry()
        .gather()
        .iter()
        .filter(|mf| mf.name() == name)
        .flat_map(|mf| mf.get_metric().iter())
        .filter(|m| {
            filter.iter().all(|(k, v)| {
                m.get_label()
                    .iter()
                    .any(|l| l.name() == *k && l.value() == *v)
            })
        })
        .cloned()
        .collect()
}

/// The sum of counter `name` over the series matching `filter`.
pub fn metric_sum(name: &str, filter: &[(&str, &str)]) -> f64 {
    series(name, filter)
        .iter()
        .map(|m| m.get_counter().value())
        .sum()
}

/// The number of observations of histogram `name` over the series matching `filter`.
pub fn histogram_count(name: &str, filter: &[(&str, &str)]) -> u64 {
    series(name, filter)
        .iter()
        .map(|m| m.get_histogram().get_sample_count())
        .sum()
}

/// The bucket upper bounds of the first series of histogram `name` matching `filter`.
pub fn histogram_bounds(name: &str, filter: &[(&str, &str)]) -> Vec<f64> {
    series(name, filter).first().map_or_else(Vec::new, |m| {
        m.get_histogram()
            .get_bucket()
            .iter()
            .map(prometheus::proto::Bucket::upper_bound)
            .collect()
    })
}

/// Whether metric `name` has a series matching `filter`.
pub fn has_series(name: &str, filter: &[(&str, &str)]) -> bool {
    !series(name, filter).is_empty()
}

/// The cluster names of a ClusterResourceBinding once its `Scheduled` condition is True, else `None`.
pub fn scheduled_cluster_names(crb: &ClusterResourceBinding) -> Option<Vec<String>> {
    let scheduled = crb
        .status
        .as_ref()?
        .conditions
        .iter()
        .any(|c| c.type_ == "Scheduled" && c.status == "True");
    scheduled.then(|| crb.spec.clusters.iter().map(|c| c.name.clone()).collect())
}
