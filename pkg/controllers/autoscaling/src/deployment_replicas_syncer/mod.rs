//! The Deployment replicas syncer (`--controllers` name `deploymentReplicasSyncer`, Karmada's
//! `deployment-replicas-syncer`, off by default): for a Deployment template labelled
//! `resourcetemplate.karmada.io/retain-replicas=true` (members' HPAs own its replicas, see
//! `hpaScaleTargetMarker`) and scheduled `Divided`, `spec.replicas` follows `status.replicas`, the
//! sum of the members' replicas, so the template shows what the HPAs decided and a rescheduling
//! divides the right number.
//!
//! It writes only once the last change has been seen through: the binding carries the template's
//! replicas, the scheduler has observed the binding, every scheduled cluster reported a status
//! with replicas, and the template's `status.replicas` equals their sum; otherwise it looks again
//! a second later. This is what keeps it from fighting a user's own change of `spec.replicas`.
//!
//! Triggers, as Karmada's predicate: an update of a labelled Deployment that adds the label or
//! changes `spec.replicas` or `status.replicas` (creations and deletions are ignored; the last
//! values seen per Deployment stand in for the old object of an update event).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apimachinery::{is_conflict, is_not_found};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use karmada_apis::ResourceBinding;
use karmada_apis::names::binding_name;
use karmada_apis::policy::v1alpha1::ReplicaSchedulingType;
use karmada_apis::well_known::{RETAIN_REPLICAS_LABEL, RETAIN_REPLICAS_VALUE};
use karmada_controllers_common::error::framework;
use karmada_controllers_common::handlers::{shared_controller, start_fn_of, template_controller};
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::{Client, ResourceExt};
use lariat::{HandlerResult, ObjectKey, SharedController};
use serde_json::json;

/// The controller's `--controllers` name.
pub const NAME: &str = "deploymentReplicasSyncer";
/// Karmada's controller name (User-Agent suffix).
pub const CONTROLLER_NAME: &str = "deployment-replicas-syncer";

/// How long to wait for a change to be seen through before looking again (Karmada's 1s).
const WAIT_STATUS_INTERVAL: Duration = Duration::from_secs(1);

/// A syncer failure.
#[derive(Debug, thiserror::Error)]
pub enum SyncerError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// Writing the Deployment failed.
    #[error("update replicas of Deployment {namespace}/{name}: {source}")]
    Update {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
}

karmada_controllers_common::core_error_from!(SyncerError);

/// What the predicate compares between two sightings of a Deployment.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Seen {
    labelled: bool,
    spec_replicas: Option<i32>,
    status_replicas: i32,
}

struct Inner {
    ctx: ControllerContext,
    client: Client,
    /// The detector's (dynamic) Deployment controller.
    deployments: SharedController<DynamicObject>,
    bindings: SharedController<ResourceBinding>,
    seen: Mutex<HashMap<String, Seen>>,
    /// Deployments triggered and not done yet (waiting for their status, or failed).
    pending: Mutex<HashSet<String>>,
}

/// The syncer. Cheap to clone.
#[derive(Clone)]
pub struct Syncer {
    inner: Arc<Inner>,
}

