//! PropagationPolicy / ClusterPropagationPolicy: which resource templates go to which clusters.

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema::{Cel, QUALIFIED_NAME_MAX_LENGTH, QUALIFIED_NAME_PATTERN, cel, only_values};

/// The desired behaviour of a PropagationPolicy or ClusterPropagationPolicy: the resource templates it
/// selects and where and how they are scheduled.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "policy.karmada.io",
    version = "v1alpha1",
    kind = "PropagationPolicy",
    plural = "propagationpolicies",
    singular = "propagationpolicy",
    shortname = "pp",
    category = "karmada-io",
    namespaced,
    derive = "PartialEq",
    derive = "Default",
    doc = "Propagates the resource templates it selects (in its own namespace) to member clusters.",
    printcolumn(
        name = "CONFLICT-RESOLUTION",
        type_ = "string",
        json_path = ".spec.conflictResolution"
    ),
    printcolumn(name = "PRIORITY", type_ = "string", json_path = ".spec.priority"),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = cel(PROPAGATION_SPEC_RULES))]
pub struct PropagationSpec {
    /// The resource templates this policy propagates. At least one is required: an empty list does not
    /// mean "everything", so sensitive kinds such as Secrets are never propagated by accident.
    #[schemars(length(min = 1))]
    pub resource_selectors: Vec<ResourceSelector>,

    /// Deprecated in favour of `propagateDeps`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub association: bool,

    /// Propagate the resources the selected templates depend on (ConfigMaps, Secrets, …) with them,
    /// and move them along on failover.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub propagate_deps: bool,

    /// Which clusters the resources go to and how replicas are spread.
    #[serde(default)]
    #[schemars(transform = crate::schema::no_default)]
    pub placement: Placement,

    /// Priority among policies matching the same template; higher wins. Defaults to 0.
    #[serde(default = "zero_priority", skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,

    /// Whether this policy may take templates already claimed by a lower-priority policy.
    #[serde(default)]
    pub preemption: PreemptionBehavior,

    /// OverridePolicies that must exist before this policy takes effect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependent_overrides: Vec<String>,

    /// The scheduler that schedules the resources.
    #[serde(
        default = "default_scheduler_name",
        skip_serializing_if = "String::is_empty"
    )]
    pub scheduler_name: String,

    /// How applications are migrated on application or cluster failure; `None` disables failover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<FailoverBehavior>,

    /// What to do when a propagated resource already exists in a member cluster.
    #[serde(default)]
    pub conflict_resolution: ConflictResolution,

    /// `Lazy` defers policy changes until the template itself changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation_preference: Option<ActivationPreference>,

    /// Suspends dispatching to all or some clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspension: Option<Suspension>,

    /// Keep the member clusters' copies when the resource template is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_resources_on_deletion: Option<bool>,

    /// Where the workload's scheduling priority comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_priority: Option<SchedulePriority>,
}

fn zero_priority() -> Option<i32> {
    Some(0)
}

fn default_scheduler_name() -> String {
    crate::well_known::DEFAULT_SCHEDULER_NAME.to_owned()
}

/// What Karmada's PropagationPolicy webhook checks on the spec, as CEL.
const PROPAGATION_SPEC_RULES: &[Cel] = &[
    // A policy selecting a ServiceImport propagates dependencies without asking (Karmada's
    // mutating webhook sets propagateDeps before this check; the detector forces it here).
    Cel::at(
        ".propagateDeps",
        "!has(self.failover) || !has(self.failover.application) || (has(self.propagateDeps) && self.propagateDeps) || self.resourceSelectors.exists(s, s.kind == 'ServiceImport' && s.apiVersion == 'multicluster.x-k8s.io/v1alpha1')",
        "application failover is set, propagateDeps must be true",
    ),
    Cel::at(
        ".resourceSelectors",
        "!has(self.preemption) || self.preemption != 'Always' || self.resourceSelectors.all(s, has(s.name) && s.name != '')",
        "name cannot be empty if preemption is Always, the empty name may cause unexpected resources preemption",
    ),
    // A transition rule: only checked on update.
    Cel::at(
        ".schedulerName",
        "!has(oldSelf.schedulerName) || (has(self.schedulerName) && self.schedulerName == oldSelf.schedulerName)",
        "the schedulerName should not be updated",
    ),
];

