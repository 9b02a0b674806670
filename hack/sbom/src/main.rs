//! The image's SBOM: a CycloneDX 1.5 JSON document, on stdout, listing every crate compiled into the
//! named packages' binaries, each with its version, `pkg:cargo/NAME@VERSION` purl, license and (for
//! registry crates) the SHA-256 Cargo.lock records, and the dependency graph between them.
//!
//! Usage: `cargo run -p sbom -- --image REF --created RFC3339 -p PACKAGE...` (hack/image.sh).
//!
//! The crates are those `cargo metadata --locked --filter-platform <host>` resolves for the packages
//! through normal dependencies (what is linked, and the proc-macros that generated code), as
//! `cargo tree -e normal` lists them; build-dependencies (build scripts only) and dev-dependencies
//! are left out. Written here rather than with cargo-cyclonedx: no extra tool to install, and the
//! output is reproducible (no random serial number, the timestamp is the caller's).

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, ExitCode};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

struct Args {
    image: String,
    created: String,
    packages: Vec<String>,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut image = None;
    let mut created = None;
    let mut packages = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |flag: &str| args.next().with_context(|| format!("{flag} needs a value"));
        match a.as_str() {
            "--image" => image = Some(value("--image")?),
            "--created" => created = Some(value("--created")?),
            "-p" | "--package" => packages.push(value("-p")?),
            other => bail!(
                "unknown argument {other} (usage: sbom --image REF --created RFC3339 -p PACKAGE...)"
            ),
        }
    }
    if packages.is_empty() {
        bail!("no package named (-p PACKAGE)");
    }
    Ok(Args {
        image: image.context("--image is required")?,
        created: created.context("--created is required")?,
        packages,
    })
}

fn output(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("{cmd:?} printed non-UTF-8"))
}

/// `(name, version) -> checksum` from Cargo.lock's `[[package]]` entries.
fn lock_checksums(lock: &str) -> BTreeMap<(String, String), String> {
    let mut sums = BTreeMap::new();
    let (mut name, mut version) = (String::new(), String::new());
    let value = |line: &str, key: &str| -> Option<String> {
        let rest = line.strip_prefix(key)?.trim_start().strip_prefix('=')?;
        Some(rest.trim().trim_matches('"').to_string())
    };
    for line in lock.lines() {
        if line == "[[package]]" {
            name.clear();
            version.clear();
        } else if let Some(v) = value(line, "name") {
            name = v;
        } else if let Some(v) = value(line, "version") {
            version = v;
        } else if let Some(v) = value(line, "checksum") {
            sums.insert((name.clone(), version.clone()), v);
        }
    }
    sums
}

fn str_of<'a>(v: &'a Value, key: &str) -> anyhow::Result<&'a str> {
    v[key]
        .as_str()
        .with_context(|| format!("cargo metadata: no string {key} in {v}"))
}

/// The crates reachable from `roots` through normal dependencies, each with its direct ones.
fn normal_closure<'a>(
    nodes: &BTreeMap<&'a str, &'a Value>,
    roots: &[&'a str],
) -> anyhow::Result<BTreeMap<&'a str, BTreeSet<&'a str>>> {
    let mut todo = roots.to_vec();
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    while let Some(id) = todo.pop() {
        if graph.contains_key(id) {
            continue;
        }
        let node = nodes
            .get(id)
            .with_context(|| format!("cargo metadata: {id} is not in the resolve graph"))?;
        let mut deps = BTreeSet::new();
        for dep in node["deps"].as_array().into_iter().flatten() {
            let normal = dep["dep_kinds"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|k| k["kind"].is_null());
            if normal {
                let pkg = str_of(dep, "pkg")?;
                deps.insert(pkg);
                todo.push(pkg);
            }
        }
        graph.insert(id, deps);
    }
    Ok(graph)
}

