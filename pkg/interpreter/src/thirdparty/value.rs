//! Reading and building unstructured values the way Karmada's third-party interpretations see
//! them: the interpretations were specified as Lua scripts, so a field is "absent" when it is
//! missing or `null`, numbers are doubles, and the results take the shape a Lua result takes when
//! it becomes JSON again ([`shape`]). Keeping these rules in one place is what makes the native
//! answers equal the scripts' answers, field for field.

use std::collections::HashSet;

use serde_json::{Map, Number, Value};

use crate::error::{Cause, InterpretError, ObjectRef, Result};

/// The value at `path`, `None` when a step is missing, `null` or not an object (a guarded read:
/// `a ~= nil and a.b ~= nil`).
pub(crate) fn get<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut at = value;
    for key in path {
        at = at.as_object()?.get(*key)?;
    }
    (!at.is_null()).then_some(at)
}

/// The value at `path` read without guards: a missing or non-object step before the last is an
/// error, as indexing `nil` is in the scripts.
pub(crate) fn index<'a>(
    value: &'a Value,
    path: &[&str],
    id: &ObjectRef,
) -> Result<Option<&'a Value>> {
    let mut at = value;
    for (i, key) in path.iter().enumerate() {
        match at {
            Value::Object(fields) => match fields.get(*key) {
                Some(Value::Null) | None => {
                    if i + 1 == path.len() {
                        return Ok(None);
                    }
                    return Err(missing(&path[..=i], id));
                }
                Some(next) => at = next,
            },
            // Indexing a string or a list by name gives nothing.
            Value::String(_) | Value::Array(_) => return Ok(None),
            _ => return Err(wrong(&path[..i], "an object", id)),
        }
    }
    Ok(Some(at))
}

/// The error for a field that must be present.
pub(crate) fn missing(path: &[&str], id: &ObjectRef) -> InterpretError {
    Cause::Missing {
        path: path.join("."),
    }
    .at(id)
}

/// The error for a field of the wrong type.
pub(crate) fn wrong(path: &[&str], expected: &'static str, id: &ObjectRef) -> InterpretError {
    Cause::WrongType {
        path: path.join("."),
        expected,
    }
    .at(id)
}

/// A value as a number: numbers, and strings that read as numbers (Lua converts them in
/// arithmetic).
pub(crate) fn as_number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => to_number(s),
        _ => None,
    }
}

/// A value as a number for `==`: numbers only (Lua does not convert strings there).
pub(crate) fn as_number_strict(value: &Value) -> Option<f64> {
    value.as_f64()
}

/// The number at `path` for arithmetic: absent is an error, as adding `nil` is.
pub(crate) fn number_at(value: &Value, path: &[&str], id: &ObjectRef) -> Result<f64> {
    match index(value, path, id)? {
        None => Err(missing(path, id)),
        Some(v) => as_number(v).ok_or_else(|| wrong(path, "a number", id)),
    }
}

/// The number at `path`, or `default` when absent (`x or 0`).
pub(crate) fn number_or(value: &Value, path: &[&str], default: f64, id: &ObjectRef) -> Result<f64> {
    match get(value, path) {
        None => Ok(default),
        Some(v) => as_number(v).ok_or_else(|| wrong(path, "a number", id)),
    }
}

/// Lua's `tonumber` of a string: decimal (with exponent) or `0x` hexadecimal, surrounding blanks
/// allowed.
pub(crate) fn to_number(text: &str) -> Option<f64> {
    let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let (negative, digits) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        let n = u64::from_str_radix(hex, 16).ok()? as f64;
        return Some(if negative { -n } else { n });
    }
    let valid = !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        && t.chars().any(|c| c.is_ascii_digit());
    if !valid {
        return None;
    }
    t.parse::<f64>().ok().filter(|n| n.is_finite())
}

/// A double as JSON: integral values as integers (how Lua numbers come back).
pub(crate) fn number(n: f64) -> Value {
    if n.fract() == 0.0 && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&n) {
        Value::from(n as i64)
    } else {
        Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}

/// Equality of two possibly absent values as Lua compares them (numbers by value, tables never
/// equal unless both absent).
pub(crate) fn lua_eq(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(Value::Number(x)), Some(Value::Number(y))) => x.as_f64() == y.as_f64(),
        (Some(Value::String(x)), Some(Value::String(y))) => x == y,
        (Some(Value::Bool(x)), Some(Value::Bool(y))) => x == y,
        _ => false,
    }
}

/// `a < b` for two numbers read at `a_path` / `b_path`; comparing an absent value is an error.
pub(crate) fn less(
    object: &Value,
    a_path: &[&str],
    b_path: &[&str],
    id: &ObjectRef,
) -> Result<bool> {
    let a = number_at(object, a_path, id)?;
    let b = number_at(object, b_path, id)?;
    Ok(a < b)
}