cluster_scoped_twin! {
    /// Propagates the resource templates it selects, cluster-scoped ones and those in any
    /// non-reserved namespace, to member clusters.
    pub struct ClusterPropagationPolicy: PropagationPolicy {
        group: "policy.karmada.io",
        version: "v1alpha1",
        kind: "ClusterPropagationPolicy",
        singular: "clusterpropagationpolicy",
        plural: "clusterpropagationpolicies",
        short_name: "cpp",
        spec: PropagationSpec,
    }
}

impl PropagationSpec {
    /// The explicit priority (`spec.priority`), 0 when unset.
    pub fn explicit_priority(&self) -> i32 {
        self.priority.unwrap_or(0)
    }
}

/// Selects resource templates by API version and kind, then by name or labels.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSelector {
    /// API version of the target resources, e.g. `apps/v1`.
    pub api_version: String,
    /// Kind of the target resources, e.g. `Deployment`.
    pub kind: String,
    /// Namespace of the target resources; empty inherits the policy's namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name of the target resource; empty selects all of that kind.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Label query over the resources; ignored when `name` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crate::schema::label_selector)]
    pub label_selector: Option<LabelSelector>,
}

/// Filters clusters by their `provider`, `region` and `zone` fields.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldSelector {
    /// Requirements on cluster fields (keys `provider`, `region`, `zone`; operators `In`, `NotIn`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = cluster_field_requirements)]
    pub match_expressions: Vec<NodeSelectorRequirement>,
}

/// Restricts field-selector requirements to the keys and operators Karmada supports, with at least
/// one valid label value (an `In`/`NotIn` without values cannot be compiled, and Karmada then
/// silently matches no cluster).
fn cluster_field_requirements(schema: &mut schemars::Schema) {
    use crate::schema::{LABEL_VALUE_PATTERN, set_at, set_item_property};
    use serde_json::json;
    set_item_property(schema, "key", "enum", json!(["provider", "region", "zone"]));
    set_item_property(schema, "operator", "enum", json!(["In", "NotIn"]));
    set_item_property(schema, "values", "minItems", json!(1));
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let mut value = serde_json::Value::Object(std::mem::take(object));
    set_at(
        &mut value,
        &["items"],
        "required",
        json!(["key", "operator", "values"]),
    );
    let values = ["items", "properties", "values", "items"];
    set_at(&mut value, &values, "pattern", LABEL_VALUE_PATTERN.into());
    set_at(&mut value, &values, "maxLength", json!(63));
    if let serde_json::Value::Object(o) = value {
        *object = o;
    }
}

/// Suspends parts of propagation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = cel(SUSPENSION_RULES))]
pub struct Suspension {
    /// `true` stops dispatching to every cluster. Cannot be combined with `dispatchingOnClusters`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatching: Option<bool>,
    /// Clusters to which dispatching is suspended. Cannot be combined with `dispatching`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatching_on_clusters: Option<SuspendClusters>,
}

const SUSPENSION_RULES: &[Cel] = &[Cel::new(
    "!(has(self.dispatching) && self.dispatching && has(self.dispatchingOnClusters) && has(self.dispatchingOnClusters.clusterNames) && size(self.dispatchingOnClusters.clusterNames) > 0)",
    "suspension dispatching cannot co-exist with dispatchingOnClusters.clusterNames",
)];

/// The clusters to which dispatching is suspended.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuspendClusters {
    /// Names of the clusters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_names: Vec<String>,
}

string_enum! {
    /// What happens to the application left on the cluster it is migrated away from.
    #[derive(Default)]
    pub enum PurgeMode {
        /// Evict it immediately (for applications that cannot run twice at once).
        Directly = "Directly",
        /// Evict it once the application is healthy elsewhere or a timeout passes.
        #[default]
        Gracefully = "Gracefully",
        /// Karmada never evicts it; users clean up.
        Never = "Never",
    }
}

/// Failover behaviour on application or cluster failure.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailoverBehavior {
    /// Failover on application failure; `None` disables it. Requires `propagateDeps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application: Option<ApplicationFailoverBehavior>,
    /// Failover on cluster failure; `None` uses the controller's configured purge mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterFailoverBehavior>,
}

