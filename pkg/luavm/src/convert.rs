//! Data conversion between JSON objects and Lua values, with the rules Karmada's Lua VM follows
//! (gopher-lua with gopher-json), so scripts written for Karmada see and return the same data:
//!
//! - JSON to Lua: objects and arrays become tables; `null` (an absent key, or an element of an
//!   array, which is dropped and closes the gap) becomes nothing; every number becomes a Lua number
//!   (a double: Lua 5.1 has no integers).
//! - Lua to JSON: an empty table becomes `[]`; a table whose keys are all strings an object; one
//!   whose keys are exactly 1..n an array; anything else (gaps, mixed keys, other key types) is an
//!   error, as are functions, NaN and infinities, and a table reached twice (gopher-json rejects
//!   any table it meets a second time, shared or cyclic). A number with no fraction in the `i64`
//!   range becomes an integer, any other a float (Kubernetes' unstructured decoding).
//! - Empty tables, then ([`fix_empty`]): the result of an operation cannot tell `{}` from `[]`, so
//!   a `[]` at the root of a result that must be an object becomes `{}`; deeper, a `[]` is kept
//!   where the objects handed to the script had an empty list at that path (array positions
//!   ignored), becomes `{}` where they had an empty object, and is removed otherwise.

use std::collections::HashSet;

use mlua::{Lua, Table, Value as LuaValue};
use serde_json::{Map, Number, Value};

/// A path of object keys, array positions left out (how Karmada compares empty fields).
type FieldPath = Vec<String>;

/// Converts a JSON value into a Lua value.
pub(crate) fn to_lua(lua: &Lua, value: &Value) -> mlua::Result<LuaValue> {
    Ok(match value {
        Value::Null => LuaValue::Nil,
        Value::Bool(b) => LuaValue::Boolean(*b),
        Value::Number(n) => LuaValue::Number(n.as_f64().unwrap_or_default()),
        Value::String(s) => LuaValue::String(lua.create_string(s)?),
        Value::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for item in items.iter().filter(|v| !v.is_null()) {
                table.raw_push(to_lua(lua, item)?)?;
            }
            LuaValue::Table(table)
        }
        Value::Object(fields) => {
            let table = lua.create_table_with_capacity(0, fields.len())?;
            for (key, item) in fields.iter().filter(|(_, v)| !v.is_null()) {
                table.raw_set(key.as_str(), to_lua(lua, item)?)?;
            }
            LuaValue::Table(table)
        }
    })
}

/// How deep returned tables may nest (Kubernetes objects are a few dozen levels deep).
pub const MAX_DEPTH: usize = 512;

/// Why a Lua value could not become JSON (the messages follow gopher-json's).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EncodeError {
    /// A table was reached a second time.
    #[error("cannot encode recursively nested tables to JSON")]
    Nested,
    /// Integer keys with a gap, or not starting at 1.
    #[error("cannot encode sparse array")]
    SparseArray,
    /// Keys of different or unsupported types.
    #[error("cannot encode mixed or invalid key types")]
    InvalidKeys,
    /// A value JSON has no form for.
    #[error("cannot encode {0} to JSON")]
    InvalidType(&'static str),
    /// NaN or an infinity.
    #[error("json: unsupported value: {0}")]
    UnsupportedNumber(String),
    /// Tables nested deeper than [`MAX_DEPTH`] (the conversion recurses once per level).
    #[error("tables nested more than {MAX_DEPTH} deep")]
    TooDeep,
    /// The VM failed while reading the table (e.g. out of memory).
    #[error("{0}")]
    Lua(String),
}

/// Converts a Lua value into JSON (see the module docs).
pub(crate) fn from_lua(value: &LuaValue) -> Result<Value, EncodeError> {
    let mut visited = HashSet::new();
    encode(value, &mut visited, 0)
}

fn encode(
    value: &LuaValue,
    visited: &mut HashSet<usize>,
    depth: usize,
) -> Result<Value, EncodeError> {
    match value {
        LuaValue::Nil => Ok(Value::Null),
        LuaValue::Boolean(b) => Ok(Value::Bool(*b)),
        #[allow(unreachable_patterns)]
        LuaValue::Integer(i) => Ok(Value::from(*i)),
        LuaValue::Number(n) => number(*n),
        LuaValue::String(s) => Ok(Value::String(s.to_string_lossy())),
        LuaValue::Table(table) => encode_table(table, visited, depth + 1),
        other => Err(EncodeError::InvalidType(other.type_name())),
    }
}

