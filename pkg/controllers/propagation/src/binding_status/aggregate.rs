//! Folding a binding's Works into `aggregatedStatus` items and the `FullyApplied` condition
//! (pure functions, plus the read of the Work cache).

use std::collections::BTreeSet;

use apimachinery::{find_status_condition, split_api_version};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use karmada_apis::policy::v1alpha1::PurgeMode;
use karmada_apis::well_known::{
    BINDING_FULLY_APPLIED, FULLY_APPLIED_FAILED_MESSAGE, FULLY_APPLIED_FAILED_REASON,
    FULLY_APPLIED_SUCCESS_MESSAGE, FULLY_APPLIED_SUCCESS_REASON, WORK_APPLIED,
};
use karmada_apis::work::v1alpha2::{
    AggregatedStatusItem, ObjectReference as TemplateReference, ResourceHealth,
};
use karmada_apis::{ResourceBindingSpec, Work, names};
use karmada_controllers_common::manifest::manifest_index;
use kube::ResourceExt;
use lariat::cache::store::label_index_name;

use super::error::BindingStatusError;
use super::{BindingStatusController, StatusBinding};

/// The clusters a binding's Works should be in (Karmada's `ObtainBindingSpecExistingClusters`):
/// scheduled clusters, clusters of bindings that require it, and clusters being evicted from
/// gracefully (not those purged directly).
pub fn binding_clusters(spec: &ResourceBindingSpec) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = spec.clusters.iter().map(|c| c.name.clone()).collect();
    for required in &spec.required_by {
        out.extend(required.clusters.iter().map(|c| c.name.clone()));
    }
    for task in &spec.graceful_eviction_tasks {
        if task.purge_mode != Some(PurgeMode::Directly) {
            out.insert(task.from_cluster.clone());
        }
    }
    out
}

/// Whether every target cluster has an applied item and nothing else (Karmada's
/// `worksFullyApplied`).
pub fn fully_applied(items: &[AggregatedStatusItem], targets: &BTreeSet<String>) -> bool {
    !targets.is_empty()
        && targets.len() == items.len()
        && items
            .iter()
            .all(|i| i.applied && targets.contains(&i.cluster_name))
}

/// The `FullyApplied` condition for `items` (transition time filled in by the caller).
pub fn fully_applied_condition(
    spec: &ResourceBindingSpec,
    items: &[AggregatedStatusItem],
    now: Time,
) -> Condition {
    let (status, reason, message) = if fully_applied(items, &binding_clusters(spec)) {
        (
            "True",
            FULLY_APPLIED_SUCCESS_REASON,
            FULLY_APPLIED_SUCCESS_MESSAGE,
        )
    } else {
        (
            "False",
            FULLY_APPLIED_FAILED_REASON,
            FULLY_APPLIED_FAILED_MESSAGE,
        )
    };
    Condition {
        type_: BINDING_FULLY_APPLIED.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: None,
        last_transition_time: now,
    }
}

/// One Work's contribution to `aggregatedStatus` (Karmada's `assembleWorkStatus`), `None` for a
/// Work being deleted.
pub fn aggregated_item(
    work: &Work,
    template: &TemplateReference,
    binding: &str,
) -> Result<Option<AggregatedStatusItem>, BindingStatusError> {
    if work.metadata.deletion_timestamp.is_some() {
        return Ok(None);
    }
    let work_ns = work.namespace().unwrap_or_default();
    let work_key = names::namespaced_key(&work_ns, &work.name_any());
    let ordinal = manifest_index(
        work,
        &template.api_version,
        &template.kind,
        &template.namespace,
        &template.name,
    )
    .ok_or_else(|| BindingStatusError::NoManifest {
        work: work_key.clone(),
        binding: binding.to_owned(),
        template: format!(
            "{} {}",
            template.kind,
            names::namespaced_key(&template.namespace, &template.name)
        ),
    })?;
    let cluster =
        names::cluster_name(&work_ns).map_err(|source| BindingStatusError::NotExecutionSpace {
            work: work_key,
            binding: binding.to_owned(),
            source,
        })?;
    let status = work.status.as_ref();
    let (applied, applied_message) =
        match status.and_then(|s| find_status_condition(&s.conditions, WORK_APPLIED)) {
            Some(c) if c.status == "True" => (true, String::new()),
            Some(c) => (false, c.message.clone()),
            None => (false, String::new()),
        };
    let mut item = AggregatedStatusItem {
        cluster_name: cluster.to_owned(),
        status: None,
        applied,
        applied_message,
        health: Some(ResourceHealth::Unknown),
    };
    if !applied {
        return Ok(Some(item));
    }
    let (group, version) = split_api_version(&template.api_version);
    if let Some(ms) = status.and_then(|s| {
        s.manifest_statuses.iter().find(|m| {
            let id = &m.identifier;
            id.ordinal == ordinal as i64
                && id.group == group
                && id.version == version
                && id.kind == template.kind
                && id.namespace == template.namespace
                && id.name == template.name
        })
    }) {
        item.status = ms.status.clone();
        item.health = ms.health.clone();
    }
    Ok(Some(item))
}

