//! DriftPolicy / ClusterDriftPolicy: what happens when a propagated object is changed in a member
//! cluster by someone else (drift), and whether an object that already exists in a member before
//! it is propagated is taken over.
//!
//! Without a matching policy the behaviour is Karmada's: drift is repaired (the member object is
//! written back from the Work's manifest), and a pre-existing object is taken over only when the
//! PropagationPolicy's `conflictResolution` is `Overwrite`. Drift is reported either way (the
//! Work's `Drifted` condition, a Warning Event, a metric).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::policy::v1alpha1::ResourceSelector;
use crate::schema::{Cel, cel};

/// Which workloads the policy covers and what it decides for them.
///
/// A workload is matched by its Work's manifest (the template as propagated to that member, after
/// overrides), with PropagationPolicy's selector rules; a namespaced DriftPolicy covers only its
/// own namespace. When several policies match, a DriftPolicy wins over a ClusterDriftPolicy, then
/// the one whose selector matches most precisely (by name, then by labels, then by kind), then the
/// first by name.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "policy.karmada-rs.io",
    version = "v1alpha1",
    kind = "DriftPolicy",
    plural = "driftpolicies",
    singular = "driftpolicy",
    shortname = "dp",
    category = "karmada-io",
    namespaced,
    derive = "PartialEq",
    derive = "Default",
    doc = "Chooses, for the workloads it selects, whether drift in member clusters is repaired or only reported, and whether pre-existing member objects are taken over (karmada-rs's own).",
    printcolumn(name = "DRIFT", type_ = "string", json_path = ".spec.drift"),
    printcolumn(name = "TAKEOVER", type_ = "string", json_path = ".spec.takeover"),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = cel(DRIFT_SPEC_RULES))]
pub struct DriftPolicySpec {
    /// The workloads this policy covers (same fields and matching as PropagationPolicy's); at least
    /// one.
    #[schemars(length(min = 1, max = 64))]
    pub resource_selectors: Vec<ResourceSelector>,

    /// What to do when a member object no longer matches its manifest. `Repair` (the default,
    /// Karmada's behaviour) writes the manifest back; `ReportOnly` leaves the member object as it
    /// was edited and only reports the drift, until the manifest itself changes (a template or
    /// override change is still applied, over the drift).
    #[serde(default)]
    pub drift: DriftAction,

    /// Whether an object that already exists in a member, not created by karmada-rs, is taken over
    /// when the workload is propagated there. `Always`: taken over (overwritten with the manifest);
    /// `IfNoDiff`: taken over only if it already matches the manifest (fields the manifest sets
    /// have the same values), else left alone and reported; `Never`: left alone and reported.
    /// Unset: the PropagationPolicy's `conflictResolution` decides (`Overwrite` = `Always`,
    /// `Abort` = `Never`), as in Karmada. When set, it decides instead of `conflictResolution`.
    /// An object that belongs to another Work is never taken over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub takeover: Option<Takeover>,
}

/// The spec's rules, beyond the enums: selectors must name an apiVersion and a kind.
const DRIFT_SPEC_RULES: &[Cel] = &[Cel::at(
    ".resourceSelectors",
    "self.resourceSelectors.all(s, s.apiVersion != '' && s.kind != '')",
    "every resource selector needs apiVersion and kind",
)];

string_enum! {
    /// What to do with drift.
    #[derive(Default)]
    pub enum DriftAction {
        /// Write the manifest back over the drift (the default; Karmada's behaviour).
        #[default]
        Repair = "Repair",
        /// Report the drift and leave the member object as it is, until the manifest changes.
        ReportOnly = "ReportOnly",
    }
}

string_enum! {
    /// Whether a pre-existing member object is taken over.
    pub enum Takeover {
        /// Take it over: overwrite it with the manifest.
        Always = "Always",
        /// Take it over only when it already matches the manifest.
        IfNoDiff = "IfNoDiff",
        /// Never take it over.
        Never = "Never",
    }
}

cluster_scoped_twin! {
    /// The cluster-scoped DriftPolicy: covers workloads in every namespace and cluster-scoped ones.
    pub struct ClusterDriftPolicy: DriftPolicy {
        group: "policy.karmada-rs.io",
        version: "v1alpha1",
        kind: "ClusterDriftPolicy",
        singular: "clusterdriftpolicy",
        plural: "clusterdriftpolicies",
        short_name: "cdp",
        spec: DriftPolicySpec,
    }
}
