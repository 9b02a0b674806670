//! What the policy handlers and the template handler need of a PropagationPolicy and a
//! ClusterPropagationPolicy, so that one path serves both. Its own module so that `policy` and
//! `template` (which adopts templates for a policy) both use it without importing each other.

use karmada_apis::policy::v1alpha1::{PropagationSpec, ResourceSelector};
use karmada_apis::{ClusterPropagationPolicy, PropagationPolicy};
use karmada_policy::matching::defaulted_selectors;
use kube::api::Api;
use kube::{Resource, ResourceExt};

use super::claim::PolicyKind;

/// PropagationPolicy or ClusterPropagationPolicy: what the policy handlers need of each, so that
/// one path serves both.
pub(crate) trait PolicyObject:
    Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug
{
    /// Which of the two kinds this is.
    const KIND: PolicyKind;
    /// Prefix of the policy's key in the handled-generation memo.
    const MEMO_PREFIX: &'static str;

    /// The API of the policy's kind (`namespace` is ignored for the cluster-scoped one).
    fn api(client: kube::Client, namespace: &str) -> Api<Self>;

    /// The spec, which both kinds share.
    fn spec(&self) -> &PropagationSpec;

    /// The resource selectors as they are matched: a PropagationPolicy's only select in its own
    /// namespace.
    fn selectors(&self) -> Vec<ResourceSelector>;
}

impl PolicyObject for PropagationPolicy {
    const KIND: PolicyKind = PolicyKind::PropagationPolicy;
    const MEMO_PREFIX: &'static str = "pp";

    fn api(client: kube::Client, namespace: &str) -> Api<Self> {
        Api::namespaced(client, namespace)
    }

    fn spec(&self) -> &PropagationSpec {
        &self.spec
    }

    fn selectors(&self) -> Vec<ResourceSelector> {
        defaulted_selectors(
            &self.spec.resource_selectors,
            &self.namespace().unwrap_or_default(),
        )
    }
}

impl PolicyObject for ClusterPropagationPolicy {
    const KIND: PolicyKind = PolicyKind::ClusterPropagationPolicy;
    const MEMO_PREFIX: &'static str = "cpp";

    fn api(client: kube::Client, _namespace: &str) -> Api<Self> {
        Api::all(client)
    }

    fn spec(&self) -> &PropagationSpec {
        &self.spec
    }

    fn selectors(&self) -> Vec<ResourceSelector> {
        self.spec.resource_selectors.clone()
    }
}
