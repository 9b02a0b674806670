//! Quotas and autoscaling across clusters. `federatedResourceQuotaSync` turns a
//! FederatedResourceQuota's static assignments into ResourceQuotas in the members (as Works),
//! `federatedResourceQuotaStatus` brings the members' quota usage home, and
//! `federatedResourceQuotaEnforcement` (gate `FederatedQuotaEnforcement`) accounts the bindings'
//! placements against `overall`. `federatedHorizontalPodAutoscaler` scales resource templates
//! from their pods' metrics in the member clusters (FederatedHPA).

pub mod federated_hpa;
pub mod federated_resource_quota_enforcement;
pub mod federated_resource_quota_status;
pub mod federated_resource_quota_sync;
