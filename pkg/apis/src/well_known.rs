//! Every label, annotation, finalizer, condition type and reason, taint key, reserved namespace and
//! name prefix the controllers read or write, spelled exactly as Karmada spells them.
//!
//! Objects written with these names are indistinguishable from Karmada's own, so Karmada's tools keep
//! working and a control plane can switch between the Go and Rust controllers.

// ---------------------------------------------------------------------------------------------
// Labels
// ---------------------------------------------------------------------------------------------

/// Label: permanent id of a PropagationPolicy, also put on the templates and bindings it claims.
pub const PROPAGATION_POLICY_PERMANENT_ID_LABEL: &str = "propagationpolicy.karmada.io/permanent-id";
/// Label: permanent id of a ClusterPropagationPolicy, also put on the templates and bindings it claims.
pub const CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL: &str =
    "clusterpropagationpolicy.karmada.io/permanent-id";
/// Label on a Namespace: `"true"` keeps the namespace controller from propagating it.
pub const NAMESPACE_SKIP_AUTO_PROPAGATION_LABEL: &str =
    "namespace.karmada.io/skip-auto-propagation";

/// Label: permanent id of a ResourceBinding, also put on its Works and the member objects.
pub const RESOURCE_BINDING_PERMANENT_ID_LABEL: &str = "resourcebinding.karmada.io/permanent-id";
/// Label: permanent id of a ClusterResourceBinding, also put on its Works and the member objects.
pub const CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL: &str =
    "clusterresourcebinding.karmada.io/permanent-id";
/// Label: permanent id of a Work, also put on the member objects it creates.
pub const WORK_PERMANENT_ID_LABEL: &str = "work.karmada.io/permanent-id";
/// Label: which controller manages a binding (e.g. the dependencies distributor).
pub const BINDING_MANAGED_BY_LABEL: &str = "binding.karmada.io/managed-by";

/// Label on member objects: `"true"` marks objects Karmada manages (the gate for update and delete).
pub const MANAGED_BY_KARMADA_LABEL: &str = "karmada.io/managed";
/// Value of [`MANAGED_BY_KARMADA_LABEL`].
pub const MANAGED_BY_KARMADA_LABEL_VALUE: &str = "true";
/// Label on system-level objects Karmada manages (execution namespaces, `karmada-cluster` objects).
pub const KARMADA_SYSTEM_LABEL: &str = "karmada.io/system";
/// Value of [`KARMADA_SYSTEM_LABEL`].
pub const KARMADA_SYSTEM_LABEL_VALUE: &str = "true";
/// The ServiceAccount `karmadactl join` creates in a member for Karmada's proxies to impersonate
/// with (Karmada's `GenerateServiceAccountName("impersonator")`); unifiedAuth binds it in members.
pub const IMPERSONATOR_SERVICE_ACCOUNT: &str = "karmada-impersonator";
/// Label on a template: `"true"` keeps the member clusters' replica counts (e.g. under an HPA).
pub const RETAIN_REPLICAS_LABEL: &str = "resourcetemplate.karmada.io/retain-replicas";
/// Value of [`RETAIN_REPLICAS_LABEL`] that enables retaining.
pub const RETAIN_REPLICAS_VALUE: &str = "true";
/// Label on a template: the component that propagates it instead of the policies (e.g. MCS).
pub const RESOURCE_TEMPLATE_CLAIMED_BY_LABEL: &str = "resourcetemplate.karmada.io/claimed-by";
/// Label on a template protecting it from deletion.
pub const DELETION_PROTECTION_LABEL: &str = "resourcetemplate.karmada.io/deletion-protected";
/// Value of [`DELETION_PROTECTION_LABEL`] that denies deletion.
pub const DELETION_PROTECTION_ALWAYS: &str = "Always";