/// Application failover settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = cel(APPLICATION_FAILOVER_RULES))]
pub struct ApplicationFailoverBehavior {
    /// When failover happens.
    pub decision_conditions: DecisionConditions,
    /// What happens to the application on the cluster it left. Defaults to `Gracefully`.
    #[serde(default)]
    pub purge_mode: PurgeMode,
    /// With `Gracefully`: how long to wait before deleting the old copy (seconds, positive; 600 if
    /// unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub grace_period_seconds: Option<i32>,
    /// State carried from the old cluster to the new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_preservation: Option<StatePreservation>,
}

const APPLICATION_FAILOVER_RULES: &[Cel] = &[Cel::at(
    ".gracePeriodSeconds",
    "!has(self.gracePeriodSeconds) || !has(self.purgeMode) || self.purgeMode == 'Gracefully'",
    "gracePeriodSeconds only takes effect when purgeMode is Gracefully",
)];

/// Grace period used when application failover purges `Gracefully` without an explicit one (seconds);
/// Karmada's webhook fills it in.
pub const DEFAULT_GRACE_PERIOD_SECONDS: i32 = 600;

impl ApplicationFailoverBehavior {
    /// The effective grace period: the explicit one, or 600 s for `Gracefully` (Karmada's default).
    pub fn effective_grace_period_seconds(&self) -> Option<i32> {
        match (self.grace_period_seconds, &self.purge_mode) {
            (Some(seconds), _) => Some(seconds),
            (None, PurgeMode::Gracefully) => Some(DEFAULT_GRACE_PERIOD_SECONDS),
            (None, _) => None,
        }
    }
}

/// Cluster failover settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterFailoverBehavior {
    /// What happens to the application on the failed cluster (`Directly` or `Gracefully`).
    #[serde(default)]
    #[schemars(transform = only_values(&["Directly", "Gracefully"]))]
    pub purge_mode: PurgeMode,
    /// State carried from the old cluster to the new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_preservation: Option<StatePreservation>,
}

/// When application failover is performed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionConditions {
    /// How long the application must be unhealthy before failover (seconds; 0 fails over at once).
    #[serde(
        default = "default_toleration_seconds",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0))]
    pub toleration_seconds: Option<i32>,
}

impl Default for DecisionConditions {
    fn default() -> Self {
        Self {
            toleration_seconds: default_toleration_seconds(),
        }
    }
}

fn default_toleration_seconds() -> Option<i32> {
    Some(300)
}

/// Which state to carry over on failover.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatePreservation {
    /// The pieces of state to preserve.
    pub rules: Vec<StatePreservationRule>,
}

/// One piece of state to preserve, injected into the new cluster as a label.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatePreservationRule {
    /// Label key under which the preserved value is passed to the new cluster.
    #[schemars(length(max = QUALIFIED_NAME_MAX_LENGTH), pattern(QUALIFIED_NAME_PATTERN))]
    pub alias_label_name: String,
    /// JSONPath (relative to `.status`) of the value to preserve, e.g. `{.availableReplicas}`.
    #[serde(rename = "jsonPath")]
    pub json_path: String,
}

/// The rules that choose target clusters and spread replicas.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = cel(PLACEMENT_RULES))]
pub struct Placement {
    /// Restricts scheduling to a set of clusters. Cannot be combined with `clusterAffinities`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_affinity: Option<ClusterAffinity>,

    /// Ordered groups of clusters; the scheduler uses the first group that fits. Cannot be combined
    /// with `clusterAffinity`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub cluster_affinities: Vec<ClusterAffinityTerm>,

    /// Taints of clusters the resources tolerate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub cluster_tolerations: Vec<Toleration>,

    /// Constraints on how many cluster groups are selected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub spread_constraints: Vec<SpreadConstraint>,

    /// How replicas of workloads with replicas are assigned to clusters; `None` duplicates them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_scheduling: Option<ReplicaSchedulingStrategy>,

    /// Inter-workload affinity and anti-affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_affinity: Option<WorkloadAffinity>,
}

/// The spread-by-field a constraint effectively uses: Karmada's webhook turns a constraint with
/// neither `spreadByField` nor `spreadByLabel` into `cluster`; a label constraint yields ''.
macro_rules! effective_spread_field {
    ($c:literal) => {
        concat!(
            "((has(",
            $c,
            ".spreadByField) && ",
            $c,
            ".spreadByField != '') ? ",
            $c,
            ".spreadByField : ((has(",
            $c,
            ".spreadByLabel) && ",
            $c,
            ".spreadByLabel != '') ? '' : 'cluster'))"
        )
    };
}

