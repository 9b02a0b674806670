//! `karmadactl interpret` over every case of Karmada's third-party customizations
//! (`pkg/resourceinterpreter/default/thirdparty/resourcecustomizations/<group>/<version>/<kind>/`
//! of the pinned Karmada module, `KARMADA_VERSION` in hack/test-binaries.env), read at test time.
//!
//! Karmada's testdata names inputs, not outputs: its own test requires that every case runs
//! without error. This test requires that too, through the built binary with Karmada's flags, and
//! that what the binary prints equals what the controllers' interpreter answers for the same input
//! (the customizations as the first layer of `karmada_interpreter::Interpreter`, then the built-in
//! third-party layer and the native rules, as the controller-manager builds it): a script that
//! passes here behaves the same in the cluster. It also runs `--check` on every customization file,
//! and requires every printed result to be byte-identical to what gopkg.in/yaml.v3 (the encoder
//! Karmada's command prints with) writes for the same value: `hack/tools/yaml-v3-check`, built with
//! the Go toolchain from the module cache.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use karmada_apis::config::v1alpha1::ResourceInterpreterCustomization;
use karmada_apis::work::v1alpha2::AggregatedStatusItem;
use karmada_interpreter::{Interpreter, InterpreterOptions, ThirdParty};
use karmada_luavm::{Customizations, Limits};
use karmadactl::interpret::{Rule, rule};
use serde_json::{Value, json};

fn karmada_version() -> String {
    let env = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hack/test-binaries.env");
    let text = std::fs::read_to_string(&env).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("KARMADA_VERSION="))
        .expect("KARMADA_VERSION in hack/test-binaries.env")
        .trim()
        .to_owned()
}

/// The third-party customizations folder of the pinned Karmada module; fails saying how to fetch
/// the module when it is not in the Go module cache.
fn thirdparty_root() -> PathBuf {
    let version = karmada_version();
    let fetch = format!(
        "the Karmada {version} Go module is needed: run `cd hack/tools/karmada && go mod download \
         -json github.com/karmada-io/karmada@{version}`"
    );
    let out = Command::new("go")
        .args(["env", "GOMODCACHE"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run `go env GOMODCACHE` ({e}); {fetch}"));
    let cache = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let root = Path::new(&cache)
        .join(format!("github.com/karmada-io/karmada@{version}"))
        .join("pkg/resourceinterpreter/default/thirdparty/resourcecustomizations");
    assert!(root.is_dir(), "{} is missing; {fetch}", root.display());
    root
}

/// Builds `hack/tools/yaml-v3-check` (offline, from the module cache) and runs it over `files`:
/// its report, or a failure naming the cause.
fn yaml_v3_check(files: &[PathBuf]) -> Result<String, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hack/tools/yaml-v3-check");
    let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join("yaml-v3-check");
    let build = Command::new("go")
        .args(["build", "-mod=readonly", "-o"])
        .arg(&bin)
        .arg(".")
        .current_dir(&dir)
        .env("GOPROXY", "off")
        .env("GOFLAGS", "-mod=readonly")
        .output()
        .map_err(|e| format!("cannot run go: {e}"))?;
    if !build.status.success() {
        return Err(format!(
            "building hack/tools/yaml-v3-check failed (fetch its module with `cd hack/tools/yaml-v3-check && go mod download`): {}",
            String::from_utf8_lossy(&build.stderr)
        ));
    }
    let out = Command::new(&bin)
        .args(files)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(report)
    } else {
        Err(report)
    }
}

/// `<group>/<version>/<kind>` folders, sorted.
fn kinds(root: &Path) -> Vec<PathBuf> {
    let subdirs = |p: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect()
    };
    let mut dirs: Vec<PathBuf> = subdirs(root)
        .iter()
        .flat_map(|g| subdirs(g))
        .flat_map(|v| subdirs(&v))
        .collect();
    dirs.sort();
    dirs
}

fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

