//! `string.find`, `string.match` and `string.gmatch` backed by the bounded Rust matcher
//! ([`crate::pattern`]), with Lua 5.1's argument rules (numbers accepted as strings, `init`
//! relative to the end when negative) and messages.

use std::sync::Mutex;
use std::sync::PoisonError;

use mlua::{Lua, MultiValue, Value as LuaValue};

use crate::pattern::{self, Capture, Found, PatternError};
use crate::sandbox::{self, TIMEOUT_MESSAGE};

/// Replaces the three functions in the `string` table (before the sandbox wraps them). The
/// Rust functions answer `true, results...` or `false, message`; a Lua wrapper raises the
/// message as a string error located at the caller, as the C functions' `luaL_error` does.
pub(crate) fn install(lua: &Lua) -> mlua::Result<()> {
    let find =
        lua.create_function(|lua, args: MultiValue| status(lua, find_or_match(lua, &args, true)))?;
    let matcher =
        lua.create_function(|lua, args: MultiValue| status(lua, find_or_match(lua, &args, false)))?;
    let gmatch = lua.create_function(|lua, args: MultiValue| status(lua, gmatch(lua, args)))?;
    lua.load(WRAP)
        .set_name("=string")
        .set_mode(mlua::chunk::ChunkMode::Text)
        .call::<()>((find, matcher, gmatch))
}

/// Wraps the Rust functions (`error` at level 3: the caller of the wrapper, which `check` was
/// tail-called from).
const WRAP: &str = r"
local find, match, gmatch = ...
local error = error
local function check(ok, ...)
  if not ok then error((...), 3) end
  return ...
end
string.find = function(...) return check(find(...)) end
string.match = function(...) return check(match(...)) end
string.gmatch = function(...)
  local step = check(gmatch(...))
  return function() return check(step()) end
end
";

