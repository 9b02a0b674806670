//! The controller registry: every controller name Karmada's `--controllers` knows, whether it is on by
//! default, which ones karmada-rs implements (from `karmada_controllers::registry`) and how to start
//! them. Names not implemented yet are accepted only where that cannot mislead: `*` runs what exists
//! (the process warns about the rest) and `-name` is fine, but asking for one by name is an error.

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

/// The names `karmada-controllers` implements (its registry is the one source of truth), sorted.
pub fn implemented() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = karmada_controllers::registry::implemented()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    names.sort_unstable();
    names
}

/// Karmada's controller names karmada-rs does not implement yet, sorted.
pub fn not_implemented() -> Vec<&'static str> {
    let implemented = implemented();
    ALL_CONTROLLERS
        .iter()
        .copied()
        .filter(|n| !implemented.contains(n))
        .collect()
}

/// Problems in a `--controllers` list: one per unknown name, and one naming every controller that is
/// asked for explicitly (`foo`, not `-foo` or `*`) but not implemented yet, since running without it
/// while looking healthy would pretend.
pub fn validate_selection(selection: &[String]) -> Vec<String> {
    check_selection(selection, &not_implemented())
}

/// [`validate_selection`] against a given list of names not implemented.
fn check_selection(selection: &[String], missing: &[&'static str]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut asked_for_missing = Vec::new();
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
        } else if name == item && missing.contains(&name) && !asked_for_missing.contains(&name) {
            asked_for_missing.push(name);
        }
    }
    if !asked_for_missing.is_empty() {
        let names: Vec<String> = asked_for_missing.iter().map(|n| format!("{n:?}")).collect();
        let verb = if names.len() == 1 { "is" } else { "are" };
        problems.push(format!(
            "{} {verb} not implemented in karmada-rs yet (not available yet: {}; available: {}); \
             '*' runs every available controller and '-name' leaves one out",
            names.join(", "),
            missing.join(", "),
            implemented().join(", ")
        ));
    }
    problems
}

/// The Karmada controllers `selection` turns on that karmada-rs does not implement yet: what `*`
/// leaves out (explicit names are refused by [validate_selection]), sorted.
pub fn left_out(selection: &[String]) -> Vec<&'static str> {
    left_out_of(selection, &not_implemented())
}

/// [`left_out`] of a given list of names not implemented.
fn left_out_of(selection: &[String], missing: &[&'static str]) -> Vec<&'static str> {
    missing
        .iter()
        .copied()
        .filter(|n| is_enabled(selection, n))
        .collect()
}

/// Karmada's rule: the first entry equal to `name` or `-name` decides; otherwise `*` turns on the
/// controllers that are on by default; otherwise it is off.
pub fn is_enabled(selection: &[String], name: &str) -> bool {
    karmada_process::flags::controller_enabled(selection, name, DISABLED_BY_DEFAULT)
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
            .finish_non_exhaustive()
    }
}

/// The registry: the controllers `karmada-controllers` implements, in Karmada's name order. Names it
/// does not implement have no entry: they never run and never report synced.
pub fn registry() -> Vec<ControllerSpec> {
    let mut implemented = karmada_controllers::registry::implemented();
    ALL_CONTROLLERS
        .iter()
        .filter_map(|name| {
            let i = implemented.iter().position(|(n, _)| n == name)?;
            Some(ControllerSpec {
                name,
                enabled_by_default: !DISABLED_BY_DEFAULT.contains(name),
                start: implemented.swap_remove(i).1,
            })
        })
        .collect()
}

/// Names `karmada-controllers` implements that Karmada does not know (a bug in that crate's table).
pub fn unknown_implemented() -> Vec<&'static str> {
    implemented()
        .into_iter()
        .filter(|n| !ALL_CONTROLLERS.contains(n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(items: &[&str]) -> Vec<String> {
        items.iter().map(ToString::to_string).collect()
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
        assert!(p[0].contains("\"nope\"") && p[0].contains("serviceExport"));
        assert!(p[1].contains("\"bad\""));
    }

    #[test]
    fn every_karmada_controller_is_implemented() {
        assert!(not_implemented().is_empty(), "{:?}", not_implemented());
        assert!(left_out(&sel(&["*"])).is_empty());
        assert!(validate_selection(&sel(ALL_CONTROLLERS)).is_empty());
    }

    /// Stand-ins for controllers not implemented, to exercise the rules whatever the registry
    /// holds today.
    const MISSING: &[&str] = &["serviceExport", "serviceImport"];

    #[test]
    fn naming_an_unimplemented_controller_is_refused() {
        // `-name` and `*` are fine.
        assert!(
            check_selection(&sel(&["*", "-serviceImport", "-gracefulEviction"]), MISSING)
                .is_empty()
        );
        let p = check_selection(
            &sel(&["cluster", "serviceImport", "*", "serviceImport"]),
            MISSING,
        );
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].starts_with("\"serviceImport\" is not implemented"),
            "{p:?}"
        );
        // It lists what is not available and what is.
        assert!(
            p[0].contains("not available yet: serviceExport, serviceImport"),
            "{p:?}"
        );
        assert!(
            p[0].contains("applicationFailover, binding, bindingStatus, cluster"),
            "{p:?}"
        );
        let p = check_selection(
            &sel(&["serviceImport", "serviceExport", "-serviceImport"]),
            MISSING,
        );
        assert!(
            p[0].starts_with("\"serviceImport\", \"serviceExport\" are not implemented"),
            "{p:?}"
        );
        // Off by default and implemented: asking for it by name is fine.
        assert!(validate_selection(&sel(&["-hpaScaleTargetMarker"])).is_empty());
        assert!(validate_selection(&sel(&["*", "hpaScaleTargetMarker"])).is_empty());
    }

    #[test]
    fn star_leaves_out_what_is_not_implemented() {
        assert_eq!(left_out_of(&sel(&["*"]), MISSING), MISSING);
        assert_eq!(
            left_out_of(&sel(&["-serviceImport", "*"]), MISSING),
            ["serviceExport"]
        );
        assert!(left_out_of(&sel(&["cluster", "binding"]), MISSING).is_empty());
        // What the registry lacks today: never what `*` keeps off anyway, nor anything implemented.
        let out = left_out(&sel(&["*"]));
        assert!(!out.contains(&"hpaScaleTargetMarker"));
        assert!(!out.contains(&"deploymentReplicasSyncer"));
        for name in implemented() {
            assert!(!out.contains(&name), "{name}");
        }
    }

    #[test]
    fn registry_holds_only_implemented_controllers() {
        let r = registry();
        let names: Vec<&str> = r.iter().map(|s| s.name).collect();
        let mut sorted_implemented = implemented();
        sorted_implemented.sort_unstable();
        let mut sorted_names = names.clone();
        sorted_names.sort_unstable();
        assert_eq!(sorted_names, sorted_implemented);
        // Off by default as in Karmada: only the two FederatedHPA helpers.
        let off: Vec<&str> = r
            .iter()
            .filter(|s| !s.enabled_by_default)
            .map(|s| s.name)
            .collect();
        assert_eq!(off, ["deploymentReplicasSyncer", "hpaScaleTargetMarker"]);
        let mut sorted = ALL_CONTROLLERS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, ALL_CONTROLLERS);
        assert!(
            unknown_implemented().is_empty(),
            "{:?}",
            unknown_implemented()
        );
        assert_eq!(
            implemented().len() + not_implemented().len(),
            ALL_CONTROLLERS.len()
        );
    }
}
