//! The controller registry: every controller Karmada's `--controllers` knows, whether it is on by
//! default, and how to start it. Later work replaces placeholder starters with real controllers; the
//! names, defaults and selection rules stay.

use std::sync::Arc;
use std::time::Duration;

pub use karmada_controllers::{ControllerContext, ControllerFuture, StartFn, SyncReporter};
use kube::api::{ApiResource, DynamicObject};
use lariat::{HandlerResult, ObjectKey};

/// Every controller name Karmada accepts in `--controllers`, sorted.
pub const ALL_CONTROLLERS: &[&str] = &[
    "agentcsrapproving",
    "applicationFailover",
    "binding",
    "bindingStatus",
    "cluster",
    "clusterStatus",
    "clustertaintpolicy",
    "cronFederatedHorizontalPodAutoscaler",
    "deploymentReplicasSyncer",
    "endpointSlice",
    "endpointsliceCollect",
    "endpointsliceDispatch",
    "execution",
    "federatedHorizontalPodAutoscaler",
    "federatedResourceQuotaEnforcement",
    "federatedResourceQuotaStatus",
    "federatedResourceQuotaSync",
    "gracefulEviction",
    "hpaScaleTargetMarker",
    "multiclusterservice",
    "namespace",
    "remedy",
    "scheduler",
    "serviceExport",
    "serviceImport",
    "unifiedAuth",
    "workStatus",
    "workloadRebalancer",
];

/// Controllers that `*` does not turn on.
pub const DISABLED_BY_DEFAULT: &[&str] = &["deploymentReplicasSyncer", "hpaScaleTargetMarker"];

/// Problems in a `--controllers` list (unknown names), one per name.
pub fn validate_selection(selection: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    for item in selection {
        if item == "*" {
            continue;
        }
        let name = item.strip_prefix('-').unwrap_or(item);
        if !ALL_CONTROLLERS.contains(&name) {
            problems.push(format!(
                "unknown controller {name:?} (known controllers: {})",
                ALL_CONTROLLERS.join(", ")
            ));
        }
    }
    problems
}

/// Karmada's rule: the first entry equal to `name` or `-name` decides; otherwise `*` turns on the
/// controllers that are on by default; otherwise it is off.
pub fn is_enabled(selection: &[String], name: &str) -> bool {
    let mut star = false;
    for item in selection {
        if item == name {
            return true;
        }
        if item.strip_prefix('-') == Some(name) {
            return false;
        }
        if item == "*" {
            star = true;
        }
    }
    star && !DISABLED_BY_DEFAULT.contains(&name)
}

/// One registry entry.
#[derive(Clone)]
pub struct ControllerSpec {
    /// The `--controllers` name.
    pub name: &'static str,
    /// Whether `*` turns it on.
    pub enabled_by_default: bool,
    /// Starts it.
    pub start: StartFn,
}

impl std::fmt::Debug for ControllerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerSpec")
            .field("name", &self.name)
            .field("enabled_by_default", &self.enabled_by_default)
            .finish()
    }
}

/// An API resource a placeholder waits for (group, version, kind, plural).
#[derive(Debug, Clone, Copy)]
pub struct Resource(
    pub &'static str,
    pub &'static str,
    pub &'static str,
    pub &'static str,
);

impl Resource {
    fn api_resource(&self) -> ApiResource {
        let Resource(group, version, kind, plural) = *self;
        ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: if group.is_empty() {
                version.into()
            } else {
                format!("{group}/{version}")
            },
            kind: kind.into(),
            plural: plural.into(),
        }
    }

    fn describe(&self) -> String {
        if self.0.is_empty() {
            format!("{}/{}", self.1, self.3)
        } else {
            format!("{}/{}/{}", self.0, self.1, self.3)
        }
    }
}

