//! The namespace controller (`--controllers` name `namespace`): propagates every namespace of the
//! control plane to every member cluster through a Work (Karmada's `namespace-sync-controller`),
//! so namespaced templates land in a namespace that exists.
//!
//! Skipped: reserved namespaces (`karmada-system`, `karmada-cluster`, `karmada-es-*`), `default`,
//! namespaces matching `--skipped-propagating-namespaces` (default `kube-.*`), namespaces being
//! deleted, and namespaces labelled `namespace.karmada.io/skip-auto-propagation=true`. Only
//! ClusterOverridePolicies apply to namespaces. The Work is named like Karmada's, owned by the
//! namespace (the garbage collector removes it with the namespace), carries finalizer
//! `karmada.io/execution-controller` and is written only when it changed.
//!
//! Triggers: namespace changes, a new Cluster (all namespaces), and ClusterOverridePolicy changes
//! (the namespaces they select, or all).
//!
//! Namespaces are watched through the control plane's dynamic view of `v1/Namespace`, the one the
//! resource detector uses too: one cache serves both, so a (Cluster)PropagationPolicy can select
//! namespaces while this controller runs. As in Karmada, the two do not coordinate: a namespace a
//! policy claims is still propagated here unless it is labelled to skip auto-propagation, and both
//! write the same Work (Karmada's Work name depends only on the kind and name) in the policy's
//! clusters.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use karmada_apis::names::{execution_space_name, is_reserved_namespace, work_name};
use karmada_apis::policy::v1alpha1::ResourceSelector;
use karmada_apis::well_known::{
    EXECUTION_CONTROLLER_FINALIZER, NAMESPACE_DEFAULT, NAMESPACE_SKIP_AUTO_PROPAGATION_LABEL,
};
use karmada_apis::{Cluster, ClusterOverridePolicy, Work};
use karmada_interpreter::Interpreter;
use kube::ResourceExt;
use kube::api::DynamicObject;
use lariat::{HandlerResult, ObjectKey, SharedController};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use karmada_controllers_common::handlers::{start_fn_of, template_controller};
use karmada_controllers_common::work::{WorkTarget, create_or_update_work};
use karmada_controllers_common::{ControllerContext, StartFn};

/// The controller's `--controllers` name.
pub const NAME: &str = "namespace";
/// Karmada's controller name (User-Agent suffix).
pub const CONTROLLER_NAME: &str = "namespace-sync-controller";

/// A namespace-controller failure.
#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// Some clusters failed.
    #[error("sync namespace({namespace}) failed: {message}")]
    Sync {
        /// The namespace.
        namespace: String,
        /// What failed per cluster.
        message: String,
    },
}

karmada_controllers_common::core_error_from!(NamespaceError);

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    interpreter: Interpreter,
    /// The dynamic view of `v1/Namespace`, shared with the resource detector.
    namespaces: SharedController<DynamicObject>,
    clusters: SharedController<Cluster>,
    cops: SharedController<ClusterOverridePolicy>,
    works: SharedController<Work>,
    known_clusters: Mutex<HashSet<String>>,
    cop_selectors: Mutex<HashMap<String, Vec<ResourceSelector>>>,
    cancel: CancellationToken,
}

/// The namespace controller. Cheap to clone.
#[derive(Clone)]
pub struct NamespaceController {
    inner: Arc<Inner>,
}

/// Whether a namespace is propagated at all (Karmada's `namespaceShouldBeSynced`).
pub fn should_sync(name: &str, skipped: &[regex::Regex]) -> bool {
    !(is_reserved_namespace(name)
        || name == NAMESPACE_DEFAULT
        || skipped.iter().any(|r| r.is_match(name)))
}

