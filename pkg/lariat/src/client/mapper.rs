//! A cached REST mapping (GVK → resource, scope, verbs). A miss asks discovery for the kind's
//! group/version, so CRDs created after start-up are found without a restart; only successes are
//! cached, and [`RestMapper::invalidate`] drops an entry when the server stops serving it.

use ahash::AHashMap;
use kube::Client;
use kube::api::{ApiResource, GroupVersionKind};
use kube::discovery::{self, ApiCapabilities};
use parking_lot::RwLock;

use crate::error::{Error, Result};
use crate::gvk::gvk_string;

/// Maps kinds to resources for one cluster.
#[derive(Debug, Default)]
pub struct RestMapper {
    cache: RwLock<AHashMap<GroupVersionKind, (ApiResource, ApiCapabilities)>>,
}

impl RestMapper {
    /// An empty mapper.
    pub fn new() -> Self {
        Self::default()
    }

    /// Resolves `gvk`, asking discovery through `client` on a miss.
    pub async fn resolve(
        &self,
        cluster: &str,
        client: &Client,
        gvk: &GroupVersionKind,
    ) -> Result<(ApiResource, ApiCapabilities)> {
        if let Some(hit) = self.cache.read().get(gvk) {
            return Ok(hit.clone());
        }
        let found = discovery::pinned_kind(client, gvk)
            .await
            .map_err(|source| Error::UnknownKind {
                cluster: cluster.to_string(),
                gvk: gvk_string(gvk),
                source,
            })?;
        self.cache.write().insert(gvk.clone(), found.clone());
        Ok(found)
    }

    /// Returns the cached mapping of `gvk` without asking the server.
    pub fn cached(&self, gvk: &GroupVersionKind) -> Option<(ApiResource, ApiCapabilities)> {
        self.cache.read().get(gvk).cloned()
    }

    /// Forgets the mapping of `gvk` so the next lookup asks discovery again.
    pub fn invalidate(&self, gvk: &GroupVersionKind) {
        self.cache.write().remove(gvk);
    }

    /// Number of cached mappings.
    pub fn len(&self) -> usize {
        self.cache.read().len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether the API server serves the resource `plural` in `group_version` (e.g. `apps/v1`,
/// `deployments`): for features that depend on optional CRDs and are checked once at start-up.
/// A group/version the server does not know is an error, as discovery reports it.
pub async fn resource_served(
    client: &Client,
    group_version: &str,
    plural: &str,
) -> kube::Result<bool> {
    let list = client.list_api_group_resources(group_version).await?;
    Ok(list.resources.iter().any(|r| r.name == plural))
}
