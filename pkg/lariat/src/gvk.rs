//! Group/kind naming helpers shared by the factories.

use kube::api::GroupVersionKind;

/// `Kind.group` (or `Kind` for the core group): controller-runtime's `GroupKind.String()`, the key
/// form of per-GroupKind worker and scope settings.
pub fn group_kind_string(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

/// `group/version, Kind=kind`, as Kubernetes prints a GVK.
pub fn gvk_string(gvk: &GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        format!("{}, Kind={}", gvk.version, gvk.kind)
    } else {
        format!("{}/{}, Kind={}", gvk.group, gvk.version, gvk.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(group_kind_string("apps", "Deployment"), "Deployment.apps");
        assert_eq!(group_kind_string("", "ConfigMap"), "ConfigMap");
        assert_eq!(
            gvk_string(&GroupVersionKind::gvk("", "v1", "Pod")),
            "v1, Kind=Pod"
        );
        assert_eq!(
            gvk_string(&GroupVersionKind::gvk("apps", "v1", "Deployment")),
            "apps/v1, Kind=Deployment"
        );
    }
}
