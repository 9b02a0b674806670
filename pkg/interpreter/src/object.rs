//! Helpers for reading and writing unstructured objects (`serde_json::Value`), in the spirit of
//! apimachinery's `unstructured.Nested*` functions: a JSON `null` counts as absent, a non-object on
//! the way to a field is a type error, and writes create missing intermediate objects.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::Cause;

pub(crate) type CResult<T> = std::result::Result<T, Cause>;

/// Looks up a nested field; `Ok(None)` when it (or a parent) is absent or `null`.
pub(crate) fn get<'a>(object: &'a Value, path: &[&str]) -> CResult<Option<&'a Value>> {
    let mut current = object;
    for (depth, key) in path.iter().enumerate() {
        match current {
            Value::Object(map) => match map.get(*key) {
                None | Some(Value::Null) => return Ok(None),
                Some(next) => current = next,
            },
            Value::Null => return Ok(None),
            _ => return Err(Cause::wrong_type(&path[..depth], "an object")),
        }
    }
    Ok(Some(current))
}

/// Mutable access to a nested field; `None` when it or a parent is absent or not an object.
pub(crate) fn get_mut<'a>(object: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    let mut current = object;
    for key in path {
        current = current.as_object_mut()?.get_mut(*key)?;
    }
    Some(current)
}

/// Reads a JSON number as an integer (Go decodes whole floats into integer fields too).
pub(crate) fn as_int(value: &Value) -> Option<i64> {
    if let Some(i) = value.as_i64() {
        return Some(i);
    }
    let f = value.as_f64()?;
    // The bounds are exactly representable; `i64::MAX as f64` rounds up to 2^63, hence `<`.
    (f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64).then_some(f as i64)
}

pub(crate) fn opt_i64(object: &Value, path: &[&str]) -> CResult<Option<i64>> {
    match get(object, path)? {
        None => Ok(None),
        Some(v) => as_int(v)
            .map(Some)
            .ok_or_else(|| Cause::wrong_type(path, "an integer")),
    }
}

pub(crate) fn opt_i32(object: &Value, path: &[&str]) -> CResult<Option<i32>> {
    match opt_i64(object, path)? {
        None => Ok(None),
        Some(v) => i32::try_from(v)
            .map(Some)
            .map_err(|_| Cause::wrong_type(path, "a 32-bit integer")),
    }
}

pub(crate) fn opt_str<'a>(object: &'a Value, path: &[&str]) -> CResult<Option<&'a str>> {
    match get(object, path)? {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Cause::wrong_type(path, "a string")),
    }
}

pub(crate) fn opt_bool(object: &Value, path: &[&str]) -> CResult<Option<bool>> {
    match get(object, path)? {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(Cause::wrong_type(path, "a boolean")),
    }
}

pub(crate) fn opt_array<'a>(object: &'a Value, path: &[&str]) -> CResult<Option<&'a Vec<Value>>> {
    match get(object, path)? {
        None => Ok(None),
        Some(Value::Array(a)) => Ok(Some(a)),
        Some(_) => Err(Cause::wrong_type(path, "an array")),
    }
}

pub(crate) fn opt_object<'a>(
    object: &'a Value,
    path: &[&str],
) -> CResult<Option<&'a Map<String, Value>>> {
    match get(object, path)? {
        None => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(_) => Err(Cause::wrong_type(path, "an object")),
    }
}

/// Reads a map of strings (labels, annotations, nodeSelector, ...).
pub(crate) fn string_map(
    object: &Value,
    path: &[&str],
) -> CResult<Option<BTreeMap<String, String>>> {
    let Some(map) = opt_object(object, path)? else {
        return Ok(None);
    };
    let mut out = BTreeMap::new();
    for (key, value) in map {
        match value {
            Value::String(s) => {
                out.insert(key.clone(), s.clone());
            }
            _ => return Err(Cause::wrong_type(path, "a map of strings")),
        }
    }
    Ok(Some(out))
}

/// Decodes a field into a typed value.
pub(crate) fn decode<T: DeserializeOwned>(value: &Value, path: &[&str]) -> CResult<T> {
    T::deserialize(value).map_err(|source| Cause::Decode {
        path: path.join("."),
        source,
    })
}

