//! The rollout controller's metrics (karmada-rs's own), registered in the process registry on
//! first use, so a control plane without staged rollouts serves none of them.

use std::sync::OnceLock;

use prometheus::{IntCounter, IntCounterVec, Opts};

struct RolloutMetrics {
    transitions: IntCounterVec,
    promotions: IntCounter,
}

fn build() -> prometheus::Result<RolloutMetrics> {
    let transitions = IntCounterVec::new(
        Opts::new(
            "karmada_rs_rollout_cluster_transitions_total",
            "Clusters entering a rollout state: Progressing (given the target revision), Succeeded (healthy for the soak time), Failed (progress deadline exceeded); Halted counts halted rollouts.",
        ),
        &["state"],
    )?;
    let promotions = IntCounter::with_opts(Opts::new(
        "karmada_rs_rollout_stage_promotions_total",
        "Rollout stages whose clusters all succeeded.",
    ))?;
    let registry = lariat::metrics::registry();
    for collector in [
        Box::new(transitions.clone()) as Box<dyn prometheus::core::Collector>,
        Box::new(promotions.clone()),
    ] {
        if let Err(e) = registry.register(collector) {
            tracing::warn!(error = %e, "rollout metric not registered");
        }
    }
    Ok(RolloutMetrics {
        transitions,
        promotions,
    })
}

fn metrics() -> Option<&'static RolloutMetrics> {
    static METRICS: OnceLock<Option<RolloutMetrics>> = OnceLock::new();
    METRICS
        .get_or_init(|| match build() {
            Ok(m) => Some(m),
            Err(e) => {
                tracing::error!(error = %e, "invalid rollout metric definition");
                None
            }
        })
        .as_ref()
}

/// Counts a cluster entering `state` (or a rollout halting, `Halted`).
pub fn cluster_transition(state: &str) {
    if let Some(m) = metrics() {
        m.transitions.with_label_values(&[state]).inc();
    }
}

/// Counts a stage promoted.
pub fn stage_promoted() {
    if let Some(m) = metrics() {
        m.promotions.inc();
    }
}
