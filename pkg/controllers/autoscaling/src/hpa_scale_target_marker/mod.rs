//! The HPA scale target marker (`--controllers` name `hpaScaleTargetMarker`, Karmada's
//! `hpa-scale-target-marker`, off by default): a HorizontalPodAutoscaler template that a
//! (Cluster)PropagationPolicy propagates (it carries a policy permanent-id label) gets its scale
//! target template labelled `resourcetemplate.karmada.io/retain-replicas=true`, so the members'
//! HPAs own the replicas (the interpreter then keeps each member's replicas) and
//! `deploymentReplicasSyncer` may copy them back. The label goes when the HPA is deleted or points
//! elsewhere.
//!
//! Karmada compares the old and new HPA of an update event; here the last target seen per HPA is
//! remembered for the same purpose (so, as in Karmada, an HPA deleted while this controller was not
//! running leaves the label behind).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use apimachinery::{gvk_of, is_not_found};
use k8s_openapi::api::autoscaling::v2::{CrossVersionObjectReference, HorizontalPodAutoscaler};
use karmada_apis::well_known::{
    CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL, PROPAGATION_POLICY_PERMANENT_ID_LABEL,
    RETAIN_REPLICAS_LABEL, RETAIN_REPLICAS_VALUE,
};
use karmada_controllers_common::error::framework;
use karmada_controllers_common::handlers::{start_fn_of, template_controller};
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::{Client, ResourceExt};
use lariat::{HandlerResult, ObjectKey, SharedController};
use serde_json::json;

/// The controller's `--controllers` name.
pub const NAME: &str = "hpaScaleTargetMarker";
/// Karmada's controller name (User-Agent suffix).
pub const CONTROLLER_NAME: &str = "hpa-scale-target-marker";

/// A marker failure.
#[derive(Debug, thiserror::Error)]
pub enum MarkerError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// The scale target could not be read or labelled.
    #[error("scale ref resource {namespace}/{kind}/{name} of HPA: {message}")]
    Target {
        /// The namespace.
        namespace: String,
        /// The target's kind.
        kind: String,
        /// The target's name.
        name: String,
        /// What failed.
        message: String,
    },
}

karmada_controllers_common::core_error_from!(MarkerError);

struct Inner {
    ctx: ControllerContext,
    client: Client,
    /// The detector's (dynamic) HPA controller.
    hpas: SharedController<DynamicObject>,
    /// `namespace/name` of each HPA to the scale target last seen.
    targets: Mutex<HashMap<String, CrossVersionObjectReference>>,
}

/// The marker. Cheap to clone.
#[derive(Clone)]
pub struct Marker {
    inner: Arc<Inner>,
}

impl Marker {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, MarkerError> {
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("hpaScaleTargetMarker client"))?;
        let hpas = template_controller::<HorizontalPodAutoscaler>(cp)?;
        Ok(Marker {
            inner: Arc::new(Inner {
                ctx,
                client,
                hpas,
                targets: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// Registers the handler and runs until the context is cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        inner
            .ctx
            .wiring(NAME, &self)
            .handles_typed(
                &inner.hpas,
                NAME,
                |this: Self, k, o: Option<Arc<HorizontalPodAutoscaler>>| async move {
                    this.handle(k, o).await
                },
            )
            .run()
            .await?;
        Ok(())
    }

    async fn handle(
        &self,
        key: ObjectKey,
        obj: Option<Arc<HorizontalPodAutoscaler>>,
    ) -> HandlerResult<DynamicObject> {
        let namespace = key.namespace().unwrap_or_default().to_owned();
        let current = obj.as_ref().map(|h| h.spec.scale_target_ref.clone());
        let previous = self
            .inner
            .targets
            .lock()
            .ok()
            .and_then(|t| t.get(key.as_str()).cloned());
        // The HPA is gone or points elsewhere: unmark the old target.
        if let Some(old) = previous.filter(|old| Some(old) != current.as_ref())
            && let Err(e) = self.label(&namespace, &old, false).await
        {
            return HandlerResult::error(e);
        }
        if let Ok(mut targets) = self.inner.targets.lock() {
            match &current {
                Some(target) => targets.insert(key.as_str().to_owned(), target.clone()),
                None => targets.remove(key.as_str()),
            };
        }
        if let (Some(hpa), Some(target)) = (obj, current)
            && has_been_propagated(&hpa)
            && let Err(e) = self.label(&namespace, &target, true).await
        {
            return HandlerResult::error(e);
        }
        HandlerResult::Success
    }

    /// Adds (`mark`) or removes the retain-replicas label on the target template.
    async fn label(
        &self,
        namespace: &str,
        target: &CrossVersionObjectReference,
        mark: bool,
    ) -> Result<(), MarkerError> {
        let error = |message: String| MarkerError::Target {
            namespace: namespace.to_owned(),
            kind: target.kind.clone(),
            name: target.name.clone(),
            message,
        };
        let api_version = target.api_version.clone().unwrap_or_default();
        let gvk = gvk_of(&api_version, &target.kind);
        let (resource, _) = self
            .inner
            .ctx
            .control_plane
            .clients()
            .resolve(&gvk)
            .await
            .map_err(|e| error(format!("unable to recognize scale ref resource: {e}")))?;
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.inner.client.clone(), namespace, &resource);
        let object = match api.get(&target.name).await {
            Ok(o) => o,
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(error(format!("failed to find scale ref resource: {e}"))),
        };
        let labelled = object
            .labels()
            .get(RETAIN_REPLICAS_LABEL)
            .map(String::as_str);
        let patch = match (mark, labelled) {
            (true, Some(RETAIN_REPLICAS_VALUE)) | (false, None) => return Ok(()),
            (true, _) => {
                json!({"metadata": {"labels": {RETAIN_REPLICAS_LABEL: RETAIN_REPLICAS_VALUE}}})
            }
            (false, Some(_)) => json!({"metadata": {"labels": {RETAIN_REPLICAS_LABEL: null}}}),
        };
        match api
            .patch(&target.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                tracing::info!(
                    namespace,
                    target = target.name,
                    mark,
                    "hpa scale ref labels updated"
                );
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(error(format!("failed to patch scale ref resource: {e}"))),
        }
    }
}

/// Whether a (Cluster)PropagationPolicy has claimed the HPA.
fn has_been_propagated(hpa: &HorizontalPodAutoscaler) -> bool {
    let labels = hpa.labels();
    labels.contains_key(PROPAGATION_POLICY_PERMANENT_ID_LABEL)
        || labels.contains_key(CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL)
}

/// The controller's [`StartFn`].
pub fn start_fn() -> StartFn {
    start_fn_of(Marker::new, Marker::run)
}