/// `a < b` as Lua orders two values: numbers by value, strings byte-wise; anything else is an
/// error.
pub(crate) fn lua_lt(a: &Value, b: &Value, path: &[&str], id: &ObjectRef) -> Result<bool> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => Ok(x.as_f64() < y.as_f64()),
        (Value::String(x), Value::String(y)) => Ok(x.as_bytes() < y.as_bytes()),
        _ => Err(wrong(path, "two strings or two numbers to compare", id)),
    }
}

/// The scripts' `to_num(v, default)`: absent or `''` gives `default`, else `tonumber(v)`, else
/// `default`.
pub(crate) fn to_num(value: Option<&Value>, default: Option<f64>) -> Option<f64> {
    match value {
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) if !s.is_empty() => to_number(s).or(default),
        _ => default,
    }
}

/// The current time as the scripts write it (`os.date("!%Y-%m-%dT%H:%M:%SZ")`).
pub(crate) fn now_utc() -> Value {
    Value::from(
        k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string(),
    )
}

/// Which scalars the scripts' `omitEmpty` drops besides `nil`.
#[derive(Clone, Copy)]
pub(crate) enum Omit {
    /// Only empty tables go.
    EmptyTables,
    /// `0`, `''` and `'0s'` go too.
    ZeroValues,
}

/// The scripts' `omitEmpty`: drops what [`Omit`] says, and tables left empty; `None` when
/// nothing is left. A list that loses an element other than at its end cannot be written back
/// (a sparse Lua array): an error.
pub(crate) fn omit_empty(value: &Value, omit: Omit, id: &ObjectRef) -> Result<Option<Value>> {
    let keep_scalar = |v: &Value| match (omit, v) {
        (_, Value::Null) => false,
        (Omit::ZeroValues, Value::Number(n)) => n.as_f64() != Some(0.0),
        (Omit::ZeroValues, Value::String(s)) => !(s.is_empty() || s == "0s"),
        _ => true,
    };
    let keep = |v: &Value| -> Result<Option<Value>> {
        match v {
            Value::Object(_) | Value::Array(_) => omit_empty(v, omit, id),
            other => Ok(keep_scalar(other).then(|| other.clone())),
        }
    };
    match value {
        Value::Object(fields) => {
            let mut out = Map::new();
            for (k, v) in fields {
                if let Some(kept) = keep(v)? {
                    out.insert(k.clone(), kept);
                }
            }
            Ok((!out.is_empty()).then_some(Value::Object(out)))
        }
        Value::Array(items) => {
            let items: Vec<&Value> = items.iter().filter(|v| !v.is_null()).collect();
            let mut out = Vec::new();
            let mut gap = false;
            for v in items {
                match keep(v)? {
                    Some(kept) if gap => {
                        let _ = kept;
                        return Err(wrong(&["status"], "a list without dropped elements", id));
                    }
                    Some(kept) => out.push(kept),
                    None => gap = true,
                }
            }
            Ok((!out.is_empty()).then_some(Value::Array(out)))
        }
        other => Ok(keep_scalar(other).then(|| other.clone())),
    }
}

/// The string at `path` when present and not empty (`x ~= nil and x ~= ''`).
pub(crate) fn non_empty<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    get(value, path).filter(|v| v.as_str() != Some(""))
}

/// `obj.status`, made an object if absent (`if obj.status == nil then obj.status = {} end`).
pub(crate) fn status_mut<'a>(
    object: &'a mut Value,
    id: &ObjectRef,
) -> Result<&'a mut Map<String, Value>> {
    let fields = object
        .as_object_mut()
        .ok_or_else(|| Cause::NotAnObject.at(id))?;
    let status = fields
        .entry("status")
        .or_insert_with(|| Value::Object(Map::new()));
    if status.is_null() {
        *status = Value::Object(Map::new());
    }
    status
        .as_object_mut()
        .ok_or_else(|| wrong(&["status"], "an object", id))
}

/// Sets `object[path] = value`; the parents must exist (as in the scripts), `null` removes.
pub(crate) fn set(object: &mut Value, path: &[&str], value: Value, id: &ObjectRef) -> Result<()> {
    let (last, parents) = path.split_last().ok_or_else(|| missing(path, id))?;
    let mut at = object;
    for (i, key) in parents.iter().enumerate() {
        at = at
            .as_object_mut()
            .and_then(|f| f.get_mut(*key))
            .filter(|v| v.is_object())
            .ok_or_else(|| missing(&path[..=i], id))?;
    }
    let fields = at
        .as_object_mut()
        .ok_or_else(|| wrong(parents, "an object", id))?;
    if value.is_null() {
        fields.remove(*last);
    } else {
        fields.insert((*last).to_owned(), value);
    }
    Ok(())
}

/// The member statuses as the scripts see them (`statusItems`).
pub(crate) fn items_value(
    items: &[karmada_apis::work::v1alpha2::AggregatedStatusItem],
    id: &ObjectRef,
) -> Result<Vec<Value>> {
    items
        .iter()
        .map(|item| {
            serde_json::to_value(item).map_err(|e| {
                Cause::Decode {
                    path: "statusItems".into(),
                    source: e,
                }
                .at(id)
            })
        })
        .collect()
}

