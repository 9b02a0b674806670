//! One workload's rollout sync, as an outline of named steps.

use std::time::Duration;

use karmada_apis::ResourceBinding;
use karmada_controllers_common::rollout::template_revision;
use kube::ResourceExt;

use super::RolloutController;
use super::error::RolloutError;
use super::progress::step;

impl RolloutController {
    /// Syncs the Rollout of binding `b`; `Some(delay)` to look again when a soak, deadline or
    /// wait ends.
    pub(super) async fn reconcile(
        &self,
        b: &ResourceBinding,
    ) -> Result<Option<Duration>, RolloutError> {
        let namespace = b.namespace().unwrap_or_default();
        let existing = self
            .inner
            .rollouts
            .store()
            .get_named(Some(&namespace), &b.name_any());
        // 1. The template; a binding whose template is gone follows it.
        let Some(template) = self.fetch_template(b).await? else {
            return Ok(None);
        };
        // 2. The strategy: none means no rollout, and no Rollout object.
        let Some(strategy) = self.strategy_for(b, &template) else {
            if let Some(r) = existing {
                self.delete_rollout(b, &r).await?;
            }
            return Ok(None);
        };
        // 3. The Rollout object, created on first sight.
        let rollout = match existing {
            Some(r) => (*r).clone(),
            None => self.create_rollout(b, &strategy.name_any()).await?,
        };
        // 4. One step, then the status written and the step's Events recorded.
        let revision = template_revision(&template);
        let status = rollout.status_or_default();
        let observation = self.observe(b, &template, &revision);
        let next = step(&rollout.spec, &strategy.spec, &status, &observation);
        self.write_status(&rollout, &strategy.name_any(), &next)
            .await?;
        Ok(next.requeue)
    }
}