/// `true, values...` or `false, message` for a result.
fn status(lua: &Lua, result: mlua::Result<MultiValue>) -> mlua::Result<MultiValue> {
    match result {
        Ok(values) => {
            let mut out = Vec::with_capacity(values.len() + 1);
            out.push(LuaValue::Boolean(true));
            out.extend(values);
            Ok(MultiValue::from_vec(out))
        }
        Err(mlua::Error::RuntimeError(message)) => Ok(MultiValue::from_vec(vec![
            LuaValue::Boolean(false),
            LuaValue::String(lua.create_string(&message)?),
        ])),
        Err(e) => Err(e),
    }
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

fn gmatch(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let s = check_string(lua, &args, 1, "gmatch")?;
    let p = check_string(lua, &args, 2, "gmatch")?;
    let position = Mutex::new(0usize);
    let step = lua.create_function(move |lua, ()| {
        let step = || {
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
        };
        status(lua, step())
    })?;
    Ok(MultiValue::from_vec(vec![LuaValue::Function(step)]))
}

#[cfg(test)]
mod tests {
    //! The Rust matcher against PUC Lua 5.1's C one, on the same calls.
    use mlua::{Lua, LuaOptions, StdLib};
    use proptest::prelude::*;

    fn states() -> (Lua, Lua) {
        let c = Lua::new_with(StdLib::STRING | StdLib::TABLE, LuaOptions::new()).unwrap();
        let rust = Lua::new_with(StdLib::STRING | StdLib::TABLE, LuaOptions::new()).unwrap();
        super::install(&rust).unwrap();
        (c, rust)
    }

    /// Runs `call` (a Lua expression over `s`, `p`, `i`) in both states: the results as text,
    /// or the error message.
    fn both(states: &(Lua, Lua), call: &str, s: &[u8], p: &[u8], i: i64) -> (String, String) {
        let code = format!(
            "local s, p, i = ...
             local r = {{pcall(function() {call} end)}}
             local out = {{}}
             for k = 1, #r do out[k] = tostring(r[k]) end
             if not r[1] then return 'error: ' .. out[2] end
             return table.concat(out, '|', 2)"
        );
        let run = |lua: &Lua| -> String {
            let s = lua.create_string(s).unwrap();
            let p = lua.create_string(p).unwrap();
            lua.load(code.as_str())
                .call::<String>((s, p, i))
                .unwrap_or_else(|e| format!("error: {e}"))
        };
        (run(&states.0), run(&states.1))
    }

    fn same(states: &(Lua, Lua), s: &[u8], p: &[u8], i: i64) -> Result<(), String> {
        for call in [
            "return string.find(s, p)",
            "return string.find(s, p, i)",
            "return string.find(s, p, i, true)",
            "return string.match(s, p, i)",
            "local t = {} for a, b in string.gmatch(s, p) do t[#t + 1] = tostring(a) .. ',' .. tostring(b) if #t > 50 then break end end return table.concat(t, ';')",
        ] {
            let (c, rust) = both(states, call, s, p, i);
            // Error messages agree but for the position prefix (a Lua wrapper in front of
            // a function moves it; the sandbox's own wrappers already did).
            let agree = if let Some(message) = c.strip_prefix("error: ") {
                let message = message.rsplit(": ").next().unwrap_or(message);
                rust.starts_with("error: ") && rust.ends_with(message)
            } else {
                c == rust
            };
            if !agree {
                return Err(format!(
                    "{call} with s={:?} p={:?} i={i}: C {c:?}, Rust {rust:?}",
                    String::from_utf8_lossy(s),
                    String::from_utf8_lossy(p)
                ));
            }
        }
        Ok(())
    }

    #[test]
    fn known_patterns_match_like_c() {
        let states = states();
        let subjects: [&[u8]; 8] = [
            b"",
            b"hello world from Lua",
            b"key = value; other=2",
            b"x(a(b)c)y[z]",
            b"THE (quick) fox\n\t42.5e3",
            b"aaaabaaab",
            b"a\0b\0c",
            b"nginx:1.27 registry.k8s.io/pause:3.9",
        ];
        let patterns: [&[u8]; 40] = [
            b"o",
            b"o w",
            b"^h",
            b"^w",
            b"d$",
            b"%a+",
            b"%A+",
            b"(%w+)%s*=%s*(%w+)",
            b"()",
            b"()b()",
            b"%b()",
            b"%b[]",
            b"%f[%a]%a+",
            b"%f[%A]",
            b"a-b",
            b"a*b",
            b"a+b",
            b"a?b",
            b"(a)%1",
            b"(a+)b%1",
            b"[%d%.]+",
            b"[^%s]+",
            b"[a-c]+",
            b"[]]",
            b"[^]]+",
            b"%z",
            b"[%z]",
            b".-",
            b"(.-)%s",
            b"%d+%.?%d*",
            b"%",
            b"[a",
            b"(a",
            b"a)",
            b"%1",
            b"%b",
            b"%fa",
            b"(()",
            b"a\0b",
            b"([^:]+):(.*)",
        ];
        let mut failures = Vec::new();
        for s in subjects {
            for p in patterns {
                for i in [1, 2, -3, 0, 100] {
                    if let Err(e) = same(&states, s, p, i) {
                        failures.push(e);
                    }
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    fn pattern_strategy() -> impl Strategy<Value = Vec<u8>> {
        let atoms = prop_oneof![
            Just(b"a".to_vec()),
            Just(b"b".to_vec()),
            Just(b".".to_vec()),
            Just(b"%a".to_vec()),
            Just(b"%d".to_vec()),
            Just(b"%s".to_vec()),
            Just(b"%W".to_vec()),
            Just(b"[ab]".to_vec()),
            Just(b"[^a]".to_vec()),
            Just(b"[a-c%d]".to_vec()),
            Just(b"*".to_vec()),
            Just(b"+".to_vec()),
            Just(b"-".to_vec()),
            Just(b"?".to_vec()),
            Just(b"(".to_vec()),
            Just(b")".to_vec()),
            Just(b"()".to_vec()),
            Just(b"%1".to_vec()),
            Just(b"%b()".to_vec()),
            Just(b"%f[%w]".to_vec()),
            Just(b"^".to_vec()),
            Just(b"$".to_vec()),
            Just(b"%".to_vec()),
            Just(b"[".to_vec()),
            Just(b"]".to_vec()),
        ];
        prop::collection::vec(atoms, 0..8).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn random_patterns_match_like_c(
            s in prop::collection::vec(prop::sample::select(b"ab1 ()x".to_vec()), 0..12),
            p in pattern_strategy(),
            i in -4i64..6,
        ) {
            let states = states();
            if let Err(e) = same(&states, &s, &p, i) {
                prop_assert!(false, "{}", e);
            }
        }
    }
}
