//! The interface ResourceBinding and ClusterResourceBinding share, for the controllers that handle
//! both kinds alike.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karmada_apis::work::v1alpha2::ResourceBindingSpec;

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
