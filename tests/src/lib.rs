//! Shared helpers for the integration and end-to-end tests in `tests/tests/`: the real binaries as
//! processes, Karmada's Go binaries as peers, waits and tools. The benchmark harness (`bench/`,
//! crate `karmada-bench`) builds on them.
// The test harness: its helpers fail the test that calls them by panicking, so they may
// unwrap (clippy.toml covers only #[test] functions and #[cfg(test)] modules).
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod controller_manager;
pub mod in_process;
pub mod karmada_go;
pub mod karmada_suite;
pub mod karmadactl;
pub mod pod_run;
pub mod process;
pub mod quiet;
pub mod tls;
pub mod tools;
pub mod wait;
