//! The container image, built without a daemon (`hack/image.sh`, `make image-archive`) from the debug
//! binaries the other tests already build (the recipe is the release one, parametrised by the binary
//! folder, so CI pays no release build): the docker-archive's manifest and config (tag, entrypoint,
//! user, OCI labels, one layer of root-owned files dated SOURCE_DATE_EPOCH), each binary extracted from
//! the layer and run with the layer's own loader and libraries (`--version`; the controller-manager
//! against a real API server until /readyz is 200, then SIGTERM and exit code 0), and the SBOM
//! beside the archive. Also: the docker build context (.dockerignore) keeps every file `cargo build
//! --locked` of the workspace reads.
//!
//! `crane` comes from `make test-binaries` (hack/tools/crane).
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use karmada_e2e::controller_manager::*;

const TAG: &str = "test.invalid/karmada-rs:image-test";
/// 2023-11-14T22:13:20Z.
const EPOCH: &str = "1700000000";
const BINARIES: [&str; 3] = ["karmada-controller-manager", "karmada-agent", "karmadactl"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The image, built once per test process: its folder (archive, SBOM, extracted archive and layer).
struct Image {
    dir: PathBuf,
    archive: PathBuf,
    manifest: serde_json::Value,
    config: serde_json::Value,
    /// The layer's files, extracted.
    rootfs: PathBuf,
    /// `tar -tvz` of the layer.
    listing: String,
}

/// Removes the `karmada-rs-image-<pid>` folders in the temp dir whose process is gone.
fn remove_stale_image_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("karmada-rs-image-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn image() -> &'static Image {
    static IMAGE: OnceLock<Image> = OnceLock::new();
    IMAGE.get_or_init(|| {
        // The image is kept for the whole process (a static), so nothing removes it at exit: the
        // folders of earlier runs (about 850 MB each) are removed here instead.
        remove_stale_image_dirs();
        let dir = std::env::temp_dir().join(format!("karmada-rs-image-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let bins = dir.join("bin");
        std::fs::create_dir_all(&bins).unwrap();
        for (name, path) in BINARIES
            .iter()
            .zip([binary(), agent_binary(), karmadactl_binary()])
        {
            std::os::unix::fs::symlink(path, bins.join(name)).unwrap();
        }
        // crane from the test-binaries cache, as hack/build-test-binaries.sh leaves it (not rebuilt).
        testenv::binaries::locate("crane").unwrap_or_else(|e| panic!("{e}"));
        let archive = dir.join("karmada-rs-image.tar");
        let started = std::time::Instant::now();
        run(Command::new(workspace().join("hack/image.sh"))
            .args(["--bin-dir", &bins.to_string_lossy()])
            .args(["--out", &archive.to_string_lossy()])
            .args(["--tag", TAG])
            .env("SOURCE_DATE_EPOCH", EPOCH)
            .current_dir(workspace()));
        eprintln!("hack/image.sh took {:?}", started.elapsed());
        let unpacked = dir.join("archive");
        std::fs::create_dir_all(&unpacked).unwrap();
        run(Command::new("tar")
            .arg("-xf")
            .arg(&archive)
            .arg("-C")
            .arg(&unpacked));
        let read_json = |name: &str| -> serde_json::Value {
            let text = std::fs::read_to_string(unpacked.join(name))
                .unwrap_or_else(|e| panic!("{name} in the archive: {e}"));
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"))
        };
        let manifest = read_json("manifest.json");
        let config = read_json(
            manifest[0]["Config"]
                .as_str()
                .expect("manifest names a config"),
        );
        let layers = manifest[0]["Layers"]
            .as_array()
            .expect("manifest lists layers");
        assert_eq!(layers.len(), 1, "one layer: {manifest}");
        let layer = unpacked.join(layers[0].as_str().unwrap());
        let rootfs = dir.join("rootfs");
        std::fs::create_dir_all(&rootfs).unwrap();
        run(Command::new("tar")
            .arg("-xzf")
            .arg(&layer)
            .arg("-C")
            .arg(&rootfs));
        let listing = run(Command::new("tar")
            .args(["--numeric-owner", "--utc", "-tvzf"])
            .arg(&layer));
        write_launchers(&dir, &rootfs, &listing);
        Image {
            dir,
            archive,
            manifest,
            config,
            rootfs,
            listing,
        }
    })
}

/// The script that runs `bin` from the layer with the layer's own loader and libraries (never the
/// machine's), passing its arguments; written once with the image (see [`write_launchers`]).
fn in_layer(img: &Image, bin: &str) -> PathBuf {
    launcher(&img.dir, bin)
}

fn launcher(dir: &Path, bin: &str) -> PathBuf {
    dir.join(format!("run-{bin}"))
}

/// Writes a launcher for each of [`BINARIES`]: the layer's loader with `--inhibit-cache` and
/// `--library-path` the layer's library folders. Written before any test runs one: a script
/// rewritten while another test executes it fails that exec with ETXTBSY ("Text file busy").
fn write_launchers(dir: &Path, rootfs: &Path, listing: &str) {
    let mut loader = None;
    let mut lib_dirs = BTreeSet::new();
    for line in listing.lines() {
        let path = line
            .split_whitespace()
            .last()
            .unwrap()
            .trim_start_matches("./");
        let name = path.rsplit('/').next().unwrap();
        if name.starts_with("ld-linux") {
            loader = Some(rootfs.join(path));
        } else if name.contains(".so") {
            lib_dirs.insert(rootfs.join(path).parent().unwrap().to_path_buf());
        }
    }
    let loader = loader.unwrap_or_else(|| panic!("no ld-linux loader in the layer:\n{listing}"));
    let libs: Vec<String> = lib_dirs.iter().map(|d| d.display().to_string()).collect();
    for bin in BINARIES {
        let script = launcher(dir, bin);
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\nexec '{}' --inhibit-cache --library-path '{}' '{}' \"$@\"\n",
                loader.display(),
                libs.join(":"),
                rootfs.join(bin).display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

#[test]
fn archive_manifest_config_and_layer() {
    let img = image();
    let size = std::fs::metadata(&img.archive).unwrap().len();
    eprintln!("archive: {} MiB (debug binaries)", size >> 20);
    assert_eq!(
        img.manifest.as_array().unwrap().len(),
        1,
        "{}",
        img.manifest
    );
    assert_eq!(img.manifest[0]["RepoTags"], serde_json::json!([TAG]));

    let c = &img.config;
    assert_eq!(c["os"], "linux");
    assert_eq!(
        c["architecture"],
        if cfg!(target_arch = "x86_64") {
            "amd64"
        } else {
            "arm64"
        }
    );
    assert_eq!(
        c["config"]["Entrypoint"],
        serde_json::json!(["/karmada-controller-manager"])
    );
    assert_eq!(c["config"]["Cmd"], serde_json::Value::Null);
    assert_eq!(c["config"]["User"], "65532:65532");
    let labels: BTreeMap<String, String> =
        serde_json::from_value(c["config"]["Labels"].clone()).expect("labels");
    let revision = run(Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(workspace()));
    for (key, want) in [
        ("source", env!("CARGO_PKG_REPOSITORY")),
        ("version", env!("CARGO_PKG_VERSION")),
        ("revision", revision.trim()),
        ("created", "2023-11-14T22:13:20Z"),
    ] {
        let key = format!("org.opencontainers.image.{key}");
        assert_eq!(
            labels.get(&key).map(String::as_str),
            Some(want),
            "{key}: {labels:?}"
        );
    }

    // Every entry root-owned and dated SOURCE_DATE_EPOCH; the binaries executable by anyone, the
    // passwd file naming the user the image runs as.
    for line in img.listing.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f[1], "0/0", "{line}");
        assert_eq!(&f[3..5], ["2023-11-14", "22:13"], "{line}");
    }
    for bin in BINARIES {
        let line = img
            .listing
            .lines()
            .find(|l| l.ends_with(&format!(" ./{bin}")))
            .unwrap_or_else(|| panic!("{bin} is not in the layer:\n{}", img.listing));
        assert!(line.starts_with("-rwxr-xr-x"), "{line}");
    }
    let passwd = std::fs::read_to_string(img.rootfs.join("etc/passwd")).unwrap();
    assert!(passwd.contains(":65532:65532:"), "{passwd}");
    assert!(
        img.rootfs
            .join("etc/ssl/certs/ca-certificates.crt")
            .is_file()
    );
}

#[test]
fn binaries_from_the_layer_print_their_version() {
    let img = image();
    let version = env!("CARGO_PKG_VERSION");
    for bin in BINARIES {
        let subcommand = if bin == "karmadactl" {
            "--version"
        } else {
            "version"
        };
        let out = run(Command::new(in_layer(img, bin)).arg(subcommand));
        assert!(out.contains(version), "{bin} {subcommand}: {out}");
        let out = run(Command::new(in_layer(img, bin)).arg("--version"));
        assert!(out.contains(version), "{bin} --version: {out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_manager_from_the_layer_becomes_ready_and_exits_0_on_sigterm() {
    let img = image();
    let env = testenv::shared(testenv::EnvOptions {
        host_controller_manager: false,
        install_crds: true,
        ..testenv::EnvOptions::default()
    });
    let client = env.host().client().await;
    let ns = fresh_namespace(&client, "kcm-image").await;
    let mut kcm = Kcm::start_program(
        &in_layer(img, "karmada-controller-manager"),
        env.host().kubeconfig_path(),
        &[
            &format!("--leader-elect-resource-namespace={ns}"),
            "--controllers=namespace,cluster",
        ],
        &[],
    );
    kcm.wait_for("/readyz 200", Duration::from_secs(60), |k| {
        k.probe("/readyz").map(|r| r.0) == Some(200)
    })
    .await;
    // The documented exit code of a graceful shutdown (cmd/karmada-controller-manager/src/app.rs).
    kcm.signal(libc::SIGTERM);
    let status = kcm
        .wait_exit(Duration::from_secs(15))
        .await
        .expect("exits within 15s of SIGTERM");
    assert_eq!(Kcm::code(status), Some(0), "{}", kcm.log_tail(40));
}

/// This machine's target triple (`rustc -vV`): the platform the image's binaries are built for.
fn host_triple() -> String {
    run(Command::new("rustc").arg("-vV"))
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .expect("rustc -vV names the host")
}

/// Docker's .dockerignore rule: the last pattern matching the path or one of its parent folders
/// decides (`!` re-includes); `*` and `?` stay within a path segment, `**` crosses them.
fn docker_excluded(patterns: &[String], path: &str) -> bool {
    let mut excluded = false;
    for p in patterns {
        let (negate, glob) = match p.strip_prefix('!') {
            Some(g) => (true, g),
            None => (false, p.as_str()),
        };
        let glob = glob.trim_start_matches('/').trim_end_matches('/');
        let mut re = String::from("^");
        let mut chars = glob.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '*' if chars.peek() == Some(&'*') => {
                    chars.next();
                    if chars.peek() == Some(&'/') {
                        chars.next();
                        re.push_str("(.*/)?");
                    } else {
                        re.push_str(".*");
                    }
                }
                '*' => re.push_str("[^/]*"),
                '?' => re.push_str("[^/]"),
                c => re.push_str(&regex::escape(&c.to_string())),
            }
        }
        re.push('$');
        let re = regex::Regex::new(&re).unwrap();
        let mut prefix = String::new();
        let matched = path.split('/').any(|seg| {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(seg);
            re.is_match(&prefix)
        });
        if matched {
            excluded = !negate;
        }
    }
    excluded
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one walk: cargo metadata, the compiled members, their files and includes"
)]
fn docker_build_context_keeps_every_file_cargo_build_reads() {
    let root = workspace();
    let patterns: Vec<String> = std::fs::read_to_string(root.join(".dockerignore"))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    // The matcher itself, on the rules the file relies on.
    assert!(docker_excluded(&patterns, "target/debug/x"));
    assert!(docker_excluded(&patterns, "hack/image.sh"));
    assert!(!docker_excluded(&patterns, "hack/test-runner/src/main.rs"));

    let meta: serde_json::Value = serde_json::from_str(&run(Command::new(env!("CARGO"))
        .args(["metadata", "--format-version=1", "--offline", "--locked"])
        .args(["--filter-platform", &host_triple()])
        .current_dir(&root)))
    .unwrap();
    // The workspace packages the Dockerfile's `cargo build -p` compiles: the shipped binaries and
    // the workspace crates they depend on (normal and build dependencies).
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    let nodes: BTreeMap<&str, &serde_json::Value> = meta["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    let packages: BTreeMap<&str, &serde_json::Value> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p))
        .collect();
    let mut todo: Vec<&str> = packages
        .iter()
        .filter(|(id, p)| members.contains(*id) && BINARIES.contains(&p["name"].as_str().unwrap()))
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(
        todo.len(),
        BINARIES.len(),
        "the shipped packages in cargo metadata"
    );
    let mut compiled = BTreeSet::new();
    while let Some(id) = todo.pop() {
        if !members.contains(id) || !compiled.insert(id) {
            continue;
        }
        for dep in nodes[id]["deps"].as_array().unwrap() {
            let shipped = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null() || k["kind"] == "build");
            if shipped {
                todo.push(dep["pkg"].as_str().unwrap());
            }
        }
    }
    let tracked = run(Command::new("git").args(["ls-files"]).current_dir(&root));
    let include = regex::Regex::new(r#"include_(?:str|bytes)!\(\s*"([^"]+)"\s*\)"#).unwrap();
    // Cargo reads every member's manifest, whatever it builds.
    let mut needed = BTreeSet::from(["Cargo.toml".to_string(), "Cargo.lock".to_string()]);
    for id in &members {
        let manifest = Path::new(packages[id]["manifest_path"].as_str().unwrap());
        needed.insert(manifest.strip_prefix(&root).unwrap().display().to_string());
    }
    for id in &compiled {
        let manifest = PathBuf::from(packages[id]["manifest_path"].as_str().unwrap());
        let dir = manifest
            .parent()
            .unwrap()
            .strip_prefix(&root)
            .unwrap()
            .to_path_buf();
        for file in tracked.lines().filter(|f| Path::new(f).starts_with(&dir)) {
            // What a build reads: the sources (not tests/benches/examples), and what they include.
            let rel = Path::new(file).strip_prefix(&dir).unwrap();
            let first = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy();
            if ["tests", "benches", "examples"].contains(&first.as_ref())
                && rel.components().count() > 1
            {
                continue;
            }
            if Path::new(file).extension().is_some_and(|e| e == "rs") {
                needed.insert(file.to_string());
                let text = std::fs::read_to_string(root.join(file)).unwrap();
                for cap in include.captures_iter(&text) {
                    let target = Path::new(file).parent().unwrap().join(&cap[1]);
                    // Normalise a/b/../c without touching the file system.
                    let mut parts: Vec<String> = Vec::new();
                    for c in target.components() {
                        match c.as_os_str().to_str().unwrap() {
                            ".." => {
                                parts.pop();
                            }
                            "." => {}
                            s => parts.push(s.to_string()),
                        }
                    }
                    needed.insert(parts.join("/"));
                }
            }
        }
    }
    eprintln!(
        "{} workspace members, {} compiled for the image, {} files checked",
        members.len(),
        compiled.len(),
        needed.len()
    );
    assert!(compiled.len() >= 10, "{compiled:?}");
    let dropped: Vec<&String> = needed
        .iter()
        .filter(|f| docker_excluded(&patterns, f))
        .collect();
    assert!(
        dropped.is_empty(),
        ".dockerignore leaves out files `cargo build --locked` reads (the Dockerfile build would fail): {dropped:?}"
    );
}

#[test]
fn sbom_lists_every_crate_the_controller_manager_links() {
    let img = image();
    let path = img.archive.with_extension("cdx.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("the SBOM beside the archive, {}: {e}", path.display()));
    let bom: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(bom["bomFormat"], "CycloneDX");
    assert_eq!(bom["specVersion"], "1.5");
    assert_eq!(bom["metadata"]["component"]["type"], "container");
    assert_eq!(bom["metadata"]["component"]["bom-ref"], TAG);
    assert_eq!(bom["metadata"]["timestamp"], "2023-11-14T22:13:20Z");
    let components: BTreeMap<&str, &serde_json::Value> = bom["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["purl"].as_str().unwrap(), c))
        .collect();
    // Every crate of the controller-manager's tree (normal dependencies, this host), by cargo tree.
    let tree = run(Command::new(env!("CARGO"))
        .args(["tree", "-p", "karmada-controller-manager", "-e", "normal"])
        .args([
            "--prefix",
            "none",
            "--format",
            "{p}",
            "--locked",
            "--offline",
        ])
        .current_dir(workspace()));
    let mut crates = BTreeSet::new();
    for line in tree.lines().filter(|l| !l.trim().is_empty()) {
        let mut f = line.split_whitespace();
        let name = f.next().unwrap();
        let version = f.next().unwrap().trim_start_matches('v');
        crates.insert((name.to_string(), version.to_string()));
    }
    assert!(
        crates.len() > 100,
        "cargo tree listed {} crates",
        crates.len()
    );
    for (name, version) in &crates {
        let purl = format!("pkg:cargo/{name}@{version}");
        let c = components
            .get(purl.as_str())
            .unwrap_or_else(|| panic!("{purl} (in cargo tree) is not in the SBOM"));
        assert_eq!(c["name"], name.as_str(), "{c}");
        assert_eq!(c["version"], version.as_str(), "{c}");
    }
    // Registry crates carry Cargo.lock's SHA-256; the binaries are applications.
    let serde = components
        .iter()
        .find(|(p, _)| p.starts_with("pkg:cargo/serde@"))
        .expect("serde in the SBOM")
        .1;
    let sum = serde["hashes"][0]["content"].as_str().unwrap_or_default();
    assert!(
        sum.len() == 64 && serde["hashes"][0]["alg"] == "SHA-256",
        "{serde}"
    );
    for bin in BINARIES {
        let c = components
            .iter()
            .find(|(p, _)| p.starts_with(&format!("pkg:cargo/{bin}@")))
            .unwrap_or_else(|| panic!("{bin} is not in the SBOM"))
            .1;
        assert_eq!(c["type"], "application", "{c}");
    }
    eprintln!(
        "SBOM: {} components; cargo tree of the controller-manager: {} crates",
        components.len(),
        crates.len()
    );
}