/// What Karmada's webhook checks on a placement, as CEL.
const PLACEMENT_RULES: &[Cel] = &[
    Cel::new(
        "!(has(self.clusterAffinity) && has(self.clusterAffinities))",
        "clusterAffinities cannot co-exist with clusterAffinity",
    ),
    Cel::at(
        ".clusterAffinities",
        "!has(self.clusterAffinities) || self.clusterAffinities.all(t, self.clusterAffinities.exists_one(u, u.affinityName == t.affinityName))",
        "each affinity term in a policy must have a unique name",
    ),
    Cel::at(
        ".clusterAffinities",
        "!has(self.clusterAffinities) || self.clusterAffinities.all(t, !has(t.overflowAffinities)) || (has(self.replicaScheduling) && has(self.replicaScheduling.replicaSchedulingType) && self.replicaScheduling.replicaSchedulingType == 'Divided' && has(self.replicaScheduling.replicaDivisionPreference) && (self.replicaScheduling.replicaDivisionPreference == 'Aggregated' || (self.replicaScheduling.replicaDivisionPreference == 'Weighted' && has(self.replicaScheduling.weightPreference) && has(self.replicaScheduling.weightPreference.dynamicWeight))))",
        "overflowAffinities can only be used together with dynamic weight or aggregated scheduling",
    ),
    Cel::at(
        ".clusterTolerations",
        "!has(self.clusterTolerations) || self.clusterTolerations.all(t, !has(t.operator) || !(t.operator in ['Lt', 'Gt']))",
        "clusterTolerations operator must be Exists or Equal, Lt and Gt are not supported",
    ),
    Cel::at(
        ".spreadConstraints",
        concat!(
            "!has(self.spreadConstraints) || self.spreadConstraints.all(c, ",
            effective_spread_field!("c"),
            " == '' || self.spreadConstraints.exists_one(d, ",
            effective_spread_field!("d"),
            " == ",
            effective_spread_field!("c"),
            "))"
        ),
        "multiple spread constraints by the same spreadByField are not allowed",
    ),
    Cel::at(
        ".spreadConstraints",
        concat!(
            "!has(self.spreadConstraints) || !self.spreadConstraints.exists(c, ",
            effective_spread_field!("c"),
            " != '') || self.spreadConstraints.exists(c, ",
            effective_spread_field!("c"),
            " == 'cluster')"
        ),
        "the cluster spread constraint must be enabled in one of the constraints in case of SpreadByField is enabled",
    ),
];

string_enum! {
    /// A Cluster field that clusters can be grouped by for spreading.
    pub enum SpreadFieldValue {
        /// Each cluster is its own group.
        Cluster = "cluster",
        /// Group by `spec.region`.
        Region = "region",
        /// Group by `spec.zones`.
        Zone = "zone",
        /// Group by `spec.provider`.
        Provider = "provider",
    }
}

/// Spreads resources over groups of clusters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = cel(SPREAD_CONSTRAINT_RULES))]
pub struct SpreadConstraint {
    /// Cluster field to group by. Cannot be combined with `spreadByLabel`; with neither set, `cluster`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_by_field: Option<SpreadFieldValue>,
    /// Cluster label key to group by. Cannot be combined with `spreadByField`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub spread_by_label: String,
    /// Maximum number of groups to select (0: no maximum).
    #[serde(default, skip_serializing_if = "crate::is_zero_i64")]
    #[schemars(range(min = 0))]
    pub max_groups: i64,
    /// Minimum number of groups to select (0 means 1).
    #[serde(default, skip_serializing_if = "crate::is_zero_i64")]
    #[schemars(range(min = 0))]
    pub min_groups: i64,
}

const SPREAD_CONSTRAINT_RULES: &[Cel] = &[
    Cel::new(
        "!(has(self.spreadByField) && self.spreadByField != '' && has(self.spreadByLabel) && self.spreadByLabel != '')",
        "spreadByLabel should not co-exist with spreadByField",
    ),
    Cel::at(
        ".maxGroups",
        "!has(self.maxGroups) || self.maxGroups == 0 || !has(self.minGroups) || self.maxGroups >= self.minGroups",
        "maxGroups lower than minGroups is not allowed",
    ),
];

