//! `karmada-controller-manager` command line: bad flags exit 2 naming the flag (an unparsable or
//! unknown one: `cmd/karmada-controller-manager/tests`), every Karmada controller name is accepted,
//! `*` leaves nothing out and ineffective flags log one warning, `version` (and the agent's), `--help`
//! groups, a missing kubeconfig, and an unreachable API server.

use std::time::Duration;

use karmada_e2e::controller_manager::*;

const T: Duration = Duration::from_secs(30);

#[test]
fn unknown_controller_exits_2_listing_valid_names() {
    let (code, _, err) = run_to_exit(&["--controllers=*,nope"], T);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--controllers"), "{err}");
    assert!(err.contains("\"nope\""), "{err}");
    assert!(
        err.contains("workStatus") && err.contains("clustertaintpolicy"),
        "{err}"
    );
}

/// Every name Karmada's controller-manager accepts is implemented: naming them all gets as far as
/// the kubeconfig (the rules for names not implemented are unit-tested in `controllers.rs`).
#[test]
fn every_karmada_controller_can_be_named() {
    let (code, help, _) = run_to_exit(&["--help"], T);
    assert_eq!(code, Some(0));
    assert!(
        !help.contains("Not implemented yet"),
        "--help lists controllers as not implemented:\n{help}"
    );
    let all = help
        .lines()
        .find_map(|l| l.trim().strip_prefix("All controllers: "))
        .expect("--help lists the controllers")
        .trim_end_matches('.')
        .to_owned();
    // Karmada's 27 names, and `scheduler` (the built-in scheduler: see docs/compatibility.md).
    assert_eq!(all.split(", ").count(), 28, "{all}");
    let (code, _, err) = run_to_exit(
        &[
            &format!("--controllers={}", all.replace(", ", ",")),
            "--kubeconfig=/nonexistent/kubeconfig",
            "--health-probe-bind-address=0",
            "--metrics-bind-address=0",
        ],
        T,
    );
    assert_eq!(code, Some(2), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(errors[0].contains("--kubeconfig"), "{err}");
}

/// `*` leaves nothing out (no warning about controllers); flags and gates that have no effect yet
/// are named in one warning when set to something other than their default.
#[tokio::test]
async fn star_and_ineffective_flags_each_log_one_warning() {
    let dir = std::env::temp_dir();
    let server = format!("https://127.0.0.1:{}", free_port());
    let kubeconfig = kubeconfig_for(&dir, &server);
    let mut kcm = Kcm::start(
        &kubeconfig,
        &[
            "--controllers=*,-multiclusterservice",
            "--resync-period=1m",
            "--enable-taint-manager=true",
            "--feature-gates=SchedulingOvercommitProtection=true,PropagateDeps=true",
            "--log-dir=/tmp",
        ],
        &[],
    );
    kcm.wait_for("the startup warnings", Duration::from_secs(20), |k| {
        k.log().contains("cannot reach the API server")
    })
    .await;
    let log = kcm.log();
    kcm.signal(libc::SIGTERM);
    let status = kcm
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("exits after SIGTERM");
    assert_eq!(Kcm::code(status), Some(0), "{log}");
    let _ = std::fs::remove_file(kubeconfig);

    assert!(
        !log.contains("not implemented in karmada-rs yet"),
        "a controller was left out:\n{log}"
    );

    let ignored: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("not acted on yet"))
        .collect();
    assert_eq!(ignored.len(), 1, "{log}");
    let line = ignored[0];
    assert!(line.contains("WARN"), "{log}");
    for set in [
        "--resync-period=1m",
        "--log-dir=/tmp",
        "SchedulingOvercommitProtection=true",
    ] {
        assert!(line.contains(set), "{set} missing in {line}");
    }
    // At their defaults, or with an effect now: nothing to warn about.
    assert!(!line.contains("enable-taint-manager"), "{line}");
    assert!(!line.contains("PropagateDeps"), "{line}");
    assert!(line.contains("Accepted, no effect yet"), "{line}");
}

#[test]
fn negative_lease_duration_exits_2_naming_the_flag() {
    let (code, _, err) = run_to_exit(&["--leader-elect-lease-duration=-1s"], T);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--leader-elect-lease-duration"), "{err}");
    assert!(err.contains("must be greater than 0"), "{err}");
}

#[test]
fn every_problem_is_reported_at_once() {
    let (code, _, err) = run_to_exit(
        &[
            "--controllers=nope",
            "--leader-elect-lease-duration=-1s",
            "--cluster-status-update-frequency=0s",
            "--logging-format=xml",
            "--feature-gates=NoSuchGate=true",
        ],
        T,
    );
    assert_eq!(code, Some(2), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 5, "{err}");
    for flag in [
        "--controllers",
        "--leader-elect-lease-duration",
        "--cluster-status-update-frequency",
        "--logging-format",
        "--feature-gates",
    ] {
        assert!(err.contains(flag), "{flag} not named in:\n{err}");
    }
}

