//! `--enable-pprof`: the profiling server on `--profiling-bind-address` (Karmada's flags, default
//! `:6060`), serving what `go tool pprof` reads:
//!
//! - `/debug/pprof/profile?seconds=N`: a CPU profile over N seconds (default 30, at most
//!   [`MAX_CPU_SECONDS`]), sampled at 100 Hz with `SIGPROF` and symbolized in the process;
//! - `/debug/pprof/heap`: the live heap, from jemalloc's sampling profiler (one sample per 512 KiB
//!   allocated on average, as Go's default `MemProfileRate`), symbolized in the process. It needs
//!   the binary's global allocator to be jemalloc with profiling compiled in: [`global_allocator!`].
//!
//! One profile is taken at a time: a second request while one runs is refused with 500 (as Go
//! refuses a second CPU profile). Go's other endpoints (goroutine, trace, symbol...) have no
//! equivalent here and answer 404.

use std::time::Duration;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use lariat::runtime::BindAddress;
use pprof::protos::Message as _;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

#[doc(hidden)]
pub use tikv_jemallocator::Jemalloc;

/// The longest CPU profile served, in seconds: Karmada's profiling server refuses a profile longer
/// than its 5-minute write timeout.
pub const MAX_CPU_SECONDS: u64 = 300;
/// The length of a CPU profile whose request gives no (or an invalid) `seconds`, as in Go.
pub const DEFAULT_CPU_SECONDS: u64 = 30;
/// CPU samples per second (Go's rate).
const CPU_FREQUENCY: i32 = 100;

/// Makes jemalloc the global allocator, with its heap profiler compiled in and configured but
/// inactive until [`serve`] activates it (`--enable-pprof`): while inactive it samples nothing.
/// Invoke once, in the binary's `main.rs`.
#[macro_export]
macro_rules! global_allocator {
    () => {
        #[global_allocator]
        static GLOBAL: $crate::profiling::Jemalloc = $crate::profiling::Jemalloc;

        /// jemalloc's options, read at its start: profiling available, inactive, one sample per
        /// 2^19 bytes (512 KiB) allocated.
        #[allow(non_upper_case_globals)]
        #[unsafe(export_name = "_rjem_malloc_conf")]
        pub static malloc_conf: &[u8] = b"prof:true,prof_active:false,lg_prof_sample:19\0";
    };
}

/// Failures of the profiling server.
#[derive(Debug, thiserror::Error)]
pub enum ProfilingError {
    /// The address could not be bound (in use, not permitted...).
    #[error("cannot serve profiling on --profiling-bind-address={address}: {source}")]
    Bind {
        /// The address as given.
        address: String,
        /// Why.
        source: std::io::Error,
    },
}

#[derive(Clone)]
struct Profiler {
    /// One profile (CPU or heap) at a time.
    busy: Arc<Semaphore>,
}

/// Whether heap profiles can be taken: jemalloc is the global allocator with profiling compiled in
/// ([`global_allocator!`]).
pub fn heap_profiling_available() -> bool {
    jemalloc_pprof::PROF_CTL.is_some()
}

/// Binds `address` and serves the profiles until `cancel`; starts jemalloc's heap sampling when
/// available (a warning says so when it is not). `Ok(None)` when the address is `0`. A bind
/// failure is an error, so the process exits as Karmada's does.
pub async fn serve(
    address: &BindAddress,
    cancel: CancellationToken,
) -> Result<Option<tokio::task::JoinHandle<()>>, ProfilingError> {
    let listener = address
        .bind()
        .await
        .map_err(|source| ProfilingError::Bind {
            address: address.to_string(),
            source,
        })?;
    let Some(listener) = listener else {
        return Ok(None);
    };
    match jemalloc_pprof::PROF_CTL.as_ref() {
        Some(ctl) => {
            if let Err(e) = ctl.lock().await.activate() {
                tracing::warn!(error = %e, "cannot start jemalloc's heap profiler: /debug/pprof/heap will fail");
            }
        }
        None => tracing::warn!(
            "heap profiles are not available: jemalloc with profiling is not this binary's allocator"
        ),
    }
    let local = listener
        .local_addr()
        .map_or_else(|_| address.to_string(), |a| a.to_string());
    tracing::info!(address = %local, "serving profiles under /debug/pprof/");
    let app = router();
    Ok(Some(tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { cancel.cancelled().await })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the profiling server failed");
        }
    })))
}

/// The routes, for [`serve`] and tests.
pub fn router() -> Router {
    Router::new()
        .route("/debug/pprof/", get(index))
        .route("/debug/pprof/profile", get(cpu))
        .route("/debug/pprof/heap", get(heap))
        .with_state(Profiler {
            busy: Arc::new(Semaphore::new(1)),
        })
}

