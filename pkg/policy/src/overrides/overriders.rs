//! The individual overriders of a rule, applied in Karmada's order: images, commands, args,
//! labels, annotations, fields, then plaintext.

use karmada_apis::policy::v1alpha1::{
    CommandArgsOverrider, FieldOverrider, ImageComponent, ImageOverrider, LabelAnnotationOverrider,
    OverriderOperator, Overriders, PlaintextOverrider,
};
use serde_json::Value;

use super::doc::Doc;
use super::image::ImageComponents;
use super::patch::{self, Op, Patch};
use super::yaml;

/// Why one overrider could not be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// Which overrider, e.g. `imageOverrider[0]`.
    pub(crate) overrider: String,
    /// The path involved (JSON pointer or field path).
    pub(crate) path: String,
    /// What went wrong.
    pub(crate) cause: String,
}

fn failure(overrider: String, path: impl Into<String>, cause: impl Into<String>) -> Failure {
    Failure {
        overrider,
        path: path.into(),
        cause: cause.into(),
    }
}

/// Where the containers of a workload kind live, as Karmada knows them (others have none).
fn containers_path(kind: &str) -> Option<&'static str> {
    match kind {
        "Pod" => Some("/spec/containers"),
        "ReplicaSet" | "Deployment" | "DaemonSet" | "StatefulSet" | "Job" => {
            Some("/spec/template/spec/containers")
        }
        _ => None,
    }
}

fn op_of(operator: &OverriderOperator) -> Result<Op, String> {
    match operator {
        OverriderOperator::Add => Ok(Op::Add),
        OverriderOperator::Remove => Ok(Op::Remove),
        OverriderOperator::Replace => Ok(Op::Replace),
        OverriderOperator::Other(other) => Err(format!("unsupported operator {other:?}")),
    }
}

fn json_value(value: Option<&Value>) -> Doc {
    value.map_or(Doc::Null, Doc::from_value)
}

/// Applies a patch to the manifest and checks the result is still an object with a kind (Karmada
/// re-decodes the manifest after every patch and fails otherwise).
fn patch_manifest(manifest: &Doc, patches: &[Patch]) -> Result<Doc, (usize, String)> {
    let patched = patch::apply_all(manifest, patches)?;
    match patched.get_key("kind") {
        Some(Doc::String(kind)) if !kind.is_empty() => Ok(patched),
        _ => Err((
            patches.len().saturating_sub(1),
            "Object 'Kind' is missing: the overridden manifest must stay an object with a kind"
                .to_owned(),
        )),
    }
}

/// Applies all overriders of one rule to the manifest, returning the new manifest.
pub(crate) fn apply_overriders(manifest: &Doc, overriders: &Overriders) -> Result<Doc, Failure> {
    let kind = match manifest.get_key("kind") {
        Some(Doc::String(kind)) => kind.clone(),
        _ => String::new(),
    };
    let mut doc = manifest.clone();
    for (i, o) in overriders.image_overrider.iter().enumerate() {
        doc = apply_image(&doc, &kind, o, i)?;
    }
    for (i, o) in overriders.command_overrider.iter().enumerate() {
        doc = apply_command_args(&doc, &kind, o, "command", format!("commandOverrider[{i}]"))?;
    }
    for (i, o) in overriders.args_overrider.iter().enumerate() {
        doc = apply_command_args(&doc, &kind, o, "args", format!("argsOverrider[{i}]"))?;
    }
    for (i, o) in overriders.labels_overrider.iter().enumerate() {
        doc = apply_label_annotation(&doc, o, "labels", format!("labelsOverrider[{i}]"))?;
    }
    for (i, o) in overriders.annotations_overrider.iter().enumerate() {
        doc = apply_label_annotation(&doc, o, "annotations", format!("annotationsOverrider[{i}]"))?;
    }
    for (i, o) in overriders.field_overrider.iter().enumerate() {
        doc = apply_field(&doc, o, format!("fieldOverrider[{i}]"))?;
    }
    apply_plaintext(&doc, &overriders.plaintext)
}

fn apply_plaintext(doc: &Doc, plaintext: &[PlaintextOverrider]) -> Result<Doc, Failure> {
    let mut patches = Vec::with_capacity(plaintext.len());
    for (i, o) in plaintext.iter().enumerate() {
        let op = op_of(&o.operator)
            .map_err(|e| failure(format!("plaintext[{i}]"), o.path.clone(), e))?;
        patches.push(Patch {
            op,
            path: o.path.clone(),
            value: json_value(o.value.as_ref()),
        });
    }
    patch_manifest(doc, &patches).map_err(|(i, cause)| {
        let path = plaintext.get(i).map(|o| o.path.clone()).unwrap_or_default();
        failure(format!("plaintext[{i}]"), path, cause)
    })
}