/// `cargo metadata` for this host's platform, and the text of Cargo.lock.
fn metadata() -> anyhow::Result<(Value, String)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let host = output(Command::new("rustc").arg("-vV"))?
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .context("rustc -vV names no host triple")?;
    let meta: Value = serde_json::from_str(&output(Command::new(&cargo).args([
        "metadata",
        "--format-version=1",
        "--locked",
        "--filter-platform",
        &host,
    ]))?)
    .context("cargo metadata printed invalid JSON")?;
    let root = str_of(&meta, "workspace_root")?;
    let lock = std::fs::read_to_string(format!("{root}/Cargo.lock"))
        .with_context(|| format!("cannot read {root}/Cargo.lock"))?;
    Ok((meta, lock))
}

fn run() -> anyhow::Result<Value> {
    let args = parse_args()?;
    let (meta, lock) = metadata()?;
    let sums = lock_checksums(&lock);

    let packages: BTreeMap<&str, &Value> = meta["packages"]
        .as_array()
        .context("cargo metadata: no packages")?
        .iter()
        .map(|p| Ok((str_of(p, "id")?, p)))
        .collect::<anyhow::Result<_>>()?;
    let nodes: BTreeMap<&str, &Value> = meta["resolve"]["nodes"]
        .as_array()
        .context("cargo metadata: no resolve graph")?
        .iter()
        .map(|n| Ok((str_of(n, "id")?, n)))
        .collect::<anyhow::Result<_>>()?;
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .context("cargo metadata: no workspace_members")?
        .iter()
        .filter_map(Value::as_str)
        .collect();

    let mut roots = Vec::new();
    for name in &args.packages {
        let id = members
            .iter()
            .find(|id| packages.get(**id).and_then(|p| p["name"].as_str()) == Some(name))
            .with_context(|| format!("package {name} is not a workspace member"))?;
        roots.push(*id);
    }
    let graph = normal_closure(&nodes, &roots)?;

    let purl = |id: &str| -> anyhow::Result<String> {
        let p = packages
            .get(id)
            .with_context(|| format!("cargo metadata: no package {id}"))?;
        Ok(format!(
            "pkg:cargo/{}@{}",
            str_of(p, "name")?,
            str_of(p, "version")?
        ))
    };
    let mut components = Vec::new();
    for id in graph.keys() {
        let p = packages[id];
        let (name, version) = (str_of(p, "name")?, str_of(p, "version")?);
        let mut c = json!({
            "type": if roots.contains(id) { "application" } else { "library" },
            "bom-ref": purl(id)?,
            "name": name,
            "version": version,
            "purl": purl(id)?,
        });
        if let Some(license) = p["license"].as_str() {
            c["licenses"] = json!([{ "expression": license }]);
        }
        if let Some(sum) = sums.get(&(name.to_string(), version.to_string())) {
            c["hashes"] = json!([{ "alg": "SHA-256", "content": sum }]);
        }
        if let Some(repo) = p["repository"].as_str() {
            c["externalReferences"] = json!([{ "type": "vcs", "url": repo }]);
        }
        components.push(c);
    }
    let dependencies = graph
        .iter()
        .map(|(id, deps)| {
            Ok(json!({
                "ref": purl(id)?,
                "dependsOn": deps.iter().map(|d| purl(d)).collect::<anyhow::Result<Vec<_>>>()?,
            }))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (image_name, image_tag) = match args.image.rsplit_once(':') {
        Some((n, t)) if !t.contains('/') => (n.to_string(), t.to_string()),
        _ => (args.image.clone(), "latest".to_string()),
    };
    Ok(json!({
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": {
            "timestamp": args.created,
            "tools": { "components": [{
                "type": "application",
                "name": "karmada-rs hack/sbom",
                "version": env!("CARGO_PKG_VERSION"),
            }]},
            "component": {
                "type": "container",
                "bom-ref": args.image,
                "name": image_name,
                "version": image_tag,
            },
        },
        "components": components,
        "dependencies": dependencies,
    }))
}

fn main() -> ExitCode {
    match run() {
        Ok(bom) => match serde_json::to_string_pretty(&bom) {
            Ok(text) => {
                println!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("sbom: cannot serialise the SBOM: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("sbom: {e:#}");
            ExitCode::FAILURE
        }
    }
}
