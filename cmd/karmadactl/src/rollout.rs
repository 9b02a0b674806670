//! `karmadactl rollout status|approve|pause|resume|rollback`: read and steer the staged rollout of
//! one workload (karmada-rs's own `apps.karmada-rs.io/v1alpha1` Rollout). The workload is named
//! `KIND/NAME` (`deployment/web`) or by its Rollout's name (`web-deployment`).
//!
//! `status` prints the phase, the stable and target revisions and each stage's and cluster's
//! state; the others merge-patch the Rollout's spec (`approvals`, `paused`, `rollbackRevision`),
//! which the rollout controller acts on.

use anyhow::{Context, bail};
use karmada_apis::rollout::{Rollout, StageApproval};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::cli::{RolloutAction, RolloutArgs};

/// The Rollout name for `KIND/NAME`, or `target` itself.
fn rollout_name(target: &str) -> String {
    match target.split_once('/') {
        Some((kind, name)) => {
            let kind = kind.split('.').next().unwrap_or(kind);
            let kind = match kind.to_ascii_lowercase().as_str() {
                "deploy" | "deployments" => "deployment".to_owned(),
                "sts" | "statefulsets" => "statefulset".to_owned(),
                "ds" | "daemonsets" => "daemonset".to_owned(),
                other => other.trim_end_matches('s').to_owned(),
            };
            karmada_apis::names::binding_name(&kind, name)
        }
        None => target.to_owned(),
    }
}

/// Runs the command; returns what it prints.
pub async fn run(args: RolloutArgs) -> anyhow::Result<String> {
    let host = args.control_plane.load().await?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_owned());
    let name = rollout_name(&args.target);
    let api: Api<Rollout> = Api::namespaced(host.client.clone(), &namespace);
    let rollout = api.get(&name).await.with_context(|| {
        format!("Rollout {namespace}/{name} (does a RolloutStrategy select the workload?)")
    })?;
    let status = rollout.status_or_default();
    let patch = match args.action {
        RolloutAction::Status => return Ok(render(&rollout)),
        RolloutAction::Pause => json!({"spec": {"paused": true}}),
        RolloutAction::Resume => json!({"spec": {"paused": null}}),
        RolloutAction::Rollback => {
            if status.target_revision == status.stable_revision {
                bail!(
                    "Rollout {namespace}/{name}: nothing to roll back, revision {} is everywhere",
                    status.stable_revision
                );
            }
            json!({"spec": {"rollbackRevision": status.target_revision}})
        }
        RolloutAction::Approve => {
            let stage = match args.stage.clone() {
                Some(s) => s,
                None if !status.current_stage.is_empty() => status.current_stage.clone(),
                None => {
                    bail!("Rollout {namespace}/{name}: no stage is waiting; name one with --stage")
                }
            };
            let approval = StageApproval {
                revision: status.target_revision.clone(),
                stage: stage.clone(),
            };
            let mut approvals = rollout.spec.approvals.clone();
            if approvals.contains(&approval) {
                return Ok(format!("rollout {name}: stage {stage} already approved"));
            }
            approvals.push(approval);
            json!({"metadata": {"resourceVersion": rollout.metadata.resource_version}, "spec": {"approvals": approvals}})
        }
    };
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("patch Rollout {namespace}/{name}"))?;
    let verb = match args.action {
        RolloutAction::Pause => "paused",
        RolloutAction::Resume => "resumed",
        RolloutAction::Rollback => "rolled back",
        RolloutAction::Approve | RolloutAction::Status => "approved",
    };
    Ok(format!("rollout {name} {verb}"))
}

/// The status as text: a header, then one line per stage and per cluster.
fn render(r: &Rollout) -> String {
    let s = r.status_or_default();
    let mut out = format!(
        "Rollout {}/{} (strategy {}): {}\n  stable revision {}, target revision {}\n",
        r.metadata.namespace.as_deref().unwrap_or_default(),
        r.metadata.name.as_deref().unwrap_or_default(),
        r.spec.strategy,
        if s.phase.is_empty() {
            "Pending"
        } else {
            &s.phase
        },
        s.stable_revision,
        s.target_revision
    );
    if !s.message.is_empty() {
        out.push_str(&format!("  {}\n", s.message));
    }
    for stage in &s.stages {
        out.push_str(&format!(
            "  stage {}: {}{}\n",
            stage.name,
            stage.state.as_str(),
            if stage.reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", stage.reason)
            }
        ));
        for c in s.clusters.iter().filter(|c| c.stage == stage.name) {
            out.push_str(&format!(
                "    {}: {} revision {}{}\n",
                c.name,
                c.state.as_str(),
                c.revision,
                if c.reason.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", c.reason)
                }
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(rollout_name("deployment/web"), "web-deployment");
        assert_eq!(rollout_name("deploy/web"), "web-deployment");
        assert_eq!(rollout_name("deployments.apps/web"), "web-deployment");
        assert_eq!(rollout_name("web-deployment"), "web-deployment");
    }
}
