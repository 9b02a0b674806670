//! Process runtime shared by controller binaries (the controller-manager and the agent): flag value
//! types, logging, signals, leader election, probe and metrics servers, and the [`manager::Manager`]
//! that ties them together.

pub mod addr;
pub mod client;
pub mod duration;
pub mod exposition;
pub mod features;
pub mod health;
pub mod leader_election;
pub mod logging;
pub mod manager;
#[cfg(target_os = "linux")]
pub mod process_extra;
pub mod signals;

pub use addr::BindAddress;
pub use duration::GoDuration;
pub use health::{Health, ReadinessGate};
pub use leader_election::{LeaderElectionConfig, LeaderElector, Leadership};
pub use manager::{LeaderContext, LeaderWork, Manager, ManagerConfig, ManagerError};
pub use signals::SignalHandler;
