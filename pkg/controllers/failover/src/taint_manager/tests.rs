use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karmada_apis::policy::v1alpha1::ClusterFailoverBehavior;

fn taint(key: &str, effect: &str, added_ms: i64) -> Taint {
    Taint {
        key: key.into(),
        effect: effect.into(),
        value: None,
        time_added: Timestamp::from_millisecond(added_ms).ok().map(Time),
    }
}

fn toleration(key: &str, seconds: Option<i64>) -> Toleration {
    Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some("NoExecute".into()),
        toleration_seconds: seconds,
        ..Default::default()
    }
}

#[test]
fn untolerated_taint_evicts_at_once() {
    let t = taint("a", "NoExecute", 0);
    let taints = vec![&t];
    assert!(matching_tolerations(&taints, &[toleration("b", None)]).is_none());
    assert_eq!(
        matching_tolerations(&taints, &[]).map(|v| v.len()),
        None,
        "no toleration tolerates nothing"
    );
}

#[test]
fn toleration_seconds_count_from_time_added() {
    let t = taint("a", "NoExecute", 1_000_000);
    let taints = vec![&t];
    let now = Timestamp::from_millisecond(1_010_000).unwrap();
    let bounded = [toleration("a", Some(30))];
    let used = matching_tolerations(&taints, &bounded).unwrap();
    assert_eq!(
        min_toleration_time(&taints, &used, now),
        Some(Duration::from_secs(20))
    );
    let late = Timestamp::from_millisecond(1_040_000).unwrap();
    assert_eq!(
        min_toleration_time(&taints, &used, late),
        Some(Duration::ZERO)
    );
    let forever = [toleration("a", None)];
    let used = matching_tolerations(&taints, &forever).unwrap();
    assert_eq!(min_toleration_time(&taints, &used, now), None);
    assert_eq!(min_toleration_time(&[], &used, now), None);
}

#[test]
fn purge_mode_prefers_the_policy() {
    assert_eq!(purge_mode(None, "Directly"), PurgeMode::Directly);
    assert_eq!(purge_mode(None, "Gracefully"), PurgeMode::Gracefully);
    assert_eq!(purge_mode(None, "x"), PurgeMode::Gracefully);
    let f = FailoverBehavior {
        cluster: Some(ClusterFailoverBehavior {
            purge_mode: PurgeMode::Gracefully,
            state_preservation: None,
        }),
        application: None,
    };
    assert_eq!(purge_mode(Some(&f), "Directly"), PurgeMode::Gracefully);
}

#[test]
fn dynamic_limiter_paces_by_rate() {
    let l = DynamicRateLimiter::new(0.5);
    assert_eq!(RateLimiter::<u8>::when(&l, &0), Duration::from_secs(2));
    let zero = DynamicRateLimiter::new(0.0);
    assert_eq!(RateLimiter::<u8>::when(&zero, &0), rate::MAX_EVICTION_DELAY);
}
