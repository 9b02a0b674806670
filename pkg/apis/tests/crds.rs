//! The generated CRDs carry Karmada's names, scopes, short names, categories, printer columns,
//! subresources, defaults, enums and validation rules.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};

fn crd(name: &str) -> CustomResourceDefinition {
    karmada_apis::crds::all()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no CRD {name}"))
}

fn columns(crd: &CustomResourceDefinition) -> Vec<(String, i32)> {
    crd.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.clone(), c.priority.unwrap_or(0)))
        .collect()
}

fn schema(crd: &CustomResourceDefinition) -> &JSONSchemaProps {
    crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("schema")
}

/// The schema at a dotted path of property names (`[]` steps into list items).
fn at<'a>(mut schema: &'a JSONSchemaProps, path: &str) -> &'a JSONSchemaProps {
    for step in path.split('.') {
        schema = if step == "[]" {
            match schema.items.as_ref() {
                Some(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray::Schema(s)) => s,
                _ => panic!("{path}: no items at {step}"),
            }
        } else {
            schema
                .properties
                .as_ref()
                .and_then(|p| p.get(step))
                .unwrap_or_else(|| panic!("{path}: no property {step}"))
        };
    }
    schema
}

fn rules(schema: &JSONSchemaProps) -> Vec<String> {
    schema
        .x_kubernetes_validations
        .iter()
        .flatten()
        .map(|r| r.rule.clone())
        .collect()
}

fn enum_values(schema: &JSONSchemaProps) -> Vec<String> {
    schema
        .enum_
        .iter()
        .flatten()
        .map(|v| v.0.as_str().unwrap_or_default().to_owned())
        .collect()
}

fn default_of(schema: &JSONSchemaProps) -> serde_json::Value {
    schema
        .default
        .as_ref()
        .map(|d| d.0.clone())
        .unwrap_or_default()
}

