//! Status conditions as apimachinery's `meta` helpers build them: the current time at the API
//! server's one-second precision, a new condition stamped with it, and `meta.SetStatusCondition`
//! (apimachinery's `set_status_condition`, the one implementation).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

pub use apimachinery::set_status_condition as set_condition;

/// The current time, at the one-second precision the API server keeps.
pub fn now() -> Time {
    let ts = k8s_openapi::jiff::Timestamp::now();
    Time(k8s_openapi::jiff::Timestamp::from_second(ts.as_second()).unwrap_or(ts))
}

/// A condition observed now: [`set_condition`] keeps an existing condition's transition time
/// unless the status changes.
pub fn new_condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        last_transition_time: now(),
        observed_generation: None,
    }
}
