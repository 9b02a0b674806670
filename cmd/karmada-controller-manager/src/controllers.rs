//! The controller registry: every controller Karmada's `--controllers` knows, whether it is on by
//! default, and how to start it. Later work replaces placeholder starters with real controllers; the
//! names, defaults and selection rules stay.

use std::sync::Arc;

pub use karmada_controllers::{ControllerContext, ControllerFuture, StartFn, SyncReporter};

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

/// A stand-in for a Karmada controller karmada-rs does not implement yet: it accepts the name (so
/// existing `--controllers` lists keep working), says once that it does nothing, reports synced so it
/// never holds readiness back, and idles until stopped. It opens no caches: real controllers own the
/// representation of each kind they watch.
fn placeholder(name: &'static str) -> StartFn {
    Arc::new(move |ctx: ControllerContext| {
        Box::pin(async move {
            tracing::info!(
                controller = name,
                "controller not implemented in karmada-rs yet; it does nothing"
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
        assert!(
            unknown_implemented().is_empty(),
            "{:?}",
            unknown_implemented()
        );
    }
}