fn apply_image(doc: &Doc, kind: &str, o: &ImageOverrider, index: usize) -> Result<Doc, Failure> {
    let name = format!("imageOverrider[{index}]");
    let mut patches = Vec::new();
    match &o.predicate {
        Some(predicate) => {
            let current = image_at_predicate(doc, &predicate.path).map_err(|e| {
                failure(
                    name.clone(),
                    predicate.path.clone(),
                    format!("failed to obtain the image value: {e}"),
                )
            })?;
            if !predicate.path.starts_with('/') {
                return Err(failure(
                    name,
                    predicate.path.clone(),
                    "the image path must start with '/'",
                ));
            }
            let image = override_image(&current, o)
                .map_err(|e| failure(name.clone(), predicate.path.clone(), e))?;
            patches.push(Patch {
                op: Op::Replace,
                path: predicate.path.clone(),
                value: Doc::String(image),
            });
        }
        None => {
            let Some(containers_path) = containers_path(kind) else {
                return Ok(doc.clone());
            };
            let containers = containers_at(doc, containers_path)
                .map_err(|e| failure(name.clone(), containers_path, e))?;
            for (ci, container) in containers.iter().enumerate() {
                let path = format!("{containers_path}/{ci}/image");
                let current = match container.get_key("image") {
                    Some(Doc::String(image)) => image.clone(),
                    None | Some(Doc::Null) => String::new(),
                    Some(other) => {
                        return Err(failure(
                            name,
                            path,
                            format!("image is a {}, not a string", other.type_name()),
                        ));
                    }
                };
                let image = override_image(&current, o)
                    .map_err(|e| failure(name.clone(), path.clone(), e))?;
                patches.push(Patch {
                    op: Op::Replace,
                    path,
                    value: Doc::String(image),
                });
            }
        }
    }
    patch_manifest(doc, &patches).map_err(|(i, cause)| {
        let path = patches.get(i).map(|p| p.path.clone()).unwrap_or_default();
        failure(name, path, cause)
    })
}

/// The containers array of a workload: empty when the path is absent, an error when something
/// on the way has the wrong type.
fn containers_at<'d>(doc: &'d Doc, path: &str) -> Result<&'d [Doc], String> {
    let tokens = patch::parse_pointer(path)?;
    let mut current = doc;
    for token in &tokens {
        current = match current {
            Doc::Object(_) => match current.get_key(token) {
                Some(next) => next,
                None => return Ok(&[]),
            },
            Doc::Null => return Ok(&[]),
            other => {
                return Err(format!(
                    "{token:?} is inside a {}, expected an object",
                    other.type_name()
                ));
            }
        };
    }
    match current {
        Doc::Array(items) => {
            if let Some(bad) = items.iter().find(|c| !matches!(c, Doc::Object(_))) {
                return Err(format!(
                    "a container is a {}, not an object",
                    bad.type_name()
                ));
            }
            Ok(items)
        }
        Doc::Null => Ok(&[]),
        other => Err(format!(
            "containers is a {}, not an array",
            other.type_name()
        )),
    }
}

/// Reads the image at a predicate path the way Karmada does: segments split on `/`, arrays
/// indexed by the following segment, the last segment must name a string.
fn image_at_predicate(doc: &Doc, path: &str) -> Result<String, String> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let Some((last, walk)) = segments.split_last() else {
        return Err("empty path".to_owned());
    };
    let mut current = doc;
    let mut i = 0;
    while i < walk.len() {
        let segment = walk[i];
        let next = match current {
            Doc::Object(_) => current.get_key(segment),
            _ => None,
        };
        current = match next {
            Some(obj @ Doc::Object(_)) => obj,
            Some(Doc::Array(items)) => {
                let index_segment = segments.get(i + 1).copied().unwrap_or_default();
                let index: usize = index_segment
                    .parse()
                    .map_err(|_| format!("path({index_segment}) of rawObj's is not number"))?;
                let item = items
                    .get(index)
                    .ok_or_else(|| format!("index {index} is out of range at {segment:?}"))?;
                if !matches!(item, Doc::Object(_)) {
                    return Err(format!("item {index} of {segment:?} is not an object"));
                }
                i += 1;
                item
            }
            _ => {
                return Err(format!(
                    "path({segment}) of rawObj's type is not map[string]interface{{}} and []interface{{}}"
                ));
            }
        };
        i += 1;
    }
    match current.get_key(last) {
        Some(Doc::String(s)) => Ok(s.clone()),
        _ => Err(format!("failed to convert path({last}) to string")),
    }
}

