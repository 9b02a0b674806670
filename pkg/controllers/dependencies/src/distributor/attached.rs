//! The attached bindings of dependencies, as values: their names and labels, the `requiredBy`
//! bookkeeping, the policy fields they inherit from the bindings that require them, and which
//! dependencies an object satisfies. Pure, so the rules are tested without a server.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use karmada_apis::ResourceBinding;
use karmada_apis::names::{binding_name, binding_reference_key};
use karmada_apis::policy::v1alpha1::ConflictResolution;
use karmada_apis::well_known::{BINDING_CONTROLLER_FINALIZER, RESOURCE_BINDING_PERMANENT_ID_LABEL};
use karmada_apis::work::v1alpha2::{BindingSnapshot, ObjectReference, ResourceBindingSpec};
use karmada_interpreter::DependentObjectReference;

/// Prefix of the label an attached binding carries for each binding that requires it (Karmada's
/// `resourcebinding.karmada.io/depended-by-<hash of namespace/name>`), valued with the requiring
/// binding's permanent id.
pub const DEPENDED_BY_LABEL_PREFIX: &str = "resourcebinding.karmada.io/depended-by-";

/// The depended-by label key for the binding `namespace/name`.
pub fn depended_by_label(namespace: &str, name: &str) -> String {
    format!(
        "{DEPENDED_BY_LABEL_PREFIX}{}",
        binding_reference_key(namespace, name)
    )
}

/// The `resourcebinding.karmada.io/dependencies` annotation value: the dependencies as Go's
/// `encoding/json` writes them (`null` when there are none).
pub fn dependencies_annotation(
    dependencies: &[DependentObjectReference],
) -> Result<String, serde_json::Error> {
    if dependencies.is_empty() {
        return Ok("null".to_owned());
    }
    Ok(apimachinery::go_escape_json(&serde_json::to_string(
        dependencies,
    )?))
}

/// The dependencies recorded on a binding; an annotation that does not parse counts as none.
pub fn recorded_dependencies(binding: &ResourceBinding) -> Vec<DependentObjectReference> {
    binding
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(karmada_apis::well_known::DEPENDENCIES_ANNOTATION))
        .and_then(|v| serde_json::from_str::<Option<Vec<_>>>(v).ok().flatten())
        .unwrap_or_default()
}

/// An object that may satisfy dependencies: its identity and labels.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// `apiVersion` of the object.
    pub api_version: &'a str,
    /// Kind.
    pub kind: &'a str,
    /// Namespace.
    pub namespace: &'a str,
    /// Name.
    pub name: &'a str,
    /// Its labels; `None` when unknown (the object is gone): then every selector matches.
    pub labels: Option<&'a BTreeMap<String, String>>,
}

/// Whether `dependency` names or selects `object` (Karmada's `matchesWithBindingDependencies`).
pub fn satisfies(dependency: &DependentObjectReference, object: &Candidate<'_>) -> bool {
    if dependency.api_version != object.api_version
        || dependency.kind != object.kind
        || dependency.namespace != object.namespace
    {
        return false;
    }
    if !dependency.name.is_empty() {
        return dependency.name == object.name;
    }
    match (&dependency.label_selector, object.labels) {
        (Some(_), None) => true,
        (Some(selector), Some(labels)) => {
            karmada_policy::selector::label_selector_matches(selector, labels)
        }
        (None, _) => false,
    }
}

/// The attached binding of `object` for the binding `independent` that requires it (Karmada's
/// `buildAttachedBinding`): named `<name>-<kind>`, owned by the object, labelled depended-by the
/// requirer, with the requirer and its clusters in `requiredBy` and the requirer's conflict
/// resolution and deletion preservation. `id` is the permanent id of a new binding.
pub fn build(
    independent: &ResourceBinding,
    object: &ObjectReference,
    id: String,
) -> ResourceBinding {
    let namespace = independent.metadata.namespace.clone().unwrap_or_default();
    let name = independent.metadata.name.clone().unwrap_or_default();
    let labels = BTreeMap::from([
        (
            depended_by_label(&namespace, &name),
            permanent_id(independent),
        ),
        (RESOURCE_BINDING_PERMANENT_ID_LABEL.to_owned(), id),
    ]);
    let spec = ResourceBindingSpec {
        resource: object.clone(),
        required_by: vec![BindingSnapshot {
            namespace: namespace.clone(),
            name,
            clusters: independent.spec.clusters.clone(),
        }],
        preserve_resources_on_deletion: independent.spec.preserve_resources_on_deletion,
        conflict_resolution: independent.spec.conflict_resolution.clone(),
        ..Default::default()
    };
    let mut binding = ResourceBinding::new(&binding_name(&object.kind, &object.name), spec);
    binding.metadata = ObjectMeta {
        name: binding.metadata.name.take(),
        namespace: Some(namespace),
        labels: Some(labels),
        finalizers: Some(vec![BINDING_CONTROLLER_FINALIZER.to_owned()]),
        owner_references: Some(vec![OwnerReference {
            api_version: object.api_version.clone(),
            kind: object.kind.clone(),
            name: object.name.clone(),
            uid: object.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]),
        ..Default::default()
    };
    binding
}

/// The permanent id of a binding (empty when it has none yet).
pub fn permanent_id(binding: &ResourceBinding) -> String {
    binding
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(RESOURCE_BINDING_PERMANENT_ID_LABEL))
        .cloned()
        .unwrap_or_default()
}

