//! Shared helpers for the integration and end-to-end tests in `tests/tests/`.
pub mod in_process;
