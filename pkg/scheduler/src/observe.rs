//! What a scheduling run reports about its own work, for the caller to turn into metrics: the time
//! each step of the algorithm took, and each extension point and plugin run with its outcome. The
//! names are Karmada's (`schedule_step`, `extension_point`, `result` label values of its scheduler
//! metrics). The algorithm only reads the clock; what is recorded, and where, is the caller's.

use std::time::Duration;

use crate::plugins::Plugin;

/// A step of the algorithm (Karmada's `ScheduleStep*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// Running the filter plugins over every cluster.
    Filter,
    /// Running the score plugins over the feasible clusters.
    Score,
    /// Estimating available replicas and selecting clusters (spread constraints).
    Select,
    /// Dividing the replicas among the selected clusters.
    AssignReplicas,
}

impl Step {
    /// Karmada's `schedule_step` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Filter => "Filter",
            Self::Score => "Score",
            Self::Select => "Select",
            Self::AssignReplicas => "AssignReplicas",
        }
    }
}

/// An extension point of the scheduling framework.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtensionPoint {
    /// The filter plugins, run once per cluster.
    Filter,
    /// The score plugins, run once per binding over the feasible clusters.
    Score,
    /// A score plugin's normalization.
    ScoreExtensionNormalize,
}

impl ExtensionPoint {
    /// Karmada's `extension_point` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Filter => "Filter",
            Self::Score => "Score",
            Self::ScoreExtensionNormalize => "ScoreExtensionNormalize",
        }
    }
}

/// The outcome of a plugin or extension point (Karmada's framework result code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    /// It ran and the cluster fits.
    Success,
    /// The cluster does not fit.
    Unschedulable,
    /// It failed.
    Error,
}

impl Code {
    /// Karmada's `result` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "Success",
            Self::Unschedulable => "Unschedulable",
            Self::Error => "Error",
        }
    }
}

/// Receives what a scheduling run did. Every method does nothing by default.
pub trait Observer {
    /// A step of the algorithm finished after `took`.
    fn step(&mut self, step: Step, took: Duration) {
        let _ = (step, took);
    }
    /// All plugins of an extension point ran, with `code`, in `took`.
    fn extension_point(&mut self, point: ExtensionPoint, code: Code, took: Duration) {
        let _ = (point, code, took);
    }
    /// One plugin ran at an extension point, with `code`, in `took`.
    fn plugin(&mut self, plugin: Plugin, point: ExtensionPoint, code: Code, took: Duration) {
        let _ = (plugin, point, code, took);
    }
}

/// An observer that records nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unobserved;

impl Observer for Unobserved {}
