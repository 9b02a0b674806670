//! The propagation benchmark at smoke size, so `make test` keeps the harness working: every scenario
//! runs against real API servers and the real controller-manager, and the numbers it reports are
//! checked for being real measurements of the work asked for (not for meeting targets: those are
//! reported by `make bench`, see docs/benchmarks.md).

use karmada_bench::{BenchConfig, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn every_scenario_runs_and_reports_what_it_measured() {
    let config = BenchConfig::smoke();
    let report = run(&config, |step| eprintln!("bench: {step}"))
        .await
        .unwrap_or_else(|e| panic!("benchmark failed: {e:#}"));
    eprintln!("{}", report.markdown());
    let templates = config.deployments + config.configmaps;

    // Main run (QPS 1000, 2 members), Karmada's default QPS, the Lua customization, Pull mode,
    // scale-out to 1 member, failover.
    let labels: Vec<&str> = report.runs.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "QPS 1000, 2 members",
            "Karmada default QPS, 2 members",
            "QPS 1000, 2 members, Lua customization",
            "QPS 1000, 2 members, Pull (agents)",
            "QPS 1000, 1 member",
            "QPS 1000, 2 members, failover",
        ]
    );
    let (failover_run, runs) = report.runs.split_last().unwrap();
    for run in runs {
        let b = run
            .burst
            .as_ref()
            .expect("every run but failover has a burst");
        let templates = if run.label.starts_with("Karmada default QPS") {
            config.default_qps_templates
        } else {
            templates
        };
        assert_eq!(b.templates, templates, "{}", run.label);
        assert_eq!(
            b.arrival.count,
            templates * run.members,
            "{}: one arrival per template and member",
            run.label
        );
        assert!(
            b.converged_seconds > 0.0 && b.settled_seconds >= b.create_seconds,
            "{}: {b:?}",
            run.label
        );
        // Every member object was created by the controller-manager (in Pull mode by the agents, and
        // the controller-manager never contacted a member), and every binding and Work on the host.
        if run.pull {
            let agents = b.agents.expect("a Pull run measures its agents");
            assert_eq!(agents.count, run.members, "{}", run.label);
            assert!(
                agents.cpu_seconds > 0.0 && agents.peak_rss_mib > 0.0,
                "{}: {agents:?}",
                run.label
            );
            assert!(
                b.requests
                    .get("members")
                    .is_none_or(|m| m.values().sum::<u64>() == 0),
                "{}: the controller-manager contacted a Pull member: {:?}",
                run.label,
                b.requests
            );
        } else {
            assert!(b.agents.is_none(), "{}", run.label);
            assert!(
                b.member_writes >= (templates * run.members) as u64,
                "{}: {b:?}",
                run.label
            );
        }
        assert!(
            b.host_writes >= (templates * (1 + run.members)) as u64,
            "{}: {b:?}",
            run.label
        );
        // The host API server saw every template created, one binding per template, and at least the
        // detector's ApplyPolicySucceed Event per template.
        let by_resource = |r: &str| b.host_writes_by_resource.get(r).copied().unwrap_or(0);
        assert!(
            by_resource("deployments") + by_resource("configmaps") >= templates as u64
                && by_resource("resourcebindings") >= templates as u64
                && by_resource("events") >= templates as u64,
            "{}: {b:?}",
            run.label
        );
        assert!(
            b.cpu_seconds > 0.0 && b.peak_rss_mib >= b.rss_mib && b.rss_mib > 0.0,
            "{}: {b:?}",
            run.label
        );
    }

    // The customization's scripts ran: its health rule (unlike the native one) calls the Deployments
    // the API-server-only members never roll out healthy.
    for run in &report.runs {
        let expected = if run.customization {
            config.deployments
        } else {
            0
        };
        assert_eq!(
            run.healthy_deployment_bindings, expected,
            "{}: Deployment bindings reported Healthy",
            run.label
        );
    }
    assert!(report.runs[2].customization);

    let main = &report.runs[0];
    let restart = main.restart.as_ref().expect("the main run restarts");
    assert_eq!(restart.templates, templates);
    assert_eq!(
        restart.fresh_latency.count, main.members,
        "the fresh template reached every member"
    );
    assert!(restart.ready_seconds > 0.0 && restart.settled_seconds > 0.0);
    let member_changes: u32 = restart
        .changes
        .iter()
        .filter(|(k, _)| k.starts_with("members/"))
        .map(|(_, c)| c.total())
        .sum();
    assert_eq!(
        member_changes, 0,
        "a restart must not write to members: {:?}",
        restart.changes
    );
    // The new process writes the fresh template's binding, Works and Events and its lease: a
    // number that does not grow with the templates already propagated. A replay that fails (and
    // records a Warning per retry) or rewrites what it finds costs a multiple of the templates.
    let host_writes = karmada_e2e::process::writes(&restart.requests, "host");
    assert!(
        host_writes <= 2 * templates as u64,
        "the restarted process wrote {host_writes} times to the host for {templates} templates \
         already propagated: {:?}",
        restart.requests
    );

    // Failover: every Deployment evicted from the lost member2 (its task stays: the API-server-only
    // member1 never reports the replacement healthy) and whole on member1, in that order.
    assert!(failover_run.burst.is_none());
    let f = failover_run
        .failover
        .as_ref()
        .expect("the failover run measures failover");
    assert_eq!(
        (f.templates, f.members, f.eviction_tasks),
        (config.failover_templates, 2, config.failover_templates),
        "{f:?}"
    );
    assert!(
        0.0 < f.taint_seconds
            && f.taint_seconds <= f.evicted_seconds
            && f.evicted_seconds <= f.whole_seconds,
        "{f:?}"
    );
    assert!(
        f.member_writes >= f.templates as u64 && f.host_writes > 0 && f.cpu_seconds > 0.0,
        "{f:?}"
    );

    // Only the main run measures the steady rate.
    assert!(report.runs[1..].iter().all(|r| r.steady.is_none()));
    let s = main
        .steady
        .as_ref()
        .expect("the main run measures the steady rate");
    let expected = (config.steady_rate * config.steady_seconds) as usize;
    assert_eq!(s.templates, expected);
    assert_eq!(s.latency.count, expected * main.members);
    assert!(s.latency.p50_ms > 0.0 && s.latency.max_ms >= s.latency.p99_ms);

    let floor = report.floor.as_ref().expect("floor measured");
    assert_eq!(floor.templates, templates);
    assert_eq!(floor.writes, templates * (2 + 2 * config.members));
    assert!(floor.seconds > 0.0);

    let md = report.markdown();
    for heading in [
        "#### Burst",
        "#### Restart",
        "#### Steady rate",
        "#### Minimal-writes floor",
        "Pull mode (each member served by its own karmada-agent",
        "#### Failover",
    ] {
        assert!(md.contains(heading), "markdown lacks {heading}:\n{md}");
    }
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["runs"].as_array().map(Vec::len), Some(6));
}