/// CRD name, kind, scope, short name, status subresource, printer columns.
type Expected<'a> = (
    &'a str,
    &'a str,
    &'a str,
    Option<&'a str>,
    bool,
    &'a [&'a str],
);

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one expected row per CRD, read as a table"
)]
fn names_scopes_and_columns_match_karmada() {
    let expect: &[Expected] = &[
        (
            "clusters.cluster.karmada.io",
            "Cluster",
            "Cluster",
            None,
            true,
            &[
                "VERSION",
                "MODE",
                "READY",
                "AGE",
                "ZONES",
                "REGION",
                "PROVIDER",
                "API-ENDPOINT",
                "PROXY-URL",
            ],
        ),
        (
            "propagationpolicies.policy.karmada.io",
            "PropagationPolicy",
            "Namespaced",
            Some("pp"),
            false,
            &["CONFLICT-RESOLUTION", "PRIORITY", "AGE"],
        ),
        (
            "clusterpropagationpolicies.policy.karmada.io",
            "ClusterPropagationPolicy",
            "Cluster",
            Some("cpp"),
            false,
            &["CONFLICT-RESOLUTION", "PRIORITY", "AGE"],
        ),
        (
            "overridepolicies.policy.karmada.io",
            "OverridePolicy",
            "Namespaced",
            Some("op"),
            false,
            &[],
        ),
        (
            "clusteroverridepolicies.policy.karmada.io",
            "ClusterOverridePolicy",
            "Cluster",
            Some("cop"),
            false,
            &[],
        ),
        (
            "federatedresourcequotas.policy.karmada.io",
            "FederatedResourceQuota",
            "Namespaced",
            None,
            true,
            &["OVERALL", "OVERALL_USED"],
        ),
        (
            "clustertaintpolicies.policy.karmada.io",
            "ClusterTaintPolicy",
            "Cluster",
            None,
            false,
            &[],
        ),
        (
            "works.work.karmada.io",
            "Work",
            "Namespaced",
            Some("wk"),
            true,
            &["WORKLOAD-KIND", "APPLIED", "AGE"],
        ),
        (
            "resourcebindings.work.karmada.io",
            "ResourceBinding",
            "Namespaced",
            Some("rb"),
            true,
            &["SCHEDULED", "FULLYAPPLIED", "AGE"],
        ),
        (
            "clusterresourcebindings.work.karmada.io",
            "ClusterResourceBinding",
            "Cluster",
            Some("crb"),
            true,
            &["SCHEDULED", "FULLYAPPLIED", "AGE"],
        ),
        (
            "resourceinterpretercustomizations.config.karmada.io",
            "ResourceInterpreterCustomization",
            "Cluster",
            Some("ric"),
            false,
            &["TARGET-API-VERSION", "TARGET-KIND", "AGE"],
        ),
        (
            "resourceinterpreterwebhookconfigurations.config.karmada.io",
            "ResourceInterpreterWebhookConfiguration",
            "Cluster",
            None,
            false,
            &[],
        ),
        (
            "federatedhpas.autoscaling.karmada.io",
            "FederatedHPA",
            "Namespaced",
            Some("fhpa"),
            true,
            &[
                "REFERENCE-KIND",
                "REFERENCE-NAME",
                "MINPODS",
                "MAXPODS",
                "REPLICAS",
                "AGE",
            ],
        ),
        (
            "cronfederatedhpas.autoscaling.karmada.io",
            "CronFederatedHPA",
            "Namespaced",
            Some("cronfhpa"),
            true,
            &["REFERENCE-KIND", "REFERENCE-NAME", "AGE"],
        ),
        (
            "workloadrebalancers.apps.karmada.io",
            "WorkloadRebalancer",
            "Cluster",
            None,
            true,
            &[],
        ),
        (
            "remedies.remedy.karmada.io",
            "Remedy",
            "Cluster",
            None,
            false,
            &[],
        ),
        (
            "multiclusterservices.networking.karmada.io",
            "MultiClusterService",
            "Namespaced",
            Some("mcs"),
            true,
            &[],
        ),
        (
            "multiclusteringresses.networking.karmada.io",
            "MultiClusterIngress",
            "Namespaced",
            Some("mci"),
            true,
            &[],
        ),
        (
            "serviceexports.multicluster.x-k8s.io",
            "ServiceExport",
            "Namespaced",
            Some("svcex"),
            true,
            &["Age"],
        ),
        (
            "serviceimports.multicluster.x-k8s.io",
            "ServiceImport",
            "Namespaced",
            Some("svcim"),
            true,
            &["Type", "IP", "Age"],
        ),
        // karmada-rs's own kinds.
        (
            "rolloutstrategies.apps.karmada-rs.io",
            "RolloutStrategy",
            "Namespaced",
            None,
            false,
            &[],
        ),
        (
            "rollouts.apps.karmada-rs.io",
            "Rollout",
            "Namespaced",
            None,
            true,
            &[
                "STRATEGY",
                "PHASE",
                "STAGE",
                "TARGET-REVISION",
                "STABLE-REVISION",
                "AGE",
            ],
        ),
        (
            "driftpolicies.policy.karmada-rs.io",
            "DriftPolicy",
            "Namespaced",
            Some("dp"),
            false,
            &["DRIFT", "TAKEOVER", "AGE"],
        ),
        (
            "clusterdriftpolicies.policy.karmada-rs.io",
            "ClusterDriftPolicy",
            "Cluster",
            Some("cdp"),
            false,
            &["DRIFT", "TAKEOVER", "AGE"],
        ),
    ];
    assert_eq!(karmada_apis::crds::all().len(), expect.len());
    for (name, kind, scope, short, status, cols) in expect {
        let crd = crd(name);
        assert_eq!(crd.spec.names.kind, *kind);
        assert_eq!(crd.spec.scope, *scope, "{name}");
        assert_eq!(
            crd.spec.names.short_names.clone().unwrap_or_default(),
            short.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "{name}"
        );
        // Karmada serves Cluster from its aggregated API server, without a category; its
        // ClusterTaintPolicy and WorkloadRebalancer CRDs have none either, nor the MCS API's.
        let categories = crd.spec.names.categories.clone().unwrap_or_default();
        if [
            "Cluster",
            "ClusterTaintPolicy",
            "WorkloadRebalancer",
            "ServiceExport",
            "ServiceImport",
        ]
        .contains(kind)
        {
            assert!(categories.is_empty());
        } else {
            assert_eq!(categories, vec!["karmada-io".to_string()], "{name}");
        }
        let version = &crd.spec.versions[0];
        assert!(version.served && version.storage);
        assert_eq!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            *status,
            "{name}: status subresource"
        );
        let names: Vec<String> = columns(&crd).into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            cols.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "{name}"
        );
    }
    // Cluster's wide columns are priority 1, like `kubectl get clusters -o wide` on Karmada.
    let cluster_cols = columns(&crd("clusters.cluster.karmada.io"));
    assert!(cluster_cols[..4].iter().all(|(_, p)| *p == 0));
    assert!(cluster_cols[4..].iter().all(|(_, p)| *p == 1));
}

