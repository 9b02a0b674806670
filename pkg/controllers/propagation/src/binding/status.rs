//! What a sync tells the user: Events on the binding and its template, and the conditions
//! ([`super::CONDITION_OVERRIDE_APPLIED`], [`super::CONDITION_WORKS_SYNCED`]) written only once
//! something failed.

use apimachinery::{ConflictRetry, DEFAULT_RETRY, find_status_condition, is_conflict};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use karmada_apis::well_known::event_reasons;
use karmada_apis::work::v1alpha2::ResourceBindingSpec;
use karmada_controllers_common::binding::BindingObject;
use kube::ResourceExt;
use kube::api::PostParams;
use lariat::events::EventType;
use serde_json::json;

use super::sync::Synced;
use super::works::WorksSynced;
use super::{
    BindingController, CONDITION_OVERRIDE_APPLIED, CONDITION_WORKS_SYNCED, REASON_WORK_TOO_LARGE,
};

pub(super) fn template_reference(spec: &ResourceBindingSpec) -> ObjectReference {
    let r = &spec.resource;
    ObjectReference {
        api_version: Some(r.api_version.clone()),
        kind: Some(r.kind.clone()),
        namespace: (!r.namespace.is_empty()).then(|| r.namespace.clone()),
        name: Some(r.name.clone()),
        uid: (!r.uid.is_empty()).then(|| r.uid.clone()),
        resource_version: None,
        field_path: None,
    }
}

pub(super) fn binding_reference<B: BindingObject>(b: &B) -> ObjectReference {
    lariat::events::reference_of(b)
}

impl BindingController {
    pub(super) async fn event_binding<B: BindingObject>(
        &self,
        b: &B,
        t: EventType,
        reason: &str,
        msg: String,
    ) {
        self.inner
            .recorder
            .record(&binding_reference(b), t, reason, msg)
            .await;
    }

    /// An Event on the binding and one on its template (Karmada records both).
    pub(super) async fn event_both<B: BindingObject>(
        &self,
        b: &B,
        t: EventType,
        reason: &str,
        msg: String,
    ) {
        self.inner
            .recorder
            .record(&binding_reference(b), t, reason, msg.clone())
            .await;
        self.inner
            .recorder
            .record(&template_reference(b.binding_spec()), t, reason, msg)
            .await;
    }

    /// Records what a sync refused (overrides that do not apply, Works too large to store) as
    /// Events and conditions, and clears the conditions of failures that are gone.
    pub(super) async fn record_refusals<B: BindingObject>(
        &self,
        b: &B,
        synced: &WorksSynced,
    ) -> Synced {
        let mut refused = Vec::new();
        if synced.override_failures.is_empty() {
            self.set_failure_condition(b, &OVERRIDE_CONDITION, None)
                .await;
        } else {
            let msg = synced.override_failures.join("; ");
            self.event_both(
                b,
                EventType::Warning,
                event_reasons::SYNC_WORK_FAILED,
                msg.clone(),
            )
            .await;
            self.event_binding(
                b,
                EventType::Warning,
                event_reasons::APPLY_OVERRIDE_POLICY_FAILED,
                msg.clone(),
            )
            .await;
            self.set_failure_condition(b, &OVERRIDE_CONDITION, Some(&msg))
                .await;
            refused.push(msg);
        }
        if synced.too_large.is_empty() {
            self.set_failure_condition(b, &SIZE_CONDITION, None).await;
        } else {
            let msg = synced.too_large.join("; ");
            self.event_both(
                b,
                EventType::Warning,
                event_reasons::SYNC_WORK_FAILED,
                msg.clone(),
            )
            .await;
            self.set_failure_condition(b, &SIZE_CONDITION, Some(&msg))
                .await;
            refused.push(msg);
        }
        if refused.is_empty() {
            Synced::Done
        } else {
            Synced::Refused(refused.join("; "))
        }
    }

    /// Sets the condition `c` to False with `failure`, or to True when it exists and the failure
    /// is gone (a binding that never failed carries no such condition, so success costs no
    /// write). Failures to write are logged.
    pub(super) async fn set_failure_condition<B: BindingObject>(
        &self,
        b: &B,
        c: &FailureCondition,
        failure: Option<&str>,
    ) {
        let existing = b
            .binding_status()
            .and_then(|s| find_status_condition(&s.conditions, c.type_));
        let (status, reason, message) = match failure {
            Some(m) => ("False", c.failed, m.to_owned()),
            None => {
                if existing.is_none_or(|x| x.status == "True") {
                    return;
                }
                ("True", c.recovered, c.recovered_message.to_owned())
            }
        };
        if existing
            .is_some_and(|x| x.status == status && x.reason == reason && x.message == message)
        {
            return;
        }
        let condition_type = c.type_;
        let ns = b.namespace().unwrap_or_default();
        let name = b.name_any();
        let api = B::api(self.inner.client.clone(), &ns);
        let mut retry = ConflictRetry::new(DEFAULT_RETRY);
        while retry.next().await {
            let current = match api.get(&name).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(namespace = %ns, name = %name, error = %e, "cannot read binding to set condition");
                    return;
                }
            };
            let Ok(mut v) = serde_json::to_value(&current) else {
                return;
            };
            let mut conditions: Vec<Condition> = v
                .pointer("/status/conditions")
                .and_then(|c| serde_json::from_value(c.clone()).ok())
                .unwrap_or_default();
            let now = Time(Timestamp::now());
            let new = Condition {
                type_: condition_type.to_owned(),
                status: status.to_owned(),
                reason: reason.to_owned(),
                message: message.clone(),
                last_transition_time: now,
                observed_generation: current.meta().generation,
            };
            karmada_controllers_common::set_condition(&mut conditions, new);
            let Ok(cv) = serde_json::to_value(&conditions) else {
                return;
            };
            if let Some(obj) = v.as_object_mut() {
                let status = obj.entry("status").or_insert_with(|| json!({}));
                if let Some(s) = status.as_object_mut() {
                    s.insert("conditions".to_owned(), cv);
                }
            }
            let Ok(updated) = serde_json::from_value::<B>(v) else {
                return;
            };
            match api
                .replace_status(&name, &PostParams::default(), &updated)
                .await
            {
                Ok(_) => return,
                Err(e) if is_conflict(&e) => continue,
                Err(e) => {
                    tracing::warn!(namespace = %ns, name = %name, error = %e, "cannot set binding condition");
                    return;
                }
            }
        }
    }
}

/// A binding condition that is only written once something failed: `False` with reason `failed`,
/// then `True` with `recovered` once the failure is gone.
pub(super) struct FailureCondition {
    pub(super) type_: &'static str,
    pub(super) failed: &'static str,
    pub(super) recovered: &'static str,
    pub(super) recovered_message: &'static str,
}

const OVERRIDE_CONDITION: FailureCondition = FailureCondition {
    type_: CONDITION_OVERRIDE_APPLIED,
    failed: event_reasons::APPLY_OVERRIDE_POLICY_FAILED,
    recovered: event_reasons::APPLY_OVERRIDE_POLICY_SUCCEED,
    recovered_message: "Override policies have been applied to every target cluster.",
};

const SIZE_CONDITION: FailureCondition = FailureCondition {
    type_: CONDITION_WORKS_SYNCED,
    failed: REASON_WORK_TOO_LARGE,
    recovered: event_reasons::SYNC_WORK_SUCCEED,
    recovered_message: "Every Work has been stored.",
};
