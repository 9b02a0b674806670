//! The failures every controller shares, so that each controller's error enum wraps them instead
//! of spelling them again: an API request on a named object ([`ApiError`]), the framework not
//! providing a controller, cache or client ([`FrameworkError`]), and the framework's own errors (a
//! cache that did not sync). Each names what was being done and keeps the cause as `source`.
//! A controller's enum holds them in one variant, `Core(#[from] CoreError)`, and
//! [`core_error_from!`](crate::core_error_from) lets `?` convert each of them.

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

/// The failures every controller's error enum shares, in one variant (`Core(#[from] CoreError)`,
/// shown as is): the framework could not provide a controller, cache or client, a cache did not
/// sync, or an API request on a named object failed. Each names what failed and why.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// Setting up a named controller, cache, client or REST mapping failed.
    #[error(transparent)]
    Framework(#[from] FrameworkError),
    /// The framework failed (a cache that did not sync, a client): the error names the cluster
    /// and the kind.
    #[error(transparent)]
    Lariat(#[from] lariat::Error),
    /// An API request on a named object failed.
    #[error(transparent)]
    Api(#[from] ApiError),
}

impl CoreError {
    /// True for an API request that failed on an optimistic-lock conflict.
    pub fn is_conflict(&self) -> bool {
        matches!(self, CoreError::Api(e) if apimachinery::is_conflict(&e.source))
    }
}

/// Implements `From` [`FrameworkError`], `lariat::Error` and [`ApiError`] for an error enum with a
/// `Core(#[from] CoreError)` variant, so `?` converts each of them as before.
#[macro_export]
macro_rules! core_error_from {
    ($error:ty) => {
        impl From<$crate::error::FrameworkError> for $error {
            fn from(e: $crate::error::FrameworkError) -> Self {
                Self::Core(e.into())
            }
        }
        impl From<$crate::error::LariatError> for $error {
            fn from(e: $crate::error::LariatError) -> Self {
                Self::Core(e.into())
            }
        }
        impl From<$crate::error::ApiError> for $error {
            fn from(e: $crate::error::ApiError) -> Self {
                Self::Core(e.into())
            }
        }
    };
}

/// The framework's error, named for [`core_error_from`].
pub use lariat::Error as LariatError;

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum Example {
        #[error(transparent)]
        Core(#[from] CoreError),
    }
    crate::core_error_from!(Example);

    fn framework_failure() -> Result<(), Example> {
        Err(FrameworkError::new(
            "Work controller",
            lariat::Error::CacheStopped {
                cluster: "member1".into(),
                kind: "Work".into(),
            },
        ))?
    }

    #[test]
    fn shared_failures_convert_with_question_mark_and_keep_their_message() {
        let e = framework_failure().unwrap_err();
        assert_eq!(
            e.to_string(),
            "Work controller: cache for Work in cluster \"member1\" was stopped"
        );
        let conflict = kube::Error::Api(Box::new(kube::core::Status {
            code: 409,
            reason: "Conflict".into(),
            message: "the object has been modified".into(),
            ..Default::default()
        }));
        let e = CoreError::from(ApiError::new("update", "Work", "ns/w", conflict));
        assert!(e.is_conflict());
        assert!(e.to_string().starts_with("update Work ns/w: "), "{e}");
    }
}
