//! Lazy activation (`activationPreference: Lazy`): a Lazy policy's changes reach a template's
//! binding only when the template itself next changes, as in Karmada's detector.
//!
//! Karmada tags each queued template with whether Karmada caused the change (a policy change, or
//! only Karmada's own labels and annotations changed on the template); a Lazy policy then claims
//! the template but leaves its binding as it is. Here the detector remembers, per template, a
//! fingerprint of what users own ([`user_fingerprint`]: everything but status, server-set metadata
//! and the labels and annotations with `.karmada.io` in their key other than
//! `namespace.karmada.io/skip-auto-propagation`). A template whose fingerprint differs from the
//! last one seen has a *user change pending* until a reconcile of it completes; only then does a
//! Lazy policy write the binding. A template seen for the first time counts as changed, so a
//! restart, like Karmada's initial list, applies the current policy.

use std::collections::HashMap;

use karmada_apis::policy::v1alpha1::{ActivationPreference, PropagationSpec};
use karmada_apis::well_known::NAMESPACE_SKIP_AUTO_PROPAGATION_LABEL;
use kube::api::DynamicObject;
use parking_lot::Mutex;
use serde_json::Value;

use super::TemplateRef;
use super::fingerprint::fingerprint_value;

/// The part of a label or annotation key that marks it as Karmada's.
const KARMADA_KEY_PART: &str = ".karmada.io";

/// Whether a policy defers its changes to the templates' next change.
pub(crate) fn is_lazy(spec: &PropagationSpec) -> bool {
    spec.activation_preference == Some(ActivationPreference::Lazy)
}

/// A fingerprint of what users own in a template (see the module docs).
pub(crate) fn user_fingerprint(obj: &DynamicObject) -> u64 {
    let Ok(mut value) = serde_json::to_value(obj) else {
        return 0; // cannot happen for a DynamicObject
    };
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("generation");
        for field in ["labels", "annotations"] {
            let Some(map) = meta.get_mut(field).and_then(Value::as_object_mut) else {
                continue;
            };
            map.retain(|k, _| {
                !k.contains(KARMADA_KEY_PART)
                    || (field == "labels" && k == NAMESPACE_SKIP_AUTO_PROPAGATION_LABEL)
            });
            if map.is_empty() {
                meta.remove(field);
            }
        }
    }
    fingerprint_value(&mut value)
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    fingerprint: u64,
    user_change_pending: bool,
}

/// What the detector remembers for lazy activation: per template, the last user fingerprint and
/// whether a user change is still to be reconciled.
#[derive(Debug, Default)]
pub(crate) struct LazyActivation {
    seen: Mutex<HashMap<TemplateRef, Seen>>,
}

impl LazyActivation {
    /// Notes the template as it is about to be reconciled: a new user fingerprint (or a template
    /// not seen before) makes a user change pending.
    pub(crate) fn observe(&self, t: &TemplateRef, obj: &DynamicObject) {
        let fingerprint = user_fingerprint(obj);
        let mut seen = self.seen.lock();
        let entry = seen.entry(t.clone()).or_insert(Seen {
            fingerprint,
            user_change_pending: true,
        });
        if entry.fingerprint != fingerprint {
            entry.fingerprint = fingerprint;
            entry.user_change_pending = true;
        }
    }

    /// Whether a user change of the template is still to be reconciled (a Lazy policy writes the
    /// binding only then).
    pub(crate) fn user_change_pending(&self, t: &TemplateRef) -> bool {
        self.seen
            .lock()
            .get(t)
            .is_none_or(|s| s.user_change_pending)
    }

    /// A reconcile of the template completed: its user change, if any, is handled.
    pub(crate) fn settled(&self, t: &TemplateRef) {
        if let Some(s) = self.seen.lock().get_mut(t) {
            s.user_change_pending = false;
        }
    }

    /// The template is gone.
    pub(crate) fn forget(&self, t: &TemplateRef) {
        self.seen.lock().remove(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    fn deploy(labels: Value, annotations: Value, replicas: i64) -> DynamicObject {
        object(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "a", "namespace": "ns", "labels": labels,
                "annotations": annotations, "generation": replicas, "resourceVersion": "9"},
            "spec": {"replicas": replicas}, "status": {"readyReplicas": 1}}))
    }

    #[test]
    fn karmada_labels_annotations_and_generation_are_not_user_changes() {
        let plain = deploy(json!({"app": "a"}), json!({}), 1);
        let claimed = deploy(
            json!({"app": "a", "propagationpolicy.karmada.io/permanent-id": "x"}),
            json!({"propagationpolicy.karmada.io/name": "p"}),
            1,
        );
        assert_eq!(user_fingerprint(&plain), user_fingerprint(&claimed));
        let scaled = deploy(json!({"app": "a"}), json!({}), 2);
        assert_ne!(user_fingerprint(&plain), user_fingerprint(&scaled));
        let skip = deploy(
            json!({"app": "a", NAMESPACE_SKIP_AUTO_PROPAGATION_LABEL: "true"}),
            json!({}),
            1,
        );
        assert_ne!(user_fingerprint(&plain), user_fingerprint(&skip));
    }

    #[test]
    fn a_user_change_stays_pending_until_a_reconcile_settles_it() {
        let lazy = LazyActivation::default();
        let t = TemplateRef {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespace: "ns".into(),
            name: "a".into(),
        };
        assert!(lazy.user_change_pending(&t), "never seen: applies");
        let v1 = deploy(json!({}), json!({}), 1);
        lazy.observe(&t, &v1);
        assert!(lazy.user_change_pending(&t));
        lazy.settled(&t);
        // A policy change re-queues the same template: nothing pending.
        lazy.observe(&t, &v1);
        assert!(!lazy.user_change_pending(&t));
        // A failed reconcile leaves the change pending for the retry.
        lazy.observe(&t, &deploy(json!({}), json!({}), 2));
        assert!(lazy.user_change_pending(&t));
        lazy.observe(&t, &deploy(json!({}), json!({}), 2));
        assert!(lazy.user_change_pending(&t));
        lazy.settled(&t);
        assert!(!lazy.user_change_pending(&t));
        lazy.forget(&t);
        assert!(lazy.user_change_pending(&t));
    }
}
