//! API error classes of client-go's `k8s.io/apimachinery/pkg/api/errors` (`IsNotFound`,
//! `IsConflict`, `IsAlreadyExists`) for kube's client errors.

/// The `reason` values apimachinery knows; a status with another reason is classified by its code.
const KNOWN_REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
];

/// Whether `e` is an API status with `reason`, or with an unknown reason and `code`.
fn is_reason(e: &kube::Error, reason: &str, code: u16) -> bool {
    match e {
        kube::Error::Api(s) => {
            s.reason == reason || (!KNOWN_REASONS.contains(&s.reason.as_str()) && s.code == code)
        }
        _ => false,
    }
}

/// Whether the API server said the object does not exist (404 `NotFound`).
pub fn is_not_found(e: &kube::Error) -> bool {
    is_reason(e, "NotFound", 404)
}

/// Whether a write lost a race with another writer (409 `Conflict`, not `AlreadyExists`).
pub fn is_conflict(e: &kube::Error) -> bool {
    is_reason(e, "Conflict", 409)
}

/// Whether a create found the object already there (409 `AlreadyExists`).
pub fn is_already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.reason == "AlreadyExists")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("message", reason)
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn classifies_like_client_go() {
        assert!(is_not_found(&status(404, "NotFound")));
        assert!(is_not_found(&status(404, "")));
        assert!(!is_not_found(&status(409, "Conflict")));
        assert!(is_conflict(&status(409, "Conflict")));
        assert!(is_conflict(&status(409, "")));
        assert!(!is_conflict(&status(409, "AlreadyExists")));
        assert!(is_already_exists(&status(409, "AlreadyExists")));
        assert!(!is_already_exists(&status(409, "Conflict")));
    }
}
