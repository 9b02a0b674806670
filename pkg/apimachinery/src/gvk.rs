//! Group, version and kind from an object's `apiVersion` and `kind`.

#[cfg(feature = "client")]
use kube::api::GroupVersionKind;

/// Splits `group/version` into group and version; a bare `version` (the core group) has an
/// empty group.
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

#[cfg(feature = "client")]
/// The GVK of `apiVersion` and `kind` (apimachinery's `schema.FromAPIVersionAndKind` for
/// well-formed values).
pub fn gvk_of(api_version: &str, kind: &str) -> GroupVersionKind {
    let (group, version) = split_api_version(api_version);
    GroupVersionKind::gvk(group, version, kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_group_and_version() {
        assert_eq!(split_api_version("apps/v1"), ("apps", "v1"));
        assert_eq!(split_api_version("v1"), ("", "v1"));
    }

    #[cfg(feature = "client")]
    #[test]
    fn gvk_of_splits_the_api_version() {
        let gvk = gvk_of("policy.karmada.io/v1alpha1", "PropagationPolicy");
        assert_eq!(
            (gvk.group.as_str(), gvk.version.as_str()),
            ("policy.karmada.io", "v1alpha1")
        );
        assert_eq!(gvk_of("v1", "ConfigMap").group, "");
    }
}
