//! The `karmada-controller-manager` process: Karmada's flags, the controller registry, version
//! information, and the wiring onto the framework's process runtime ([`lariat::runtime`]).

pub mod app;
pub mod cluster_api;
pub mod cluster_source;
pub mod controllers;

pub mod no_effect;
pub mod options;
