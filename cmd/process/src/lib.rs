//! What the karmada-rs processes (`karmada-controller-manager`, `karmada-agent`) share: build
//! information ([`version`]), the flags every Karmada component has ([`flags`]), and the process
//! shell ([`shell`]): exit codes, logging, the async runtime and running a set of controllers.

pub mod features;
pub mod flags;
pub mod shell;
pub mod version;
