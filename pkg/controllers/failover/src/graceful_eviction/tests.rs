use super::*;

fn at(ms: i64) -> Time {
    Time(Timestamp::from_millisecond(ms).unwrap())
}

fn task(cluster: &str, created: Option<i64>) -> GracefulEvictionTask {
    GracefulEvictionTask {
        from_cluster: cluster.into(),
        reason: "TaintUntolerated".into(),
        producer: "TaintManager".into(),
        creation_timestamp: created.map(at),
        ..Default::default()
    }
}

fn target(name: &str) -> TargetCluster {
    TargetCluster {
        name: name.into(),
        replicas: 1,
        ..Default::default()
    }
}

fn status(cluster: &str, health: ResourceHealth) -> AggregatedStatusItem {
    AggregatedStatusItem {
        cluster_name: cluster.into(),
        health: Some(health),
        ..Default::default()
    }
}

#[test]
fn new_tasks_are_stamped_then_wait_for_health_or_timeout() {
    let targets = [target("b")];
    let unhealthy = [status("b", ResourceHealth::Unhealthy)];
    let opt = |observed| Assessment {
        timeout: Duration::from_secs(600),
        schedule_result: &targets,
        observed_status: observed,
        has_scheduled: true,
        now: Timestamp::from_millisecond(2000).unwrap(),
    };
    let (kept, evicted) = assess(&[task("a", None)], &at(1000), opt(&unhealthy));
    assert_eq!(kept[0].creation_timestamp, Some(at(1000)));
    assert!(evicted.is_empty());
    let (kept, evicted) = assess(&kept, &at(2000), opt(&unhealthy));
    assert_eq!((kept.len(), evicted.len()), (1, 0));
    let healthy = [status("b", ResourceHealth::Healthy)];
    let (kept, evicted) = assess(&kept, &at(2000), opt(&healthy));
    assert_eq!((kept.len(), evicted), (0, vec!["a".to_owned()]));
    let late = assess(
        &[task("a", Some(1000))],
        &at(602_000),
        Assessment {
            now: Timestamp::from_millisecond(602_000).unwrap(),
            ..opt(&unhealthy)
        },
    );
    assert_eq!(late.1, vec!["a".to_owned()]);
}

#[test]
fn suppress_deletion_and_grace_period() {
    let opt = Assessment {
        timeout: Duration::from_secs(600),
        schedule_result: &[],
        observed_status: &[],
        has_scheduled: false,
        now: Timestamp::from_millisecond(20_000).unwrap(),
    };
    let keep = GracefulEvictionTask {
        suppress_deletion: Some(true),
        ..task("a", Some(0))
    };
    let drop = GracefulEvictionTask {
        suppress_deletion: Some(false),
        ..task("b", Some(0))
    };
    let graced = GracefulEvictionTask {
        grace_period_seconds: Some(10),
        ..task("c", Some(0))
    };
    // The grace period carries over to the next task without one (as in Karmada).
    let (kept, evicted) = assess(&[keep, drop, graced, task("d", Some(0))], &at(20_000), opt);
    assert_eq!(kept.len(), 1);
    assert_eq!(evicted, ["b", "c", "d"]);
    let pending = [task("e", Some(0))];
    assert_eq!(
        next_retry(
            &pending,
            Duration::from_secs(60),
            Timestamp::from_millisecond(20_000).unwrap()
        ),
        Some(Duration::from_secs(40))
    );
}

/// The requeue fires at the deadline to the millisecond, while new tasks are stamped in whole
/// seconds: the deadline is checked against the precise time, or the task stays (and, past its
/// deadline, is not requeued again) until something else changes the binding.
#[test]
fn a_grace_period_ends_at_its_requeue_not_a_second_later() {
    let graced = GracefulEvictionTask {
        grace_period_seconds: Some(10),
        ..task("a", Some(34_000))
    };
    let due = next_retry(
        std::slice::from_ref(&graced),
        Duration::from_secs(600),
        Timestamp::from_millisecond(34_725).unwrap(),
    );
    assert_eq!(due, Some(Duration::from_millis(9_275)));
    // The requeue at 44.0xx s; the stamp a new task would get is 44 s.
    let opt = Assessment {
        timeout: Duration::from_secs(600),
        schedule_result: &[],
        observed_status: &[],
        has_scheduled: false,
        now: Timestamp::from_millisecond(44_012).unwrap(),
    };
    let (kept, evicted) = assess(&[graced], &at(44_000), opt);
    assert!(kept.is_empty());
    assert_eq!(evicted, ["a"]);
}
