//! `karmadactl cordon` / `uncordon` / `taint`: edit a Cluster's `spec.taints` the way Karmada's
//! commands do, with a JSON merge patch of the whole list guarded by the `resourceVersion` read
//! (a concurrent change makes the patch fail with a conflict instead of being overwritten).

use anyhow::{anyhow, bail};
use k8s_openapi::api::core::v1::Taint;
use karmada_apis::cluster::v1alpha1::Cluster;
use kube::api::{Api, Patch, PatchParams};

use crate::cli::{CordonArgs, TaintArgs};
use crate::util::{Target, code, explain};

/// The taint `cordon` adds, Karmada's `TaintClusterUnscheduler`.
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.karmada.io/unschedulable";

const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// Runs `cordon` (`cordon == true`) or `uncordon`; returns the line printed.
pub async fn cordon(args: CordonArgs, cordon: bool) -> anyhow::Result<String> {
    let host = args.control_plane.load().await?;
    let name = &args.cluster_name;
    let cluster = get(&host, name).await?;
    let is_cordon = |t: &Taint| t.key == UNSCHEDULABLE_TAINT_KEY && t.effect == "NoSchedule";
    let taints = cluster.spec.taints.clone();
    let verb = if cordon { "cordon" } else { "uncordon" };
    if taints.iter().any(is_cordon) == cordon {
        return Ok(format!("{name} cluster already {verb}ed"));
    }
    let new: Vec<Taint> = if cordon {
        let mut t = taints;
        t.push(Taint {
            key: UNSCHEDULABLE_TAINT_KEY.to_owned(),
            effect: "NoSchedule".to_owned(),
            ..Taint::default()
        });
        t
    } else {
        taints.into_iter().filter(|t| !is_cordon(t)).collect()
    };
    if !args.dry_run {
        patch_taints(&host, &cluster, &new).await?;
    }
    Ok(format!("{name} cluster {verb}ed"))
}

/// A taint change parsed from the command line: the taints to add and those to remove (an empty
/// effect removes every taint with the key).
#[derive(Debug, Default, PartialEq)]
pub struct TaintChanges {
    /// `KEY[=VALUE]:EFFECT`.
    pub add: Vec<Taint>,
    /// `KEY-` / `KEY:EFFECT-`.
    pub remove: Vec<Taint>,
}

/// Splits `taint`'s positional arguments into the resource (`cluster`/`clusters`), the names and
/// the taint changes, and validates them as Karmada does.
pub fn parse_args(args: &[String]) -> anyhow::Result<(Vec<String>, TaintChanges)> {
    let mut resources = Vec::new();
    let mut specs = Vec::new();
    for s in args {
        let is_taint = s.contains('=') || s.contains(':') || s.ends_with('-');
        match (specs.is_empty(), is_taint) {
            (_, true) => specs.push(s.clone()),
            (true, false) => resources.push(s.clone()),
            (false, false) => {
                bail!("all resources must be specified before taint changes: {s}")
            }
        }
    }
    if resources.is_empty() {
        bail!("one or more resources must be specified as <resource> <name>");
    }
    if specs.is_empty() {
        bail!("at least one taint update is required");
    }
    let changes = parse_taints(&specs)?;
    let kind = resources[0].to_lowercase();
    if kind != "cluster" && kind != "clusters" {
        bail!("invalid resource type {kind}, only [\"cluster\" \"clusters\"] are supported");
    }
    let mut conflicts = Vec::new();
    for a in &changes.add {
        for r in &changes.remove {
            if a.key == r.key && (r.effect.is_empty() || a.effect == r.effect) {
                conflicts.push(format!("{{\"{}\":\"{}\"}}", r.key, r.effect));
            }
        }
    }
    if !conflicts.is_empty() {
        bail!(
            "can not both modify and remove the following taint(s) in the same command: {}",
            conflicts.join(", ")
        );
    }
    if resources.len() < 2 {
        bail!("at least one resource name must be specified");
    }
    Ok((resources.split_off(1), changes))
}

