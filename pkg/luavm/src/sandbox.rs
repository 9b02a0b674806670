//! The sandboxed Lua state: Karmada's library set (base, table, string, math, os, package) with
//! the same functions taken away, the `kube` library preloaded, and the time and memory limits.

use std::time::{Duration, Instant};

use apimachinery::{Format, Quantity};
use karmada_interpreter::InterpreterOptions;
use mlua::chunk::ChunkMode;
use mlua::{HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value as LuaValue, VmState};
use serde_json::Value;

use crate::convert;

/// What the scripts may use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time one call may run (Karmada: 1 s).
    pub time: Duration,
    /// Memory one Lua state may hold, the converted objects included.
    pub memory: usize,
    /// Interpreter options the `kube` library follows (`ResourceQuotaEstimate`).
    pub options: InterpreterOptions,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            time: Duration::from_secs(1),
            memory: 64 << 20,
            options: InterpreterOptions::default(),
        }
    }
}

/// The message a script gets when it runs out of time (also how a caught one is told apart).
pub(crate) const TIMEOUT_MESSAGE: &str = "script exceeded its time limit";

/// The deadline of the call in progress, kept in the state's app data.
struct Deadline(Option<Instant>);

/// Sets (or clears) the deadline of the next call.
pub(crate) fn set_deadline(lua: &Lua, deadline: Option<Instant>) {
    lua.set_app_data(Deadline(deadline));
}

/// The deadline of the call in progress, if any.
pub(crate) fn deadline(lua: &Lua) -> Option<Instant> {
    lua.app_data_ref::<Deadline>().and_then(|d| d.0)
}

/// Whether the call in progress is past its deadline.
pub(crate) fn expired(lua: &Lua) -> bool {
    deadline(lua).is_some_and(|d| Instant::now() >= d)
}

/// Instructions between two looks at the deadline. Small enough that a loop of C calls that
/// each do bounded work (a concatenation of strings up to the memory limit) cannot overrun
/// the deadline by much; large enough to stay cheap (one hook call per 128 instructions).
const HOOK_EVERY: u32 = 128;

/// Lua run once per state, with `expired`, the kube loader and `print` as arguments: removes
/// what Karmada removes and keeps `pcall` from swallowing the time limit.
const SANDBOX: &str = r#"
local expired, kube, log, timeout = ...
for _, name in ipairs({"collectgarbage", "dofile", "getfenv", "getmetatable", "load",
    "loadfile", "loadstring", "rawequal", "rawget", "rawset", "setfenv", "setmetatable",
    "module", "newproxy"}) do
  local message = "call function " .. name ..
    " is not supported in karmada customized resourceinterpreter."
  _G[name] = function() error(message) end
end
coroutine = nil
gcinfo = nil
print = log
os = { time = os.time, date = os.date }
package.loaded.os = os
for _, name in ipairs({"gsub", "rep", "dump"}) do
  local message = "The Lua function string." .. name .. " is not supported by Karmada."
  string[name] = function() error(message) end