/// Label on Works holding collected EndpointSlices: the Service's namespace.
pub const SERVICE_NAMESPACE_LABEL: &str = "endpointslice.karmada.io/namespace";
/// Label on Works holding collected EndpointSlices: the Service's name.
pub const SERVICE_NAME_LABEL: &str = "endpointslice.karmada.io/name";
/// Label on Works managed by a MultiClusterService: its namespace.
pub const MULTI_CLUSTER_SERVICE_NAMESPACE_LABEL: &str = "multiclusterservice.karmada.io/namespace";
/// Label on Works managed by a MultiClusterService: its name.
pub const MULTI_CLUSTER_SERVICE_NAME_LABEL: &str = "multiclusterservice.karmada.io/name";
/// Label on Works of a FederatedResourceQuota: its namespace.
pub const FEDERATED_RESOURCE_QUOTA_NAMESPACE_LABEL: &str =
    "federatedresourcequota.karmada.io/namespace";
/// Label on Works of a FederatedResourceQuota: its name.
pub const FEDERATED_RESOURCE_QUOTA_NAME_LABEL: &str = "federatedresourcequota.karmada.io/name";
/// Label on collected EndpointSlice Works: which controller manages them.
pub const ENDPOINT_SLICE_WORK_MANAGED_BY_LABEL: &str = "endpointslice.karmada.io/managed-by";
/// `endpointslice.kubernetes.io/managed-by` value of the EndpointSlices the `endpointSlice`
/// controller builds on the control plane from collected ones.
pub const ENDPOINT_SLICE_CONTROLLER_LABEL_VALUE: &str = "endpointslice-controller.karmada.io";
/// `endpointslice.kubernetes.io/managed-by` value of the EndpointSlices `endpointsliceDispatch`
/// hands to consumer clusters.
pub const ENDPOINT_SLICE_DISPATCH_CONTROLLER_LABEL_VALUE: &str =
    "endpointslice-dispatch-controller.karmada.io";
/// Label identifying a MultiClusterService for good (set once by the `multiclusterservice` controller).
pub const MULTI_CLUSTER_SERVICE_PERMANENT_ID_LABEL: &str =
    "multiclusterservice.karmada.io/permanent-id";
/// Annotation naming the MultiClusterService an object belongs to.
pub const MULTI_CLUSTER_SERVICE_NAME_ANNOTATION: &str = "multiclusterservice.karmada.io/name";
/// Annotation naming the namespace of the MultiClusterService an object belongs to.
pub const MULTI_CLUSTER_SERVICE_NAMESPACE_ANNOTATION: &str =
    "multiclusterservice.karmada.io/namespace";

/// The labels Karmada puts on the objects it creates in member clusters.
pub const MANAGED_RESOURCE_LABELS: &[&str] = &[
    RESOURCE_BINDING_PERMANENT_ID_LABEL,
    WORK_PERMANENT_ID_LABEL,
    MANAGED_BY_KARMADA_LABEL,
];

// ---------------------------------------------------------------------------------------------
// Annotations
// ---------------------------------------------------------------------------------------------

/// Annotation on templates and bindings: namespace of the claiming PropagationPolicy.
pub const PROPAGATION_POLICY_NAMESPACE_ANNOTATION: &str = "propagationpolicy.karmada.io/namespace";
/// Annotation on templates and bindings: name of the claiming PropagationPolicy.
pub const PROPAGATION_POLICY_NAME_ANNOTATION: &str = "propagationpolicy.karmada.io/name";
/// Annotation on templates and bindings: name of the claiming ClusterPropagationPolicy.
pub const CLUSTER_PROPAGATION_POLICY_ANNOTATION: &str = "clusterpropagationpolicy.karmada.io/name";