fn parse_taints(specs: &[String]) -> anyhow::Result<TaintChanges> {
    let mut out = TaintChanges::default();
    for spec in specs {
        if let Some(s) = spec.strip_suffix('-') {
            let t = parse_taint(s)?;
            out.remove.push(Taint {
                key: t.key,
                effect: t.effect,
                ..Taint::default()
            });
        } else {
            let t = parse_taint(spec)?;
            if t.effect.is_empty() {
                bail!("invalid taint spec: {spec}");
            }
            if out
                .add
                .iter()
                .any(|o| o.key == t.key && o.effect == t.effect)
            {
                bail!(
                    "duplicated taints with the same key and effect: {}:{}",
                    t.key,
                    t.effect
                );
            }
            out.add.push(t);
        }
    }
    Ok(out)
}

fn parse_taint(spec: &str) -> anyhow::Result<Taint> {
    let parts: Vec<&str> = spec.split(':').collect();
    let (key, value, effect) = match parts.as_slice() {
        [key] => (*key, None, String::new()),
        [kv, effect] => {
            if !EFFECTS.contains(effect) {
                bail!("invalid taint effect: {effect}, unsupported taint effect");
            }
            let kv: Vec<&str> = kv.split('=').collect();
            match kv.as_slice() {
                [k] => (*k, None, (*effect).to_owned()),
                [k, v] => {
                    if let Some(p) = label_value_problem(v) {
                        bail!("invalid taint spec: {spec}, {p}");
                    }
                    (*k, Some((*v).to_owned()), (*effect).to_owned())
                }
                _ => bail!("invalid taint spec: {spec}"),
            }
        }
        _ => bail!("invalid taint spec: {spec}"),
    };
    if let Some(p) = qualified_name_problem(key) {
        bail!("invalid taint spec: {spec}, {p}");
    }
    Ok(Taint {
        key: key.to_owned(),
        value: value.filter(|v| !v.is_empty()),
        effect,
        time_added: None,
    })
}

fn name_part_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn label_value_problem(v: &str) -> Option<String> {
    (!v.is_empty() && !name_part_ok(v)).then(|| {
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' \
         or '.', and must start and end with an alphanumeric character, at most 63 characters"
            .to_owned()
    })
}

fn qualified_name_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let ok = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                let b = l.as_bytes();
                !b.is_empty()
                    && b.len() <= 63
                    && b[0].is_ascii_alphanumeric()
                    && b[b.len() - 1].is_ascii_alphanumeric()
                    && b.iter()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            });
        if !ok {
            return Some(
                "prefix part must be a lowercase RFC 1123 subdomain (e.g. example.com)".to_owned(),
            );
        }
    }
    (!name_part_ok(name)).then(|| {
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and \
         end with an alphanumeric character, at most 63 characters (e.g. 'MyName', \
         'example.com/my_name')"
            .to_owned()
    })
}

/// Applies `changes` to `taints`: returns the new list and Karmada's word for what happened
/// (`tainted`, `untainted` or `modified`), or an error naming taints to remove that were absent.
pub fn apply(
    taints: &[Taint],
    changes: &TaintChanges,
    overwrite: bool,
) -> anyhow::Result<(Vec<Taint>, &'static str)> {
    let matches = |a: &Taint, b: &Taint| a.key == b.key && a.effect == b.effect;
    let mut new = changes.add.clone();
    for old in taints {
        if !new.iter().any(|n| matches(n, old)) {
            new.push(old.clone());
        }
    }
    let added = taints.len() != new.len();
    let mut missing = Vec::new();
    let mut removed = false;
    for r in &changes.remove {
        let before = new.len();
        new.retain(|t| !(t.key == r.key && (r.effect.is_empty() || t.effect == r.effect)));
        removed = new.len() != before;
        if !removed {
            let s = if r.effect.is_empty() {
                r.key.clone()
            } else {
                format!("{}:{}", r.key, r.effect)
            };
            missing.push(format!("taint {s:?} not found"));
        }
    }
    if !missing.is_empty() {
        bail!("{}", missing.join(", "));
    }
    let op = if (added && removed) || overwrite {
        "modified"
    } else if added {
        "tainted"
    } else {
        "untainted"
    };
    Ok((new, op))
}