/// A Lua number as JSON: Go prints integral doubles below 1e21 without a fraction, and
/// Kubernetes' decoding makes those that fit an `int64` integers.
pub(crate) fn number(n: f64) -> Result<Value, EncodeError> {
    if n.is_nan() {
        return Err(EncodeError::UnsupportedNumber("NaN".into()));
    }
    if n.is_infinite() {
        let sign = if n > 0.0 { "+" } else { "-" };
        return Err(EncodeError::UnsupportedNumber(format!("{sign}Inf")));
    }
    // -2^63 <= n < 2^63: exactly the doubles that convert to an i64 without saturating.
    if n.fract() == 0.0 && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&n) {
        return Ok(Value::from(n as i64));
    }
    Number::from_f64(n)
        .map(Value::Number)
        .ok_or_else(|| EncodeError::UnsupportedNumber(n.to_string()))
}

fn encode_table(
    table: &Table,
    visited: &mut HashSet<usize>,
    depth: usize,
) -> Result<Value, EncodeError> {
    if depth > MAX_DEPTH {
        return Err(EncodeError::TooDeep);
    }
    if !visited.insert(table.to_pointer() as usize) {
        return Err(EncodeError::Nested);
    }
    let mut strings: Vec<(String, LuaValue)> = Vec::new();
    let mut numbers: Vec<(f64, LuaValue)> = Vec::new();
    for pair in table.pairs::<LuaValue, LuaValue>() {
        let (key, value) = pair.map_err(|e| EncodeError::Lua(e.to_string()))?;
        match key {
            LuaValue::String(s) => strings.push((s.to_string_lossy(), value)),
            LuaValue::Number(n) => numbers.push((n, value)),
            #[allow(unreachable_patterns)]
            LuaValue::Integer(i) => numbers.push((i as f64, value)),
            _ => return Err(EncodeError::InvalidKeys),
        }
    }
    match (strings.is_empty(), numbers.is_empty()) {
        (true, true) => Ok(Value::Array(Vec::new())),
        (false, true) => {
            let mut object = Map::new();
            for (key, value) in strings {
                object.insert(key, encode(&value, visited, depth)?);
            }
            Ok(Value::Object(object))
        }
        (true, false) => {
            numbers.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut array = Vec::with_capacity(numbers.len());
            for (expected, (key, value)) in (1..).zip(numbers) {
                if key != f64::from(expected) {
                    return Err(EncodeError::SparseArray);
                }
                array.push(encode(&value, visited, depth)?);
            }
            Ok(Value::Array(array))
        }
        (false, false) => Err(EncodeError::InvalidKeys),
    }
}

/// Restores or removes the empty tables of a converted result (see the module docs):
/// `root_is_object` says whether the result must be an object, `references` are the objects the
/// script was given (Retain's desired and observed, ReviseReplica's object; none for the others).
pub(crate) fn fix_empty(mut result: Value, root_is_object: bool, references: &[&Value]) -> Value {
    if result.as_array().is_some_and(Vec::is_empty) {
        return if root_is_object {
            Value::Object(Map::new())
        } else {
            result
        };
    }
    let mut empty_lists = HashSet::new();
    let mut empty_objects = HashSet::new();
    for reference in references {
        find_empty(
            reference,
            &mut Vec::new(),
            &mut empty_lists,
            &mut empty_objects,
        );
    }
    fix_children(&mut result, &mut Vec::new(), &empty_lists, &empty_objects);
    result
}

