//! Status conditions with client-go's `meta` helpers' semantics (`SetStatusCondition`,
//! `FindStatusCondition`, `RemoveStatusCondition`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// Adds `new`, or updates the condition of the same type: `lastTransitionTime` changes only
/// when the status does; reason, message and observedGeneration are always taken from `new`.
/// Returns whether anything changed (client-go's `meta.SetStatusCondition`).
pub fn set_status_condition(conditions: &mut Vec<Condition>, new: Condition) -> bool {
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == new.type_) else {
        conditions.push(new);
        return true;
    };
    let mut changed = false;
    if existing.status != new.status {
        existing.status = new.status;
        existing.last_transition_time = new.last_transition_time;
        changed = true;
    }
    if existing.reason != new.reason {
        existing.reason = new.reason;
        changed = true;
    }
    if existing.message != new.message {
        existing.message = new.message;
        changed = true;
    }
    if existing.observed_generation != new.observed_generation {
        existing.observed_generation = new.observed_generation;
        changed = true;
    }
    changed
}

/// The condition of `type_`, if present (client-go's `meta.FindStatusCondition`).
pub fn find_status_condition<'a>(
    conditions: &'a [Condition],
    type_: &str,
) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Removes the condition of `type_`; returns whether one was there (client-go's
/// `meta.RemoveStatusCondition`).
pub fn remove_status_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn at(second: i64, status: &str, reason: &str, generation: Option<i64>) -> Condition {
        Condition {
            type_: "Ready".to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message: format!("{reason} message"),
            last_transition_time: Time(Timestamp::from_second(second).unwrap()),
            observed_generation: generation,
        }
    }

    #[test]
    fn transition_time_moves_only_with_the_status() {
        let mut conditions = Vec::new();
        assert!(set_status_condition(
            &mut conditions,
            at(1, "True", "A", None)
        ));
        assert!(set_status_condition(
            &mut conditions,
            at(2, "True", "B", Some(3))
        ));
        assert_eq!(conditions.len(), 1);
        assert_eq!(
            conditions[0].last_transition_time,
            at(1, "", "", None).last_transition_time
        );
        assert_eq!(conditions[0].reason, "B");
        assert_eq!(conditions[0].message, "B message");
        assert_eq!(conditions[0].observed_generation, Some(3));
        assert!(!set_status_condition(
            &mut conditions,
            at(3, "True", "B", Some(3))
        ));
        assert!(set_status_condition(
            &mut conditions,
            at(4, "False", "B", Some(3))
        ));
        assert_eq!(
            conditions[0].last_transition_time,
            at(4, "", "", None).last_transition_time
        );
    }

    #[test]
    fn finds_and_removes() {
        let mut conditions = vec![at(1, "True", "A", None)];
        assert_eq!(
            find_status_condition(&conditions, "Ready").map(|c| c.reason.as_str()),
            Some("A")
        );
        assert!(find_status_condition(&conditions, "Other").is_none());
        assert!(!remove_status_condition(&mut conditions, "Other"));
        assert!(remove_status_condition(&mut conditions, "Ready"));
        assert!(conditions.is_empty());
    }
}
