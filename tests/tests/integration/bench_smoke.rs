//! The propagation benchmark at smoke size, so `make test` keeps the harness working: every scenario
//! runs against real API servers and the real controller-manager, and the numbers it reports are
//! checked for being real measurements of the work asked for (not for meeting targets: those are
//! reported by `make bench`, see docs/benchmarks.md).

// test-runner: one job per test (each starts its own environments; the scenarios together
// took ~460 s as one job, longer than any other file)
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use karmada_bench::report::{Report, Run};
use karmada_bench::{BenchConfig, run};

/// The smoke size with no run at all: each test below turns on the runs it checks.
fn nothing() -> BenchConfig {
    BenchConfig {
        main_run: false,
        karmada_default_qps: false,
        customization: false,
        pull: false,
        scale_out: Vec::new(),
        failover_templates: 0,
        floor: false,
        ..BenchConfig::smoke()
    }
}

/// Runs `config`, prints its report and checks that the markdown has each of `headings` and the
/// runs are labelled `labels`, in order.
async fn smoke(config: &BenchConfig, labels: &[&str], headings: &[&str]) -> Report {
    let report = run(config, |step| eprintln!("bench: {step}"))
        .await
        .unwrap_or_else(|e| panic!("benchmark failed: {e:#}"));
    let md = report.markdown();
    eprintln!("{md}");
    let got: Vec<&str> = report.runs.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(got, labels);
    for heading in headings {
        assert!(md.contains(heading), "markdown lacks {heading}:\n{md}");
    }
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["runs"].as_array().map(Vec::len), Some(labels.len()));
    report
}

/// A burst run measured what it was asked: one arrival per template and member, every member
/// object written by the controller-manager (in Pull mode by the agents, the controller-manager
/// never contacting a member), every template's binding and Event on the host, and the process
/// numbers, the watches and connections the controllers hold on each member; the Deployments
/// reported Healthy only where the Lua customization's health rule ran
/// (the API-server-only members never roll them out).
fn assert_burst(config: &BenchConfig, run: &Run) {
    let b = run.burst.as_ref().expect("a burst run has a burst");
    let templates = if run.label.starts_with("Karmada default QPS") {
        config.default_qps_templates
    } else {
        config.deployments + config.configmaps
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
    let healthy = if run.customization {
        config.deployments
    } else {
        0
    };
    assert_eq!(
        run.healthy_deployment_bindings, healthy,
        "{}: Deployment bindings reported Healthy",
        run.label
    );
    assert!(run.failover.is_none(), "{}", run.label);
    // The controllers (in Pull mode the agents) watch and hold a connection to every member.
    assert_eq!(b.member_load.len(), run.members, "{}", run.label);
    for (member, load) in &b.member_load {
        assert!(
            load.watches > 0 && load.connections > 0,
            "{}: {member}: {load:?}",
            run.label
        );
    }
}

/// The main run (burst, restart, steady rate) and the minimal-writes floor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_main_run_and_the_floor_report_what_they_measured() {
    let profiles = tempfile::tempdir().unwrap();
    let config = BenchConfig {
        main_run: true,
        floor: true,
        heap_profiles: Some(profiles.path().to_path_buf()),
        ..nothing()
    };
    let report = smoke(
        &config,
        &["QPS 1000, 2 members"],
        &[
            "#### Burst",
            "#### Restart",
            "#### Steady rate",
            "#### Minimal-writes floor",
        ],
    )
    .await;
    let main = &report.runs[0];
    assert_burst(&config, main);
    let profile = main
        .heap_profile
        .as_ref()
        .expect("a heap profile after the burst");
    assert!(
        profile.starts_with(profiles.path()),
        "{}",
        profile.display()
    );
    let bytes = std::fs::read(profile).unwrap();
    assert!(
        bytes.len() > 100 && bytes.starts_with(&[0x1f, 0x8b]),
        "{}: not a gzipped profile ({} bytes)",
        profile.display(),
        bytes.len()
    );
    let templates = config.deployments + config.configmaps;
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
}

/// A burst at Karmada's default client QPS, and one with a Lua ResourceInterpreterCustomization
/// for Deployments installed (its health rule, unlike the native one, calls them Healthy).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_qps_and_customization_runs_report_what_they_measured() {
    let config = BenchConfig {
        karmada_default_qps: true,
        customization: true,
        ..nothing()
    };
    let report = smoke(
        &config,
        &[
            "Karmada default QPS, 2 members",
            "QPS 1000, 2 members, Lua customization",
        ],
        &["#### Burst"],
    )
    .await;
    for run in &report.runs {
        assert_burst(&config, run);
        assert!(run.restart.is_none() && run.steady.is_none(), "{run:?}");
    }
    assert!(report.runs[1].customization);
    assert!(report.floor.is_none());
}

/// A burst with every member in Pull mode (each served by its own karmada-agent), and one scaled
/// out to a single member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pull_and_scale_out_runs_report_what_they_measured() {
    let config = BenchConfig {
        pull: true,
        scale_out: vec![1],
        ..nothing()
    };
    let report = smoke(
        &config,
        &["QPS 1000, 2 members, Pull (agents)", "QPS 1000, 1 member"],
        &["Pull mode (each member served by its own karmada-agent"],
    )
    .await;
    for run in &report.runs {
        assert_burst(&config, run);
    }
    assert!(report.runs[0].pull && !report.runs[1].pull);
}

/// Failover: every Deployment evicted from the lost member2 (its task stays: the API-server-only
/// member1 never reports the replacement healthy) and whole on member1, in that order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_failover_run_reports_what_it_measured() {
    let config = BenchConfig {
        failover_templates: BenchConfig::smoke().failover_templates,
        ..nothing()
    };
    let report = smoke(
        &config,
        &["QPS 1000, 2 members, failover"],
        &["#### Failover"],
    )
    .await;
    let run = &report.runs[0];
    assert!(run.burst.is_none() && run.steady.is_none());
    let f = run
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
    // Settled means converged: every member holds every manifest as its Work says.
    assert_eq!(c.stale_members, 0, "{:?}", c.stale_examples);

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
    // Nor rewrite the bindings that existed (it once wrote an explicit default into every
    // attached binding).
    let binding_changes: u32 = r
        .changes
        .iter()
        .filter(|(k, _)| *k == "host/ResourceBinding")
        .map(|(_, c)| c.total())
        .sum();
    assert_eq!(
        binding_changes, 0,
        "a restart must not rewrite existing bindings: {r:?}"
    );
    assert!(r.changed_fields.is_empty(), "{:?}", r.changed_fields);
    // The new process created the fresh workload's 2 objects in each member.
    assert!(r.member_writes >= (2 * members) as u64, "{r:?}");
    assert_eq!(r.stale_members, 0, "{:?}", r.stale_examples);

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