/// `existing` with each snapshot of `new` put in: a requirer already listed gets the new clusters,
/// others are appended (Karmada's `mergeBindingSnapshot`).
pub fn merge_snapshots(
    mut existing: Vec<BindingSnapshot>,
    new: &[BindingSnapshot],
) -> Vec<BindingSnapshot> {
    for snapshot in new {
        let mut found = false;
        for e in existing
            .iter_mut()
            .filter(|e| e.namespace == snapshot.namespace && e.name == snapshot.name)
        {
            e.clusters = snapshot.clusters.clone();
            found = true;
        }
        if !found {
            existing.push(snapshot.clone());
        }
    }
    existing
}

/// `existing` without the requirer `namespace/name`.
pub fn remove_snapshot(
    mut existing: Vec<BindingSnapshot>,
    namespace: &str,
    name: &str,
) -> Vec<BindingSnapshot> {
    existing.retain(|s| !(s.namespace == namespace && s.name == name));
    existing
}

/// The policy fields an attached binding takes from the bindings that require it, and whether
/// they disagree (Karmada records a `DependencyPolicyConflict` Warning then).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inherited {
    /// `Overwrite` if any requirer overwrites, else `Abort`.
    pub conflict_resolution: ConflictResolution,
    /// True if any requirer preserves resources on deletion.
    pub preserve_resources_on_deletion: bool,
    /// Some requirers overwrite and others abort.
    pub conflict_resolution_conflicted: bool,
    /// Some requirers preserve and others do not.
    pub preserve_conflicted: bool,
}