/// Annotation on member objects: namespace of the Work that created them.
pub const WORK_NAMESPACE_ANNOTATION: &str = "work.karmada.io/namespace";
/// Annotation on member objects: name of the Work that created them.
pub const WORK_NAME_ANNOTATION: &str = "work.karmada.io/name";
/// Annotation on Works and member objects: namespace of the ResourceBinding.
pub const RESOURCE_BINDING_NAMESPACE_ANNOTATION: &str = "resourcebinding.karmada.io/namespace";
/// Annotation on Works and member objects: name of the ResourceBinding.
pub const RESOURCE_BINDING_NAME_ANNOTATION: &str = "resourcebinding.karmada.io/name";
/// Annotation on Works and member objects: name of the ClusterResourceBinding.
pub const CLUSTER_RESOURCE_BINDING_ANNOTATION: &str = "clusterresourcebinding.karmada.io/name";
/// Annotation on member objects: the template's `metadata.generation` they were made from.
pub const RESOURCE_TEMPLATE_GENERATION_ANNOTATION: &str = "resourcetemplate.karmada.io/generation";
/// Annotation on member objects: the template's uid.
pub const RESOURCE_TEMPLATE_UID_ANNOTATION: &str = "resourcetemplate.karmada.io/uid";
/// Annotation on member objects: sorted, comma-separated keys of the labels Karmada manages.
pub const MANAGED_LABELS_ANNOTATION: &str = "resourcetemplate.karmada.io/managed-labels";
/// Annotation on member objects: sorted, comma-separated keys of the annotations Karmada manages.
pub const MANAGED_ANNOTATIONS_ANNOTATION: &str = "resourcetemplate.karmada.io/managed-annotations";

/// Annotation on templates, Works and member objects: how to resolve a conflict with an existing
/// member object ([`CONFLICT_RESOLUTION_OVERWRITE`] or [`CONFLICT_RESOLUTION_ABORT`]).
pub const CONFLICT_RESOLUTION_ANNOTATION: &str = "work.karmada.io/conflict-resolution";
/// Value of [`CONFLICT_RESOLUTION_ANNOTATION`]: take over the existing object.
pub const CONFLICT_RESOLUTION_OVERWRITE: &str = "overwrite";
/// Value of [`CONFLICT_RESOLUTION_ANNOTATION`]: leave the existing object alone.
pub const CONFLICT_RESOLUTION_ABORT: &str = "abort";

/// Annotation on bindings: the placement last used for scheduling (JSON), written by the scheduler.
pub const POLICY_PLACEMENT_ANNOTATION: &str = "policy.karmada.io/applied-placement";
/// Annotation on Works: the OverridePolicies applied (JSON, sorted by policy name).
pub const APPLIED_OVERRIDES_ANNOTATION: &str = "policy.karmada.io/applied-overrides";
/// Annotation on Works: the ClusterOverridePolicies applied (JSON, sorted by policy name).
pub const APPLIED_CLUSTER_OVERRIDES_ANNOTATION: &str =
    "policy.karmada.io/applied-cluster-overrides";
/// Annotation on independent bindings: their dependencies (JSON).
pub const DEPENDENCIES_ANNOTATION: &str = "resourcebinding.karmada.io/dependencies";
/// Annotation on dispatched EndpointSlice Works: the cluster providing the endpoints.
pub const ENDPOINT_SLICE_PROVISION_CLUSTER_ANNOTATION: &str =
    "endpointslice.karmada.io/provision-cluster";
/// Annotation on objects cached from a member cluster: the cluster's name.
pub const CACHE_SOURCE_ANNOTATION: &str = "resource.karmada.io/cached-from-cluster";

/// The annotations Karmada puts on the objects it creates in member clusters.
pub const MANAGED_RESOURCE_ANNOTATIONS: &[&str] = &[
    MANAGED_ANNOTATIONS_ANNOTATION,
    MANAGED_LABELS_ANNOTATION,
    RESOURCE_BINDING_NAMESPACE_ANNOTATION,
    RESOURCE_BINDING_NAME_ANNOTATION,
    RESOURCE_TEMPLATE_UID_ANNOTATION,
    RESOURCE_TEMPLATE_GENERATION_ANNOTATION,
    WORK_NAME_ANNOTATION,
    WORK_NAMESPACE_ANNOTATION,
];

