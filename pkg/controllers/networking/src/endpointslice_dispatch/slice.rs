//! The EndpointSlice a consumer gets for one collected from a provider (Karmada's
//! `ensureEndpointSliceWork` manifest): renamed after its provider, labelled for the consumer's
//! Service and `endpointslice-dispatch-controller.karmada.io`, annotated with its provider.

use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karmada_apis::well_known::{
    ENDPOINT_SLICE_DISPATCH_CONTROLLER_LABEL_VALUE, ENDPOINT_SLICE_PROVISION_CLUSTER_ANNOTATION,
};
use karmada_controllers_common::collected_slices::{
    SERVICE_NAME_OF_SLICE_LABEL, SLICE_MANAGED_BY_LABEL,
};
use kube::ResourceExt;

/// The EndpointSlice dispatched to consumers for `collected`, provided by `provider`, exposing
/// `service`: renamed `<provider>-<name>`, with Karmada's labels and annotation, and no other
/// metadata of the provider's object.
pub fn dispatched_slice(collected: &EndpointSlice, provider: &str, service: &str) -> EndpointSlice {
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(format!("{provider}-{}", collected.name_any())),
            namespace: collected.metadata.namespace.clone(),
            labels: Some(
                [
                    (SERVICE_NAME_OF_SLICE_LABEL.to_owned(), service.to_owned()),
                    (
                        SLICE_MANAGED_BY_LABEL.to_owned(),
                        ENDPOINT_SLICE_DISPATCH_CONTROLLER_LABEL_VALUE.to_owned(),
                    ),
                ]
                .into(),
            ),
            annotations: Some(
                [(
                    ENDPOINT_SLICE_PROVISION_CLUSTER_ANNOTATION.to_owned(),
                    provider.to_owned(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        address_type: collected.address_type.clone(),
        endpoints: collected.endpoints.clone(),
        ports: collected.ports.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::discovery::v1::Endpoint;

    #[test]
    fn dispatched_slices_follow_karmada_naming() {
        let collected = EndpointSlice {
            metadata: ObjectMeta {
                name: Some("web-abc12".to_owned()),
                namespace: Some("default".to_owned()),
                labels: Some(
                    [(
                        SLICE_MANAGED_BY_LABEL.to_owned(),
                        "endpointslice-controller.k8s.io".to_owned(),
                    )]
                    .into(),
                ),
                uid: Some("u".to_owned()),
                ..Default::default()
            },
            address_type: "IPv4".to_owned(),
            endpoints: Some(vec![Endpoint {
                addresses: vec!["10.0.0.1".to_owned()],
                ..Default::default()
            }]),
            ports: None,
        };
        let s = dispatched_slice(&collected, "member1", "web");
        assert_eq!(s.metadata.name.as_deref(), Some("member1-web-abc12"));
        let labels = s.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels[SERVICE_NAME_OF_SLICE_LABEL], "web");
        assert_eq!(
            labels[SLICE_MANAGED_BY_LABEL],
            ENDPOINT_SLICE_DISPATCH_CONTROLLER_LABEL_VALUE
        );
        assert_eq!(
            s.metadata.annotations.unwrap_or_default()[ENDPOINT_SLICE_PROVISION_CLUSTER_ANNOTATION],
            "member1"
        );
        assert!(s.metadata.uid.is_none());
        assert_eq!(s.endpoints, collected.endpoints);
    }
}