const CLUSTERS: Resource = Resource("cluster.karmada.io", "v1alpha1", "Cluster", "clusters");
const WORKS: Resource = Resource("work.karmada.io", "v1alpha1", "Work", "works");
const RBS: Resource = Resource(
    "work.karmada.io",
    "v1alpha2",
    "ResourceBinding",
    "resourcebindings",
);
const CRBS: Resource = Resource(
    "work.karmada.io",
    "v1alpha2",
    "ClusterResourceBinding",
    "clusterresourcebindings",
);
const NAMESPACES: Resource = Resource("", "v1", "Namespace", "namespaces");
const FRQS: Resource = Resource(
    "policy.karmada.io",
    "v1alpha1",
    "FederatedResourceQuota",
    "federatedresourcequotas",
);

/// The resources each controller's caches need: what a placeholder waits for before it reports synced.
fn watched_resources(name: &str) -> &'static [Resource] {
    match name {
        "cluster" | "clusterStatus" | "unifiedAuth" => &[CLUSTERS],
        "binding" | "bindingStatus" | "gracefulEviction" | "applicationFailover" => &[RBS, CRBS],
        "scheduler" => &[RBS, CRBS, CLUSTERS],
        "execution"
        | "workStatus"
        | "endpointSlice"
        | "endpointsliceCollect"
        | "endpointsliceDispatch" => &[WORKS],
        "namespace" => &[NAMESPACES],
        "serviceExport" => &[Resource(
            "multicluster.x-k8s.io",
            "v1alpha1",
            "ServiceExport",
            "serviceexports",
        )],
        "serviceImport" => &[Resource(
            "multicluster.x-k8s.io",
            "v1alpha1",
            "ServiceImport",
            "serviceimports",
        )],
        "federatedResourceQuotaSync"
        | "federatedResourceQuotaStatus"
        | "federatedResourceQuotaEnforcement" => &[FRQS],
        "federatedHorizontalPodAutoscaler" => &[Resource(
            "autoscaling.karmada.io",
            "v1alpha1",
            "FederatedHPA",
            "federatedhpas",
        )],
        "cronFederatedHorizontalPodAutoscaler" => &[Resource(
            "autoscaling.karmada.io",
            "v1alpha1",
            "CronFederatedHPA",
            "cronfederatedhpas",
        )],
        "hpaScaleTargetMarker" => &[Resource(
            "autoscaling",
            "v2",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
        )],
        "deploymentReplicasSyncer" => &[Resource("apps", "v1", "Deployment", "deployments")],
        "multiclusterservice" => &[Resource(
            "networking.karmada.io",
            "v1alpha1",
            "MultiClusterService",
            "multiclusterservices",
        )],
        "remedy" => &[Resource(
            "remedy.karmada.io",
            "v1alpha1",
            "Remedy",
            "remedies",
        )],
        "workloadRebalancer" => &[Resource(
            "apps.karmada.io",
            "v1alpha1",
            "WorkloadRebalancer",
            "workloadrebalancers",
        )],
        "agentcsrapproving" => &[Resource(
            "certificates.k8s.io",
            "v1",
            "CertificateSigningRequest",
            "certificatesigningrequests",
        )],
        "clustertaintpolicy" => &[Resource(
            "policy.karmada.io",
            "v1alpha1",
            "ClusterTaintPolicy",
            "clustertaintpolicies",
        )],
        _ => &[],
    }
}