/// The scheduling benchmark at smoke size, karmada-rs only (Karmada's scheduler needs `make
/// karmada-binaries`, which `make test` does not build): every backlog and live binding is seen
/// placed, and the process numbers are read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduling_benchmark_runs_and_reports_what_it_measured() {
    use karmada_bench::scheduling::{SchedulingConfig, run};
    use karmada_bench::session::Impl;
    let config = SchedulingConfig::smoke();
    let report = run(&config, &[Impl::Rust])
        .await
        .unwrap_or_else(|e| panic!("scheduling benchmark failed: {e:#}"));
    eprintln!("{}", report.markdown());
    let [run] = report.runs.as_slice() else {
        panic!("one run expected: {:?}", report.runs);
    };
    assert_eq!((run.clusters, run.bindings), (3, config.bindings));
    let live = (config.live_rate * config.live_seconds).round() as usize;
    assert_eq!(run.live_bindings, live);
    assert_eq!(
        run.live_latency.count, live,
        "every live binding seen placed"
    );
    assert!(
        run.backlog_seconds > 0.0 && run.bindings_per_second > 0.0,
        "{run:?}"
    );
    assert!(run.cpu_seconds > 0.0 && run.peak_rss_mib > 0.0, "{run:?}");
    // The general estimate alone puts every replica on the large-summary cluster.
    assert_eq!(
        (run.backlog_small_share_pct, run.live_small_share_pct),
        (0.0, 0.0),
        "{run:?}"
    );
    assert_eq!(run.estimator_requests, None, "{run:?}");
}