impl Inherited {
    /// What `requirers` (their specs) make of an attached binding.
    pub fn of<'a>(requirers: impl IntoIterator<Item = &'a ResourceBindingSpec>) -> Self {
        let (mut overwrite, mut abort, mut preserve, mut keep) = (false, false, false, false);
        for spec in requirers {
            if spec.conflict_resolution == ConflictResolution::Overwrite {
                overwrite = true;
            } else {
                abort = true;
            }
            if spec.preserve_resources_on_deletion == Some(true) {
                preserve = true;
            } else {
                keep = true;
            }
        }
        Inherited {
            conflict_resolution: if overwrite {
                ConflictResolution::Overwrite
            } else {
                ConflictResolution::Abort
            },
            preserve_resources_on_deletion: preserve,
            conflict_resolution_conflicted: overwrite && abort,
            preserve_conflicted: preserve && keep,
        }
    }

    /// Karmada's `DependencyPolicyConflict` message, `None` without a conflict.
    pub fn conflict_message(&self) -> Option<String> {
        let mut reasons = Vec::new();
        if self.conflict_resolution_conflicted {
            reasons.push("ConflictResolution conflicted (Overwrite vs Abort)");
        }
        if self.preserve_conflicted {
            reasons.push("PreserveResourcesOnDeletion conflicted (true vs false)");
        }
        (!reasons.is_empty()).then(|| {
            format!(
                "Dependency policy conflict detected: {}.",
                reasons.join("; ")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karmada_apis::work::v1alpha2::TargetCluster;
    use serde_json::json;

    fn snapshot(name: &str, clusters: &[&str]) -> BindingSnapshot {
        BindingSnapshot {
            namespace: "ns".into(),
            name: name.into(),
            clusters: clusters
                .iter()
                .map(|c| TargetCluster {
                    name: (*c).into(),
                    ..Default::default()
                })
                .collect(),
        }
    }

    #[test]
    fn label_key_hashes_the_requirer_as_karmada_does() {
        assert_eq!(
            depended_by_label("prod-xxx", "mytest-deployment"),
            "resourcebinding.karmada.io/depended-by-5d6cf9f4c6"
        );
    }

    #[test]
    fn annotation_is_go_json_and_null_when_empty() {
        assert_eq!(dependencies_annotation(&[]).unwrap(), "null");
        let deps = [DependentObjectReference::named("v1", "Secret", "ns", "a&b")];
        assert_eq!(
            dependencies_annotation(&deps).unwrap(),
            r#"[{"apiVersion":"v1","kind":"Secret","namespace":"ns","name":"a\u0026b"}]"#
        );
    }

    #[test]
    fn snapshots_merge_by_requirer_and_are_removed_by_requirer() {
        let merged = merge_snapshots(
            vec![snapshot("a", &["m1"]), snapshot("b", &["m2"])],
            &[snapshot("a", &["m3"]), snapshot("c", &["m1"])],
        );
        assert_eq!(
            merged,
            vec![
                snapshot("a", &["m3"]),
                snapshot("b", &["m2"]),
                snapshot("c", &["m1"])
            ]
        );
        assert_eq!(
            remove_snapshot(merged, "ns", "b"),
            vec![snapshot("a", &["m3"]), snapshot("c", &["m1"])]
        );
    }

    #[test]
    fn inherited_fields_take_the_stronger_value_and_report_conflicts() {
        let overwrite = ResourceBindingSpec {
            conflict_resolution: ConflictResolution::Overwrite,
            ..Default::default()
        };
        let preserve = ResourceBindingSpec {
            preserve_resources_on_deletion: Some(true),
            ..Default::default()
        };
        let one = Inherited::of([&overwrite]);
        assert_eq!(one.conflict_resolution, ConflictResolution::Overwrite);
        assert!(!one.preserve_resources_on_deletion);
        assert_eq!(one.conflict_message(), None);
        let both = Inherited::of([&overwrite, &preserve]);
        assert!(both.preserve_resources_on_deletion);
        assert_eq!(
            both.conflict_message().unwrap(),
            "Dependency policy conflict detected: ConflictResolution conflicted (Overwrite vs \
             Abort); PreserveResourcesOnDeletion conflicted (true vs false)."
        );
        assert_eq!(
            Inherited::of([]).conflict_resolution,
            ConflictResolution::Abort
        );
    }

    #[test]
    fn dependencies_match_by_name_or_selector() {
        let by_name = DependentObjectReference::named("v1", "ConfigMap", "ns", "cm");
        let selected: DependentObjectReference = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap", "namespace": "ns",
            "labelSelector": {"matchLabels": {"app": "x"}}}))
        .unwrap();
        let labels = BTreeMap::from([("app".to_owned(), "x".to_owned())]);
        let cm = Candidate {
            api_version: "v1",
            kind: "ConfigMap",
            namespace: "ns",
            name: "cm",
            labels: Some(&labels),
        };
        assert!(satisfies(&by_name, &cm));
        assert!(satisfies(&selected, &cm));
        assert!(!satisfies(
            &by_name,
            &Candidate {
                name: "other",
                ..cm
            }
        ));
        assert!(!satisfies(
            &by_name,
            &Candidate {
                namespace: "x",
                ..cm
            }
        ));
        assert!(!satisfies(
            &selected,
            &Candidate {
                labels: Some(&BTreeMap::new()),
                ..cm
            }
        ));
        assert!(satisfies(&selected, &Candidate { labels: None, ..cm }));
    }

    #[test]
    fn attached_binding_is_named_owned_and_labelled_as_karmada_does() {
        let mut independent = ResourceBinding::new(
            "web-deployment",
            ResourceBindingSpec {
                clusters: snapshot("x", &["m1"]).clusters,
                conflict_resolution: ConflictResolution::Overwrite,
                ..Default::default()
            },
        );
        independent.metadata.namespace = Some("ns".into());
        independent.metadata.labels = Some(BTreeMap::from([(
            RESOURCE_BINDING_PERMANENT_ID_LABEL.to_owned(),
            "id-1".to_owned(),
        )]));
        let object = ObjectReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "ns".into(),
            name: "cm".into(),
            uid: "u".into(),
            resource_version: "7".into(),
        };
        let b = build(&independent, &object, "id-2".into());
        assert_eq!(b.metadata.name.as_deref(), Some("cm-configmap"));
        let labels = b.metadata.labels.unwrap();
        assert_eq!(labels[&depended_by_label("ns", "web-deployment")], "id-1");
        assert_eq!(labels[RESOURCE_BINDING_PERMANENT_ID_LABEL], "id-2");
        assert_eq!(
            b.spec.required_by,
            vec![BindingSnapshot {
                namespace: "ns".into(),
                name: "web-deployment".into(),
                clusters: snapshot("x", &["m1"]).clusters,
            }]
        );
        assert_eq!(b.spec.conflict_resolution, ConflictResolution::Overwrite);
        assert!(b.spec.placement.is_none());
        let owner = &b.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("ConfigMap", "u")
        );
    }
}
