//! The committed `crds/` must be exactly what the types generate; `make crds` regenerates it.

use std::path::Path;

#[test]
fn workspace_crds_are_up_to_date() {
    let dir = crdgen::default_out_dir();
    let drift = crdgen::check(&dir).expect("can compare crds/");
    assert!(
        drift.is_empty(),
        "{} is out of date with pkg/apis; run `make crds` (cargo run -p crdgen):\n{drift}",
        dir.display()
    );
}

#[test]
fn check_detects_missing_changed_and_extra_files() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let written = crdgen::write(dir).expect("writes");
    // One file per CRD of the API types.
    assert_eq!(written.len(), karmada_apis::crds::all().len());
    assert!(crdgen::check(dir).expect("compares").is_empty());

    let changed = "policy.karmada.io_propagationpolicies.yaml";
    let missing = "work.karmada.io_works.yaml";
    let extra = "work.karmada.io_oldthings.yaml";
    std::fs::write(dir.join(changed), "stale").expect("write");
    std::fs::remove_file(dir.join(missing)).expect("remove");
    std::fs::write(dir.join(extra), "old").expect("write");
    std::fs::write(dir.join("someone-elses.yaml"), "not ours").expect("write");

    let drift = crdgen::check(dir).expect("compares");
    assert_eq!(drift.changed, vec![changed.to_string()]);
    assert_eq!(drift.missing, vec![missing.to_string()]);
    assert_eq!(drift.extra, vec![extra.to_string()]);

    crdgen::write(dir).expect("rewrites");
    assert!(crdgen::check(dir).expect("compares").is_empty());
    assert!(
        !Path::new(&dir.join(extra)).exists(),
        "stale generated file removed"
    );
    assert!(
        dir.join("someone-elses.yaml").exists(),
        "other files left alone"
    );
}

#[test]
fn generated_files_parse_as_crds() {
    for (name, text) in crdgen::render().expect("renders") {
        let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(karmada_apis::crds::file_name(&crd), name);
    }
}
