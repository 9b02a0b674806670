//! The process-wide Prometheus registry. Every metric the framework and the controllers define is
//! registered here, and the binary serves exactly this registry on `/metrics`.

use std::sync::OnceLock;

use prometheus::Registry;

/// The one registry the binary exposes.
pub fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::new)
}
