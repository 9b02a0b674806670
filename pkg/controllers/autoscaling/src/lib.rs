//! Quotas and autoscaling across clusters. `federatedResourceQuotaSync` turns a
//! FederatedResourceQuota's static assignments into ResourceQuotas in the members (as Works),
//! `federatedResourceQuotaStatus` brings the members' quota usage home, and
//! `federatedResourceQuotaEnforcement` (gate `FederatedQuotaEnforcement`) accounts the bindings'
//! placements against `overall`. `federatedHorizontalPodAutoscaler` scales resource templates
//! from their pods' metrics in the member clusters (FederatedHPA);
//! `cronFederatedHorizontalPodAutoscaler` scales workloads and FederatedHPAs on cron schedules;
//! `hpaScaleTargetMarker` and `deploymentReplicasSyncer` (off by default) let members' own HPAs own
//! a Deployment's replicas and copy them back to the template.

pub mod cron_federated_hpa;
pub mod deployment_replicas_syncer;
pub mod federated_hpa;
pub mod federated_resource_quota_enforcement;
pub mod federated_resource_quota_status;
pub mod federated_resource_quota_sync;
pub mod hpa_scale_target_marker;