#[test]
fn policy_schema_has_karmada_defaults_enums_and_rules() {
    let pp = crd("propagationpolicies.policy.karmada.io");
    let spec = at(schema(&pp), "spec");
    assert_eq!(
        spec.required.clone().unwrap_or_default(),
        vec!["resourceSelectors"]
    );
    assert_eq!(at(spec, "resourceSelectors").min_items, Some(1));
    assert_eq!(default_of(at(spec, "conflictResolution")), "Abort");
    assert_eq!(
        enum_values(at(spec, "conflictResolution")),
        ["Overwrite", "Abort"]
    );
    assert_eq!(default_of(at(spec, "preemption")), "Never");
    assert_eq!(default_of(at(spec, "priority")), 0);
    assert_eq!(default_of(at(spec, "schedulerName")), "default-scheduler");
    let strategy = at(spec, "placement.replicaScheduling");
    assert_eq!(default_of(at(strategy, "replicaSchedulingType")), "Divided");
    assert_eq!(
        enum_values(at(strategy, "replicaSchedulingType")),
        ["Duplicated", "Divided"]
    );
    assert_eq!(
        enum_values(at(strategy, "replicaDivisionPreference")),
        ["Aggregated", "Weighted"]
    );
    assert_eq!(
        at(strategy, "weightPreference.staticWeightList.[].weight").minimum,
        Some(1.0)
    );
    let app = at(spec, "failover.application");
    assert_eq!(default_of(at(app, "purgeMode")), "Gracefully");
    assert_eq!(
        enum_values(at(app, "purgeMode")),
        ["Directly", "Gracefully", "Never"]
    );
    assert_eq!(
        default_of(at(app, "decisionConditions.tolerationSeconds")),
        300
    );
    assert_eq!(
        enum_values(at(spec, "failover.cluster.purgeMode")),
        ["Directly", "Gracefully"]
    );
    assert_eq!(
        enum_values(at(spec, "schedulePriority.priorityClassSource")),
        ["KubePriorityClass"]
    );
    assert!(
        rules(at(spec, "placement.spreadConstraints.[]"))
            .iter()
            .any(|r| r.contains("self.maxGroups >= self.minGroups"))
    );
    assert!(
        rules(at(spec, "placement"))
            .iter()
            .any(|r| r.contains("clusterAffinity") && r.contains("clusterAffinities"))
    );
    // No `nullable` and no `null` enum values anywhere (Karmada's CRDs prune nulls).
    let text = serde_json::to_string(&pp).expect("serializes");
    assert!(!text.contains("nullable"));
    assert!(!text.contains("null"));

    let op = crd("overridepolicies.policy.karmada.io");
    let plaintext = at(schema(&op), "spec.overrideRules.[].overriders.plaintext.[]");
    assert_eq!(
        enum_values(at(plaintext, "operator")),
        ["add", "remove", "replace"]
    );
    assert_eq!(
        at(plaintext, "value").x_kubernetes_preserve_unknown_fields,
        Some(true)
    );
    assert_eq!(
        enum_values(at(
            schema(&op),
            "spec.overrideRules.[].overriders.commandOverrider.[].operator"
        )),
        ["add", "remove"]
    );
}

#[test]
fn raw_objects_preserve_unknown_fields() {
    let work = crd("works.work.karmada.io");
    let manifest = at(schema(&work), "spec.workload.manifests.[]");
    assert_eq!(manifest.type_.as_deref(), Some("object"));
    assert_eq!(manifest.x_kubernetes_preserve_unknown_fields, Some(true));
    let status = at(schema(&work), "status.manifestStatuses.[].status");
    assert_eq!(status.x_kubernetes_preserve_unknown_fields, Some(true));
    let rb = crd("resourcebindings.work.karmada.io");
    let aggregated = at(schema(&rb), "status.aggregatedStatus.[].status");
    assert_eq!(aggregated.x_kubernetes_preserve_unknown_fields, Some(true));
}

/// Remedy's schema has Karmada's shape: `spec` required, the operator enum, the requirement's three
/// fields required, and free-string actions and condition types.
#[test]
fn remedy_schema_matches_karmada() {
    let remedy = crd("remedies.remedy.karmada.io");
    let root = schema(&remedy);
    assert_eq!(root.required.clone().unwrap_or_default(), vec!["spec"]);
    assert!(root.x_kubernetes_validations.is_none());
    let spec = at(root, "spec");
    assert!(spec.required.is_none());
    let requirement = at(spec, "decisionMatches.[].clusterConditionMatch");
    let mut required = requirement.required.clone().unwrap_or_default();
    required.sort();
    assert_eq!(required, ["conditionStatus", "conditionType", "operator"]);
    assert_eq!(
        enum_values(at(requirement, "operator")),
        ["Equal", "NotEqual"]
    );
    assert!(at(requirement, "conditionType").enum_.is_none());
    let action = at(spec, "actions.[]");
    assert_eq!(action.type_.as_deref(), Some("string"));
    assert!(action.enum_.is_none());
    assert_eq!(
        at(spec, "clusterAffinity.clusterNames.[]").type_.as_deref(),
        Some("string")
    );
    let text = serde_json::to_string(&remedy).expect("serializes");
    assert!(!text.contains("nullable"));
    assert!(
        remedy.spec.versions[0].subresources.is_none(),
        "Remedy has no status"
    );
}
