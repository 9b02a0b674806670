//! The failures every controller shares, so that each controller's error enum wraps them instead
//! of spelling them again: an API request on a named object, and the framework not providing a
//! controller, cache or client. Both name what was being done and keep the cause as `source`.

/// An API request on a named object failed: `"{action} {kind} {key}: {source}"`.
#[derive(Debug, thiserror::Error)]
#[error("{action} {kind} {key}: {source}")]
pub struct ApiError {
    /// What was attempted (`get`, `patch status of`, …).
    pub action: &'static str,
    /// Kind of the object.
    pub kind: String,
    /// `namespace/name` or `name`.
    pub key: String,
    /// The API error.
    #[source]
    pub source: Box<kube::Error>,
}

impl ApiError {
    /// `action` on `kind key` failed with `source`.
    pub fn new(
        action: &'static str,
        kind: impl Into<String>,
        key: impl Into<String>,
        source: kube::Error,
    ) -> Self {
        ApiError {
            action,
            kind: kind.into(),
            key: key.into(),
            source: Box::new(source),
        }
    }
}

/// The framework could not provide a controller, cache, client or REST mapping:
/// `"{what}: {source}"`.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct FrameworkError {
    /// What was being set up.
    pub what: String,
    /// The framework error.
    #[source]
    pub source: Box<lariat::Error>,
}

impl FrameworkError {
    /// Setting up `what` failed with `source`.
    pub fn new(what: impl Into<String>, source: lariat::Error) -> Self {
        FrameworkError {
            what: what.into(),
            source: Box::new(source),
        }
    }
}

/// A `map_err` adapter naming what was being set up: `.map_err(framework("Work controller"))?`.
pub fn framework(what: impl Into<String>) -> impl FnOnce(lariat::Error) -> FrameworkError {
    let what = what.into();
    move |source| FrameworkError::new(what, source)
}