/// The scheduling benchmark's estimator variant at smoke size, both schedulers (Karmada's scheduler
/// and estimator need `make karmada-binaries`: this runs with the `karmada-go` feature, in `make
/// test-scheduler-estimator`): the estimators answer every binding's placement, which then gives
/// the small-summary clusters a share the general estimate alone does not.
#[cfg(feature = "karmada-go")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduling_benchmark_with_the_estimator_runs_and_reports_what_it_measured() {
    use karmada_bench::scheduling::{SchedulingConfig, run};
    use karmada_bench::session::Impl;
    // Smaller than the plain smoke run: this test adds a member API server and six estimators.
    let config = SchedulingConfig {
        bindings: 20,
        live_seconds: 1.0,
        estimator: vec![true],
        ..SchedulingConfig::smoke()
    };
    let report = run(&config, &[Impl::Rust, Impl::Karmada])
        .await
        .unwrap_or_else(|e| panic!("scheduling benchmark failed: {e:#}"));
    eprintln!("{}", report.markdown());
    assert_eq!(report.runs.len(), 2, "{:?}", report.runs);
    let live = (config.live_rate * config.live_seconds).round() as usize;
    for run in &report.runs {
        assert!(run.estimator, "{run:?}");
        assert_eq!(run.live_latency.count, live, "{run:?}");
        assert!(
            run.bindings_per_second > 0.0 && run.cpu_seconds > 0.0,
            "{run:?}"
        );
        // 3 clusters: accurate 440 on the large-summary one, general 390 on the others: 4/3/3.
        assert!(
            (run.live_small_share_pct - 60.0).abs() < 0.1,
            "the estimator did not cut the large summary: {run:?}"
        );
        let requests = run.estimator_requests.unwrap_or_default();
        assert!(
            requests >= (3 * live) as f64,
            "each live placement asks the 3 estimators: {run:?}"
        );
        assert!(
            run.estimator_cpu_seconds.is_some_and(|c| c > 0.0),
            "{run:?}"
        );
    }
}

/// The staged-rollout benchmark at smoke size: every workload is seen through its three stages in
/// order with the new revision, no stage completes before its soak time, and the writes and process
/// numbers are read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rollout_benchmark_runs_and_reports_what_it_measured() {
    use karmada_bench::rollout::{RolloutConfig, STAGES, run};
    let config = RolloutConfig::smoke();
    let report = run(&config, |step| eprintln!("rollout bench: {step}"))
        .await
        .unwrap_or_else(|e| panic!("rollout benchmark failed: {e:#}"));
    eprintln!("{}", report.markdown());
    assert_eq!(report.stages.len(), STAGES);
    for stage in &report.stages {
        assert_eq!(stage.completed, config.workloads, "{stage:?}");
        assert_eq!(stage.beyond_soak.count, config.workloads, "{stage:?}");
    }
    // Three stages, each held for at least the soak time (the controller counts whole seconds).
    assert!(
        report.total_seconds >= f64::from(STAGES as u32 * config.soak_seconds.saturating_sub(1)),
        "{report:?}"
    );
    // The host saw every template update, at least one Rollout status write per stage and
    // workload, and the Works the gate released to each member.
    let by = |r: &str| report.host_writes_by_resource.get(r).copied().unwrap_or(0);
    let n = config.workloads as u64;
    assert!(by("configmaps") >= n, "{report:?}");
    assert!(by("rollouts/status") >= n * STAGES as u64, "{report:?}");
    assert!(by("works") >= n * STAGES as u64, "{report:?}");
    assert!(
        report.kcm_member_writes >= n * STAGES as u64 && report.kcm_host_writes > 0,
        "{report:?}"
    );
    assert!(
        report.cpu_seconds > 0.0 && report.peak_rss_mib >= report.rss_before_mib,
        "{report:?}"
    );
}