/// A stand-in until the real controller exists: registers a no-op handler on the shared controller of
/// every kind the real controller watches (so the control plane's caches, queues and workers for those
/// kinds run, with their metrics), reports synced once those caches synced, then idles until stopped.
fn placeholder(name: &'static str) -> StartFn {
    Arc::new(move |ctx: ControllerContext| {
        Box::pin(async move {
            let mut caches = Vec::new();
            for resource in watched_resources(name) {
                let shared = ctx
                    .control_plane
                    .controllers()
                    .for_resource(&resource.api_resource())?;
                shared.register_handler(
                    name,
                    ctx.cancel.clone(),
                    |_key: ObjectKey, _obj: Option<Arc<DynamicObject>>| async {
                        HandlerResult::Success
                    },
                );
                caches.push((resource, shared.cache().clone()));
            }
            for (resource, cache) in caches {
                let mut warned = false;
                loop {
                    let synced = tokio::select! {
                        _ = ctx.cancel.cancelled() => return Ok(()),
                        r = cache.wait_for_sync(Duration::from_secs(10)) => r,
                    };
                    match synced {
                        Ok(()) => break,
                        Err(e) if !warned => {
                            tracing::warn!(controller = name, resource = %resource.describe(), error = %e, "waiting for the cache to sync");
                            warned = true;
                        }
                        Err(e) => {
                            tracing::debug!(controller = name, error = %e, "cache still not synced")
                        }
                    }
                }
            }
            tracing::debug!(
                controller = name,
                "placeholder controller ready (not implemented yet)"
            );
            ctx.synced.synced();
            ctx.cancel.cancelled().await;
            Ok(())
        })
    })
}

/// The registry: every Karmada controller, with the real starter from `karmada-controllers` where one
/// exists and a [placeholder] otherwise.
pub fn registry() -> Vec<ControllerSpec> {
    let mut implemented = karmada_controllers::registry::implemented();
    ALL_CONTROLLERS
        .iter()
        .map(|name| {
            let start = match implemented.iter().position(|(n, _)| n == name) {
                Some(i) => implemented.swap_remove(i).1,
                None => placeholder(name),
            };
            ControllerSpec {
                name,
                enabled_by_default: !DISABLED_BY_DEFAULT.contains(name),
                start,
            }
        })
        .collect()
}

/// Names `karmada-controllers` implements that Karmada does not know (a bug in that crate's table).
pub fn unknown_implemented() -> Vec<&'static str> {
    karmada_controllers::registry::implemented()
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| !ALL_CONTROLLERS.contains(n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn karmada_selection_rules() {
        let star = sel(&["*"]);
        assert!(is_enabled(&star, "cluster"));
        assert!(!is_enabled(&star, "hpaScaleTargetMarker"));
        assert!(!is_enabled(&star, "deploymentReplicasSyncer"));

        let s = sel(&["*", "-cluster", "hpaScaleTargetMarker"]);
        assert!(!is_enabled(&s, "cluster"));
        assert!(is_enabled(&s, "hpaScaleTargetMarker"));
        assert!(is_enabled(&s, "binding"));

        // First match wins.
        let s = sel(&["cluster", "-cluster"]);
        assert!(is_enabled(&s, "cluster"));
        let s = sel(&["-cluster", "cluster", "*"]);
        assert!(!is_enabled(&s, "cluster"));

        // Without '*' only named controllers run.
        let s = sel(&["binding"]);
        assert!(is_enabled(&s, "binding"));
        assert!(!is_enabled(&s, "cluster"));
        assert!(!is_enabled(&[], "cluster"));
    }

    #[test]
    fn unknown_names_are_listed() {
        assert!(validate_selection(&sel(&["*", "-cluster", "workStatus"])).is_empty());
        let p = validate_selection(&sel(&["nope", "-bad", "*"]));
        assert_eq!(p.len(), 2);
        assert!(p[0].contains("\"nope\"") && p[0].contains("workloadRebalancer"));
        assert!(p[1].contains("\"bad\""));
    }

    #[test]
    fn registry_has_every_name_and_default() {
        let r = registry();
        assert_eq!(r.len(), ALL_CONTROLLERS.len());
        assert_eq!(r.iter().filter(|s| !s.enabled_by_default).count(), 2);
        let mut sorted = ALL_CONTROLLERS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, ALL_CONTROLLERS);
        for name in ALL_CONTROLLERS {
            assert!(!watched_resources(name).is_empty(), "{name}");
        }
        assert!(
            unknown_implemented().is_empty(),
            "{:?}",
            unknown_implemented()
        );
    }
}