/// Sets a nested field, creating missing (or `null`) intermediate objects.
pub(crate) fn set(object: &mut Value, path: &[&str], value: Value) -> CResult<()> {
    let Some((last, parents)) = path.split_last() else {
        *object = value;
        return Ok(());
    };
    let mut current = object;
    for (depth, key) in parents.iter().enumerate() {
        if current.is_null() {
            *current = Value::Object(Map::new());
        }
        let Value::Object(map) = current else {
            return Err(Cause::wrong_type(&path[..depth], "an object"));
        };
        current = map
            .entry((*key).to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if current.is_null() {
        *current = Value::Object(Map::new());
    }
    match current {
        Value::Object(map) => {
            map.insert((*last).to_owned(), value);
            Ok(())
        }
        _ => Err(Cause::wrong_type(parents, "an object")),
    }
}

/// Removes a nested field; nothing happens when it or a parent is absent or not an object.
pub(crate) fn remove(object: &mut Value, path: &[&str]) -> Option<Value> {
    let (last, parents) = path.split_last()?;
    let mut current = object;
    for key in parents {
        current = current.as_object_mut()?.get_mut(*key)?;
    }
    current.as_object_mut()?.remove(*last)
}

/// Reads `metadata.labels` (empty when absent).
pub(crate) fn labels(object: &Value) -> CResult<BTreeMap<String, String>> {
    Ok(string_map(object, &["metadata", "labels"])?.unwrap_or_default())
}

/// Reads `metadata.annotations` (empty when absent).
pub(crate) fn annotations(object: &Value) -> CResult<BTreeMap<String, String>> {
    Ok(string_map(object, &["metadata", "annotations"])?.unwrap_or_default())
}

/// Writes a string map, removing the field when the map is empty (as apimachinery's setters do).
pub(crate) fn set_string_map(
    object: &mut Value,
    path: &[&str],
    map: &BTreeMap<String, String>,
) -> CResult<()> {
    if map.is_empty() {
        remove(object, path);
        return Ok(());
    }
    let value = Value::Object(
        map.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    );
    set(object, path, value)
}

/// Reads `metadata.generation` (0 when absent).
pub(crate) fn generation(object: &Value) -> CResult<i64> {
    Ok(opt_i64(object, &["metadata", "generation"])?.unwrap_or(0))
}

/// Whether two JSON values are equal once Go's "zero value means absent" rule is applied: `null`,
/// `""`, `0`, `false`, `{}` and `[]` count as missing. Statuses round-trip through Go types on the
/// API server, so this is the equality that decides whether a status write would change anything.
pub fn go_semantic_eq(a: &Value, b: &Value) -> bool {
    strip_zero(a) == strip_zero(b)
}

fn strip_zero(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter_map(|(k, v)| {
                    let v = strip_zero(v);
                    (!is_zero(&v)).then(|| (k.clone(), v))
                })
                .collect(),
        ),
        // Array elements keep their positions; only their insides are normalized.
        Value::Array(items) => Value::Array(items.iter().map(strip_zero).collect()),
        Value::Number(_) => as_int(value).map_or_else(|| value.clone(), Value::from),
        other => other.clone(),
    }
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn get_treats_null_and_missing_as_absent() {
        let v = json!({"a": {"b": null}, "c": 1});
        assert_eq!(get(&v, &["a", "b"]).unwrap(), None);
        assert_eq!(get(&v, &["a", "x", "y"]).unwrap(), None);
        assert_eq!(get(&v, &["c"]).unwrap(), Some(&json!(1)));
        assert!(matches!(
            get(&v, &["c", "d"]),
            Err(Cause::WrongType { path, .. }) if path == "c"
        ));
    }

    #[test]
    fn integers_accept_whole_floats_only() {
        let v = json!({"a": 3.0, "b": 3.5, "c": "3", "d": 4_294_967_296_i64});
        assert_eq!(opt_i64(&v, &["a"]).unwrap(), Some(3));
        assert!(opt_i64(&v, &["b"]).is_err());
        assert!(opt_i64(&v, &["c"]).is_err());
        assert!(opt_i32(&v, &["d"]).is_err());
        assert_eq!(opt_i64(&v, &["missing"]).unwrap(), None);
    }

    #[test]
    fn set_creates_parents_and_rejects_scalars_on_the_way() {
        let mut v = json!({"spec": null});
        set(&mut v, &["spec", "template", "x"], json!(1)).unwrap();
        assert_eq!(v, json!({"spec": {"template": {"x": 1}}}));
        let mut w = json!({"spec": 5});
        assert!(set(&mut w, &["spec", "x"], json!(1)).is_err());
    }

    #[test]
    fn remove_is_a_no_op_when_absent() {
        let mut v = json!({"a": {"b": 1}, "c": 2});
        assert_eq!(remove(&mut v, &["a", "b"]), Some(json!(1)));
        assert_eq!(remove(&mut v, &["c", "x"]), None);
        assert_eq!(remove(&mut v, &["z", "x"]), None);
        assert_eq!(v, json!({"a": {}, "c": 2}));
    }

    #[test]
    fn string_maps_reject_non_string_values() {
        let v = json!({"metadata": {"labels": {"a": "1", "b": 2}}});
        assert!(labels(&v).is_err());
        assert!(annotations(&v).unwrap().is_empty());
    }

    #[test]
    fn go_semantic_equality_ignores_zero_values() {
        assert!(go_semantic_eq(
            &json!({"loadBalancer": {}, "replicas": 0, "x": [{"a": "", "b": 1}]}),
            &json!({"x": [{"b": 1.0}]})
        ));
        assert!(!go_semantic_eq(&json!({"a": 1}), &json!({"a": 2})));
        assert!(!go_semantic_eq(&json!([1, 2]), &json!([2, 1])));
    }
}