pub(super) fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Whether the binding's status holds no aggregation yet: no `aggregatedStatus` item and no
/// `FullyApplied` condition.
pub(super) fn never_aggregated<B: StatusBinding>(binding: &B) -> bool {
    binding.binding_status().is_none_or(|s| {
        s.aggregated_status.is_empty()
            && find_status_condition(&s.conditions, BINDING_FULLY_APPLIED).is_none()
    })
}

/// The binding's additive `Drifted` condition (karmada-rs's own) from the clusters whose Work says
/// `Drifted=True`: True naming them, False/`NoDrift` once none does (only when the binding has the
/// condition: a binding that never drifted gets none). `None`: nothing to set.
pub fn drifted_condition(
    current: &[Condition],
    drifted_clusters: &[String],
    now: Time,
) -> Option<Condition> {
    use karmada_controllers_common::drift::{
        CONDITION_DRIFTED, REASON_DRIFT_DETECTED, REASON_NO_DRIFT,
    };
    let (status, reason, message) = if drifted_clusters.is_empty() {
        find_status_condition(current, CONDITION_DRIFTED)?;
        (
            "False",
            REASON_NO_DRIFT,
            "No member cluster reports drift.".to_owned(),
        )
    } else {
        (
            "True",
            REASON_DRIFT_DETECTED,
            format!(
                "Member objects differ from their manifests in clusters: {}.",
                drifted_clusters.join(", ")
            ),
        )
    };
    Some(Condition {
        type_: CONDITION_DRIFTED.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        observed_generation: None,
        last_transition_time: now,
    })
}

impl BindingStatusController {
    /// The clusters (sorted) whose Work of `binding` has `Drifted=True`.
    pub(super) fn drifted_clusters<B: StatusBinding>(&self, binding: &B) -> Vec<String> {
        use karmada_controllers_common::drift::CONDITION_DRIFTED;
        let id = binding
            .meta()
            .labels
            .as_ref()
            .and_then(|l| l.get(B::ID_LABEL))
            .cloned()
            .unwrap_or_default();
        if id.is_empty() {
            return Vec::new();
        }
        let mut clusters: Vec<String> = self
            .work_store()
            .by_index(&label_index_name(B::ID_LABEL), &id)
            .iter()
            .filter(|w| w.metadata.deletion_timestamp.is_none())
            .filter(|w| {
                w.status.as_ref().is_some_and(|s| {
                    find_status_condition(&s.conditions, CONDITION_DRIFTED)
                        .is_some_and(|c| c.status == "True")
                })
            })
            .filter_map(|w| {
                names::cluster_name(&w.namespace().unwrap_or_default())
                    .ok()
                    .map(str::to_owned)
            })
            .collect();
        clusters.sort();
        clusters.dedup();
        clusters
    }

    pub(super) fn binding_name<B: StatusBinding>(b: &B) -> String {
        format!(
            "{} {}",
            B::kind(&()),
            names::namespaced_key(&b.namespace().unwrap_or_default(), &b.name_any())
        )
    }

    /// The `aggregatedStatus` items of the binding's Works, sorted by cluster.
    pub(super) fn aggregate_works<B: StatusBinding>(
        &self,
        binding: &B,
    ) -> Result<Vec<AggregatedStatusItem>, BindingStatusError> {
        let name = Self::binding_name(binding);
        let id = binding
            .meta()
            .labels
            .as_ref()
            .and_then(|l| l.get(B::ID_LABEL))
            .cloned()
            .unwrap_or_default();
        let works = if id.is_empty() {
            Vec::new()
        } else {
            self.work_store()
                .by_index(&label_index_name(B::ID_LABEL), &id)
        };
        let template = &binding.binding_spec().resource;
        let mut items = Vec::with_capacity(works.len());
        for w in &works {
            if let Some(item) = aggregated_item(w, template, &name)? {
                items.push(item);
            }
        }
        items.sort_by(|a, b| a.cluster_name.cmp(&b.cluster_name));
        Ok(items)
    }
}