impl NamespaceController {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, NamespaceError> {
        let cp = &ctx.control_plane;
        let client = cp.clients().client_for_controller(CONTROLLER_NAME)?;
        let c = cp.controllers();
        let namespaces = template_controller::<Namespace>(cp)?;
        let clusters = c.for_kind::<Cluster>()?;
        let cops = c.for_kind::<ClusterOverridePolicy>()?;
        let works = c.for_kind::<Work>()?;
        let cancel = ctx.cancel.child_token();
        Ok(NamespaceController {
            inner: Arc::new(Inner {
                ctx,
                client,
                interpreter: Interpreter::default(),
                namespaces,
                clusters,
                cops,
                works,
                known_clusters: Mutex::new(HashSet::new()),
                cop_selectors: Mutex::new(HashMap::new()),
                cancel,
            }),
        })
    }

    /// Registers the handlers and runs until the context is cancelled.
    pub async fn run(self) -> Result<(), karmada_controllers_common::BoxError> {
        let inner = &self.inner;
        inner
            .ctx
            .wiring("namespace controller", &self)
            .cancelled_by(&inner.cancel)
            .waits_for(&inner.clusters)
            .waits_for(&inner.cops)
            .waits_for(&inner.works)
            .then(|this: &Self| {
                for c in this.inner.clusters.store().keys() {
                    this.inner.known_clusters.lock().insert(c.name().to_owned());
                }
            })
            .handles(
                &inner.namespaces,
                NAME,
                |this: Self, k, o: Option<Arc<DynamicObject>>| async move {
                    this.handle_namespace(k, o).await
                },
            )
            .handles(
                &inner.clusters,
                NAME,
                |this: Self, k, o: Option<Arc<Cluster>>| async move {
                    this.cluster_changed(&k, o.is_some());
                    HandlerResult::Success
                },
            )
            .handles(
                &inner.cops,
                NAME,
                |this: Self, k, o: Option<Arc<ClusterOverridePolicy>>| async move {
                    this.cop_changed(&k, o.map(|p| p.spec.resource_selectors.clone()));
                    HandlerResult::Success
                },
            )
            .run()
            .await?;
        Ok(())
    }

    fn enqueue_all(&self) {
        for k in self.inner.namespaces.store().keys() {
            self.inner.namespaces.enqueue_key(k);
        }
    }

    fn cluster_changed(&self, key: &ObjectKey, exists: bool) {
        let name = key.name().to_owned();
        let added = {
            let mut known = self.inner.known_clusters.lock();
            if exists {
                known.insert(name)
            } else {
                known.remove(&name);
                false
            }
        };
        if added {
            self.enqueue_all();
        }
    }

    fn cop_changed(&self, key: &ObjectKey, selectors: Option<Vec<ResourceSelector>>) {
        let previous = {
            let mut map = self.inner.cop_selectors.lock();
            match &selectors {
                Some(s) => map.insert(key.to_string(), s.clone()),
                None => map.remove(key.as_str()),
            }
        };
        let mut names = HashSet::new();
        for sels in selectors.iter().chain(previous.iter()) {
            for s in sels {
                if s.api_version != "v1" || s.kind != "Namespace" {
                    continue;
                }
                if s.name.is_empty() {
                    self.enqueue_all();
                    return;
                }
                names.insert(s.name.clone());
            }
        }
        for n in names {
            self.inner.namespaces.enqueue(None, &n);
        }
    }

    async fn handle_namespace(
        &self,
        key: ObjectKey,
        obj: Option<Arc<DynamicObject>>,
    ) -> HandlerResult<DynamicObject> {
        let Some(ns) = obj else {
            // Its Works are owned by it: the garbage collector removes them.
            return HandlerResult::Success;
        };
        match self.sync(&ns).await {
            Ok(()) => HandlerResult::Success,
            Err(e) => {
                tracing::warn!(namespace = key.name(), error = %e, "namespace not propagated");
                HandlerResult::error(e)
            }
        }
    }