async fn index() -> &'static str {
    "profiles (read with `go tool pprof URL`):\n\
     /debug/pprof/profile?seconds=N  CPU profile over N seconds (default 30, at most 300)\n\
     /debug/pprof/heap               live heap (jemalloc sampling, one sample per 512 KiB)\n"
}

#[derive(serde::Deserialize)]
struct CpuQuery {
    seconds: Option<String>,
}

/// The profile length a `seconds` parameter asks for: Go's reading (absent, unparsable or not
/// positive is the default), refused above [`MAX_CPU_SECONDS`].
fn cpu_seconds(param: Option<&str>) -> Result<u64, String> {
    let asked = param.and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
    match u64::try_from(asked) {
        Ok(0) | Err(_) => Ok(DEFAULT_CPU_SECONDS),
        Ok(n) if n > MAX_CPU_SECONDS => Err(format!(
            "profile duration {n}s exceeds the maximum of {MAX_CPU_SECONDS}s"
        )),
        Ok(n) => Ok(n),
    }
}

fn failure(status: StatusCode, message: String) -> Response {
    (status, format!("{message}\n")).into_response()
}

fn profile_response(bytes: Vec<u8>) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/octet-stream"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"profile\"",
            ),
        ],
        bytes,
    )
        .into_response()
}

async fn cpu(State(p): State<Profiler>, Query(q): Query<CpuQuery>) -> Response {
    let seconds = match cpu_seconds(q.seconds.as_deref()) {
        Ok(s) => s,
        Err(e) => return failure(StatusCode::BAD_REQUEST, e),
    };
    let Ok(_permit) = p.busy.clone().try_acquire_owned() else {
        return failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            "could not start the CPU profile: another profile is being taken".to_string(),
        );
    };
    // Sampling, then symbolizing, block: a thread of their own, so the runtime keeps serving.
    let taken =
        tokio::task::spawn_blocking(move || cpu_profile(Duration::from_secs(seconds))).await;
    match taken {
        Ok(Ok(bytes)) => profile_response(bytes),
        Ok(Err(e)) => failure(StatusCode::INTERNAL_SERVER_ERROR, e),
        Err(e) => failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the CPU profile failed: {e}"),
        ),
    }
}

fn cpu_profile(length: Duration) -> Result<Vec<u8>, String> {
    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(CPU_FREQUENCY)
        // Unwinding through these from a signal handler can deadlock or crash (pprof-rs's advice).
        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
        .build()
        .map_err(|e| format!("could not start the CPU profile: {e}"))?;
    std::thread::sleep(length);
    let report = guard
        .report()
        .build()
        .map_err(|e| format!("could not build the CPU profile: {e}"))?;
    drop(guard);
    let profile = report
        .pprof()
        .map_err(|e| format!("could not encode the CPU profile: {e}"))?;
    Ok(profile.encode_to_vec())
}

async fn heap(State(p): State<Profiler>) -> Response {
    let Some(ctl) = jemalloc_pprof::PROF_CTL.as_ref() else {
        return failure(
            StatusCode::NOT_IMPLEMENTED,
            "heap profiles are not available: jemalloc with profiling is not this binary's allocator"
                .to_string(),
        );
    };
    let Ok(_permit) = p.busy.clone().try_acquire_owned() else {
        return failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            "could not take the heap profile: another profile is being taken".to_string(),
        );
    };
    let mut ctl = ctl.lock().await;
    if !ctl.activated() {
        return failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            "jemalloc's heap profiler is not active".to_string(),
        );
    }
    // jemalloc writes the dump to a temporary file ($TMPDIR) that is then read and symbolized.
    match tokio::task::block_in_place(|| ctl.dump_pprof()) {
        Ok(bytes) => profile_response(bytes),
        Err(e) => failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("could not take the heap profile (jemalloc dumps into $TMPDIR): {e:#}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_read_as_go_reads_them_and_are_capped() {
        assert_eq!(cpu_seconds(None), Ok(30));
        assert_eq!(cpu_seconds(Some("x")), Ok(30));
        assert_eq!(cpu_seconds(Some("-4")), Ok(30));
        assert_eq!(cpu_seconds(Some("0")), Ok(30));
        assert_eq!(cpu_seconds(Some("1")), Ok(1));
        assert_eq!(cpu_seconds(Some("300")), Ok(300));
        assert!(cpu_seconds(Some("301")).unwrap_err().contains("300s"));
    }
}
