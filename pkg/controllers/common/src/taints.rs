//! Cluster taints as Karmada writes them in Event messages.

/// Karmada's event text for a cluster's taints (`TaintClusterSucceed`).
pub fn taints_message(taints: &[k8s_openapi::api::core::v1::Taint]) -> String {
    if taints.is_empty() {
        return "cluster now does not have taints".to_string();
    }
    let parts: Vec<String> = taints
        .iter()
        .map(|t| match t.value.as_deref().filter(|v| !v.is_empty()) {
            Some(v) => format!("{{Key:{},Value:{v},Effect:{}}}", t.key, t.effect),
            None => format!("{{Key:{},Effect:{}}}", t.key, t.effect),
        })
        .collect();
    format!("cluster now has taints([{}])", parts.join(","))
}