    async fn sync(&self, ns: &DynamicObject) -> Result<(), NamespaceError> {
        let inner = &self.inner;
        let name = ns.name_any();
        if !should_sync(&name, &inner.ctx.settings.skipped_propagating_namespaces)
            || ns.metadata.deletion_timestamp.is_some()
            || ns
                .labels()
                .get(NAMESPACE_SKIP_AUTO_PROPAGATION_LABEL)
                .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            return Ok(());
        }
        let mut manifest = serde_json::to_value(ns).map_err(|e| NamespaceError::Sync {
            namespace: name.clone(),
            message: e.to_string(),
        })?;
        if let Some(o) = manifest.as_object_mut() {
            o.insert("apiVersion".to_owned(), "v1".into());
            o.insert("kind".to_owned(), "Namespace".into());
        }
        let cops: Vec<ClusterOverridePolicy> = inner
            .cops
            .store()
            .list()
            .iter()
            .map(|p| (**p).clone())
            .collect();
        let owner = OwnerReference {
            api_version: "v1".to_owned(),
            kind: "Namespace".to_owned(),
            name: name.clone(),
            uid: ns.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let works = inner.works.store();
        let mut errors = Vec::new();
        for cluster in inner.clusters.store().list() {
            let cname = cluster.name_any();
            let overridden = match karmada_policy::apply_overrides(&manifest, &cluster, &cops, &[])
            {
                Ok(o) => o,
                Err(e) => {
                    errors.push(format!("cluster({cname}): {e}"));
                    continue;
                }
            };
            let mut annotations = Default::default();
            overridden.record_annotations(&mut annotations);
            let target = WorkTarget {
                name: work_name("Namespace", &name, ""),
                namespace: execution_space_name(&cname),
                annotations,
                finalizers: vec![EXECUTION_CONTROLLER_FINALIZER.to_owned()],
                owner_references: vec![owner.clone()],
                ..Default::default()
            };
            if let Err(e) = create_or_update_work(
                &inner.client,
                Some(&works),
                &inner.interpreter,
                &target,
                overridden.manifest,
            )
            .await
            {
                errors.push(format!("cluster({cname}): {e}"));
            }
        }
        if errors.is_empty() {
            return Ok(());
        }
        Err(NamespaceError::Sync {
            namespace: name,
            message: errors.join("; "),
        })
    }
}

/// The start function registered as `namespace`.
pub fn start_fn() -> StartFn {
    start_fn_of(NamespaceController::new, NamespaceController::run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ApiResource;

    #[test]
    fn skipped_namespaces() {
        let skipped = vec![regex::Regex::new("^(?:kube-.*)$").unwrap()];
        assert!(should_sync("team-a", &skipped));
        assert!(!should_sync("default", &skipped));
        assert!(!should_sync("kube-system", &skipped));
        assert!(!should_sync("karmada-system", &skipped));
        assert!(!should_sync("karmada-es-member1", &skipped));
    }

    /// The ApiResource discovery reports for namespaces, as the detector watches it.
    fn discovered() -> ApiResource {
        ApiResource {
            group: String::new(),
            version: "v1".to_owned(),
            api_version: "v1".to_owned(),
            kind: "Namespace".to_owned(),
            plural: "namespaces".to_owned(),
        }
    }

    #[tokio::test]
    async fn shares_the_detectors_namespace_watch_in_either_order() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let cancel = CancellationToken::new();
        let options = lariat::ClusterOptions::default();
        let first =
            lariat::Cluster::new("ns-first", config.clone(), options.clone(), &cancel).unwrap();
        let ours = template_controller::<Namespace>(&first).unwrap();
        let detectors = first.controllers().for_resource(&discovered()).unwrap();
        assert_eq!(ours.name(), detectors.name());
        ours.enqueue(None, "team-a");
        assert!(detectors.is_initialized(), "one controller, one watch");
        assert_eq!(first.caches().started().len(), 1);

        let second = lariat::Cluster::new("ns-second", config, options, &cancel).unwrap();
        second.controllers().for_resource(&discovered()).unwrap();
        template_controller::<Namespace>(&second).unwrap();
        assert_eq!(second.caches().len(), 1);
        first.stop(std::time::Duration::from_secs(5)).await;
        second.stop(std::time::Duration::from_secs(5)).await;
    }
}