impl SpreadConstraint {
    /// The field this constraint effectively spreads by, as Karmada's webhook defaults it: `cluster`
    /// when neither a field nor a label is set, `None` for a label constraint.
    pub fn effective_spread_by_field(&self) -> Option<SpreadFieldValue> {
        match (&self.spread_by_field, self.spread_by_label.is_empty()) {
            (Some(field), _) => Some(field.clone()),
            (None, true) => Some(SpreadFieldValue::Cluster),
            (None, false) => None,
        }
    }

    /// The effective minimum number of groups (Karmada's webhook turns 0 into 1).
    pub fn effective_min_groups(&self) -> i64 {
        if self.min_groups == 0 {
            1
        } else {
            self.min_groups
        }
    }
}

/// Selects clusters by labels, fields and names.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAffinity {
    /// Label query over clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crate::schema::label_selector)]
    pub label_selector: Option<LabelSelector>,
    /// Query over the clusters' `provider`, `region` and `zone` fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<FieldSelector>,
    /// Names of the clusters to select.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_names: Vec<String>,
    /// Names of the clusters to ignore.
    #[serde(rename = "exclude", default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_clusters: Vec<String>,
}

impl ClusterAffinity {
    /// Whether this affinity selects nothing in particular (no selector, names or exclusions).
    pub fn is_empty(&self) -> bool {
        self.label_selector.is_none()
            && self.field_selector.is_none()
            && self.cluster_names.is_empty()
            && self.exclude_clusters.is_empty()
    }
}

/// A named group of clusters, optionally with overflow groups used when it runs out of capacity.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = cel(CLUSTER_AFFINITY_TERM_RULES))]
pub struct ClusterAffinityTerm {
    /// Name of the group (a label key, at most 32 characters).
    #[schemars(length(min = 1, max = 32), pattern(QUALIFIED_NAME_PATTERN))]
    pub affinity_name: String,
    /// The clusters of the group.
    #[serde(flatten)]
    pub cluster_affinity: ClusterAffinity,
    /// Further groups, added in order when the primary group lacks capacity (and removed in reverse).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub overflow_affinities: Vec<OverflowClusterAffinity>,
}

const CLUSTER_AFFINITY_TERM_RULES: &[Cel] = &[
    Cel::at(
        ".overflowAffinities",
        "!has(self.overflowAffinities) || has(self.labelSelector) || has(self.fieldSelector) || (has(self.clusterNames) && size(self.clusterNames) > 0) || (has(self.exclude) && size(self.exclude) > 0)",
        "overflowAffinities can only be used together with the inline ClusterAffinity",
    ),
    Cel::at(
        ".overflowAffinities",
        "!has(self.overflowAffinities) || self.overflowAffinities.all(o, o.affinityName != self.affinityName && self.overflowAffinities.exists_one(p, p.affinityName == o.affinityName))",
        "overflow affinity name must be unique and must not duplicate the primary group's affinityName",
    ),
];

/// An overflow group of clusters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OverflowClusterAffinity {
    /// Name of the group (a label key, at most 32 characters).
    #[schemars(length(min = 1, max = 32), pattern(QUALIFIED_NAME_PATTERN))]
    pub affinity_name: String,
    /// The clusters of the group.
    #[serde(flatten)]
    pub cluster_affinity: ClusterAffinity,
}

/// Inter-workload affinity and anti-affinity (hard requirements).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = cel(WORKLOAD_AFFINITY_RULES))]
pub struct WorkloadAffinity {
    /// Co-locate with workloads of the same affinity group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<WorkloadAffinityTerm>,
    /// Avoid clusters running workloads of the same anti-affinity group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anti_affinity: Option<WorkloadAntiAffinityTerm>,
}

const WORKLOAD_AFFINITY_RULES: &[Cel] = &[Cel::new(
    "!(has(self.affinity) && has(self.antiAffinity) && self.affinity.groupByLabelKey == self.antiAffinity.groupByLabelKey)",
    "affinity and antiAffinity must not use the same groupByLabelKey",
)];

/// Affinity group definition.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadAffinityTerm {
    /// Label key on the template whose value names the affinity group (namespace-scoped).
    #[schemars(length(max = QUALIFIED_NAME_MAX_LENGTH), pattern(QUALIFIED_NAME_PATTERN))]
    pub group_by_label_key: String,
}