// ---------------------------------------------------------------------------------------------
// Finalizers
// ---------------------------------------------------------------------------------------------

/// Finalizer on Clusters: held until the execution namespace and its Works are gone.
pub const CLUSTER_CONTROLLER_FINALIZER: &str = "karmada.io/cluster-controller";
/// Finalizer on Works: held until the member objects are deleted.
pub const EXECUTION_CONTROLLER_FINALIZER: &str = "karmada.io/execution-controller";
/// Finalizer on ResourceBindings: held until their Works are deleted.
pub const BINDING_CONTROLLER_FINALIZER: &str = "karmada.io/binding-controller";
/// Finalizer on ClusterResourceBindings: held until their Works are deleted.
pub const CLUSTER_RESOURCE_BINDING_CONTROLLER_FINALIZER: &str =
    "karmada.io/cluster-resource-binding-controller";
/// Finalizer on PropagationPolicies: held until the resources they claimed are released.
pub const PROPAGATION_POLICY_CONTROLLER_FINALIZER: &str =
    "karmada.io/propagation-policy-controller";
/// Finalizer on ClusterPropagationPolicies: held until the resources they claimed are released.
pub const CLUSTER_PROPAGATION_POLICY_CONTROLLER_FINALIZER: &str =
    "karmada.io/cluster-propagation-policy-controller";
/// Finalizer on independent bindings: held until the attached bindings are cleaned up.
pub const BINDING_DEPENDENCIES_DISTRIBUTOR_FINALIZER: &str =
    "karmada.io/binding-dependencies-distributor";
/// Finalizer on Works holding collected EndpointSlices.
pub const ENDPOINT_SLICE_CONTROLLER_FINALIZER: &str = "karmada.io/endpointslice-controller";
/// Finalizer on MultiClusterServices: held until the provider clusters' Works are deleted.
pub const MCS_ENDPOINT_SLICE_COLLECT_CONTROLLER_FINALIZER: &str =
    "karmada.io/mcs-endpointslice-collect-controller";
/// Finalizer on Works holding EndpointSlices collected for a MultiClusterService: held by
/// `endpointsliceDispatch` until the copies it dispatched to the consumer clusters are deleted.
pub const MCS_ENDPOINT_SLICE_DISPATCH_CONTROLLER_FINALIZER: &str =
    "karmada.io/mcs-endpointslice-dispatch-controller";
/// Finalizer on MultiClusterServices: held until the Service Works are deleted.
pub const MCS_CONTROLLER_FINALIZER: &str = "karmada.io/multiclusterservice-controller";

// ---------------------------------------------------------------------------------------------
// Condition types, reasons and messages
// ---------------------------------------------------------------------------------------------

/// Cluster condition: the cluster is healthy and accepts workloads.
pub const CLUSTER_CONDITION_READY: &str = "Ready";
/// Cluster condition: whether `status.apiEnablements` is complete.
pub const CLUSTER_CONDITION_COMPLETE_API_ENABLEMENTS: &str = "CompleteAPIEnablements";
/// Ready reason: the health endpoint answered ok.
pub const CLUSTER_REASON_READY: &str = "ClusterReady";
/// Ready message for [`CLUSTER_REASON_READY`].
pub const CLUSTER_MESSAGE_HEALTHY: &str = "cluster is healthy and ready to accept workloads";
/// Ready reason: the health endpoint answered, but not ok.
pub const CLUSTER_REASON_NOT_READY: &str = "ClusterNotReady";
/// Ready message for [`CLUSTER_REASON_NOT_READY`].
pub const CLUSTER_MESSAGE_UNHEALTHY: &str =
    "cluster is reachable but health endpoint responded without ok";
