//! `string.find`, `string.match` and `string.gmatch` backed by the bounded Rust matcher
//! ([`crate::pattern`]), with Lua 5.1's argument rules (numbers accepted as strings, `init`
//! relative to the end when negative) and messages.

use std::sync::Mutex;
use std::sync::PoisonError;

use mlua::{Lua, MultiValue, Value as LuaValue};

use crate::pattern::{self, Capture, Found, PatternError};
use crate::sandbox::{self, TIMEOUT_MESSAGE};

/// Replaces the three functions in the `string` table (before the sandbox wraps them).
pub(crate) fn install(lua: &Lua) -> mlua::Result<()> {
    let string: mlua::Table = lua.globals().get("string")?;
    string.set(
        "find",
        lua.create_function(|lua, args: MultiValue| find_or_match(lua, &args, true))?,
    )?;
    string.set(
        "match",
        lua.create_function(|lua, args: MultiValue| find_or_match(lua, &args, false))?,
    )?;
    string.set("gmatch", lua.create_function(gmatch)?)?;
    Ok(())
}

fn arg(args: &MultiValue, n: usize) -> LuaValue {
    args.get(n - 1).cloned().unwrap_or(LuaValue::Nil)
}

fn type_name(v: &LuaValue, present: bool) -> &'static str {
    if present { v.type_name() } else { "no value" }
}

/// `luaL_checklstring`: a string, or a number in its string form.
fn check_string(lua: &Lua, args: &MultiValue, n: usize, f: &str) -> mlua::Result<Vec<u8>> {
    let v = arg(args, n);
    match &v {
        LuaValue::String(s) => Ok(s.as_bytes().to_vec()),
        LuaValue::Number(_) | LuaValue::Integer(_) => match lua.coerce_string(v.clone())? {
            Some(s) => Ok(s.as_bytes().to_vec()),
            None => Err(bad_argument(n, f, "string", &v, true)),
        },
        _ => Err(bad_argument(n, f, "string", &v, args.len() >= n)),
    }
}

/// `luaL_optinteger`: `default` when absent or nil; numbers (and numeric strings) truncated.
fn opt_integer(lua: &Lua, args: &MultiValue, n: usize, f: &str, default: i64) -> mlua::Result<i64> {
    let v = arg(args, n);
    match &v {
        LuaValue::Nil => Ok(default),
        LuaValue::Integer(i) => Ok(*i),
        LuaValue::Number(x) => Ok(*x as i64),
        LuaValue::String(_) => match lua.coerce_number(v.clone())? {
            Some(x) => Ok(x as i64),
            None => Err(bad_argument(n, f, "number", &v, true)),
        },
        _ => Err(bad_argument(n, f, "number", &v, true)),
    }
}

fn bad_argument(n: usize, f: &str, expected: &str, got: &LuaValue, present: bool) -> mlua::Error {
    mlua::Error::runtime(format!(
        "bad argument #{n} to '{f}' ({expected} expected, got {})",
        type_name(got, present)
    ))
}

fn to_lua_error(e: PatternError) -> mlua::Error {
    match e {
        PatternError::Pattern(m) => mlua::Error::runtime(m),
        PatternError::Deadline => mlua::Error::runtime(TIMEOUT_MESSAGE),
    }
}

fn push_captures(lua: &Lua, out: &mut Vec<LuaValue>, captures: Vec<Capture>) -> mlua::Result<()> {
    for c in captures {
        out.push(match c {
            Capture::Text(t) => LuaValue::String(lua.create_string(&t)?),
            Capture::Position(p) => LuaValue::Integer(p),
        });
    }
    Ok(())
}

fn find_or_match(lua: &Lua, args: &MultiValue, is_find: bool) -> mlua::Result<MultiValue> {
    let f = if is_find { "find" } else { "match" };
    let s = check_string(lua, args, 1, f)?;
    let p = check_string(lua, args, 2, f)?;
    let init = opt_integer(lua, args, 3, f, 1)?;
    let plain = is_find && !matches!(arg(args, 4), LuaValue::Nil | LuaValue::Boolean(false));
    let found = pattern::find(&s, &p, init, plain, is_find, sandbox::deadline(lua))
        .map_err(to_lua_error)?;
    let mut out = Vec::new();
    match found {
        Found::None => out.push(LuaValue::Nil),
        Found::Find(start, end, captures) => {
            out.push(LuaValue::Integer(start));
            out.push(LuaValue::Integer(end));
            push_captures(lua, &mut out, captures)?;
        }
        Found::Match(captures) => push_captures(lua, &mut out, captures)?,
    }
    Ok(MultiValue::from_vec(out))
}

fn gmatch(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::Function> {
    let s = check_string(lua, &args, 1, "gmatch")?;
    let p = check_string(lua, &args, 2, "gmatch")?;
    let position = Mutex::new(0usize);
    lua.create_function(move |lua, ()| {
        let mut pos = position.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::new();
        if let Some((next, captures)) =
            pattern::gmatch_step(&s, &p, *pos, sandbox::deadline(lua)).map_err(to_lua_error)?
        {
            *pos = next;
            push_captures(lua, &mut out, captures)?;
        } else {
            *pos = s.len() + 1;
        }
        Ok(MultiValue::from_vec(out))
    })
}
