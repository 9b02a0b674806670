//! Shared helpers for the integration and end-to-end tests in `tests/tests/`, and the propagation
//! benchmark (`make bench`, `tests/benches/propagation.rs`) with its smoke test.

pub mod bench;
pub mod controller_manager;
pub mod in_process;
pub mod karmadactl;
pub mod quiet;
pub mod tools;