/// Ready reason: the cluster could not be reached.
pub const CLUSTER_REASON_NOT_REACHABLE: &str = "ClusterNotReachable";
/// Ready message for [`CLUSTER_REASON_NOT_REACHABLE`].
pub const CLUSTER_MESSAGE_NOT_REACHABLE: &str = "cluster is not reachable";
/// Ready reason: collecting the cluster's status failed.
pub const CLUSTER_REASON_STATUS_COLLECTION_FAILED: &str = "StatusCollectionFailed";
/// Ready reason (Pull clusters): the agent stopped reporting.
pub const CLUSTER_REASON_STATUS_UNKNOWN: &str = "ClusterStatusUnknown";
/// Ready reason (Pull clusters): the agent never reported.
pub const CLUSTER_REASON_STATUS_NEVER_UPDATED: &str = "ClusterStatusNeverUpdated";
/// CompleteAPIEnablements reason: all API groups were discovered.
pub const API_ENABLEMENTS_COMPLETE: &str = "Complete";
/// CompleteAPIEnablements reason: some API groups could not be discovered.
pub const API_ENABLEMENTS_PARTIAL: &str = "Partial";
/// CompleteAPIEnablements reason: no API group could be discovered.
pub const API_ENABLEMENTS_EMPTY: &str = "Empty";

/// Work condition: the manifests were applied to the member cluster.
pub const WORK_APPLIED: &str = "Applied";
/// Work condition: the manifests are being applied (defined, never set by Karmada).
pub const WORK_PROGRESSING: &str = "Progressing";
/// Work condition: the manifests exist in the member cluster (defined, never set by Karmada).
pub const WORK_AVAILABLE: &str = "Available";
/// Work condition: the member state diverged for a while (defined, never set by Karmada).
pub const WORK_DEGRADED: &str = "Degraded";
/// Work condition: whether the Work is being dispatched or suspended.
pub const WORK_DISPATCHING: &str = "Dispatching";
/// Applied reason: every manifest was applied.
pub const WORK_REASON_APPLIED_SUCCESSFUL: &str = "AppliedSuccessful";
/// Applied message for [`WORK_REASON_APPLIED_SUCCESSFUL`].
pub const WORK_MESSAGE_APPLIED_SUCCESSFUL: &str = "Manifest has been successfully applied";
/// Applied reason: some manifest failed; the message is
/// `Failed to apply all manifests (<succeeded>/<total>): <errors>`.
pub const WORK_REASON_APPLIED_FAILED: &str = "AppliedFailed";
/// Dispatching reason: dispatching is active.
pub const WORK_REASON_DISPATCHING: &str = "Dispatching";
/// Dispatching message for [`WORK_REASON_DISPATCHING`].
pub const WORK_MESSAGE_DISPATCHING: &str = "Work is being dispatched to member clusters.";
/// Dispatching reason: dispatching is suspended.
pub const WORK_REASON_SUSPEND_DISPATCHING: &str = "SuspendDispatching";
/// Dispatching message for [`WORK_REASON_SUSPEND_DISPATCHING`].
pub const WORK_MESSAGE_SUSPEND_DISPATCHING: &str = "Work dispatching is in a suspended state.";

/// Binding condition: the scheduler has scheduled the binding.
pub const BINDING_SCHEDULED: &str = "Scheduled";
/// Binding condition: the resource was applied to every scheduled cluster.
pub const BINDING_FULLY_APPLIED: &str = "FullyApplied";
/// Scheduled reason: scheduling succeeded.
pub const BINDING_REASON_SUCCESS: &str = "Success";
/// Scheduled reason: an internal error (e.g. API server unreachable).
pub const BINDING_REASON_SCHEDULER_ERROR: &str = "SchedulerError";
/// Scheduled reason: no cluster fits.
pub const BINDING_REASON_NO_CLUSTER_FIT: &str = "NoClusterFit";
/// Scheduled reason: cannot be scheduled right now (e.g. insufficient resources).
pub const BINDING_REASON_UNSCHEDULABLE: &str = "Unschedulable";
/// Scheduled reason: a FederatedResourceQuota would be exceeded.
pub const BINDING_REASON_QUOTA_EXCEEDED: &str = "QuotaExceeded";
/// FullyApplied reason: every scheduled cluster has the resource applied.
pub const FULLY_APPLIED_SUCCESS_REASON: &str = "FullyAppliedSuccess";
/// FullyApplied message for [`FULLY_APPLIED_SUCCESS_REASON`].
pub const FULLY_APPLIED_SUCCESS_MESSAGE: &str = "All works have been successfully applied";
/// FullyApplied reason: some scheduled cluster does not have it applied.
pub const FULLY_APPLIED_FAILED_REASON: &str = "FullyAppliedFailed";
/// FullyApplied message for [`FULLY_APPLIED_FAILED_REASON`].
pub const FULLY_APPLIED_FAILED_MESSAGE: &str =
    "Failed to apply all works, see status.aggregatedStatus for details";

