//! The binding a template and its policy produce (Karmada's `BuildResourceBinding` /
//! `BuildClusterResourceBinding`) and how it is merged into an existing binding without touching
//! the scheduler's result.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use karmada_apis::PropagationSpec;
use karmada_apis::names::binding_name;
use karmada_apis::well_known::{
    BINDING_CONTROLLER_FINALIZER, CLUSTER_RESOURCE_BINDING_CONTROLLER_FINALIZER,
};
use karmada_apis::work::v1alpha2::{
    Component, ObjectReference, ReplicaRequirements, ResourceBindingSpec, SchedulePriority,
    Suspension, WorkloadAffinityGroups,
};
use kube::api::DynamicObject;

use super::claim::{PolicyRef, add_claim};

pub use karmada_controllers_common::binding::BindingObject;

/// Identity of a template, as recorded in `spec.resource` and the ownerReference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateIdentity {
    /// `apiVersion` of the template.
    pub api_version: String,
    /// `kind` of the template.
    pub kind: String,
    /// Namespace (empty for cluster-scoped templates).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// resourceVersion.
    pub resource_version: String,
    /// metadata.generation (0 for kinds without one).
    pub generation: i64,
}

impl TemplateIdentity {
    /// Reads the identity of a template object.
    pub fn of(obj: &DynamicObject) -> Self {
        let (api_version, kind) = obj
            .types
            .as_ref()
            .map(|t| (t.api_version.clone(), t.kind.clone()))
            .unwrap_or_default();
        TemplateIdentity {
            api_version,
            kind,
            namespace: obj.metadata.namespace.clone().unwrap_or_default(),
            name: obj.metadata.name.clone().unwrap_or_default(),
            uid: obj.metadata.uid.clone().unwrap_or_default(),
            resource_version: obj.metadata.resource_version.clone().unwrap_or_default(),
            generation: obj.metadata.generation.unwrap_or_default(),
        }
    }

    /// The binding's name: `lower(<name>-<kind>)`.
    pub fn binding_name(&self) -> String {
        binding_name(&self.kind, &self.name)
    }

    /// `namespace/name` or `name`, for logs and errors.
    pub fn key(&self) -> String {
        karmada_apis::names::namespaced_key(&self.namespace, &self.name)
    }
}

/// Replica information from the interpreter: either replicas and their requirements, or (gate
/// `MultiplePodTemplatesScheduling`, kinds with a component interpretation) components.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplicaInfo {
    /// `spec.replicas` of the binding.
    pub replicas: i32,
    /// `spec.replicaRequirements` of the binding.
    pub requirements: Option<ReplicaRequirements>,
    /// `spec.components` of the binding.
    pub components: Vec<Component>,
}

/// What the detector wants a binding to look like (metadata it owns plus the spec fields it owns).
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredBinding {
    /// Name, namespace, ownerReference, finalizer, claim labels and annotations.
    pub meta: ObjectMeta,
    /// The spec; `clusters` is always empty here and never written.
    pub spec: ResourceBindingSpec,
}

/// Workload affinity groups from the template's labels (feature WorkloadAffinity).
fn workload_affinity_groups(
    labels: &BTreeMap<String, String>,
    spec: &PropagationSpec,
) -> Option<WorkloadAffinityGroups> {
    let wa = spec.placement.workload_affinity.as_ref()?;
    let mut groups = WorkloadAffinityGroups::default();
    if let Some(term) = &wa.affinity
        && let Some(v) = labels.get(&term.group_by_label_key)
    {
        groups.affinity_group = format!("{}={v}", term.group_by_label_key);
    }
    if let Some(term) = &wa.anti_affinity
        && let Some(v) = labels.get(&term.group_by_label_key)
    {
        groups.anti_affinity_group = format!("{}={v}", term.group_by_label_key);
    }
    if groups.affinity_group.is_empty() && groups.anti_affinity_group.is_empty() {
        None
    } else {
        Some(groups)
    }
}

/// Options of [`build`] that come from feature gates and lookups.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// Feature WorkloadAffinity.
    pub workload_affinity: bool,
    /// The value of the policy's KubePriorityClass when feature PriorityBasedScheduling is on and
    /// the policy names one.
    pub schedule_priority: Option<i32>,
}