impl Syncer {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, SyncerError> {
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("deploymentReplicasSyncer client"))?;
        let deployments = template_controller::<Deployment>(cp)?;
        let bindings = shared_controller::<ResourceBinding>(cp)?;
        Ok(Syncer {
            inner: Arc::new(Inner {
                ctx,
                client,
                deployments,
                bindings,
                seen: Mutex::new(HashMap::new()),
                pending: Mutex::new(HashSet::new()),
            }),
        })
    }

    /// Registers the handler and runs until the context is cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        inner
            .ctx
            .wiring(NAME, &self)
            .waits_for(&inner.bindings)
            .handles_typed(
                &inner.deployments,
                NAME,
                |this: Self, k, o: Option<Arc<Deployment>>| async move { this.handle(k, o).await },
            )
            .run()
            .await?;
        Ok(())
    }

    /// Karmada's update predicate, with the last sighting standing in for the old object.
    fn triggered(&self, key: &ObjectKey, deployment: Option<&Deployment>) -> bool {
        let Ok(mut seen) = self.inner.seen.lock() else {
            return false;
        };
        let Some(deployment) = deployment else {
            seen.remove(key.as_str());
            return false;
        };
        let now = Seen {
            labelled: deployment
                .labels()
                .get(RETAIN_REPLICAS_LABEL)
                .map(String::as_str)
                == Some(RETAIN_REPLICAS_VALUE),
            spec_replicas: deployment.spec.replicas,
            status_replicas: status_replicas(deployment),
        };
        let Some(old) = seen.insert(key.as_str().to_owned(), now) else {
            // A creation (or the initial list): ignored, as in Karmada.
            return false;
        };
        if !now.labelled {
            return false;
        }
        if !old.labelled {
            return true;
        }
        let (Some(old_spec), Some(new_spec)) = (old.spec_replicas, now.spec_replicas) else {
            return false;
        };
        old_spec != new_spec || old.status_replicas != now.status_replicas
    }

    async fn handle(
        &self,
        key: ObjectKey,
        obj: Option<Arc<Deployment>>,
    ) -> HandlerResult<DynamicObject> {
        // A requeue sees the same sighting: the predicate filters only new sightings.
        let triggered = self.triggered(&key, obj.as_deref());
        let pending = match self.inner.pending.lock() {
            Ok(mut pending) if obj.is_none() => pending.remove(key.as_str()),
            Ok(mut pending) if triggered => {
                pending.insert(key.as_str().to_owned());
                true
            }
            Ok(pending) => pending.contains(key.as_str()),
            Err(_) => false,
        };
        if obj.is_none() || !pending {
            return HandlerResult::Success;
        }
        let namespace = key.namespace().unwrap_or_default().to_owned();
        let name = key.name().to_owned();
        let result = self.sync(&namespace, &name).await;
        if matches!(result, Ok(None))
            && let Ok(mut pending) = self.inner.pending.lock()
        {
            pending.remove(key.as_str());
        }
        match result {
            Ok(None) => HandlerResult::Success,
            Ok(Some(after)) => HandlerResult::RequeueAfter(after),
            Err(e) => {
                tracing::warn!(namespace, name, error = %e, "deployment replicas not synced");
                HandlerResult::error(e)
            }
        }
    }

    /// Karmada's `Reconcile`: `Some(delay)` to look again later.
    async fn sync(&self, namespace: &str, name: &str) -> Result<Option<Duration>, SyncerError> {
        let Some(binding) = self
            .inner
            .bindings
            .store()
            .get_named(Some(namespace), &binding_name("Deployment", name))
        else {
            return Ok(None);
        };
        let divided = binding
            .spec
            .placement
            .as_ref()
            .map(karmada_apis::policy::v1alpha1::Placement::replica_scheduling_type)
            == Some(ReplicaSchedulingType::Divided);
        if !divided {
            return Ok(None);
        }
        let Some(deployment) = self
            .inner
            .deployments
            .store()
            .get_named(Some(namespace), name)
            .and_then(|d| Arc::unwrap_or_clone(d).try_parse::<Deployment>().ok())
        else {
            return Ok(None);
        };
        let spec_replicas = deployment.spec.replicas;
        let status = status_replicas(&deployment);
        if spec_replicas == Some(status) {
            return Ok(None);
        }
        if !status_collected(&deployment, &binding) {
            return Ok(Some(WAIT_STATUS_INTERVAL));
        }
        let api: Api<Deployment> = Api::namespaced(self.inner.client.clone(), namespace);
        let patch = json!({
            "metadata": {"resourceVersion": deployment.resource_version()},
            "spec": {"replicas": status},
        });
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                tracing::info!(namespace, name, old = ?spec_replicas, new = status, "deployment replicas synced");
                Ok(None)
            }
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) if is_conflict(&e) => Ok(Some(WAIT_STATUS_INTERVAL)),
            Err(source) => Err(SyncerError::Update {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                source,
            }),
        }
    }
}

fn status_replicas(deployment: &Deployment) -> i32 {
    deployment
        .status
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(0)
}

/// Whether the template's last `spec.replicas` reached the binding, was scheduled, and every
/// scheduled cluster's replicas came back into the template's `status.replicas`.
fn status_collected(deployment: &Deployment, binding: &ResourceBinding) -> bool {
    let Some(spec_replicas) = deployment.spec.replicas else {
        return false;
    };
    if spec_replicas != binding.spec.replicas {
        return false;
    }
    let Some(status) = binding.status.as_ref() else {
        return false;
    };
    if binding.metadata.generation != Some(status.scheduler_observed_generation) {
        return false;
    }
    if status.aggregated_status.len() != binding.spec.clusters.len() {
        return false;
    }
    let mut sum = 0i32;
    for item in &status.aggregated_status {
        let Some(raw) = &item.status else {
            return false;
        };
        let Ok(member) = raw.decode::<DeploymentStatus>() else {
            return false;
        };
        // A member Deployment under an HPA has at least one replica; 0 means not collected yet.
        let replicas = member.replicas.unwrap_or(0);
        if replicas <= 0 {
            return false;
        }
        sum = sum.saturating_add(replicas);
    }
    status_replicas(deployment) == sum
}

/// The controller's [`StartFn`].
pub fn start_fn() -> StartFn {
    start_fn_of(Syncer::new, Syncer::run)
}
