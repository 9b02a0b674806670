//! Serving the process-wide registry ([`crate::metrics::registry`]) on `/metrics` in the Prometheus text
//! format, plus the process metrics every Go component exports (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_open_fds`, …, and the network and address-space
//! series of [`super::process_extra`]).

use std::sync::OnceLock;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus::{Encoder, Registry, TextEncoder};

use crate::metrics::registry;

/// Registers the process collector (CPU, memory, fds, start time) in the registry. Idempotent.
pub fn register_process_metrics() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            let collector = prometheus::process_collector::ProcessCollector::for_self();
            if let Err(e) = registry().register(Box::new(collector)) {
                tracing::warn!(error = %e, "cannot register process metrics");
            }
            match super::process_extra::ExtraProcessCollector::new() {
                Ok(extra) => {
                    if let Err(e) = registry().register(Box::new(extra)) {
                        tracing::warn!(error = %e, "cannot register process network metrics");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot define process network metrics"),
            }
        }
    });
}

/// The process registry's current content in the Prometheus text format.
pub fn render() -> Result<String, prometheus::Error> {
    render_registry(registry())
}

/// `registry`'s current content in the Prometheus text format.
pub fn render_registry(registry: &Registry) -> Result<String, prometheus::Error> {
    let mut buf = Vec::new();
    TextEncoder::new().encode(&registry.gather(), &mut buf)?;
    // The encoder writes UTF-8 (names and label values are Rust strings): no second copy.
    Ok(String::from_utf8(buf)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// The route `/metrics` serving the process registry.
pub fn router() -> Router {
    router_for(registry().clone())
}

/// The route `/metrics` serving `registry` (e.g. one passed to
/// [`FrameworkMetrics::register`](crate::metrics::FrameworkMetrics::register)).
pub fn router_for(registry: Registry) -> Router {
    Router::new().route(
        "/metrics",
        get(move || async move {
            match render_registry(&registry) {
                Ok(body) => (
                    StatusCode::OK,
                    [(
                        header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    body,
                )
                    .into_response(),
                Err(e) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("cannot encode metrics: {e}\n"),
                )
                    .into_response(),
            }
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_process_metrics() {
        register_process_metrics();
        register_process_metrics();
        let text = render().unwrap();
        assert!(text.contains("process_resident_memory_bytes"), "{text}");
        assert!(text.contains("process_open_fds"), "{text}");
        assert!(text.contains("process_cpu_seconds_total"), "{text}");
    }
}
