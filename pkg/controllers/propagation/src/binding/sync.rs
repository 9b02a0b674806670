//! One binding's sync: Works of clusters no longer targeted deleted, the template read, a Work
//! written per target cluster ([`super::works`]) and the outcome reported ([`super::status`]).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use karmada_apis::Work;
use karmada_apis::names::cluster_name;
use karmada_apis::well_known::event_reasons;
use karmada_apis::work::v1alpha2::ResourceBindingSpec;
use karmada_controllers_common::binding::BindingObject;
use karmada_controllers_common::error::framework;
use karmada_controllers_common::metrics;
use karmada_controllers_common::template;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject};
use lariat::events::EventType;
use serde_json::Value;

use super::clusters::{directly_purged_clusters, existing_clusters, target_clusters};
use super::error::{BindingError, api_err};
use super::works::WorksSynced;
use super::{BindingController, DIRECT_PURGE_REQUEUE};

/// Result of one binding sync.
pub(super) enum Synced {
    /// Done.
    Done,
    /// Look again later (Works being purged).
    Later(Duration),
    /// Only failures retrying cannot fix (overrides that do not apply, Works too large to
    /// store): recorded on the binding, not retried on a timer; a change of the binding, its
    /// template or an override policy brings it back.
    Refused(String),
}

impl BindingController {
    /// Syncs the Works of binding `b` (memo key `mkey`).
    pub(super) async fn sync<B: BindingObject>(
        &self,
        b: &B,
        mkey: &str,
    ) -> Result<Synced, BindingError> {
        let spec = b.binding_spec();
        let keep = existing_clusters(spec);
        let purged = directly_purged_clusters(spec);
        let works = self.works_to_reconcile(b, mkey, &keep, &purged).await?;
        for w in &works {
            let cluster = cluster_name(w.metadata.namespace.as_deref().unwrap_or_default())
                .unwrap_or_default();
            if !keep.contains(cluster) {
                tracing::info!(kind = %B::kind(&()), namespace = b.namespace().unwrap_or_default(), name = %b.name_any(), cluster, work = %w.name_any(), "deleting work of a cluster no longer targeted");
                if let Err(e) = self.delete_work(w).await {
                    self.event_binding(
                        b,
                        EventType::Warning,
                        event_reasons::CLEANUP_WORK_FAILED,
                        e.to_string(),
                    )
                    .await;
                    return Err(e);
                }
            }
        }
        if works.iter().any(|w| {
            cluster_name(w.metadata.namespace.as_deref().unwrap_or_default())
                .is_ok_and(|c| purged.contains(c))
        }) {
            return Ok(Synced::Later(DIRECT_PURGE_REQUEUE));
        }
        let started = Instant::now();
        // A binding not scheduled yet (or placed nowhere) has no Work to write: its template is
        // not read.
        let result = if target_clusters(spec).is_empty() {
            Ok(WorksSynced::default())
        } else {
            let Some(template) = self.fetch_template(spec).await? else {
                // The template is gone; the binding follows it (garbage collector or detector).
                return Ok(Synced::Done);
            };
            self.ensure_works(b, mkey, &template).await
        };
        let ok =
            matches!(result, Ok(ref s) if s.override_failures.is_empty() && s.too_large.is_empty());
        metrics::observe_sync_work(ok, started);
        let ns = b.namespace().unwrap_or_default();
        let synced = match result {
            Ok(synced) => synced,
            Err(e) => {
                self.event_both(
                    b,
                    EventType::Warning,
                    event_reasons::SYNC_WORK_FAILED,
                    e.to_string(),
                )
                .await;
                return Err(e);
            }
        };
        if ok {
            // Announced when a Work was written: a sync that found every Work up to date (a
            // restart, a status-only change) leaves no Event behind, so it costs no write.
            if synced.written > 0 {
                let msg = format!(
                    "Sync work of {}({}) successful.",
                    B::kind(&()),
                    karmada_apis::names::namespaced_key(&ns, &b.name_any())
                );
                self.event_both(b, EventType::Normal, event_reasons::SYNC_WORK_SUCCEED, msg)
                    .await;
            }
        }
        Ok(self.record_refusals(b, &synced).await)
    }

    /// The Works of a binding for a sync that keeps the Works of `keep` and waits for those of
    /// `purged` to go: from the Work cache when neither it nor the clusters this process wrote to
    /// show a Work outside `keep` or in `purged` (nothing to act on), else from the API server, so
    /// a deletion or a purge wait never acts on a stale view.
    pub(super) async fn works_to_reconcile<B: BindingObject>(
        &self,
        b: &B,
        mkey: &str,
        keep: &BTreeSet<String>,
        purged: &BTreeSet<String>,
    ) -> Result<Vec<Work>, BindingError> {
        let inner = &self.inner;
        let id = b.labels().get(B::ID_LABEL).cloned().unwrap_or_default();
        if id.is_empty() {
            return self.works_of(b).await;
        }
        let cached = inner.works.store().list_by_label(B::ID_LABEL, &id);
        let acts = |cluster: &str| !keep.contains(cluster) || purged.contains(cluster);
        let mut cached_clusters = cached
            .iter()
            .filter_map(|w| cluster_name(w.metadata.namespace.as_deref().unwrap_or_default()).ok());
        if cached_clusters.any(acts) || inner.written.lock().any(mkey, acts) {
            return self.works_of(b).await;
        }
        Ok(cached.iter().map(|w| (**w).clone()).collect())
    }

    /// Reads the template (`None` when it is gone): from the control plane's cache of its kind
    /// when that cache is watching and synced and holds it (the detector's, for every kind a
    /// policy selects), as Karmada reads its informers; else from the API server.
    pub(super) async fn fetch_template(
        &self,
        spec: &ResourceBindingSpec,
    ) -> Result<Option<Value>, BindingError> {
        let r = &spec.resource;
        let gvk = apimachinery::gvk_of(&r.api_version, &r.kind);
        let key = karmada_apis::names::namespaced_key(&r.namespace, &r.name);
        let cp = &self.inner.ctx.control_plane;
        let (ar, caps): (ApiResource, _) = cp
            .clients()
            .resolve(&gvk)
            .await
            .map_err(framework(format!("map {} {}", r.api_version, r.kind)))?;
        let api: Api<DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
            Api::namespaced_with(self.inner.client.clone(), &r.namespace, &ar)
        } else {
            Api::all_with(self.inner.client.clone(), &ar)
        };
        let encode = |obj: &DynamicObject| {
            serde_json::to_value(obj).map_err(|e| {
                BindingError::Clusters(format!("{} {key}: cannot encode template: {e}", r.kind))
            })
        };
        if let Some(obj) = template::cached(cp, &ar, &r.namespace, &r.name, &r.resource_version) {
            return encode(&obj).map(Some);
        }
        match api.get_opt(&r.name).await {
            Ok(Some(obj)) => encode(&obj).map(Some),
            Ok(None) => Ok(None),
            Err(e) => Err(api_err("get", &r.kind, &key)(e)),
        }
    }
}
