//! `/healthz` and `/readyz`, with Kubernetes' conventions: named checks, `/healthz/<check>` for one
//! check, `?verbose` to list every check, `?exclude=<check>` to skip one. A passing endpoint answers
//! `200 ok`; a failing `/healthz` answers 500 and a failing `/readyz` 503, listing every check with
//! `[+]`/`[-]` (reasons are withheld from the body and logged instead, as Kubernetes does).
//!
//! Liveness starts with one check, `ping`, as controller-runtime's manager does. Readiness checks
//! are added by the process; [`ReadinessGate`] is the handle controllers flip once their caches synced.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// A health check: `Ok(())` when healthy, else a reason.
pub type CheckFn = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// A check name was registered twice, or is not a valid path segment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HealthError {
    /// Two checks with one name on one endpoint.
    #[error("a {endpoint} check named {name:?} already exists")]
    Duplicate {
        /// `healthz` or `readyz`.
        endpoint: &'static str,
        /// The name.
        name: String,
    },
    /// Names must be non-empty and free of `/`, `?`, whitespace.
    #[error("invalid check name {0:?}")]
    InvalidName(String),
}

#[derive(Default)]
struct Checks {
    healthz: RwLock<Vec<(String, CheckFn)>>,
    readyz: RwLock<Vec<(String, CheckFn)>>,
}

/// The process's liveness and readiness checks. Cheap to clone; all clones share the checks.
#[derive(Clone)]
pub struct Health {
    checks: Arc<Checks>,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |l: &RwLock<Vec<(String, CheckFn)>>| -> Vec<String> {
            l.read()
                .map(|v| v.iter().map(|(n, _)| n.clone()).collect())
                .unwrap_or_default()
        };
        f.debug_struct("Health")
            .field("healthz", &names(&self.checks.healthz))
            .field("readyz", &names(&self.checks.readyz))
            .finish()
    }
}

impl Default for Health {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    Healthz,
    Readyz,
}

impl Endpoint {
    fn name(self) -> &'static str {
        match self {
            Endpoint::Healthz => "healthz",
            Endpoint::Readyz => "readyz",
        }
    }
    fn failure_status(self) -> StatusCode {
        match self {
            Endpoint::Healthz => StatusCode::INTERNAL_SERVER_ERROR,
            Endpoint::Readyz => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

impl Health {
    /// Liveness with the `ping` check only; no readiness checks (so `/readyz` passes).
    pub fn new() -> Self {
        let h = Health {
            checks: Arc::new(Checks::default()),
        };
        // Startup invariant: the list is empty, so the name cannot clash.
        let _ = h.add_healthz_check("ping", Arc::new(|| Ok(())));
        h
    }

    fn list(&self, e: Endpoint) -> &RwLock<Vec<(String, CheckFn)>> {
        match e {
            Endpoint::Healthz => &self.checks.healthz,
            Endpoint::Readyz => &self.checks.readyz,
        }
    }

    fn add(&self, e: Endpoint, name: &str, check: CheckFn) -> Result<(), HealthError> {
        if name.is_empty()
            || name
                .chars()
                .any(|c| c == '/' || c == '?' || c == '&' || c.is_whitespace())
        {
            return Err(HealthError::InvalidName(name.to_string()));
        }
        let mut list = self.list(e).write().unwrap_or_else(PoisonError::into_inner);
        if list.iter().any(|(n, _)| n == name) {
            return Err(HealthError::Duplicate {
                endpoint: e.name(),
                name: name.to_string(),
            });
        }
        list.push((name.to_string(), check));
        Ok(())
    }

    /// Adds a liveness check, served on `/healthz` and `/healthz/<name>`.
    pub fn add_healthz_check(&self, name: &str, check: CheckFn) -> Result<(), HealthError> {
        self.add(Endpoint::Healthz, name, check)
    }

    /// Adds a readiness check, served on `/readyz` and `/readyz/<name>`.
    pub fn add_readyz_check(&self, name: &str, check: CheckFn) -> Result<(), HealthError> {
        self.add(Endpoint::Readyz, name, check)
    }

    /// Adds a readiness check backed by a flag and returns the handle that sets it. It starts not ready
    /// with reason `reason`.
    pub fn readiness_gate(&self, name: &str, reason: &str) -> Result<ReadinessGate, HealthError> {
        let gate = ReadinessGate {
            inner: Arc::new(GateInner {
                ready: AtomicBool::new(false),
                reason: RwLock::new(reason.to_string()),
            }),
        };
        let g = gate.clone();
        self.add_readyz_check(name, Arc::new(move || g.check()))?;
        Ok(gate)
    }

    fn run(&self, e: Endpoint, exclude: &HashSet<String>) -> (bool, String) {
        let list = self.list(e).read().unwrap_or_else(PoisonError::into_inner);
        let mut ok = true;
        let mut body = String::new();
        for (name, check) in list.iter() {
            if exclude.contains(name) {
                let _ = writeln!(body, "[+]{name} excluded: ok");
                continue;
            }
            match check() {
                Ok(()) => {
                    let _ = writeln!(body, "[+]{name} ok");
                }
                Err(reason) => {
                    ok = false;
                    tracing::debug!(endpoint = e.name(), check = %name, %reason, "health check failed");
                    let _ = writeln!(body, "[-]{name} failed: reason withheld");
                }
            }
        }
        (ok, body)
    }

    fn respond(&self, e: Endpoint, query: Option<String>) -> Response {
        let mut verbose = false;
        let mut exclude = HashSet::new();
        for pair in query.as_deref().unwrap_or("").split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "verbose" => verbose = v != "false" && v != "0",
                "exclude" => {
                    exclude.insert(v.to_string());
                }
                _ => {}
            }
        }
        let (ok, mut body) = self.run(e, &exclude);
        if ok {
            if !verbose {
                return (StatusCode::OK, "ok").into_response();
            }
            let _ = writeln!(body, "{} check passed", e.name());
            (StatusCode::OK, body).into_response()
        } else {
            let _ = writeln!(body, "{} check failed", e.name());
            (e.failure_status(), body).into_response()
        }
    }

    fn respond_one(&self, e: Endpoint, name: &str) -> Response {
        let list = self.list(e).read().unwrap_or_else(PoisonError::into_inner);
        match list.iter().find(|(n, _)| n == name) {
            None => (
                StatusCode::NOT_FOUND,
                format!("no {} check named {name:?}\n", e.name()),
            )
                .into_response(),
            Some((_, check)) => match check() {
                Ok(()) => (StatusCode::OK, "ok").into_response(),
                Err(reason) => (
                    e.failure_status(),
                    format!("internal server error: {reason}\n"),
                )
                    .into_response(),
            },
        }
    }

    /// The routes `/healthz`, `/healthz/{check}`, `/readyz`, `/readyz/{check}`.
    pub fn router(&self) -> Router {
        let mut router = Router::new();
        for e in [Endpoint::Healthz, Endpoint::Readyz] {
            let all = format!("/{}", e.name());
            let one = format!("{all}/{{check}}");
            router = router
                .route(
                    &all,
                    get(
                        move |State(h): State<Health>, RawQuery(q): RawQuery| async move {
                            h.respond(e, q)
                        },
                    ),
                )
                .route(
                    &one,
                    get(
                        move |State(h): State<Health>, Path(c): Path<String>| async move {
                            h.respond_one(e, &c)
                        },
                    ),
                );
        }
        router.with_state(self.clone())
    }
}

