//! The interface ResourceBinding and ClusterResourceBinding share, for the controllers that handle
//! both kinds alike.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karmada_apis::work::v1alpha2::ResourceBindingSpec;

/// Feature gate: bindings carry the KubePriorityClass value of their policy (the detector), and
/// bindings of a higher `spec.schedulePriority` are scheduled first (the scheduler).
pub const FEATURE_PRIORITY_BASED_SCHEDULING: &str = "PriorityBasedScheduling";

/// Feature gate: bindings carry their workload affinity groups (the detector), and the scheduler
/// keeps the bindings of an affinity group together and of an anti-affinity group apart.
pub const FEATURE_WORKLOAD_AFFINITY: &str = "WorkloadAffinity";

/// Feature gate: bindings of kinds with a component interpretation (InterpretComponent) carry
/// `spec.components` instead of `replicas`/`replicaRequirements` (the detector), and a binding of
/// two or more components placed on exactly one cluster is estimated in whole component sets (the
/// scheduler).
pub const FEATURE_MULTIPLE_POD_TEMPLATES_SCHEDULING: &str = "MultiplePodTemplatesScheduling";

/// What the detector and the scheduler need from ResourceBinding and ClusterResourceBinding.
pub trait BindingObject:
    kube::Resource<DynamicType = ()>
    + Clone
    + std::fmt::Debug
    + serde::Serialize
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The permanent-id label of this kind (assigned by us, as Karmada's webhook does).
    const ID_LABEL: &'static str;

    /// A new object from metadata and spec.
    fn from_parts(meta: ObjectMeta, spec: ResourceBindingSpec) -> Self;
    /// The spec.
    fn binding_spec(&self) -> &ResourceBindingSpec;
    /// Metadata and spec, mutably.
    fn parts_mut(&mut self) -> (&mut ObjectMeta, &mut ResourceBindingSpec);
    /// The status.
    fn binding_status(&self) -> Option<&karmada_apis::ResourceBindingStatus>;
    /// The API of this kind in `namespace` (ignored for cluster-scoped kinds).
    fn api(client: kube::Client, namespace: &str) -> kube::Api<Self>;
}

impl BindingObject for karmada_apis::ResourceBinding {
    const ID_LABEL: &'static str = karmada_apis::well_known::RESOURCE_BINDING_PERMANENT_ID_LABEL;

    fn from_parts(meta: ObjectMeta, spec: ResourceBindingSpec) -> Self {
        let mut b =
            karmada_apis::ResourceBinding::new(meta.name.as_deref().unwrap_or_default(), spec);
        b.metadata = meta;
        b
    }
    fn binding_spec(&self) -> &ResourceBindingSpec {
        &self.spec
    }
    fn parts_mut(&mut self) -> (&mut ObjectMeta, &mut ResourceBindingSpec) {
        (&mut self.metadata, &mut self.spec)
    }
    fn binding_status(&self) -> Option<&karmada_apis::ResourceBindingStatus> {
        self.status.as_ref()
    }
    fn api(client: kube::Client, namespace: &str) -> kube::Api<Self> {
        kube::Api::namespaced(client, namespace)
    }
}

impl BindingObject for karmada_apis::ClusterResourceBinding {
    const ID_LABEL: &'static str =
        karmada_apis::well_known::CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL;

    fn from_parts(meta: ObjectMeta, spec: ResourceBindingSpec) -> Self {
        let mut b = karmada_apis::ClusterResourceBinding::new(
            meta.name.as_deref().unwrap_or_default(),
            spec,
        );
        b.metadata = meta;
        b
    }
    fn binding_spec(&self) -> &ResourceBindingSpec {
        &self.spec
    }
    fn parts_mut(&mut self) -> (&mut ObjectMeta, &mut ResourceBindingSpec) {
        (&mut self.metadata, &mut self.spec)
    }
    fn binding_status(&self) -> Option<&karmada_apis::ResourceBindingStatus> {
        self.status.as_ref()
    }
    fn api(client: kube::Client, _namespace: &str) -> kube::Api<Self> {
        kube::Api::all(client)
    }
}

/// Records the outcome of evicting `binding` from `cluster` on the binding and on its resource
/// template (Karmada's `EmitClusterEvictionEventForResourceBinding` and its ClusterResourceBinding
/// twin): `EvictWorkloadFromClusterSucceed` or, Warning, `EvictWorkloadFromClusterFailed`.
pub async fn record_cluster_eviction<B: BindingObject>(
    events: &lariat::events::EventRecorder,
    binding: &B,
    cluster: &str,
    ok: bool,
) {
    use karmada_apis::well_known::event_reasons;
    use lariat::events::{EventType, reference_of};
    let resource = &binding.binding_spec().resource;
    let template = k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some(resource.api_version.clone()),
        kind: Some(resource.kind.clone()),
        namespace: (!resource.namespace.is_empty()).then(|| resource.namespace.clone()),
        name: Some(resource.name.clone()),
        uid: (!resource.uid.is_empty()).then(|| resource.uid.clone()),
        ..Default::default()
    };
    let (type_, reason, message) = if ok {
        (
            EventType::Normal,
            event_reasons::EVICT_WORKLOAD_FROM_CLUSTER_SUCCEED,
            format!("Evict from cluster {cluster} succeed."),
        )
    } else {
        (
            EventType::Warning,
            event_reasons::EVICT_WORKLOAD_FROM_CLUSTER_FAILED,
            format!("Evict from cluster {cluster} failed."),
        )
    };
    for target in [reference_of(binding), template] {
        events.record(&target, type_, reason, message.clone()).await;
    }
}
