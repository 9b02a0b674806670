//! What a rollout step depends on: the template (from the control plane's cache, else the API
//! server), the strategy that selects it, the binding's clusters and their labels, and each
//! cluster's report of the target revision (its Work).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use karmada_apis::ResourceBinding;
use karmada_apis::names::{execution_space_name, namespaced_key, work_name};
use karmada_apis::rollout::RolloutStrategy;
use karmada_apis::well_known::WORK_APPLIED;
use karmada_apis::work::v1alpha1::ResourceHealth;
use karmada_controllers_common::error::framework;
use karmada_controllers_common::rollout::{REVISION_ANNOTATION, template_content};
use karmada_controllers_common::template;
use karmada_policy::ResourceRef;
use karmada_policy::matching::defaulted_selectors;
use karmada_policy::selector::resource_matches_selectors;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject};
use serde_json::Value;

use super::RolloutController;
use super::error::{RolloutError, api_err};
use super::progress::{Health, Observation};

impl RolloutController {
    /// The binding's template, `None` when it is gone.
    pub(super) async fn fetch_template(
        &self,
        b: &ResourceBinding,
    ) -> Result<Option<Value>, RolloutError> {
        let r = &b.spec.resource;
        let gvk = apimachinery::gvk_of(&r.api_version, &r.kind);
        let what = format!("{} {}", r.kind, namespaced_key(&r.namespace, &r.name));
        let cp = &self.inner.ctx.control_plane;
        let (ar, _) = cp
            .clients()
            .resolve(&gvk)
            .await
            .map_err(framework(format!("map {} {}", r.api_version, r.kind)))?;
        let object = match template::cached(cp, &ar, &r.namespace, &r.name, &r.resource_version) {
            Some(o) => Some(o),
            None => {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(self.inner.client.clone(), &r.namespace, &ar);
                api.get_opt(&r.name)
                    .await
                    .map_err(api_err("get", what.clone()))?
            }
        };
        object
            .map(|o| serde_json::to_value(&o))
            .transpose()
            .map_err(|source| RolloutError::Encode { what, source })
    }

    /// The strategy of the template's namespace that selects it (the first by name).
    pub(super) fn strategy_for(
        &self,
        b: &ResourceBinding,
        template: &Value,
    ) -> Option<Arc<RolloutStrategy>> {
        let r = &b.spec.resource;
        let labels: BTreeMap<String, String> = template
            .pointer("/metadata/labels")
            .and_then(|l| serde_json::from_value(l.clone()).ok())
            .unwrap_or_default();
        let resource = ResourceRef {
            api_version: &r.api_version,
            kind: &r.kind,
            namespace: &r.namespace,
            name: &r.name,
            labels: &labels,
        };
        let mut matching: Vec<Arc<RolloutStrategy>> = self
            .inner
            .strategies
            .store()
            .list()
            .into_iter()
            .filter(|s| {
                s.metadata.deletion_timestamp.is_none()
                    && s.metadata.namespace.as_deref() == Some(r.namespace.as_str())
                    && resource_matches_selectors(
                        resource,
                        &defaulted_selectors(&s.spec.resource_selectors, &r.namespace),
                    )
            })
            .collect();
        matching.sort_by_key(|s| s.name_any());
        matching.into_iter().next()
    }

    /// The observation of binding `b` for the template revision `revision`: its clusters, their
    /// labels, and each one's report of that revision (the one being rolled out).
    pub(super) fn observe(
        &self,
        b: &ResourceBinding,
        template: &Value,
        revision: &str,
    ) -> Observation {
        let mut seen = BTreeSet::new();
        let targets: Vec<String> = b
            .spec
            .clusters
            .iter()
            .chain(b.spec.required_by.iter().flat_map(|r| r.clusters.iter()))
            .filter(|c| seen.insert(c.name.clone()))
            .map(|c| c.name.clone())
            .collect();
        let clusters = self.inner.clusters.store();
        let labels = targets
            .iter()
            .map(|c| {
                let l = clusters
                    .get_named(None, c)
                    .map(|c| c.labels().clone())
                    .unwrap_or_default();
                (c.clone(), l)
            })
            .collect();
        let health = targets
            .iter()
            .map(|c| (c.clone(), self.health(b, c, revision)))
            .collect();
        Observation {
            revision: revision.to_owned(),
            content: template_content(template),
            targets,
            labels,
            health,
            now: k8s_openapi::jiff::Timestamp::now(),
        }
    }

    /// How cluster `cluster` reports revision `target`: its Work must carry it, applied, with the
    /// workload's health reported `Healthy`.
    fn health(&self, b: &ResourceBinding, cluster: &str, target: &str) -> Health {
        let r = &b.spec.resource;
        let Some(work) = self.inner.works.store().get_named(
            Some(&execution_space_name(cluster)),
            &work_name(&r.kind, &r.name, &r.namespace),
        ) else {
            return Health::NotApplied;
        };
        if work
            .annotations()
            .get(REVISION_ANNOTATION)
            .map(String::as_str)
            != Some(target)
        {
            return Health::NotApplied;
        }
        let Some(status) = work.status.as_ref() else {
            return Health::NotApplied;
        };
        let applied = status
            .conditions
            .iter()
            .any(|c| c.type_ == WORK_APPLIED && c.status == "True");
        if !applied {
            return Health::NotApplied;
        }
        let healthy = !status.manifest_statuses.is_empty()
            && status
                .manifest_statuses
                .iter()
                .all(|m| m.health == Some(ResourceHealth::Healthy));
        if healthy {
            Health::Healthy
        } else {
            Health::Unhealthy
        }
    }
}
