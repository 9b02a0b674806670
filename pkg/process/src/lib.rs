//! What the karmada-rs processes (`karmada-controller-manager`, `karmada-agent`) share: build
//! information ([`version`]), the flags every Karmada component has ([`flags`]), the flags both
//! processes declare ([`shared`]), and the process shell ([`shell`]): `main`, exit codes, logging,
//! the async runtime and running a set of controllers; [`malloc`] tunes the C allocator;
//! [`profiling`] serves CPU and heap profiles (`--enable-pprof`). Everything
//! but [`version`] needs the `process` feature (on by default): `karmadactl` uses only [`version`].

#[cfg(feature = "process")]
pub mod features;
#[cfg(feature = "process")]
pub mod flags;
#[cfg(feature = "process")]
pub mod malloc;
#[cfg(feature = "process")]
pub mod profiling;
#[cfg(feature = "process")]
pub mod shared;
#[cfg(feature = "process")]
pub mod shell;
pub mod version;