/// Graceful eviction reason: the cluster has a taint the binding does not tolerate.
pub const EVICTION_REASON_TAINT_UNTOLERATED: &str = "TaintUntolerated";
/// Graceful eviction reason: the application failed in the cluster.
pub const EVICTION_REASON_APPLICATION_FAILURE: &str = "ApplicationFailure";
/// Graceful eviction producer: the taint manager.
pub const EVICTION_PRODUCER_TAINT_MANAGER: &str = "TaintManager";

// ---------------------------------------------------------------------------------------------
// Event reasons
// ---------------------------------------------------------------------------------------------

/// Event reasons Karmada's controllers record, spelled as Karmada spells them.
pub mod event_reasons {
    /// Creating an execution namespace failed.
    pub const CREATE_EXECUTION_SPACE_FAILED: &str = "CreateExecutionSpaceFailed";
    /// An execution namespace was created.
    pub const CREATE_EXECUTION_SPACE_SUCCEED: &str = "CreateExecutionSpaceSucceed";
    /// Removing an execution namespace failed.
    pub const REMOVE_EXECUTION_SPACE_FAILED: &str = "RemoveExecutionSpaceFailed";
    /// An execution namespace was removed.
    pub const REMOVE_EXECUTION_SPACE_SUCCEED: &str = "RemoveExecutionSpaceSucceed";
    /// Updating a cluster's taints failed.
    pub const TAINT_CLUSTER_FAILED: &str = "TaintClusterFailed";
    /// A cluster's taints were updated.
    pub const TAINT_CLUSTER_SUCCEED: &str = "TaintClusterSucceed";
    /// The impersonation ClusterRole/ClusterRoleBinding Works of a cluster were written.
    pub const SYNC_IMPERSONATION_CONFIG_SUCCEED: &str = "SyncImpersonationConfigSucceed";
    /// Writing the impersonation Works of a cluster failed.
    pub const SYNC_IMPERSONATION_CONFIG_FAILED: &str = "SyncImpersonationConfigFailed";
    /// Reflecting a member object's status failed.
    pub const REFLECT_STATUS_FAILED: &str = "ReflectStatusFailed";
    /// A member object's status was reflected.
    pub const REFLECT_STATUS_SUCCEED: &str = "ReflectStatusSucceed";
    /// Interpreting a member object's health failed.
    pub const INTERPRET_HEALTH_FAILED: &str = "InterpretHealthFailed";
    /// A member object's health was interpreted.
    pub const INTERPRET_HEALTH_SUCCEED: &str = "InterpretHealthSucceed";
    /// Applying a workload to a member cluster failed.
    pub const SYNC_WORKLOAD_FAILED: &str = "SyncFailed";
    /// A workload was applied to a member cluster.
    pub const SYNC_WORKLOAD_SUCCEED: &str = "SyncSucceed";
    /// A Work's dispatching changed (suspended or resumed).
    pub const WORK_DISPATCHING: &str = "WorkDispatching";
    /// Cleaning up Works failed.
    pub const CLEANUP_WORK_FAILED: &str = "CleanupWorkFailed";
    /// Creating or updating Works for a binding failed.
    pub const SYNC_WORK_FAILED: &str = "SyncWorkFailed";
    /// Works for a binding were created or updated.
    pub const SYNC_WORK_SUCCEED: &str = "SyncWorkSucceed";
    /// Aggregating status into a template failed.
    pub const AGGREGATE_STATUS_FAILED: &str = "AggregateStatusFailed";
    /// Status was aggregated into a template.
    pub const AGGREGATE_STATUS_SUCCEED: &str = "AggregateStatusSucceed";
    /// Scheduling a binding failed.
    pub const SCHEDULE_BINDING_FAILED: &str = "ScheduleBindingFailed";
    /// A binding was scheduled.
    pub const SCHEDULE_BINDING_SUCCEED: &str = "ScheduleBindingSucceed";
    /// Evicting a workload from a cluster succeeded.
    pub const EVICT_WORKLOAD_FROM_CLUSTER_SUCCEED: &str = "EvictWorkloadFromClusterSucceed";
    /// Evicting a workload from a cluster failed.
    pub const EVICT_WORKLOAD_FROM_CLUSTER_FAILED: &str = "EvictWorkloadFromClusterFailed";
    /// Applying a propagation policy to a template failed.
    pub const APPLY_POLICY_FAILED: &str = "ApplyPolicyFailed";
    /// A propagation policy was applied to a template.
    pub const APPLY_POLICY_SUCCEED: &str = "ApplyPolicySucceed";
    /// Applying override policies failed.
    pub const APPLY_OVERRIDE_POLICY_FAILED: &str = "ApplyOverridePolicyFailed";
    /// Override policies were applied.
    pub const APPLY_OVERRIDE_POLICY_SUCCEED: &str = "ApplyOverridePolicySucceed";
    /// Interpreting a template's dependencies succeeded.
    pub const GET_DEPENDENCIES_SUCCEED: &str = "GetDependenciesSucceed";
    /// Interpreting a template's dependencies failed.
    pub const GET_DEPENDENCIES_FAILED: &str = "GetDependenciesFailed";
    /// Interpreting a template's components succeeded.
    pub const GET_COMPONENTS_SUCCEED: &str = "GetComponentsSucceed";
    /// Interpreting a template's components failed.
    pub const GET_COMPONENTS_FAILED: &str = "GetComponentsFailed";
    /// Interpreting a template's replicas succeeded.
    pub const GET_REPLICAS_SUCCEED: &str = "GetReplicasSucceed";
    /// Interpreting a template's replicas failed.
    pub const GET_REPLICAS_FAILED: &str = "GetReplicasFailed";
    /// A ResourceInterpreterCustomization's script failed to compile or run (on the
    /// customization itself). karmada-rs's own: Karmada rejects bad scripts at admission and
    /// reports failures only on the objects interpreted.
    pub const INTERPRETER_SCRIPT_FAILED: &str = "InterpreterScriptFailed";
    /// A ResourceInterpreterCustomization's script was stopped by its time or memory limit
    /// (on the customization). karmada-rs's own.
    pub const INTERPRETER_SCRIPT_LIMIT_EXCEEDED: &str = "InterpreterScriptLimitExceeded";
    /// A ResourceInterpreterCustomization's script kept overrunning its limits and is
    /// suspended: its calls fail at once until the customization changes (on the
    /// customization). karmada-rs's own.
    pub const INTERPRETER_SCRIPT_SUSPENDED: &str = "InterpreterScriptSuspended";
    /// A ResourceInterpreterCustomization defines an operation another customization of the
    /// same target kind defines too (on the customization; the first by name is used).
    /// karmada-rs's own: Karmada's webhook refuses the later one at admission.
    pub const INTERPRETER_CUSTOMIZATION_CONFLICT: &str = "InterpreterCustomizationConflict";
    /// A policy preempted a template.
    pub const PREEMPT_POLICY_SUCCEED: &str = "PreemptPolicySucceed";
    /// A policy failed to preempt a template.
    pub const PREEMPT_POLICY_FAILED: &str = "PreemptPolicyFailed";
    /// The Service derived from a ServiceImport was written.
    pub const SYNC_DERIVED_SERVICE_SUCCEED: &str = "SyncDerivedServiceSucceed";
    /// The Service derived from a ServiceImport could not be written.
    pub const SYNC_DERIVED_SERVICE_FAILED: &str = "SyncDerivedServiceFailed";
    /// A MultiClusterService's Service could not be propagated.
    pub const SYNC_SERVICE_FAILED: &str = "SyncServiceFailed";
    /// A MultiClusterService's Service was propagated.
    pub const SYNC_SERVICE_SUCCEED: &str = "SyncServiceSucceed";
    /// EndpointSlices could not be handed to a MultiClusterService's consumer clusters.
    pub const DISPATCH_ENDPOINT_SLICE_FAILED: &str = "DispatchEndpointSliceFailed";
    /// EndpointSlices were handed to a MultiClusterService's consumer clusters.
    pub const DISPATCH_ENDPOINT_SLICE_SUCCEED: &str = "DispatchEndpointSliceSucceed";
    /// A referenced cluster does not exist.
    pub const CLUSTER_NOT_FOUND: &str = "ClusterNotFound";
    /// The member cluster does not serve the resource's API.
    pub const API_INCOMPATIBLE: &str = "APIIncompatible";
}