/// Anti-affinity group definition.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadAntiAffinityTerm {
    /// Label key on the template whose value names the anti-affinity group (namespace-scoped).
    #[schemars(length(max = QUALIFIED_NAME_MAX_LENGTH), pattern(QUALIFIED_NAME_PATTERN))]
    pub group_by_label_key: String,
}

string_enum! {
    /// How replicas are scheduled.
    #[derive(Default)]
    pub enum ReplicaSchedulingType {
        /// Every selected cluster runs the full replica count.
        Duplicated = "Duplicated",
        /// Replicas are divided among the selected clusters.
        #[default]
        Divided = "Divided",
    }
}

string_enum! {
    /// How divided replicas are distributed.
    pub enum ReplicaDivisionPreference {
        /// As few clusters as possible, respecting available resources.
        Aggregated = "Aggregated",
        /// By weight (`weightPreference`).
        Weighted = "Weighted",
    }
}

/// How replicas are assigned to clusters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSchedulingStrategy {
    /// `Duplicated` or `Divided` (the default).
    #[serde(default)]
    pub replica_scheduling_type: ReplicaSchedulingType,
    /// With `Divided`: `Aggregated` or `Weighted` (Karmada's webhook defaults it to `Weighted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_division_preference: Option<ReplicaDivisionPreference>,
    /// Cluster weights for `Weighted`; unset weights all clusters equally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_preference: Option<ClusterPreferences>,
}

/// Weights of clusters or cluster groups.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPreferences {
    /// Static weights; ignored when `dynamicWeight` is set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub static_weight_list: Vec<StaticClusterWeight>,
    /// Derive weights from a factor instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_weight: Option<DynamicWeightFactor>,
}

/// A weight for the clusters selected by `targetCluster`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StaticClusterWeight {
    /// The clusters this weight applies to.
    pub target_cluster: ClusterAffinity,
    /// The weight (at least 1).
    #[schemars(range(min = 1))]
    pub weight: i64,
}

string_enum! {
    /// The factor dynamic weights are derived from.
    pub enum DynamicWeightFactor {
        /// Weight clusters by how many replicas they can still run.
        AvailableReplicas = "AvailableReplicas",
    }
}

string_enum! {
    /// Whether a policy may preempt templates claimed by lower-priority policies.
    #[derive(Default)]
    pub enum PreemptionBehavior {
        /// Preempt as per priority.
        Always = "Always",
        /// Never preempt.
        #[default]
        Never = "Never",
    }
}

string_enum! {
    /// What to do when a propagated resource already exists in a member cluster.
    #[derive(Default)]
    pub enum ConflictResolution {
        /// Take the resource over by overwriting it.
        Overwrite = "Overwrite",
        /// Stop propagating it (the default).
        #[default]
        Abort = "Abort",
    }
}

string_enum! {
    /// How templates react to policy changes.
    pub enum ActivationPreference {
        /// Policy changes take effect only when the template changes.
        Lazy = "Lazy",
    }
}

/// Where the workload's scheduling priority comes from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulePriority {
    /// The source of the PriorityClass (only `KubePriorityClass` is accepted).
    #[schemars(transform = only_values(&["KubePriorityClass"]))]
    pub priority_class_source: PriorityClassSource,
    /// Name of the PriorityClass.
    pub priority_class_name: String,
}

string_enum! {
    /// Where a PriorityClass is looked up.
    #[derive(Default)]
    pub enum PriorityClassSource {
        /// Karmada FederatedPriorityClass (not implemented by Karmada yet).
        FederatedPriorityClass = "FederatedPriorityClass",
        /// Kubernetes `scheduling.k8s.io/v1` PriorityClass.
        #[default]
        KubePriorityClass = "KubePriorityClass",
        /// The pod template's `priorityClassName` (not implemented by Karmada yet).
        PodPriorityClass = "PodPriorityClass",
    }
}

impl Placement {
    /// The effective replica scheduling type: `Duplicated` when no strategy is set.
    pub fn replica_scheduling_type(&self) -> ReplicaSchedulingType {
        self.replica_scheduling
            .as_ref()
            .map_or(ReplicaSchedulingType::Duplicated, |strategy| {
                strategy.replica_scheduling_type.clone()
            })
    }
}