/// Runs `karmadactl taint`; returns the lines printed (`cluster/<name> <operation>`).
pub async fn taint(args: TaintArgs) -> anyhow::Result<Vec<String>> {
    let (names, changes) = parse_args(&args.args)?;
    let host = args.control_plane.load().await?;
    let mut out = Vec::new();
    for name in names {
        let cluster = get(&host, &name).await?;
        if !args.overwrite {
            let exists: Vec<&str> = changes
                .add
                .iter()
                .filter(|a| {
                    cluster
                        .spec
                        .taints
                        .iter()
                        .any(|o| o.key == a.key && o.effect == a.effect)
                })
                .map(|a| a.key.as_str())
                .collect();
            if !exists.is_empty() {
                bail!(
                    "cluster {name} already has {} taint(s) with same effect(s) and --overwrite is false",
                    exists.join(",")
                );
            }
        }
        let (new, op) = apply(&cluster.spec.taints, &changes, args.overwrite)
            .map_err(|e| anyhow!("cluster {name}: {e}"))?;
        if !args.dry_run {
            patch_taints(&host, &cluster, &new).await?;
        }
        out.push(format!("cluster/{name} {op}"));
    }
    Ok(out)
}

async fn get(host: &Target, name: &str) -> anyhow::Result<Cluster> {
    let clusters: Api<Cluster> = Api::all(host.client.clone());
    match clusters.get(name).await {
        Ok(c) => Ok(c),
        Err(e) if code(&e) == Some(404) => {
            bail!("cluster {name} not found in the {}", host.origin)
        }
        Err(e) => Err(explain(e, &format!("getting cluster {name}"), host)),
    }
}

async fn patch_taints(host: &Target, cluster: &Cluster, taints: &[Taint]) -> anyhow::Result<()> {
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    let clusters: Api<Cluster> = Api::all(host.client.clone());
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": cluster.metadata.resource_version},
        "spec": {"taints": taints},
    });
    match clusters
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if code(&e) == Some(409) => bail!(
            "cluster {name} was changed by someone else while its taints were being updated; \
             run the command again"
        ),
        Err(e) => Err(explain(
            e,
            &format!("patching the taints of cluster {name}"),
            host,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn parses_karmada_taint_syntax() {
        let (names, c) = parse_args(&s(&[
            "clusters",
            "a",
            "b",
            "k=v:NoSchedule",
            "x-",
            "y:NoExecute-",
        ]))
        .unwrap();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(c.add.len(), 1);
        assert_eq!(c.add[0].value.as_deref(), Some("v"));
        assert_eq!(c.remove[0].effect, "");
        assert_eq!(c.remove[1].effect, "NoExecute");
        assert!(parse_args(&s(&["cluster", "a", "k=v:Bad"])).is_err());
        assert!(parse_args(&s(&["cluster", "a", "k=v"])).is_err());
        assert!(parse_args(&s(&["node", "a", "k:NoSchedule"])).is_err());
        assert!(parse_args(&s(&["cluster", "k:NoSchedule"])).is_err());
        assert!(parse_args(&s(&["cluster", "a", "k:NoSchedule", "b"])).is_err());
        assert!(parse_args(&s(&["cluster", "a", "k:NoSchedule", "k-"])).is_err());
        assert!(parse_args(&s(&["cluster", "a", "-bad:NoSchedule"])).is_err());
        assert!(parse_args(&s(&["cluster", "a", "Bad.Com/k:NoSchedule"])).is_err());
        assert!(parse_args(&s(&["cluster", "a", "example.com/k:PreferNoSchedule"])).is_ok());
    }

    #[test]
    fn applies_like_karmada() {
        let t = |k: &str, e: &str| Taint {
            key: k.into(),
            effect: e.into(),
            ..Taint::default()
        };
        let old = vec![t("a", "NoSchedule")];
        let add = TaintChanges {
            add: vec![t("b", "NoSchedule")],
            remove: vec![],
        };
        assert_eq!(apply(&old, &add, false).unwrap().1, "tainted");
        let rm = TaintChanges {
            add: vec![],
            remove: vec![t("a", "")],
        };
        let (new, op) = apply(&old, &rm, false).unwrap();
        assert!(new.is_empty());
        assert_eq!(op, "untainted");
        assert!(
            apply(
                &old,
                &TaintChanges {
                    add: vec![],
                    remove: vec![t("z", "")]
                },
                false
            )
            .is_err()
        );
        assert_eq!(
            apply(
                &old,
                &TaintChanges {
                    add: vec![t("a", "NoSchedule")],
                    remove: vec![]
                },
                true
            )
            .unwrap()
            .1,
            "modified"
        );
    }
}