struct GateInner {
    ready: AtomicBool,
    reason: RwLock<String>,
}

/// A readiness flag shared between the probe server and whoever knows the answer (for the
/// controller-manager: "this replica leads and its caches have synced", or "this replica is a standby").
#[derive(Clone)]
pub struct ReadinessGate {
    inner: Arc<GateInner>,
}

impl std::fmt::Debug for ReadinessGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadinessGate")
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl ReadinessGate {
    /// A gate not attached to any endpoint (for tests and for code that runs without a probe server).
    pub fn detached(ready: bool) -> Self {
        ReadinessGate {
            inner: Arc::new(GateInner {
                ready: AtomicBool::new(ready),
                reason: RwLock::new(String::new()),
            }),
        }
    }

    /// Marks ready.
    pub fn set_ready(&self) {
        self.inner.ready.store(true, Ordering::SeqCst);
    }

    /// Marks not ready, with the reason reported by the check.
    pub fn set_not_ready(&self, reason: &str) {
        *self
            .inner
            .reason
            .write()
            .unwrap_or_else(PoisonError::into_inner) = reason.to_string();
        self.inner.ready.store(false, Ordering::SeqCst);
    }

    /// Whether it is ready now.
    pub fn is_ready(&self) -> bool {
        self.inner.ready.load(Ordering::SeqCst)
    }

    fn check(&self) -> Result<(), String> {
        if self.is_ready() {
            Ok(())
        } else {
            Err(self
                .inner
                .reason
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(h: &Health, uri: &str) -> (StatusCode, String) {
        let (path, query) = match uri.split_once('?') {
            Some((p, q)) => (p, Some(q.to_string())),
            None => (uri, None),
        };
        let resp = match path {
            "/healthz" => h.respond(Endpoint::Healthz, query),
            "/readyz" => h.respond(Endpoint::Readyz, query),
            p if p.starts_with("/healthz/") => h.respond_one(Endpoint::Healthz, &p[9..]),
            p => h.respond_one(Endpoint::Readyz, &p[8..]),
        };
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn kubernetes_style_endpoints() {
        let h = Health::new();
        assert_eq!(get(&h, "/healthz").await, (StatusCode::OK, "ok".into()));
        assert_eq!(
            get(&h, "/healthz?verbose").await,
            (StatusCode::OK, "[+]ping ok\nhealthz check passed\n".into())
        );
        assert_eq!(get(&h, "/healthz/ping").await.0, StatusCode::OK);
        assert_eq!(get(&h, "/healthz/nope").await.0, StatusCode::NOT_FOUND);
        assert_eq!(get(&h, "/readyz").await, (StatusCode::OK, "ok".into()));

        let gate = h
            .readiness_gate("informer-sync", "caches not synced")
            .unwrap();
        let (status, body) = get(&h, "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            body,
            "[-]informer-sync failed: reason withheld\nreadyz check failed\n"
        );
        let (status, body) = get(&h, "/readyz/informer-sync").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("caches not synced"));
        assert_eq!(
            get(&h, "/readyz?exclude=informer-sync").await.0,
            StatusCode::OK
        );
        gate.set_ready();
        assert_eq!(get(&h, "/readyz").await.0, StatusCode::OK);
        assert!(h.readiness_gate("informer-sync", "x").is_err());
        assert!(h.add_healthz_check("a/b", Arc::new(|| Ok(()))).is_err());

        h.add_healthz_check("broken", Arc::new(|| Err("boom".into())))
            .unwrap();
        assert_eq!(
            get(&h, "/healthz").await.0,
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }
}
