//! What the karmada-rs processes (`karmada-controller-manager`, `karmada-agent`) share: build
//! information ([`version`]), the flags every Karmada component has ([`flags`]), the flags both
//! processes declare ([`shared`]), and the process shell ([`shell`]): `main`, exit codes, logging,
//! the async runtime and running a set of controllers; [`malloc`] tunes the C allocator.

pub mod features;
pub mod flags;
pub mod malloc;
pub mod shared;
pub mod shell;
pub mod version;