/// Builds the desired binding of `template` under `policy`.
pub fn build(
    template: &TemplateIdentity,
    template_labels: &BTreeMap<String, String>,
    policy: &PolicyRef,
    spec: &PropagationSpec,
    replicas: ReplicaInfo,
    options: &BuildOptions,
) -> DesiredBinding {
    let cluster_scoped = template.namespace.is_empty();
    let mut meta = ObjectMeta {
        name: Some(template.binding_name()),
        namespace: (!cluster_scoped).then(|| template.namespace.clone()),
        owner_references: Some(vec![OwnerReference {
            api_version: template.api_version.clone(),
            kind: template.kind.clone(),
            name: template.name.clone(),
            uid: template.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]),
        finalizers: Some(vec![
            if cluster_scoped {
                CLUSTER_RESOURCE_BINDING_CONTROLLER_FINALIZER
            } else {
                BINDING_CONTROLLER_FINALIZER
            }
            .to_owned(),
        ]),
        ..Default::default()
    };
    add_claim(&mut meta, policy);
    let binding_spec = ResourceBindingSpec {
        resource: ObjectReference {
            api_version: template.api_version.clone(),
            kind: template.kind.clone(),
            namespace: template.namespace.clone(),
            name: template.name.clone(),
            uid: template.uid.clone(),
            resource_version: template.resource_version.clone(),
        },
        // Karmada's webhook forces propagateDeps on policies selecting ServiceImports.
        propagate_deps: karmada_policy::matching::propagates_dependencies(spec),
        replica_requirements: replicas.requirements,
        replicas: replicas.replicas,
        components: replicas.components,
        placement: Some(spec.placement.clone()),
        scheduler_name: spec.scheduler_name.clone(),
        failover: spec.failover.clone(),
        conflict_resolution: spec.conflict_resolution.clone(),
        suspension: spec.suspension.clone().map(|s| Suspension {
            dispatching: s,
            scheduling: None,
        }),
        preserve_resources_on_deletion: spec.preserve_resources_on_deletion,
        schedule_priority: if cluster_scoped {
            None
        } else {
            options
                .schedule_priority
                .map(|priority| SchedulePriority { priority })
        },
        workload_affinity_groups: if options.workload_affinity && !cluster_scoped {
            workload_affinity_groups(template_labels, spec)
        } else {
            None
        },
        ..Default::default()
    };
    DesiredBinding {
        meta,
        spec: binding_spec,
    }
}

/// Whether the policy asks for a KubePriorityClass lookup (feature PriorityBasedScheduling).
pub use karmada_controllers_common::priority::kube_priority_class;

fn merge_map(
    existing: &mut Option<BTreeMap<String, String>>,
    desired: &Option<BTreeMap<String, String>>,
) {
    if let Some(d) = desired
        && !d.is_empty()
    {
        let e = existing.get_or_insert_with(BTreeMap::new);
        for (k, v) in d {
            e.insert(k.clone(), v.clone());
        }
    }
}

/// Merges `desired` into an existing binding's metadata and spec, the way Karmada's detector does:
/// labels, annotations and finalizers are merged, ownerReferences and every policy-derived spec
/// field are replaced, and `spec.clusters` (the scheduler's result), graceful eviction tasks,
/// `requiredBy` and `rescheduleTriggeredAt` are kept. The scheduling suspension is kept while the
/// dispatching suspension follows the policy. Returns true if anything changed.
pub fn merge_into(
    meta: &mut ObjectMeta,
    spec: &mut ResourceBindingSpec,
    desired: &DesiredBinding,
) -> bool {
    let before = (meta.clone(), spec.clone());
    merge_map(&mut meta.labels, &desired.meta.labels);
    merge_map(&mut meta.annotations, &desired.meta.annotations);
    for f in desired.meta.finalizers.iter().flatten() {
        let fs = meta.finalizers.get_or_insert_with(Vec::new);
        if !fs.contains(f) {
            fs.push(f.clone());
        }
    }
    meta.owner_references = desired.meta.owner_references.clone();
    let d = &desired.spec;
    spec.resource = d.resource.clone();
    spec.replica_requirements = d.replica_requirements.clone();
    spec.replicas = d.replicas;
    spec.components = d.components.clone();
    spec.propagate_deps = d.propagate_deps;
    spec.scheduler_name = d.scheduler_name.clone();
    spec.placement = d.placement.clone();
    spec.failover = d.failover.clone();
    spec.conflict_resolution = d.conflict_resolution.clone();
    spec.preserve_resources_on_deletion = d.preserve_resources_on_deletion;
    spec.schedule_priority = d.schedule_priority.clone();
    spec.workload_affinity_groups = d.workload_affinity_groups.clone();
    let scheduling = spec.suspension.as_ref().and_then(|s| s.scheduling);
    spec.suspension = match (&d.suspension, scheduling) {
        (Some(s), _) => Some(Suspension {
            dispatching: s.dispatching.clone(),
            scheduling,
        }),
        (None, Some(_)) => Some(Suspension {
            dispatching: Default::default(),
            scheduling,
        }),
        (None, None) => None,
    };
    (meta.clone(), spec.clone()) != before
}

/// The controller ownerReference of an object, if any.
pub fn controller_owner(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detector::claim::PolicyKind;
    use karmada_apis::policy::v1alpha1::Placement;
    use karmada_apis::well_known::{
        PROPAGATION_POLICY_NAME_ANNOTATION, PROPAGATION_POLICY_NAMESPACE_ANNOTATION,
        PROPAGATION_POLICY_PERMANENT_ID_LABEL,
    };
    use karmada_apis::work::v1alpha2::TargetCluster;

    fn template(ns: &str) -> TemplateIdentity {
        TemplateIdentity {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: ns.into(),
            name: "Nginx".into(),
            uid: "u-1".into(),
            resource_version: "42".into(),
            generation: 1,
        }
    }

    fn policy() -> PolicyRef {
        PolicyRef {
            kind: PolicyKind::PropagationPolicy,
            namespace: "default".into(),
            name: "pp".into(),
            id: "pid".into(),
        }
    }

    #[test]
    fn builds_karmada_shaped_binding() {
        let spec = PropagationSpec {
            placement: Placement::default(),
            scheduler_name: "default-scheduler".into(),
            ..Default::default()
        };
        let b = build(
            &template("default"),
            &BTreeMap::new(),
            &policy(),
            &spec,
            ReplicaInfo {
                replicas: 3,
                ..Default::default()
            },
            &BuildOptions::default(),
        );
        assert_eq!(b.meta.name.as_deref(), Some("nginx-deployment"));
        assert_eq!(b.meta.namespace.as_deref(), Some("default"));
        assert_eq!(
            b.meta.finalizers,
            Some(vec![BINDING_CONTROLLER_FINALIZER.to_owned()])
        );
        let owner = controller_owner(&b.meta).unwrap();
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("Deployment", "Nginx", "u-1")
        );
        assert_eq!(owner.block_owner_deletion, Some(true));
        let labels = b.meta.labels.as_ref().unwrap();
        assert_eq!(labels[PROPAGATION_POLICY_PERMANENT_ID_LABEL], "pid");
        let ann = b.meta.annotations.as_ref().unwrap();
        assert_eq!(ann[PROPAGATION_POLICY_NAMESPACE_ANNOTATION], "default");
        assert_eq!(ann[PROPAGATION_POLICY_NAME_ANNOTATION], "pp");
        assert_eq!(b.spec.replicas, 3);
        assert_eq!(b.spec.resource.resource_version, "42");
        assert_eq!(b.spec.resource.uid, "u-1");
        assert!(b.spec.clusters.is_empty());

        let crb = build(
            &template(""),
            &BTreeMap::new(),
            &policy(),
            &spec,
            ReplicaInfo::default(),
            &BuildOptions::default(),
        );
        assert_eq!(crb.meta.namespace, None);
        assert_eq!(
            crb.meta.finalizers,
            Some(vec![
                CLUSTER_RESOURCE_BINDING_CONTROLLER_FINALIZER.to_owned()
            ])
        );
    }

    #[test]
    fn merge_keeps_scheduler_result_and_scheduling_suspension() {
        let spec = PropagationSpec::default();
        let desired = build(
            &template("default"),
            &BTreeMap::new(),
            &policy(),
            &spec,
            ReplicaInfo {
                replicas: 5,
                ..Default::default()
            },
            &BuildOptions::default(),
        );
        let mut meta = ObjectMeta {
            labels: Some([("keep".to_owned(), "me".to_owned())].into()),
            finalizers: Some(vec!["other".into()]),
            ..Default::default()
        };
        let mut existing = ResourceBindingSpec {
            clusters: vec![TargetCluster {
                name: "m1".into(),
                replicas: 2,
                components: vec![],
            }],
            suspension: Some(Suspension {
                dispatching: Default::default(),
                scheduling: Some(true),
            }),
            replicas: 2,
            ..Default::default()
        };
        assert!(merge_into(&mut meta, &mut existing, &desired));
        assert_eq!(existing.replicas, 5);
        assert_eq!(existing.clusters.len(), 1);
        assert_eq!(
            existing.suspension.as_ref().and_then(|s| s.scheduling),
            Some(true)
        );
        assert_eq!(meta.labels.as_ref().unwrap()["keep"], "me");
        assert_eq!(meta.finalizers.as_ref().unwrap().len(), 2);
        assert!(!merge_into(&mut meta, &mut existing, &desired));
    }
}
