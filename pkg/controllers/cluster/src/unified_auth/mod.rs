//! The `unifiedAuth` controller (Karmada's `unified-auth-controller`): for every Cluster with an
//! `impersonatorSecretRef`, writes two Works to its execution namespace, a ClusterRole
//! `karmada-impersonator` allowing `impersonate` on the users, ServiceAccounts and groups that
//! control-plane RBAC lets through the cluster proxy (see [`rules`]), and a ClusterRoleBinding of it
//! to the `karmada-impersonator` ServiceAccount in the secret's namespace. The Works are owned by the
//! Cluster and carry the execution finalizer; they are written only when they change.
//!
//! Triggers: Cluster changes, and ClusterRole and ClusterRoleBinding changes (the clusters the role
//! opens; every cluster when one is deleted, as its rules are gone). karmada-rs serves no cluster
//! proxy itself: these Works let Karmada's `karmada-aggregated-apiserver` or `karmada-search`,
//! deployed beside it, impersonate their callers in the members.
//!
//! ClusterRoles and ClusterRoleBindings are watched through the control plane's dynamic views of
//! their kinds, the ones the resource detector uses (one cache per kind).

pub mod rules;

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use karmada_apis::names::{execution_space_name, work_name};
use karmada_apis::well_known::{EXECUTION_CONTROLLER_FINALIZER, event_reasons};
use karmada_apis::{Cluster, Work};
use karmada_controllers_common::handlers::{shared_controller, start_fn_of, template_controller};
use karmada_controllers_common::work::{WorkError, WorkOutcome, WorkTarget, create_or_update_work};
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use karmada_interpreter::Interpreter;
use kube::api::DynamicObject;
use kube::{Resource, ResourceExt};
use lariat::events::{EventRecorder, EventType, reference_of};
use lariat::{HandlerResult, ObjectKey, SharedController};
use serde::Serialize;

use rules::{Reach, impersonation_rules, impersonator_binding, impersonator_role, opens, reach};

/// The controller's `--controllers` name.
pub const NAME: &str = "unifiedAuth";
/// Karmada's controller name (User-Agent suffix, Event source).
pub const CONTROLLER_NAME: &str = "unified-auth-controller";

/// A unifiedAuth failure, naming the Cluster.
#[derive(Debug, thiserror::Error)]
pub enum UnifiedAuthError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// An impersonation Work could not be written.
    #[error("cluster {cluster}: syncing impersonation config: {source}")]
    Sync {
        /// The Cluster.
        cluster: String,
        /// What failed (boxed: a Work error is large).
        #[source]
        source: Box<WorkError>,
    },
    /// An RBAC object could not be turned into a manifest (not expected).
    #[error("cluster {cluster}: encoding {what}: {source}")]
    Encode {
        /// The Cluster.
        cluster: String,
        /// The object.
        what: &'static str,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
}

karmada_controllers_common::core_error_from!(UnifiedAuthError);

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    interpreter: Interpreter,
    events: EventRecorder,
    clusters: SharedController<Cluster>,
    /// The dynamic views of the RBAC kinds, shared with the resource detector.
    roles: SharedController<DynamicObject>,
    bindings: SharedController<DynamicObject>,
    works: SharedController<Work>,
}

/// The controller. Cheap to clone.
#[derive(Clone)]
pub struct UnifiedAuthController {
    inner: Arc<Inner>,
}

/// The start function registered under `unifiedAuth`.
pub fn start_fn() -> StartFn {
    start_fn_of(UnifiedAuthController::new, UnifiedAuthController::run)
}

fn parsed<K: serde::de::DeserializeOwned + Resource<DynamicType = ()>>(
    objects: Vec<Arc<DynamicObject>>,
) -> Vec<K> {
    objects
        .into_iter()
        .filter_map(|o| Arc::unwrap_or_clone(o).try_parse::<K>().ok())
        .collect()
}

impl UnifiedAuthController {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, UnifiedAuthError> {
        let cp = &ctx.control_plane;
        let client = cp.clients().client_for_controller(CONTROLLER_NAME)?;
        let clusters = shared_controller::<Cluster>(cp)?;
        let roles = template_controller::<ClusterRole>(cp)?;
        let bindings = template_controller::<ClusterRoleBinding>(cp)?;
        let works = shared_controller::<Work>(cp)?;
        Ok(Self {
            inner: Arc::new(Inner {
                events: ctx.events.recorder(CONTROLLER_NAME),
                client,
                interpreter: Interpreter::default(),
                clusters,
                roles,
                bindings,
                works,
                ctx,
            }),
        })
    }