end
local limit = 1000000
local format = string.format
for _, name in ipairs({"byte", "find", "format", "len", "lower", "match", "gmatch",
    "reverse", "sub", "upper"}) do
  local f = string[name]
  string[name] = function(s, ...)
    if type(s) == "string" and #s > limit then
      error(format("string length %d exceeds the maximum allowed input string length %d in Karmada lua string lib, please check your lua script.", #s, limit))
    end
    return f(s, ...)
  end
end
string.gfind = string.gmatch
-- The default order runs in C without the instruction hook (and Lua 5.1's quicksort is
-- quadratic on hostile input): sort with a Lua comparator so the time limit applies.
local rawsort = table.sort
local function less(a, b) return a < b end
table.sort = function(t, f) return rawsort(t, f or less) end
local rawpcall, rawxpcall = pcall, xpcall
local function check(ok, ...)
  if not ok and expired() then error(timeout, 0) end
  return ok, ...
end
pcall = function(...) return check(rawpcall(...)) end
xpcall = function(...) return check(rawxpcall(...)) end
package.loaders = { package.loaders[1] }
package.loadlib = function() error("loadlib is not supported") end
package.seeall = nil
package.path = ""
package.cpath = ""
package.preload.kube = kube
"#;

/// A fresh sandboxed state with the limits applied.
pub(crate) fn new_state(limits: &Limits) -> mlua::Result<Lua> {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::OS | StdLib::PACKAGE,
        LuaOptions::new(),
    )?;
    crate::lstring::install(&lua)?;
    let expired_fn = lua.create_function(|lua, ()| Ok(expired(lua)))?;
    let kube = kube_library(&lua, limits.options.clone())?;
    let loader = lua.create_function(move |_, ()| Ok(kube.clone()))?;
    let print = lua.create_function(|_, args: MultiValue| {
        let text: Vec<String> = args.iter().map(|v| format!("{v:?}")).collect();
        tracing::debug!(target: "karmada_luavm::print", "{}", text.join("\t"));
        Ok(())
    })?;
    lua.load(SANDBOX)
        .set_name("=sandbox")
        .set_mode(ChunkMode::Text)
        .call::<()>((expired_fn, loader, print, TIMEOUT_MESSAGE))?;
    lua.set_hook(
        HookTriggers::new().every_nth_instruction(HOOK_EVERY),
        |lua, _debug| {
            if expired(lua) {
                Err(mlua::Error::runtime(TIMEOUT_MESSAGE))
            } else {
                Ok(VmState::Continue)
            }
        },
    )?;
    lua.set_memory_limit(limits.memory)?;
    Ok(lua)
}

/// Karmada's `kube` library (`local kube = require("kube")`).
fn kube_library(lua: &Lua, options: InterpreterOptions) -> mlua::Result<Table> {
    let kube = lua.create_table()?;
    kube.set(
        "resourceAdd",
        lua.create_function(|_, args: MultiValue| {
            let mut sum = Quantity::from_value(0, Format::DecimalSi);
            for (i, arg) in args.iter().enumerate() {
                sum.add(&quantity_arg(arg, i + 1, "resourceAdd")?);
            }
            Ok(sum.to_string())
        })?,
    )?;
    kube.set(
        "getResourceQuantity",
        lua.create_function(|_, args: MultiValue| {
            if args.len() != 1 {
                return Err(mlua::Error::runtime(
                    "getResourceQuantity only accepts one argument",
                ));
            }
            let q = quantity_arg(&args[0], 1, "getResourceQuantity")?;
            let n = q.as_approximate_f64();
            if n < 0.0 {
                return Err(mlua::Error::runtime(format!(
                    "int approximation unexpectedly returned a negative value: {q}"
                )));
            }
            if n.is_infinite() {
                return Err(mlua::Error::runtime(format!(
                    "int approximation unexpectedly returned an infinite value: {q}"
                )));
            }
            Ok(n)
        })?,
    )?;
    kube.set(
        "accuratePodRequirements",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(mlua::Error::runtime(
                    "getPodRequirements only accepts one argument",
                ));
            }
            let LuaValue::Table(_) = &args[0] else {
                return Err(mlua::Error::runtime(format!(
                    "bad argument #1 to accuratePodRequirements (table expected, got {})",
                    args[0].type_name()
                )));
            };
            let template = table_arg(&args[0], "PodTemplateSpec")?;
            let requirements = karmada_interpreter::pod_template_requirements(&template, &options)
                .map_err(|e| {
                    mlua::Error::runtime(format!("fail to compute pod requirements: {e}"))
                })?;
            match requirements {
                None => Ok(LuaValue::Nil),
                Some(r) => {
                    let value = serde_json::to_value(&r).map_err(mlua::Error::external)?;
                    convert::to_lua(lua, &value)
                }
            }
        })?,
    )?;
    kube.set(
        "getPodDependencies",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 2 {
                return Err(mlua::Error::runtime(
                    "getPodDependencies only accepts two argument",
                ));
            }
            let template = table_arg(&args[0], "corev1.PodTemplateSpec")?;
            let LuaValue::String(namespace) = &args[1] else {
                return Err(mlua::Error::runtime(format!(
                    "bad argument #2 to getPodDependencies (string expected, got {})",
                    args[1].type_name()
                )));
            };
            // The Pod the template makes in `namespace`, through the native Pod rules; like
            // Karmada, a template the rules cannot read yields no dependencies rather than an error.
            let mut metadata = template
                .get("metadata")
                .cloned()
                .filter(serde_json::Value::is_object)
                .unwrap_or_else(|| serde_json::json!({}));
            metadata["namespace"] = serde_json::Value::String(namespace.to_str()?.to_string());
            let pod = serde_json::json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": metadata,
                "spec": template.get("spec").cloned().unwrap_or_else(|| serde_json::json!({})),
            });
            match karmada_interpreter::native_dependencies(&pod) {
                Ok(Some(deps)) => {
                    let value = serde_json::to_value(&deps).map_err(mlua::Error::external)?;
                    convert::to_lua(lua, &value)
                }
                _ => Ok(LuaValue::Nil),
            }
        })?,
    )?;
    Ok(kube)
}

/// A quantity argument: `nil` is zero, a string is parsed, anything else is a type error.
fn quantity_arg(arg: &LuaValue, n: usize, function: &str) -> mlua::Result<Quantity> {
    match arg {
        LuaValue::Nil => Ok(Quantity::from_value(0, Format::DecimalSi)),
        LuaValue::String(s) => {
            let text = s.to_string_lossy();
            Quantity::parse(&text).map_err(|e| {
                mlua::Error::runtime(format!("{function}: invalid quantity {text:?}: {e}"))
            })
        }
        other => Err(mlua::Error::runtime(format!(
            "bad argument #{n} to {function} (string expected, got {})",
            other.type_name()
        ))),
    }
}

/// A table argument as the JSON object Karmada would decode it into (empty tables dropped).
fn table_arg(arg: &LuaValue, what: &str) -> mlua::Result<Value> {
    let value = convert::from_lua(arg)
        .map_err(|e| mlua::Error::runtime(format!("fail to convert lua value to {what}: {e}")))?;
    Ok(convert::fix_empty(value, true, &[]))
}