fn karmadactl(args: &[String]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_karmadactl"))
        .args(args)
        .output()
        .expect("run karmadactl");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What Karmada's `printExecuteResult` prints, split back into (name, value) pairs.
fn parse_output(out: &str) -> Vec<(String, Value)> {
    out.split("---\n")
        .filter(|d| !d.is_empty())
        .map(|doc| {
            let (header, body) = doc.split_once('\n').unwrap();
            let name = header
                .strip_prefix("# [")
                .and_then(|h| h.split_once("] "))
                .and_then(|(_, n)| n.strip_suffix(':'))
                .unwrap_or_else(|| panic!("bad result header {header:?} in {out}"));
            let value: Value = serde_saphyr::from_str(body)
                .unwrap_or_else(|e| panic!("result {name} is not YAML ({e}): {body}"));
            (name.to_owned(), value)
        })
        .collect()
}

/// Today's date as a timestamp starts (`2026-01-02T`), UTC.
fn today() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()[..11].to_owned()
}

/// JSON numbers compared by value (YAML `3` and JSON `3.0` are one number); timestamps of today
/// (scripts that stamp conditions with `os.date`, run twice a second apart) compared as one.
fn normalized(v: &Value) -> Value {
    match v {
        Value::String(s) if s.len() == 20 && s.ends_with('Z') && s.starts_with(&today()) => {
            json!("<now>")
        }
        Value::Number(n) => json!(n.as_f64()),
        Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), normalized(v))).collect())
        }
        other => other.clone(),
    }
}