    /// Waits for the caches, registers the handlers and serves until cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        inner
            .ctx
            .wiring("unifiedAuth", &self)
            .waits_for(&inner.clusters)
            .waits_for(&inner.roles)
            .waits_for(&inner.bindings)
            .waits_for(&inner.works)
            .handles(
                &inner.clusters,
                CONTROLLER_NAME,
                |c: Self, key, obj| async move { c.reconcile(key, obj).await },
            )
            .handles_typed(
                &inner.roles,
                CONTROLLER_NAME,
                |c: Self, _key, role: Option<Arc<ClusterRole>>| async move {
                    c.enqueue(role.map_or(Reach::All, |r| reach(&r)));
                    HandlerResult::Success
                },
            )
            .handles_typed(
                &inner.bindings,
                CONTROLLER_NAME,
                |c: Self, _key, binding: Option<Arc<ClusterRoleBinding>>| async move {
                    c.enqueue(binding.map_or(Reach::All, |b| c.binding_reach(&b)));
                    HandlerResult::Success
                },
            )
            .run()
            .await?;
        Ok(())
    }

    /// The clusters a binding's ClusterRole opens (nothing for a missing role or a Role reference).
    fn binding_reach(&self, binding: &ClusterRoleBinding) -> Reach {
        if binding.role_ref.kind != "ClusterRole" {
            return Reach::Nothing;
        }
        self.inner
            .roles
            .store()
            .get_named(None, &binding.role_ref.name)
            .and_then(|o| Arc::unwrap_or_clone(o).try_parse::<ClusterRole>().ok())
            .map_or(Reach::Nothing, |r| reach(&r))
    }

    fn enqueue(&self, reach: Reach) {
        let clusters = &self.inner.clusters;
        let keys: Vec<ObjectKey> = match reach {
            Reach::Nothing => return,
            Reach::All => clusters.store().keys(),
            Reach::Named(names) => names.iter().map(|n| ObjectKey::new(None, n)).collect(),
        };
        for key in keys {
            clusters.enqueue_key(key);
        }
    }

    async fn reconcile(
        &self,
        _key: ObjectKey,
        obj: Option<Arc<Cluster>>,
    ) -> HandlerResult<Cluster> {
        let Some(cluster) = obj.filter(|c| c.metadata.deletion_timestamp.is_none()) else {
            // The Works are owned by the Cluster and go with its execution namespace.
            return HandlerResult::Success;
        };
        let Some(secret) = cluster.spec.impersonator_secret_ref.as_ref() else {
            tracing::debug!(cluster = %cluster.name_any(), "unified auth is disabled: no impersonator secret");
            return HandlerResult::Success;
        };
        let target = reference_of(&*cluster);
        match self.sync(&cluster, &secret.namespace).await {
            Ok(false) => HandlerResult::Success,
            Ok(true) => {
                self.inner
                    .events
                    .record(
                        &target,
                        EventType::Normal,
                        event_reasons::SYNC_IMPERSONATION_CONFIG_SUCCEED,
                        "Sync impersonation config succeed.".to_owned(),
                    )
                    .await;
                HandlerResult::Success
            }
            Err(e) => {
                tracing::warn!(cluster = %cluster.name_any(), error = %e, "impersonation config not synced");
                self.inner
                    .events
                    .record(
                        &target,
                        EventType::Warning,
                        event_reasons::SYNC_IMPERSONATION_CONFIG_FAILED,
                        e.to_string(),
                    )
                    .await;
                HandlerResult::error(e)
            }
        }
    }

    /// Writes the cluster's two Works; `true` when either was written.
    async fn sync(&self, cluster: &Cluster, namespace: &str) -> Result<bool, UnifiedAuthError> {
        let name = cluster.name_any();
        let roles: BTreeSet<String> = parsed::<ClusterRole>(self.inner.roles.store().list())
            .iter()
            .filter(|r| opens(r, &name))
            .map(ResourceExt::name_any)
            .collect();
        let subjects = if roles.is_empty() {
            Vec::new()
        } else {
            let bindings = parsed::<ClusterRoleBinding>(self.inner.bindings.store().list());
            rules::subjects(&roles, &bindings)
        };
        let role = impersonator_role(impersonation_rules(&subjects));
        let binding = impersonator_binding(namespace);
        let role_written = self.write(cluster, "ClusterRole", &role).await?;
        let binding_written = self.write(cluster, "ClusterRoleBinding", &binding).await?;
        if role_written || binding_written {
            tracing::info!(cluster = %name, subjects = subjects.len(), "impersonation config synced");
        }
        Ok(role_written || binding_written)
    }

    async fn write<K: Serialize + Resource<DynamicType = ()>>(
        &self,
        cluster: &Cluster,
        what: &'static str,
        object: &K,
    ) -> Result<bool, UnifiedAuthError> {
        let name = cluster.name_any();
        let mut manifest =
            serde_json::to_value(object).map_err(|source| UnifiedAuthError::Encode {
                cluster: name.clone(),
                what,
                source,
            })?;
        if let Some(m) = manifest.as_object_mut() {
            m.insert("apiVersion".into(), K::api_version(&()).into());
            m.insert("kind".into(), K::kind(&()).into());
        }
        let target = WorkTarget {
            name: work_name(what, rules::IMPERSONATOR_NAME, ""),
            namespace: execution_space_name(&name),
            finalizers: vec![EXECUTION_CONTROLLER_FINALIZER.to_owned()],
            owner_references: vec![OwnerReference {
                api_version: Cluster::api_version(&()).into_owned(),
                kind: Cluster::kind(&()).into_owned(),
                name: name.clone(),
                uid: cluster.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }],
            ..Default::default()
        };
        let works = self.inner.works.store();
        let outcome = create_or_update_work(
            &self.inner.client,
            Some(&works),
            &self.inner.interpreter,
            &target,
            manifest,
        )
        .await
        .map_err(|source| UnifiedAuthError::Sync {
            cluster: name,
            source: Box::new(source),
        })?;
        Ok(!matches!(outcome, WorkOutcome::Unchanged))
    }
}