/// Karmada's `overrideImage`: changes one component of the image.
fn override_image(current: &str, o: &ImageOverrider) -> Result<String, String> {
    let mut image = ImageComponents::parse(current)
        .map_err(|e| format!("failed to parse image value({current}), error: {e}"))?;
    match &o.component {
        ImageComponent::Registry => match o.operator {
            OverriderOperator::Add => image.hostname.push_str(&o.value),
            OverriderOperator::Replace => image.hostname = o.value.clone(),
            OverriderOperator::Remove => image.hostname.clear(),
            OverriderOperator::Other(_) => {}
        },
        ImageComponent::Repository => match o.operator {
            OverriderOperator::Add => image.repository.push_str(&o.value),
            OverriderOperator::Replace => image.repository = o.value.clone(),
            OverriderOperator::Remove => image.repository.clear(),
            OverriderOperator::Other(_) => {}
        },
        ImageComponent::Tag => match o.operator {
            OverriderOperator::Add => {
                let combined = format!("{}{}", image.tag_or_digest(), o.value);
                image.set_tag_or_digest(&combined);
            }
            OverriderOperator::Replace => image.set_tag_or_digest(&o.value),
            OverriderOperator::Remove => image.remove_tag_or_digest(),
            OverriderOperator::Other(_) => {}
        },
        ImageComponent::Other(other) => {
            return Err(format!("unsupported image component({other})"));
        }
    }
    Ok(image.to_string())
}

fn apply_command_args(
    doc: &Doc,
    kind: &str,
    o: &CommandArgsOverrider,
    target: &str,
    name: String,
) -> Result<Doc, Failure> {
    let Some(containers_path) = containers_path(kind) else {
        return Ok(doc.clone());
    };
    let containers = containers_at(doc, containers_path)
        .map_err(|e| failure(name.clone(), containers_path, e))?;
    let mut patches = Vec::new();
    for (ci, container) in containers.iter().enumerate() {
        if !matches!(container.get_key("name"), Some(Doc::String(n)) if *n == o.container_name) {
            continue;
        }
        let path = format!("{containers_path}/{ci}/{target}");
        let (op, current) = match container.get_key(target) {
            None | Some(Doc::Null) => (Op::Add, Vec::new()),
            Some(Doc::Array(items)) => {
                let mut values = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Doc::String(s) => values.push(s.clone()),
                        other => {
                            return Err(failure(
                                name,
                                path,
                                format!(
                                    "{target} entries must be strings, found a {}",
                                    other.type_name()
                                ),
                            ));
                        }
                    }
                }
                (Op::Replace, values)
            }
            Some(other) => {
                return Err(failure(
                    name,
                    path,
                    format!("{target} is a {}, not an array", other.type_name()),
                ));
            }
        };
        let updated: Vec<String> = match o.operator {
            OverriderOperator::Add => current.into_iter().chain(o.value.iter().cloned()).collect(),
            OverriderOperator::Remove => current
                .into_iter()
                .filter(|v| !o.value.contains(v))
                .collect(),
            _ => current,
        };
        patches.push(Patch {
            op,
            path,
            value: Doc::Array(updated.into_iter().map(Doc::String).collect()),
        });
    }
    patch_manifest(doc, &patches).map_err(|(i, cause)| {
        let path = patches.get(i).map(|p| p.path.clone()).unwrap_or_default();
        failure(name, path, cause)
    })
}

/// Escapes a label/annotation key for a JSON pointer the way Karmada does (only `/`).
fn escape_key(key: &str) -> String {
    key.replace('/', "~1")
}

fn apply_label_annotation(
    doc: &Doc,
    o: &LabelAnnotationOverrider,
    field: &str,
    name: String,
) -> Result<Doc, Failure> {
    let base = format!("/metadata/{field}");
    let op = op_of(&o.operator).map_err(|e| failure(name.clone(), base.clone(), e))?;
    let metadata = doc.get_key("metadata");
    let existing = metadata.and_then(|m| m.get_key(field));
    // Karmada reads the map as string→string; anything else counts as absent.
    let string_map = match existing {
        Some(Doc::Object(entries)) if entries.iter().all(|(_, v)| matches!(v, Doc::String(_))) => {
            Some(entries)
        }
        _ => None,
    };
    let mut doc = doc.clone();
    let mut patches = Vec::new();
    for (key, value) in &o.value {
        match op {
            Op::Remove | Op::Replace => {
                if !string_map.is_some_and(|m| m.iter().any(|(k, _)| k == key)) {
                    continue;
                }
            }
            Op::Add => {
                if string_map.is_none() && !ensure_empty_map(&mut doc, field) {
                    continue;
                }
            }
        }
        patches.push(Patch {
            op,
            path: format!("{base}/{}", escape_key(key)),
            value: Doc::String(value.clone()),
        });
    }
    if patches.is_empty() {
        return Ok(doc);
    }
    patch_manifest(&doc, &patches).map_err(|(i, cause)| {
        let path = patches.get(i).map(|p| p.path.clone()).unwrap_or_default();
        failure(name, path, cause)
    })
}