// ---------------------------------------------------------------------------------------------
// Taints
// ---------------------------------------------------------------------------------------------

/// Taint key: the cluster is cordoned (unschedulable).
pub const TAINT_CLUSTER_UNSCHEDULABLE: &str = "cluster.karmada.io/unschedulable";
/// Taint key: the cluster's Ready condition is False (or missing).
pub const TAINT_CLUSTER_NOT_READY: &str = "cluster.karmada.io/not-ready";
/// Taint key: the cluster's Ready condition is Unknown.
pub const TAINT_CLUSTER_UNREACHABLE: &str = "cluster.karmada.io/unreachable";

// ---------------------------------------------------------------------------------------------
// Namespaces, prefixes and other names
// ---------------------------------------------------------------------------------------------

/// Reserved namespace of the Karmada control plane components.
pub const NAMESPACE_KARMADA_SYSTEM: &str = "karmada-system";
/// Reserved namespace holding Pull clusters' leases (`karmada-cluster/<cluster>`) and member-side
/// objects created by `karmadactl join`.
pub const NAMESPACE_KARMADA_CLUSTER: &str = "karmada-cluster";
/// The `default` namespace (never auto-propagated by the namespace controller).
pub const NAMESPACE_DEFAULT: &str = "default";
/// Prefix of execution namespaces: `karmada-es-<cluster>` holds that cluster's Works.
pub const EXECUTION_SPACE_PREFIX: &str = "karmada-es-";
/// Prefix of EndpointSlices collected from member clusters (`imported-<cluster>-<name>`).
pub const ENDPOINT_SLICE_PREFIX: &str = "imported";
/// Prefix of Services derived from ServiceImports (`derived-<name>`).
pub const DERIVED_SERVICE_PREFIX: &str = "derived";
/// Name of the default scheduler (default of `spec.schedulerName`).
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";
/// Name of the controller-manager (its leader-election Lease, events' reporting component).
pub const KARMADA_CONTROLLER_MANAGER_NAME: &str = "karmada-controller-manager";
/// The agent's component name (its User-Agent; its leader Lease is `karmada-agent-<cluster>`).
pub const KARMADA_AGENT_NAME: &str = "karmada-agent";

/// Cluster field names usable in field selectors and spread constraints.
pub const PROVIDER_FIELD: &str = "provider";
/// See [`PROVIDER_FIELD`].
pub const REGION_FIELD: &str = "region";
/// See [`PROVIDER_FIELD`].
pub const ZONE_FIELD: &str = "zone";