/// The controllers' answer: the interpreter the controller-manager builds, the customizations as
/// its first layer, then the built-in third-party layer, in front of the native rules.
fn controllers_answer(
    customizations: &[ResourceInterpreterCustomization],
    rule: Rule,
    desired: Option<&Value>,
    observed: Option<&Value>,
    status: &[AggregatedStatusItem],
    replica: i32,
) -> Vec<(String, Value)> {
    let layer = Arc::new(Customizations::fixed(
        customizations.to_vec(),
        Limits::default(),
    ));
    let interpreter = Interpreter::new(InterpreterOptions::default())
        .with_layer(layer)
        .with_layer(Arc::new(ThirdParty::new(InterpreterOptions::default())));
    let object = desired.or(observed).unwrap();
    let results: Vec<(&str, Value)> = match rule.name {
        "Retain" => {
            let mut d = desired.unwrap().clone();
            interpreter.retain(&mut d, observed.unwrap()).unwrap();
            vec![("retained", d)]
        }
        "InterpretReplica" => {
            let r = interpreter.get_replicas(object).unwrap().unwrap();
            vec![
                ("replica", json!(r.replicas)),
                ("requires", serde_json::to_value(r.requirements).unwrap()),
            ]
        }
        "InterpretComponent" => {
            let c = interpreter.get_components(object).unwrap().unwrap();
            vec![("components", serde_json::to_value(c).unwrap())]
        }
        "ReviseReplica" => {
            let mut o = object.clone();
            interpreter
                .revise_replica(&mut o, i64::from(replica))
                .unwrap();
            vec![("revised", o)]
        }
        "InterpretStatus" => {
            let s = interpreter.reflect_status(object).unwrap();
            vec![("status", s.unwrap_or(Value::Null))]
        }
        "AggregateStatus" => {
            // The controllers take the aggregated object's status (None: unchanged).
            let a = interpreter.aggregate_status(object, status).unwrap();
            let status = a.unwrap_or_else(|| object.get("status").cloned().unwrap_or(Value::Null));
            vec![("aggregatedStatus.status", status)]
        }
        "InterpretHealth" => {
            let h = interpreter.try_interpret_health(object).unwrap().unwrap();
            vec![("healthy", json!(h))]
        }
        "InterpretDependency" => {
            let d = interpreter.layered_dependencies(object).unwrap().unwrap();
            vec![("dependencies", serde_json::to_value(d).unwrap())]
        }
        other => panic!("unknown rule {other}"),
    };
    results
        .into_iter()
        .map(|(n, v)| (n.to_owned(), v))
        .collect()
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one walk over every case of every kind, each operation's answer checked in turn"
)]
fn every_thirdparty_case_runs_and_matches_the_controllers() {
    let root = thirdparty_root();
    let kinds = kinds(&root);
    assert_eq!(
        kinds.len(),
        26,
        "Karmada {} has 26 third-party kinds",
        karmada_version()
    );
    let mut cases = 0;
    let mut failures = Vec::new();
    let outputs = Path::new(env!("CARGO_TARGET_TMPDIR")).join("interpret-thirdparty");
    let _ = std::fs::remove_dir_all(&outputs);
    std::fs::create_dir_all(&outputs).unwrap();
    let mut printed = Vec::new();
    for dir in &kinds {
        let kind = dir.strip_prefix(&root).unwrap().display().to_string();
        let file = dir.join("customizations.yaml");
        let customizations: Vec<ResourceInterpreterCustomization> = yaml_docs(&file)
            .into_iter()
            .map(|v| serde_json::from_value(v).unwrap())
            .collect();

        let (code, out, err) = karmadactl(&[
            "interpret".into(),
            "-f".into(),
            file.display().to_string(),
            "--check".into(),
        ]);
        if code != Some(0) || out.contains("ERROR") {
            failures.push(format!("{kind} --check: exit {code:?}\n{out}{err}"));
        }

        let tests = yaml_docs(&dir.join("customizations_tests.yaml"));
        for case in tests[0]["tests"].as_array().unwrap() {
            cases += 1;
            let field = |k: &str| case.get(k).and_then(Value::as_str).map(str::trim);
            let operation = field("operation").unwrap();
            let rule = rule(operation).unwrap();
            let path = |k: &str| field(k).map(|p| dir.join(p.trim_start_matches('/')));
            let replica = case
                .get("desiredReplicas")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let mut args: Vec<String> = vec![
                "interpret".into(),
                "-f".into(),
                file.display().to_string(),
                "--operation".into(),
                operation.into(),
                format!("--desired-replica={replica}"),
            ];
            let desired = path("desiredInputPath");
            let observed = path("observedInputPath");
            let status_path = path("statusInputPath");
            for (flag, p) in [
                ("--desired-file", &desired),
                ("--observed-file", &observed),
                ("--status-file", &status_path),
            ] {
                if let Some(p) = p {
                    args.push(flag.into());
                    args.push(p.display().to_string());
                }
            }
            let label = format!("{kind} {operation} ({})", args[6..].join(" "));
            let (code, out, err) = karmadactl(&args);
            if code != Some(0) || !err.is_empty() {
                failures.push(format!("{label}: exit {code:?}: {err}"));
                continue;
            }
            let observed_path = observed.clone();
            let file = outputs.join(format!("{cases:03}.txt"));
            std::fs::write(&file, &out).unwrap();
            printed.push(file);
            let mut got = parse_output(&out);
            // What the controllers add around the rule: the execution controller keeps the
            // member's metadata (retain_cluster_fields) before the retain rule runs, and the
            // status aggregation keeps only the aggregated object's status.
            for (name, value) in &mut got {
                if name == "retained" {
                    let observed = yaml_docs(observed_path.as_ref().unwrap()).remove(0);
                    karmada_interpreter::retain_cluster_fields(value, &observed).unwrap();
                }
                if name == "aggregatedStatus" {
                    *name = "aggregatedStatus.status".to_owned();
                    *value = value.get("status").cloned().unwrap_or(Value::Null);
                }
            }
            let desired = desired.map(|p| yaml_docs(&p).remove(0));
            let observed = observed.map(|p| yaml_docs(&p).remove(0));
            let status: Vec<AggregatedStatusItem> = status_path
                .map(|p| {
                    yaml_docs(&p)
                        .into_iter()
                        .map(|v| karmadactl::interpret::status_item(v).unwrap())
                        .collect()
                })
                .unwrap_or_default();
            let want = controllers_answer(
                &customizations,
                rule,
                desired.as_ref(),
                observed.as_ref(),
                &status,
                i32::try_from(replica).unwrap(),
            );
            let norm = |r: &[(String, Value)]| {
                r.iter()
                    .map(|(n, v)| (n.clone(), normalized(v)))
                    .collect::<Vec<_>>()
            };
            if norm(&got) != norm(&want) {
                failures.push(format!(
                    "{label}: karmadactl printed\n{out}\nthe controllers answer {want:?}"
                ));
            }
        }
    }
    eprintln!(
        "{cases} cases of {} third-party kinds run through karmadactl interpret",
        kinds.len()
    );
    assert!(cases >= 100, "only {cases} cases found");
    match yaml_v3_check(&printed) {
        Ok(report) => eprintln!("{}", report.trim()),
        Err(report) => failures.push(format!("not yaml.v3's output:\n{report}")),
    }
    assert!(
        failures.is_empty(),
        "{} of {cases} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Karmada's own `karmadactl interpret` examples (its command's testdata), through the binary:
/// the `--check` table and the result shape of each operation.
#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one walk over Karmada's interpret testdata, each command and its expected output in turn"
)]
fn karmadas_interpret_testdata() {
    let root = thirdparty_root();
    let testdata = root
        .ancestors()
        .nth(4)
        .unwrap()
        .join("karmadactl/interpret/testdata");
    let f = |name: &str| testdata.join(name).display().to_string();
    let run = |extra: &[&str]| {
        let mut args = vec!["interpret".to_owned(), "-f".into(), f("customization.yml")];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        karmadactl(&args)
    };

    let (code, out, err) = run(&["--check"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.starts_with("-----------------------------------\nSOURCE: "),
        "{out}"
    );
    assert!(
        out.contains("TARGET: apps/v1 Deployment   \nRULERS:\n"),
        "{out}"
    );
    for rule in [
        "Retain",
        "InterpretReplica",
        "InterpretComponent",
        "ReviseReplica",
        "InterpretStatus",
        "AggregateStatus",
        "InterpretHealth",
        "InterpretDependency",
    ] {
        assert!(out.contains(&format!("    {rule}:")), "{rule}: {out}");
    }

    let observed = f("observed.yml");
    let (code, out, err) = run(&[
        "--operation",
        "interpretReplica",
        "--observed-file",
        &observed,
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("---\n# [1/2] replica:\n"), "{out}");
    assert!(out.contains("---\n# [2/2] requires:\n"), "{out}");

    let (code, out, err) = run(&[
        "--operation",
        "reviseReplica",
        "--observed-file",
        &observed,
        "--desired-replica",
        "2",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with("---\n# [1/1] revised:\napiVersion: apps/v1\n"),
        "{out}"
    );
    assert!(out.contains("\n    replicas: 2\n"), "{out}");

    let (code, out, err) = run(&[
        "--operation",
        "aggregateStatus",
        "--observed-file",
        &observed,
        "--status-file",
        &f("status.yml"),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("---\n# [1/1] aggregatedStatus:\n"), "{out}");

    let (code, out, err) = run(&[
        "--operation",
        "interpretHealth",
        "--observed-file",
        &observed,
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "---\n# [1/1] healthy:\ntrue\n");

    // Errors: Karmada's messages; the check table of a broken file, with exit status 1.
    let (code, _, err) = run(&["--operation", "interpretHealth"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(
            "Execute InterpretHealth error: desired-file, observed-file options are not set"
        ),
        "{err}"
    );
    let (code, _, err) = run(&["--operation", "nope"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("operation nope is not supported. Use one of: Retain, "),
        "{err}"
    );
    let (code, out, _) = karmadactl(&[
        "interpret".into(),
        "-f".into(),
        f("customization_error.yml"),
        "--check".into(),
    ]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("target.kind no set") || out.contains("target.apiVersion no set"),
        "{out}"
    );
    assert!(
        out.contains("not a ResourceInterpreterCustomization, got /v1, Kind=Pod"),
        "{out}"
    );
}

/// One case of a Go table test: its string and integer fields and its `want` raw string.
#[derive(Debug, Default)]
struct GoCase {
    name: String,
    fields: std::collections::BTreeMap<String, String>,
    want: String,
}

/// The cases of the table test in a Go test file of Karmada's interpret command (read at test
/// time from the module cache): `name: "…"`, `Field: "…"` / `Field: 2`, `FilenameOptions: …{Filenames: []string{"…"}}`
/// and ``want: `…` ``.
fn go_cases(path: &Path) -> Vec<GoCase> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut cases = Vec::new();
    for block in text.split("\t\t\tname: \"").skip(1) {
        let mut case = GoCase {
            name: block.split('"').next().unwrap().to_owned(),
            ..GoCase::default()
        };
        let (head, want) = block.split_once("want: `").unwrap();
        case.want = want.split('`').next().unwrap().to_owned();
        for line in head.lines().map(str::trim) {
            if let Some((key, value)) = line.split_once(':') {
                let value = value.trim().trim_end_matches(',');
                let value = value.rsplit_once("{\"").map_or(value, |(_, v)| {
                    v.trim_end_matches("\"}}").trim_end_matches("\"}")
                });
                case.fields
                    .insert(key.trim().to_owned(), value.trim_matches('"').to_owned());
            }
        }
        cases.push(case);
    }
    cases
}

/// Karmada's own expected outputs for its interpret command (its `execute_test.go` and
/// `check_test.go`, read from the module cache): the binary prints exactly the same text; for a
/// script with a syntax error, the same table up to the Lua error message (PUC Lua's words, not
/// gopher-lua's).
#[test]
fn prints_what_karmadas_own_tests_expect() {
    let dir = thirdparty_root()
        .ancestors()
        .nth(4)
        .unwrap()
        .join("karmadactl/interpret");
    let execute = go_cases(&dir.join("execute_test.go"));
    assert!(execute.len() >= 8, "{execute:?}");
    for case in &execute {
        let mut args: Vec<String> = vec!["interpret".into(), "-f".into()];
        args.push(
            dir.join(&case.fields["FilenameOptions"])
                .display()
                .to_string(),
        );
        for (field, flag) in [
            ("Operation", "--operation"),
            ("DesiredFile", "--desired-file"),
            ("ObservedFile", "--observed-file"),
            ("StatusFile", "--status-file"),
            ("DesiredReplica", "--desired-replica"),
        ] {
            if let Some(v) = case.fields.get(field) {
                args.push(flag.into());
                args.push(if field.ends_with("File") {
                    dir.join(v).display().to_string()
                } else {
                    v.clone()
                });
            }
        }
        let (code, out, err) = karmadactl(&args);
        assert_eq!(code, Some(0), "{}: {err}", case.name);
        assert_eq!(out, case.want, "{}", case.name);
    }
    let check = go_cases(&dir.join("check_test.go"));
    assert!(check.len() >= 3, "{check:?}");
    for case in &check {
        let args: Vec<String> = vec![
            "interpret".into(),
            "-f".into(),
            dir.join(&case.fields["FilenameOptions"])
                .display()
                .to_string(),
            "--check".into(),
        ];
        let (code, out, _) = karmadactl(&args);
        let want_err = case.fields.get("wantErr").is_some_and(|v| v == "true");
        assert_eq!(code, Some(i32::from(want_err)), "{}: {out}", case.name);
        let (got, want): (Vec<&str>, Vec<&str>) =
            (out.lines().collect(), case.want.lines().collect());
        assert_eq!(got.len(), want.len(), "{}:\n{out}", case.name);
        for (g, w) in got.iter().zip(&want) {
            match w.split_once("ERROR: ") {
                Some((cell, _)) => assert!(
                    g.starts_with(&format!("{cell}ERROR: ")),
                    "{}: {g}",
                    case.name
                ),
                None => assert_eq!(g, w, "{}", case.name),
            }
        }
    }
}