/// The result's shape as a Lua result has it once converted back to JSON: `null`s gone, integral
/// numbers as integers, and empty lists and objects (which a Lua table cannot tell apart) kept as
/// the `references` had them at the same path (array positions ignored), else removed; an empty
/// root stays an object when `root_is_object`.
pub(crate) fn shape(result: Value, root_is_object: bool, references: &[&Value]) -> Value {
    let mut result = normalize(result);
    if is_empty(&result) {
        return if root_is_object {
            Value::Object(Map::new())
        } else {
            Value::Array(Vec::new())
        };
    }
    let mut lists = HashSet::new();
    let mut objects = HashSet::new();
    for reference in references {
        collect_empty(reference, &mut Vec::new(), &mut lists, &mut objects);
    }
    fix(&mut result, &mut Vec::new(), &lists, &objects);
    result
}

/// An aggregated object with its `status` shaped as [`shape`] shapes a script's answer (an
/// empty status is left out). The rest of the object is returned as given: the controllers read
/// only the status of an aggregation, and shaping the whole template would cost a walk of it.
pub(crate) fn shaped_status(mut object: Value) -> Value {
    if let Some(fields) = object.as_object_mut()
        && let Some(status) = fields.remove("status")
    {
        let status = shape(status, true, &[]);
        if !is_empty(&status) {
            fields.insert("status".into(), status);
        }
    }
    object
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Drops `null`s (object fields and list elements) and makes integral numbers integers.
fn normalize(value: Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, normalize(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .filter(|v| !v.is_null())
                .map(normalize)
                .collect(),
        ),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (None, Some(f)) => number(f),
            _ => Value::Number(n),
        },
        other => other,
    }
}

type FieldPath = Vec<String>;

fn collect_empty(
    value: &Value,
    path: &mut FieldPath,
    lists: &mut HashSet<FieldPath>,
    objects: &mut HashSet<FieldPath>,
) {
    let mut visit = |child: &Value, path: &mut FieldPath| match child {
        Value::Array(a) if a.is_empty() => {
            lists.insert(path.clone());
        }
        Value::Object(o) if o.is_empty() => {
            objects.insert(path.clone());
        }
        Value::Array(_) | Value::Object(_) => collect_empty(child, path, lists, objects),
        _ => {}
    };
    match value {
        Value::Object(fields) => {
            for (key, child) in fields {
                path.push(key.clone());
                visit(child, path);
                path.pop();
            }
        }
        Value::Array(items) => items.iter().for_each(|child| visit(child, path)),
        _ => {}
    }
}

fn restored(
    path: &FieldPath,
    lists: &HashSet<FieldPath>,
    objects: &HashSet<FieldPath>,
) -> Option<Value> {
    if objects.contains(path) {
        Some(Value::Object(Map::new()))
    } else if lists.contains(path) {
        Some(Value::Array(Vec::new()))
    } else {
        None
    }
}

fn fix(
    value: &mut Value,
    path: &mut FieldPath,
    lists: &HashSet<FieldPath>,
    objects: &HashSet<FieldPath>,
) {
    match value {
        Value::Object(fields) => {
            let keys: Vec<String> = fields.keys().cloned().collect();
            for key in keys {
                path.push(key.clone());
                if let Some(child) = fields.get_mut(&key) {
                    if is_empty(child) {
                        match restored(path, lists, objects) {
                            Some(fixed) => *child = fixed,
                            None => {
                                fields.remove(&key);
                            }
                        }
                    } else {
                        fix(child, path, lists, objects);
                    }
                }
                path.pop();
            }
        }
        Value::Array(items) => {
            let mut kept = Vec::with_capacity(items.len());
            for mut child in std::mem::take(items) {
                if is_empty(&child) {
                    if let Some(fixed) = restored(path, lists, objects) {
                        kept.push(fixed);
                    }
                } else {
                    fix(&mut child, path, lists, objects);
                    kept.push(child);
                }
            }
            *items = kept;
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn to_number_reads_what_lua_tonumber_reads() {
        assert_eq!(to_number("3"), Some(3.0));
        assert_eq!(to_number(" 12 "), Some(12.0));
        assert_eq!(to_number("0x10"), Some(16.0));
        assert_eq!(to_number("1e2"), Some(100.0));
        assert_eq!(to_number("abc"), None);
        assert_eq!(to_number(""), None);
        assert_eq!(to_number("inf"), None);
    }

    #[test]
    fn shape_drops_nulls_and_unreferenced_empties() {
        let reference = json!({"spec": {"a": {}, "b": []}});
        let result = json!({"spec": {"a": [], "b": {}, "c": {}, "d": null, "n": 2.0}});
        assert_eq!(
            shape(result, true, &[&reference]),
            json!({"spec": {"a": {}, "b": [], "n": 2}})
        );
        assert_eq!(shape(json!([]), true, &[]), json!({}));
    }
}