fn find_empty(
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
        Value::Array(_) | Value::Object(_) => find_empty(child, path, lists, objects),
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

/// What to do with an empty list found in a result.
fn verdict(
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

fn is_empty_list(value: &Value) -> bool {
    value.as_array().is_some_and(Vec::is_empty)
}

fn fix_children(
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
                let Some(child) = fields.get_mut(&key) else {
                    path.pop();
                    continue;
                };
                if is_empty_list(child) {
                    match verdict(path, lists, objects) {
                        Some(fixed) => *child = fixed,
                        None => {
                            fields.remove(&key);
                        }
                    }
                } else {
                    fix_children(child, path, lists, objects);
                }
                path.pop();
            }
        }
        Value::Array(items) => {
            let mut kept = Vec::with_capacity(items.len());
            for mut child in std::mem::take(items) {
                if is_empty_list(&child) {
                    if let Some(fixed) = verdict(path, lists, objects) {
                        kept.push(fixed);
                    }
                } else {
                    fix_children(&mut child, path, lists, objects);
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

    fn round_trip(lua: &Lua, script: &str) -> Result<Value, EncodeError> {
        let value: LuaValue = lua.load(script).eval().expect("script");
        from_lua(&value)
    }

    #[test]
    fn json_to_lua_and_back_keeps_objects_arrays_and_scalars() {
        let lua = Lua::new();
        let v = json!({"a": 1, "b": 2.5, "c": "x", "d": true, "e": [1, 2], "f": {"g": "h"}});
        let back = from_lua(&to_lua(&lua, &v).expect("to lua")).expect("from lua");
        assert_eq!(back, v);
    }

    #[test]
    fn nulls_vanish_and_close_array_gaps() {
        let lua = Lua::new();
        let v = json!({"a": null, "b": [1, null, 3]});
        let back = from_lua(&to_lua(&lua, &v).expect("to lua")).expect("from lua");
        assert_eq!(back, json!({"b": [1, 3]}));
    }

    #[test]
    fn numbers_follow_go_and_unstructured_decoding() {
        assert_eq!(number(3.0), Ok(json!(3)));
        assert_eq!(number(-0.0), Ok(json!(0)));
        assert_eq!(number(2.5), Ok(json!(2.5)));
        assert_eq!(number(1e20), Ok(json!(1e20)));
        assert!(number(1e20).expect("number").is_f64());
        assert!(matches!(
            number(f64::NAN),
            Err(EncodeError::UnsupportedNumber(_))
        ));
        assert!(matches!(
            number(f64::INFINITY),
            Err(EncodeError::UnsupportedNumber(_))
        ));
    }

    #[test]
    fn tables_encode_like_gopher_json() {
        let lua = Lua::new();
        assert_eq!(round_trip(&lua, "return {}"), Ok(json!([])));
        assert_eq!(
            round_trip(&lua, "return {1, 2, {x = 1}}"),
            Ok(json!([1, 2, {"x": 1}]))
        );
        assert_eq!(
            round_trip(&lua, "return {[2] = 1}"),
            Err(EncodeError::SparseArray)
        );
        assert_eq!(
            round_trip(&lua, "return {1, x = 2}"),
            Err(EncodeError::InvalidKeys)
        );
        assert_eq!(
            round_trip(&lua, "return {[true] = 1}"),
            Err(EncodeError::InvalidKeys)
        );
        assert_eq!(
            round_trip(&lua, "return {f = function() end}"),
            Err(EncodeError::InvalidType("function"))
        );
        assert_eq!(
            round_trip(&lua, "local t = {} t.self = t return t"),
            Err(EncodeError::Nested)
        );
        assert_eq!(
            round_trip(&lua, "local s = {1} return {a = s, b = s}"),
            Err(EncodeError::Nested)
        );
        assert!(matches!(
            round_trip(&lua, "return {x = 0/0}"),
            Err(EncodeError::UnsupportedNumber(_))
        ));
    }

    #[test]
    fn empty_tables_are_restored_from_references_or_removed() {
        let desired = json!({"spec": {"list": [], "map": {}, "full": [1],
            "items": [{"inner": {}}]}});
        let result = json!({"spec": {"list": [], "map": [], "full": [], "added": [],
            "items": [{"inner": []}, []]}});
        assert_eq!(
            fix_empty(result, true, &[&desired]),
            json!({"spec": {"list": [], "map": {}, "items": [{"inner": {}}]}})
        );
    }

    #[test]
    fn empty_root_becomes_an_object_only_where_one_is_expected() {
        assert_eq!(fix_empty(json!([]), true, &[]), json!({}));
        assert_eq!(fix_empty(json!([]), false, &[]), json!([]));
        assert_eq!(fix_empty(json!({"a": []}), true, &[]), json!({}));
    }
}