#[test]
fn missing_kubeconfig_exits_2_naming_the_flag() {
    let (code, _, err) = run_to_exit(
        &[
            "--kubeconfig=/nonexistent/kubeconfig",
            "--health-probe-bind-address=0",
            "--metrics-bind-address=0",
        ],
        T,
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--kubeconfig"), "{err}");
    assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
}

/// `version` and `--version` of the controller-manager and the agent print Karmada's line,
/// `<binary> version: version.Info{GitVersion:…, …, Platform:…}`, every field in Karmada's order, with
/// this checkout's commit and the same stamp as `karmadactl version` (one formatter, one build script).
#[test]
fn version_prints_version_commit_and_build_date() {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("git");
    let commit = if commit.status.success() {
        String::from_utf8_lossy(&commit.stdout).trim().to_owned()
    } else {
        "unknown".to_owned()
    };
    for (name, binary) in [
        ("karmada-controller-manager", binary()),
        ("karmada-agent", agent_binary()),
    ] {
        for args in [&["version"][..], &["--version"][..]] {
            let out = std::process::Command::new(binary)
                .args(args)
                .output()
                .expect("run the binary");
            let (stdout, stderr) = (
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
            );
            assert_eq!(out.status.code(), Some(0), "{name} {args:?}: {stderr}");
            let info = stdout
                .strip_prefix(&format!("{name} version: version.Info{{"))
                .and_then(|rest| rest.strip_suffix("}\n"))
                .unwrap_or_else(|| panic!("{name} {args:?} printed {stdout:?}"));
            let fields: Vec<(&str, &str)> = info
                .split(", ")
                .map(|f| {
                    let (k, v) = f.split_once(':').expect("Key:\"value\"");
                    (k, v.trim_matches('"'))
                })
                .collect();
            let keys: Vec<&str> = fields.iter().map(|(k, _)| *k).collect();
            assert_eq!(
                keys,
                [
                    "GitVersion",
                    "GitCommit",
                    "GitShortCommit",
                    "GitTreeState",
                    "BuildDate",
                    "GoVersion",
                    "Compiler",
                    "Platform"
                ],
                "{stdout}"
            );
            let field = |k: &str| fields.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
            assert!(
                field("GitVersion").is_some_and(|v| v.starts_with('v')),
                "{stdout}"
            );
            // The build script reruns when HEAD moves, so the binary names this checkout's commit.
            assert_eq!(field("GitCommit"), Some(commit.as_str()), "{stdout}");
            assert!(
                field("GitShortCommit").is_some_and(|v| commit.starts_with(v)),
                "{stdout}"
            );
            assert!(
                field("BuildDate").is_some_and(|v| v.len() == 20 && v.ends_with('Z')),
                "{stdout}"
            );
            assert!(
                field("GoVersion").is_some_and(|v| v.starts_with("rustc ")),
                "{stdout}"
            );
            assert_eq!(field("Compiler"), Some("rustc"), "{stdout}");
            assert!(
                field("Platform").is_some_and(|v| v.contains('/')),
                "{stdout}"
            );
            // The same stamp and formatter as karmadactl's.
            assert_eq!(
                stdout.trim_end(),
                format!("{name} version: {}", karmadactl::VERSION_INFO),
                "{name} and karmadactl disagree"
            );
        }
    }
}

#[test]
fn help_groups_flags_like_karmada() {
    let (code, out, _) = run_to_exit(&["--help"], T);
    assert_eq!(code, Some(0));
    let logs = out.find("Logs flags:").expect("Logs section");
    let generic = out.find("Generic flags:").expect("Generic section");
    let failover = out
        .find("Cluster failover flags:")
        .expect("Cluster failover section");
    assert!(logs < generic && generic < failover, "{out}");
    for flag in [
        "--kubeconfig",
        "--controllers",
        "--leader-elect-resource-namespace",
        "--concurrent-work-syncs",
        "--rate-limiter-bucket-size",
        "--feature-gates",
        "--logging-format",
        "--enable-no-execute-taint-eviction",
        "hpaScaleTargetMarker",
    ] {
        assert!(out.contains(flag), "{flag} missing in help");
    }
}

#[tokio::test]
async fn unreachable_api_server_is_reported_clearly_and_probes_stay_up() {
    let dir = std::env::temp_dir();
    let port = free_port();
    let server = format!("https://127.0.0.1:{port}");
    let kubeconfig = kubeconfig_for(&dir, &server);
    let mut kcm = Kcm::start(&kubeconfig, &[], &[]);
    kcm.wait_for(
        "a clear error naming the server",
        Duration::from_secs(20),
        |k| {
            let log = k.log();
            log.contains("cannot reach the API server")
                && log.contains(&format!("127.0.0.1:{port}"))
        },
    )
    .await;
    assert_eq!(kcm.probe("/healthz").map(|r| r.0), Some(200));
    kcm.signal(libc::SIGTERM);
    let status = kcm
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("exits after SIGTERM");
    assert_eq!(Kcm::code(status), Some(0), "{}", kcm.log());
    let _ = std::fs::remove_file(kubeconfig);
}
