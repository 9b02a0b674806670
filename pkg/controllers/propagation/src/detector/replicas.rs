//! What a binding says about its template's replicas (Karmada's `applyReplicaInterpretation`):
//! its components under `MultiplePodTemplatesScheduling` when the kind has a component
//! interpretation, else its replicas and their requirements; and the checks Karmada's
//! ResourceBinding webhook makes on components, done here before the binding is written.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karmada_apis::well_known::event_reasons;
use karmada_apis::work::v1alpha2::Component;
use kube::api::DynamicObject;
use lariat::events::EventType;

use super::binding::ReplicaInfo;
use super::error::DetectorError;
use super::{Detector, FEATURE_MULTIPLE_POD_TEMPLATES_SCHEDULING, WatchedKind, template_reference};

impl Detector {
    /// What the binding says about the template's replicas (Karmada's `applyReplicaInterpretation`):
    /// with the `MultiplePodTemplatesScheduling` gate and a component interpretation for the kind
    /// (a customization's `componentResource`, a webhook's `InterpretComponent`, a third-party
    /// rule), its components and no replicas; otherwise its replicas and their requirements, if
    /// the kind has a replica interpretation. A failure is recorded on the template as a Warning
    /// Event (`GetComponentsFailed` / `GetReplicasFailed`).
    pub(super) async fn interpret_replicas(
        &self,
        w: &WatchedKind,
        obj: &DynamicObject,
        value: &serde_json::Value,
        namespace: &str,
    ) -> Result<ReplicaInfo, DetectorError> {
        let inner = &self.inner;
        let interpreter = &inner.interpreter;
        let interpreted = if inner
            .ctx
            .settings
            .feature_gates
            .enabled(FEATURE_MULTIPLE_POD_TEMPLATES_SCHEDULING)
            && let Some(components) = interpreter.get_components(value)
        {
            match components {
                Ok(mut components) => {
                    canonical_quantities(&mut components);
                    if let Some(why) = invalid_components(&components) {
                        return Err(DetectorError::InvalidComponents {
                            kind: w.ar.kind.clone(),
                            key: karmada_apis::names::namespaced_key(
                                namespace,
                                obj.metadata.name.as_deref().unwrap_or_default(),
                            ),
                            why,
                        });
                    }
                    Ok(ReplicaInfo {
                        components,
                        ..Default::default()
                    })
                }
                Err(e) => Err((
                    event_reasons::GET_COMPONENTS_FAILED,
                    DetectorError::Components(e),
                )),
            }
        } else {
            interpreter
                .get_replicas(value)
                .map(|r| {
                    r.map(|r| {
                        let mut requirements = r.requirements;
                        if let Some(req) = requirements.as_mut() {
                            canonical(&mut req.resource_request);
                        }
                        if interpreter.options().resource_quota_estimate
                            && let Some(req) = requirements.as_mut()
                            && req.namespace.is_empty()
                        {
                            req.namespace = namespace.to_owned();
                        }
                        ReplicaInfo {
                            replicas: r.replicas,
                            requirements,
                            components: Vec::new(),
                        }
                    })
                    .unwrap_or_default()
                })
                .map_err(|e| {
                    (
                        event_reasons::GET_REPLICAS_FAILED,
                        DetectorError::Replicas(e),
                    )
                })
        };
        match interpreted {
            Ok(info) => Ok(info),
            Err((reason, e)) => {
                inner
                    .recorder
                    .record(
                        &template_reference(obj, &w.ar),
                        EventType::Warning,
                        reason,
                        match &e {
                            DetectorError::Replicas(e) | DetectorError::Components(e) => {
                                e.to_string()
                            }
                            other => other.to_string(),
                        },
                    )
                    .await;
                Err(e)
            }
        }
    }
}

/// Writes the components' requests in apimachinery's canonical notation ([`canonical`]).
fn canonical_quantities(components: &mut [Component]) {
    for c in components {
        if let Some(requirements) = c.replica_requirements.as_mut() {
            canonical(&mut requirements.resource_request);
        }
    }
}

/// Writes requests in apimachinery's canonical notation (`0.1` becomes `100m`), as Karmada's binding
/// carries them: its interpreters answer `resource.Quantity` values, which print canonically, where
/// a script's or rule's number arrives here as written. A value that is no quantity stays as is.
fn canonical(requests: &mut BTreeMap<String, Quantity>) {
    for q in requests.values_mut() {
        if let Ok(parsed) = apimachinery::Quantity::parse(&q.0) {
            *q = parsed.to_k8s();
        }
    }
}

/// Why components cannot go into a binding (Karmada's ResourceBinding webhook, gate
/// `MultiplePodTemplatesScheduling`): each name must be non-empty and unique. The fields are
/// listed as apimachinery's field errors print, one alone or all in brackets.
fn invalid_components(components: &[Component]) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    let mut errors = Vec::new();
    for (i, c) in components.iter().enumerate() {
        let problem = if c.name.is_empty() {
            "component names must be non-empty"
        } else if !seen.insert(c.name.as_str()) {
            "component names must be unique"
        } else {
            continue;
        };
        errors.push(format!(
            "spec.components[{i}].name: Invalid value: {:?}: {problem}",
            c.name
        ));
    }
    match errors.len() {
        0 => None,
        1 => errors.pop(),
        _ => Some(format!("[{}]", errors.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_are_written_canonically() {
        let mut requests: BTreeMap<String, Quantity> = serde_json::from_value(
            json!({"cpu": "0.25", "memory": "67108864", "ephemeral-storage": "1e3", "gpu": "2000m", "odd": "x"}),
        )
        .unwrap();
        canonical(&mut requests);
        assert_eq!(
            serde_json::to_value(&requests).unwrap(),
            json!({"cpu": "250m", "memory": "67108864", "ephemeral-storage": "1e3", "gpu": "2", "odd": "x"})
        );
    }

    #[test]
    fn component_requests_are_written_canonically() {
        let mut components = vec![Component {
            name: "a".into(),
            replicas: 1,
            replica_requirements: Some(
                serde_json::from_value(json!({"resourceRequest": {
                    "cpu": "1", "memory": "0.1", "nvidia.com/gpu": "2000m", "odd": "x"}}))
                .unwrap(),
            ),
        }];
        canonical_quantities(&mut components);
        let written = serde_json::to_value(&components[0]).unwrap();
        assert_eq!(
            written["replicaRequirements"]["resourceRequest"],
            json!({"cpu": "1", "memory": "100m", "nvidia.com/gpu": "2", "odd": "x"})
        );
    }

    /// Karmada's ResourceBinding webhook refuses empty and repeated component names, listing
    /// every bad field.
    #[test]
    fn component_names_must_be_set_and_unique() {
        let named = |names: &[&str]| -> Vec<Component> {
            names
                .iter()
                .map(|n| Component {
                    name: (*n).to_owned(),
                    replicas: 1,
                    replica_requirements: None,
                })
                .collect()
        };
        assert_eq!(invalid_components(&[]), None);
        assert_eq!(
            invalid_components(&named(&["jobmanager", "taskmanager"])),
            None
        );
        assert_eq!(
            invalid_components(&named(&["a", ""])).as_deref(),
            Some(
                r#"spec.components[1].name: Invalid value: "": component names must be non-empty"#
            )
        );
        assert_eq!(
            invalid_components(&named(&["", "a", "a"])).as_deref(),
            Some(
                r#"[spec.components[0].name: Invalid value: "": component names must be non-empty, spec.components[2].name: Invalid value: "a": component names must be unique]"#
            )
        );
    }
}