/// Sets `metadata.<field>` to an empty map (creating `metadata` if needed), as Karmada does before
/// adding the first label or annotation. Returns false when `metadata` is not an object.
fn ensure_empty_map(doc: &mut Doc, field: &str) -> bool {
    let Doc::Object(root) = doc else {
        return false;
    };
    let metadata = match root.iter().position(|(k, _)| k == "metadata") {
        Some(i) => &mut root[i].1,
        None => {
            root.push(("metadata".to_owned(), Doc::Object(Vec::new())));
            let last = root.len() - 1;
            &mut root[last].1
        }
    };
    let Doc::Object(entries) = metadata else {
        return false;
    };
    match entries.iter_mut().find(|(k, _)| k == field) {
        Some(slot) => slot.1 = Doc::Object(Vec::new()),
        None => entries.push((field.to_owned(), Doc::Object(Vec::new()))),
    }
    true
}

/// One operation of a field overrider's `json` or `yaml` list: operator, sub-path and value.
type SubOp<'o> = (&'o OverriderOperator, &'o str, Option<&'o Value>);

/// Applies the operations of `list` (`json` or `yaml`, for messages) to the document `sub` parsed
/// from the string at `path`.
fn patch_sub(
    sub: &Doc,
    ops: &[SubOp<'_>],
    list: &str,
    name: &str,
    path: &str,
) -> Result<Doc, Failure> {
    let patches: Vec<Patch> = ops
        .iter()
        .map(|&(operator, sub_path, value)| {
            Ok(Patch {
                op: op_of(operator)?,
                path: sub_path.to_owned(),
                value: json_value(value),
            })
        })
        .collect::<Result<_, String>>()
        .map_err(|e| failure(name.to_owned(), path, e))?;
    patch::apply_all(sub, &patches).map_err(|(i, e)| {
        let sub_path = ops.get(i).map(|op| op.1).unwrap_or_default();
        failure(
            name.to_owned(),
            format!("{path} ({list}[{i}] {sub_path})"),
            e,
        )
    })
}

fn apply_field(doc: &Doc, o: &FieldOverrider, name: String) -> Result<Doc, Failure> {
    let path = o.field_path.clone();
    let tokens = patch::parse_pointer(&path).map_err(|e| failure(name.clone(), path.clone(), e))?;
    let current = match patch::get(doc, &tokens) {
        Ok(Doc::String(s)) => s.clone(),
        Ok(other) => {
            return Err(failure(
                name,
                path,
                format!("the value is a {}, not a string", other.type_name()),
            ));
        }
        Err(e) => return Err(failure(name, path, e)),
    };
    let updated = if !o.yaml.is_empty() {
        let sub = yaml::parse(&current).map_err(|e| failure(name.clone(), path.clone(), e))?;
        let ops: Vec<SubOp<'_>> = o
            .yaml
            .iter()
            .map(|op| (&op.operator, op.sub_path.as_str(), op.value.as_ref()))
            .collect();
        yaml::emit(&patch_sub(&sub, &ops, "yaml", &name, &path)?)
    } else if !o.json.is_empty() {
        let sub = Doc::parse(&current).map_err(|e| failure(name.clone(), path.clone(), e))?;
        let ops: Vec<SubOp<'_>> = o
            .json
            .iter()
            .map(|op| (&op.operator, op.sub_path.as_str(), op.value.as_ref()))
            .collect();
        patch_sub(&sub, &ops, "json", &name, &path)?.to_go_json()
    } else {
        // Karmada writes back an empty result when neither json nor yaml is set.
        String::new()
    };
    let set = Patch {
        op: Op::Replace,
        path: path.clone(),
        value: Doc::String(updated),
    };
    patch_manifest(doc, std::slice::from_ref(&set)).map_err(|(_, e)| failure(name, path, e))
}