/// The cold start at smoke size: 10 Deployments, each with its own ConfigMap and policy
/// (`propagateDeps: true`), created while the controller-manager is stopped, reach both members
/// when it starts, their ConfigMaps through attached bindings; a restart over them rewrites no
/// member object and a fresh workload created after it still arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cold_start_runs_and_reports_what_it_measured() {
    let config = BenchConfig {
        cold_start: 10,
        cold_start_restart: true,
        only_cold_start: true,
        ..BenchConfig::smoke()
    };
    let report = run(&config, |step| eprintln!("bench: {step}"))
        .await
        .unwrap_or_else(|e| panic!("cold-start benchmark failed: {e:#}"));
    eprintln!("{}", report.markdown());
    assert!(
        report.runs.is_empty() && report.floor.is_none(),
        "{report:?}"
    );
    let [cold_run] = report.cold_starts.as_slice() else {
        panic!("one cold start expected: {:?}", report.cold_starts);
    };
    let c = &cold_run.cold;
    let (n, members) = (config.cold_start, config.members);
    assert_eq!((c.deployments, c.members, c.namespaces), (n, members, 2));
    // Every Deployment and ConfigMap arrived in every member, timed from the start.
    assert_eq!(c.arrival.count, 2 * n * members, "{c:?}");
    assert!(
        c.ready_seconds > 0.0
            && c.member_objects_seconds > 0.0
            && c.fully_applied_seconds > 0.0
            && c.settled_seconds > 0.0,
        "{c:?}"
    );
    // The controllers wrote every member object and, on the host, a binding per Deployment and
    // per ConfigMap (the distributor's attached binding) and a Work per binding and member.
    assert!(c.member_writes >= (2 * n * members) as u64, "{c:?}");
    let by = |r: &str| c.host_writes_by_resource.get(r).copied().unwrap_or(0);
    assert!(by("resourcebindings") >= (2 * n) as u64, "{c:?}");
    assert!(by("works") >= (2 * n * members) as u64, "{c:?}");
    assert!(c.host_writes >= (2 * n + 2 * n * members) as u64, "{c:?}");
    assert!(
        c.cpu_seconds > 0.0 && c.peak_rss_mib >= c.rss_mib && c.rss_mib > 0.0,
        "{c:?}"
    );

    let r = cold_run
        .restart
        .as_ref()
        .expect("the cold start was asked to restart");
    assert_eq!(r.objects, 2 * n, "{r:?}");
    assert_eq!(
        r.fresh_latency.count,
        2 * members,
        "the fresh Deployment and ConfigMap reached every member: {r:?}"
    );
    assert!(r.fresh_seconds > 0.0 && r.settled_seconds > 0.0, "{r:?}");
    let member_changes: u32 = r
        .changes
        .iter()
        .filter(|(k, _)| k.starts_with("members/"))
        .map(|(_, c)| c.total())
        .sum();
    assert_eq!(
        member_changes, 0,
        "a restart must not write to members: {r:?}"
    );
    // The new process created the fresh workload's 2 objects in each member.
    assert!(r.member_writes >= (2 * members) as u64, "{r:?}");

    let md = report.markdown();
    for heading in ["#### Cold start", "#### Restart under the cold-start load"] {
        assert!(md.contains(heading), "markdown lacks {heading}:\n{md}");
    }
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(
        json["cold_starts"][0]["cold"]["arrival"]["count"],
        2 * n * members
    );
}
