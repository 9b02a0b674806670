//! One compiled customization script: a pool of sandboxed Lua states that have run the script
//! once (so its function is defined), and the operations that call it with Karmada's argument
//! and result conversions.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use karmada_apis::config::v1alpha1::DependentObjectReference;
use karmada_apis::work::v1alpha2::{AggregatedStatusItem, Component, ReplicaRequirements};
use mlua::chunk::ChunkMode;
use mlua::{Function, Lua, MultiValue, Value as LuaValue};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::convert;
use crate::error::ScriptError;
use crate::pool;
use crate::sandbox::{self, Limits};

/// The operations a customization can define: their field in `spec.customizations` and the
/// function the script must define.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LuaOperation {
    /// `retention`: `Retain(desiredObj, observedObj)`.
    Retain,
    /// `replicaResource`: `GetReplicas(desiredObj)`.
    GetReplicas,
    /// `componentResource`: `GetComponents(desiredObj)`.
    GetComponents,
    /// `replicaRevision`: `ReviseReplica(desiredObj, desiredReplica)`.
    ReviseReplica,
    /// `statusReflection`: `ReflectStatus(observedObj)`.
    ReflectStatus,
    /// `statusAggregation`: `AggregateStatus(desiredObj, statusItems)`.
    AggregateStatus,
    /// `healthInterpretation`: `InterpretHealth(observedObj)`.
    InterpretHealth,
    /// `dependencyInterpretation`: `GetDependencies(desiredObj)`.
    GetDependencies,
}

impl LuaOperation {
    /// Every operation.
    pub const ALL: [LuaOperation; 8] = [
        LuaOperation::Retain,
        LuaOperation::GetReplicas,
        LuaOperation::GetComponents,
        LuaOperation::ReviseReplica,
        LuaOperation::ReflectStatus,
        LuaOperation::AggregateStatus,
        LuaOperation::InterpretHealth,
        LuaOperation::GetDependencies,
    ];

    /// The field of `spec.customizations` holding the script.
    pub fn field(self) -> &'static str {
        match self {
            LuaOperation::Retain => "retention",
            LuaOperation::GetReplicas => "replicaResource",
            LuaOperation::GetComponents => "componentResource",
            LuaOperation::ReviseReplica => "replicaRevision",
            LuaOperation::ReflectStatus => "statusReflection",
            LuaOperation::AggregateStatus => "statusAggregation",
            LuaOperation::InterpretHealth => "healthInterpretation",
            LuaOperation::GetDependencies => "dependencyInterpretation",
        }
    }

    /// Karmada's name of the operation (its `InterpreterOperation`), as its messages name it.
    pub fn karmada_name(self) -> &'static str {
        match self {
            LuaOperation::Retain => "Retain",
            LuaOperation::GetReplicas => "InterpretReplica",
            LuaOperation::GetComponents => "InterpretComponent",
            LuaOperation::ReviseReplica => "ReviseReplica",
            LuaOperation::ReflectStatus => "InterpretStatus",
            LuaOperation::AggregateStatus => "AggregateStatus",
            LuaOperation::InterpretHealth => "InterpretHealth",
            LuaOperation::GetDependencies => "InterpretDependency",
        }
    }

    /// The global function the script defines.
    pub fn function(self) -> &'static str {
        match self {
            LuaOperation::Retain => "Retain",
            LuaOperation::GetReplicas => "GetReplicas",
            LuaOperation::GetComponents => "GetComponents",
            LuaOperation::ReviseReplica => "ReviseReplica",
            LuaOperation::ReflectStatus => "ReflectStatus",
            LuaOperation::AggregateStatus => "AggregateStatus",
            LuaOperation::InterpretHealth => "InterpretHealth",
            LuaOperation::GetDependencies => "GetDependencies",
        }
    }
}

/// States kept idle per script; more are made when calls overlap, and dropped after.
const MAX_IDLE: usize = 4;

/// A state holding more than this after a call (what the script left in its globals) is
/// collected, and dropped rather than kept idle when it still does.
const IDLE_MEMORY: usize = 4 << 20;

/// Consecutive calls stopped by the time or memory limit after which a script is suspended.
pub const SUSPEND_AFTER: u32 = 3;

/// How long a suspended script fails fast before one call may try it again at full cost.
pub const SUSPENDED_FOR: Duration = Duration::from_secs(60);

/// A call waits for a Lua thread at most this many time limits before it is given up unrun.
const QUEUE_WAIT_FACTOR: u32 = 2;

/// How a binary (precompiled) chunk starts; only source text is loaded.
const BINARY_SIGNATURE: &[u8] = b"\x1bLua";

/// A compiled script for one operation. Calls may run concurrently (each on its own state, on
/// the Lua threads of [`crate::pool`]); a state whose call failed is discarded, so a failure
/// never leaks into the next call. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Script {
    inner: Arc<Inner>,
}

/// The circuit breaker of one script: consecutive limit overruns, and until when it is open.
#[derive(Debug, Default)]
struct Breaker {
    overruns: u32,
    open_until: Option<Instant>,
}

#[derive(Debug)]
struct Inner {
    name: String,
    operation: LuaOperation,
    source: String,
    limits: Limits,
    idle: Mutex<Vec<Lua>>,
    breaker: Mutex<Breaker>,
}

impl Script {
    /// Compiles `source` for `operation`; `name` says whose script it is in errors (e.g.
    /// `ResourceInterpreterCustomization my-rule retention`). Fails on a binary chunk, a
    /// syntax error, an error while the script's top level runs, or a missing function.
    pub fn compile(
        name: impl Into<String>,
        operation: LuaOperation,
        source: impl Into<String>,
        limits: Limits,
    ) -> Result<Self, ScriptError> {
        let script = Self::lazy(name, operation, source, limits)?;
        script.check()?;
        Ok(script)
    }

    /// Like [`Script::compile`] but runs nothing yet (only a binary chunk is refused): the
    /// first call (or [`Script::check`]) loads the script, on the Lua threads.
    pub fn lazy(
        name: impl Into<String>,
        operation: LuaOperation,
        source: impl Into<String>,
        limits: Limits,
    ) -> Result<Self, ScriptError> {
        let name = name.into();
        let source = source.into();
        if source.as_bytes().starts_with(BINARY_SIGNATURE) {
            return Err(ScriptError::BinaryChunk { script: name });
        }
        Ok(Self {
            inner: Arc::new(Inner {
                name,
                operation,
                source,
                limits,
                idle: Mutex::new(Vec::new()),
                breaker: Mutex::new(Breaker::default()),
            }),
        })
    }

    /// Loads the script on a fresh state (syntax, top level, the function): the error a call
    /// would give before running the function, if any.
    pub fn check(&self) -> Result<(), ScriptError> {
        self.on_pool(|inner| {
            let state = inner.new_state()?;
            inner.give_back(state);
            Ok(())
        })
    }

    /// Whose script this is (for errors and events).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The operation.
    pub fn operation(&self) -> LuaOperation {
        self.inner.operation
    }

    /// Whether the circuit breaker has suspended the script (it keeps overrunning its limits).
    pub fn suspended(&self) -> bool {
        let breaker = self
            .inner
            .breaker
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        breaker.open_until.is_some_and(|t| Instant::now() < t)
    }

    /// Runs `f` on a Lua thread through the circuit breaker, within the time limit.
    fn on_pool<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Inner) -> Result<T, ScriptError> + Send + 'static,
    ) -> Result<T, ScriptError> {
        let inner = &self.inner;
        {
            let mut breaker = inner.breaker.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(until) = breaker.open_until {
                let now = Instant::now();
                if now < until {
                    return Err(ScriptError::Suspended {
                        script: inner.name.clone(),
                        overruns: breaker.overruns,
                        retry_in: until - now,
                    });
                }
                // Half open: this call tries; the others keep failing fast meanwhile.
                breaker.open_until = Some(now + SUSPENDED_FOR);
            }
        }
        let job = self.inner.clone();
        let time = inner.limits.time;
        let result = match pool::run(QUEUE_WAIT_FACTOR * time, time, move || f(&job)) {
            pool::Outcome::Done(r) => r,
            pool::Outcome::Busy => Err(ScriptError::Busy {
                script: inner.name.clone(),
                waited: QUEUE_WAIT_FACTOR * time,
            }),
            pool::Outcome::NoAnswer => Err(ScriptError::Timeout {
                script: inner.name.clone(),
                limit: time,
            }),
        };
        let mut breaker = inner.breaker.lock().unwrap_or_else(PoisonError::into_inner);
        match &result {
            Err(ScriptError::Timeout { .. } | ScriptError::Memory { .. }) => {
                breaker.overruns += 1;
                if breaker.overruns >= SUSPEND_AFTER {
                    breaker.open_until = Some(Instant::now() + SUSPENDED_FOR);
                }
            }
            Err(ScriptError::Busy { .. }) => {
                if breaker.overruns >= SUSPEND_AFTER {
                    breaker.open_until = Some(Instant::now() + SUSPENDED_FOR);
                }
            }
            _ => *breaker = Breaker::default(),
        }
        result
    }

    /// Calls the function with `args` converted to Lua and hands its results (and the
    /// arguments) to `read`, on a Lua thread.
    fn call<T: Send + 'static>(
        &self,
        args: Vec<Value>,
        extra: Option<f64>,
        read: impl FnOnce(&Inner, MultiValue, &[Value]) -> Result<T, ScriptError> + Send + 'static,
    ) -> Result<T, ScriptError> {
        self.on_pool(move |inner| inner.call(&args, extra, read))
    }
    /// `GetReplicas(desiredObj)`: the replica count (a number, truncated to an integer) and the
    /// requirements (a table, or nil for none).
    pub fn get_replicas(
        &self,
        object: &Value,
    ) -> Result<(i32, Option<ReplicaRequirements>), ScriptError> {
        self.call(vec![object.clone()], None, |s, results, _| {
            let replicas = match results.front() {
                Some(LuaValue::Number(n)) => s.replica_count(*n)?,
                #[allow(unreachable_patterns)]
                Some(LuaValue::Integer(n)) => s.replica_count(*n as f64)?,
                other => {
                    return Err(s.result_error(format!(
                        "replicas of type {}, not a number",
                        type_of(other)
                    )));
                }
            };
            let requirements = match results.get(1) {
                None | Some(LuaValue::Nil) => None,
                Some(table @ LuaValue::Table(_)) => {
                    let mut value = s.table_value(table, true, &[])?;
                    quantities_as_strings(value.get_mut("resourceRequest"));
                    Some(s.typed::<ReplicaRequirements>(value, "requirements")?)
                }
                Some(other) => {
                    return Err(s.result_error(format!(
                        "requirements of type {}, not a table",
                        other.type_name()
                    )));
                }
            };
            Ok((replicas, requirements))
        })
    }

    /// `GetComponents(desiredObj)`: the components (a list, or nil for none).
    pub fn get_components(&self, object: &Value) -> Result<Vec<Component>, ScriptError> {
        self.call(vec![object.clone()], None, |s, results, _| {
            match results.front() {
                None | Some(LuaValue::Nil) => Ok(Vec::new()),
                Some(table @ LuaValue::Table(_)) => {
                    let mut value = s.table_value(table, false, &[])?;
                    if let Some(items) = value.as_array_mut() {
                        for item in items {
                            if let Some(r) = item.get_mut("replicaRequirements") {
                                quantities_as_strings(r.get_mut("resourceRequest"));
                            }
                        }
                    }
                    s.typed(value, "components")
                }
                Some(other) => Err(s.result_error(format!(
                    "components of type {}, not a table",
                    other.type_name()
                ))),
            }
        })
    }

    /// `ReviseReplica(desiredObj, desiredReplica)`: the revised object.
    pub fn revise_replica(&self, object: &Value, replicas: i64) -> Result<Value, ScriptError> {
        self.call(
            vec![object.clone()],
            Some(replicas as f64),
            |s, results, args| s.whole_object(results.front(), &args.iter().collect::<Vec<_>>()),
        )
    }

    /// `Retain(desiredObj, observedObj)`: the object to apply.
    pub fn retain(&self, desired: &Value, observed: &Value) -> Result<Value, ScriptError> {
        self.call(
            vec![desired.clone(), observed.clone()],
            None,
            |s, results, args| s.whole_object(results.front(), &args.iter().collect::<Vec<_>>()),
        )
    }

    /// `AggregateStatus(desiredObj, statusItems)`: the template with its status aggregated.
    pub fn aggregate_status(
        &self,
        object: &Value,
        items: &[AggregatedStatusItem],
    ) -> Result<Value, ScriptError> {
        let items =
            serde_json::to_value(items).map_err(|e| self.inner.result_error(e.to_string()))?;
        self.call(vec![object.clone(), items], None, |s, results, _| {
            s.whole_object(results.front(), &[])
        })
    }

    /// `ReflectStatus(observedObj)`: the status to report (a table).
    pub fn reflect_status(&self, object: &Value) -> Result<Value, ScriptError> {
        self.call(vec![object.clone()], None, |s, results, _| {
            match results.front() {
                Some(table @ LuaValue::Table(_)) => s.table_value(table, true, &[]),
                other => {
                    Err(s.result_error(format!("a status of type {}, not a table", type_of(other))))
                }
            }
        })
    }

    /// `InterpretHealth(observedObj)`: a boolean.
    pub fn interpret_health(&self, object: &Value) -> Result<bool, ScriptError> {
        self.call(vec![object.clone()], None, |s, results, _| {
            match results.front() {
                Some(LuaValue::Boolean(b)) => Ok(*b),
                other => Err(s.result_error(format!("{}, not a boolean", type_of(other)))),
            }
        })
    }

    /// `GetDependencies(desiredObj)`: the dependencies (a list).
    pub fn get_dependencies(
        &self,
        object: &Value,
    ) -> Result<Vec<DependentObjectReference>, ScriptError> {
        self.call(vec![object.clone()], None, |s, results, _| {
            match results.front() {
                Some(table @ LuaValue::Table(_)) => {
                    let value = s.table_value(table, false, &[])?;
                    s.typed(value, "dependencies")
                }
                other => Err(s.result_error(format!(
                    "dependencies of type {}, not a table",
                    type_of(other)
                ))),
            }
        })
    }
}

impl Inner {
    fn new_state(&self) -> Result<Lua, ScriptError> {
        let lua = sandbox::new_state(&self.limits).map_err(|e| ScriptError::Vm {
            script: self.name.clone(),
            message: e.to_string(),
        })?;
        let chunk = lua
            .load(self.source.as_str())
            .set_name(format!("={}", self.name))
            .set_mode(ChunkMode::Text)
            .into_function()
            .map_err(|e| ScriptError::Syntax {
                script: self.name.clone(),
                message: root_message(&e),
            })?;
        let started = Instant::now();
        sandbox::set_deadline(&lua, Some(started + self.limits.time));
        let ran = chunk.call::<()>(());
        sandbox::set_deadline(&lua, None);
        ran.map_err(|e| self.run_error(&lua, &e, started))?;
        let function = self.operation.function();
        match lua.globals().get::<LuaValue>(function) {
            Ok(LuaValue::Function(_)) => Ok(lua),
            Ok(LuaValue::Nil) => Err(ScriptError::MissingFunction {
                script: self.name.clone(),
                message: format!("not found function {function}"),
            }),
            Ok(other) => Err(ScriptError::MissingFunction {
                script: self.name.clone(),
                message: format!("{function} is not a function: {}", other.type_name()),
            }),
            Err(e) => Err(self.run_error(&lua, &e, started)),
        }
    }

    fn take(&self) -> Result<Lua, ScriptError> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        match idle {
            Some(lua) => Ok(lua),
            None => self.new_state(),
        }
    }

    /// Keeps `lua` for the next call, unless enough are kept or it holds what the script
    /// stashed in its globals beyond [`IDLE_MEMORY`].
    fn give_back(&self, lua: Lua) {
        if lua.used_memory() > IDLE_MEMORY
            && (lua.gc_collect().is_err() || lua.used_memory() > IDLE_MEMORY)
        {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < MAX_IDLE {
            idle.push(lua);
        }
    }

    /// Classifies a failed run: memory limit, time limit, or the script's own error. An
    /// allocation refused by the limit is named as such even when the call also ran past its
    /// deadline (a thread starved on a loaded machine reaches the deadline without the
    /// script having looped): the memory is what stopped it.
    fn run_error(&self, lua: &Lua, error: &mlua::Error, started: Instant) -> ScriptError {
        if is_memory_error(error) {
            return ScriptError::Memory {
                script: self.name.clone(),
                limit: self.limits.memory,
            };
        }
        if started.elapsed() >= self.limits.time || sandbox::expired(lua) {
            return ScriptError::Timeout {
                script: self.name.clone(),
                limit: self.limits.time,
            };
        }
        ScriptError::Runtime {
            script: self.name.clone(),
            message: root_message(error),
        }
    }

    fn result_error(&self, message: impl Into<String>) -> ScriptError {
        ScriptError::Result {
            script: self.name.clone(),
            function: self.operation.function(),
            message: message.into(),
        }
    }

    /// Calls the function with `args` converted to Lua and hands its results to `read`; runs
    /// on the calling thread (a Lua thread).
    fn call<T>(
        &self,
        args: &[Value],
        extra: Option<f64>,
        read: impl FnOnce(&Self, MultiValue, &[Value]) -> Result<T, ScriptError>,
    ) -> Result<T, ScriptError> {
        let lua = self.take()?;
        let started = Instant::now();
        let outcome = (|| {
            let function: Function = lua.globals().get(self.operation.function())?;
            let mut values = Vec::with_capacity(args.len() + 1);
            for arg in args {
                values.push(convert::to_lua(&lua, arg)?);
            }
            if let Some(n) = extra {
                values.push(LuaValue::Number(n));
            }
            sandbox::set_deadline(&lua, Some(started + self.limits.time));
            let result = function.call::<MultiValue>(MultiValue::from_vec(values));
            sandbox::set_deadline(&lua, None);
            result
        })();
        match outcome {
            Ok(results) => {
                let read = read(self, results, args);
                if read.is_ok() {
                    self.give_back(lua);
                }
                read
            }
            Err(e) => Err(self.run_error(&lua, &e, started)),
        }
    }

    /// Go's `int32(float64)` for the values that have one; NaN and out-of-range are errors.
    fn replica_count(&self, n: f64) -> Result<i32, ScriptError> {
        let truncated = n.trunc();
        if truncated.is_nan() || truncated < f64::from(i32::MIN) || truncated > f64::from(i32::MAX)
        {
            return Err(self.result_error(format!("replicas {n}, out of the int32 range")));
        }
        Ok(truncated as i32)
    }

    fn table_value(
        &self,
        table: &LuaValue,
        root_is_object: bool,
        references: &[&Value],
    ) -> Result<Value, ScriptError> {
        let value = convert::from_lua(table)
            .map_err(|e| self.result_error(format!("a value that is not JSON: {e}")))?;
        Ok(convert::fix_empty(value, root_is_object, references))
    }

    fn typed<T: DeserializeOwned>(&self, value: Value, what: &str) -> Result<T, ScriptError> {
        serde_json::from_value(value)
            .map_err(|e| self.result_error(format!("{what} that do not decode: {e}")))
    }

    /// A whole object result: a table that becomes an object with a kind.
    fn whole_object(
        &self,
        result: Option<&LuaValue>,
        references: &[&Value],
    ) -> Result<Value, ScriptError> {
        let table = match result {
            Some(table @ LuaValue::Table(_)) => table,
            other => {
                return Err(
                    self.result_error(format!("an object of type {}, not a table", type_of(other)))
                );
            }
        };
        let value = self.table_value(table, true, references)?;
        match value.get("kind") {
            Some(Value::String(kind)) if !kind.is_empty() => Ok(value),
            _ => Err(self.result_error("an object without a kind")),
        }
    }
}

fn type_of(value: Option<&LuaValue>) -> &'static str {
    value.map_or("nil", LuaValue::type_name)
}

/// Quantities may come back as Lua numbers; Kubernetes parses their JSON text, so do the same.
fn quantities_as_strings(list: Option<&mut Value>) {
    let Some(Value::Object(list)) = list else {
        return;
    };
    for q in list.values_mut() {
        if let Value::Number(n) = q {
            *q = Value::String(n.to_string());
        }
    }
}

fn is_memory_error(error: &mlua::Error) -> bool {
    match error {
        mlua::Error::MemoryError(_) => true,
        mlua::Error::CallbackError { cause, .. } => is_memory_error(cause),
        mlua::Error::RuntimeError(m) => m.contains("not enough memory"),
        _ => false,
    }
}

/// The innermost message of an error (callback errors wrap the real one).
fn root_message(error: &mlua::Error) -> String {
    match error {
        mlua::Error::CallbackError { cause, .. } => root_message(cause),
        mlua::Error::SyntaxError { message, .. } | mlua::Error::RuntimeError(message) => {
            message.clone()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread starved on a loaded machine can pass the deadline while its script only
    /// allocates: the refused allocation is what stopped it, and the error says so.
    #[test]
    fn a_memory_error_past_the_deadline_is_reported_as_memory() {
        let script = Script::lazy(
            "bomb",
            LuaOperation::InterpretHealth,
            "function InterpretHealth(o) return true end",
            Limits::default(),
        )
        .unwrap();
        let lua = Lua::new();
        let long_ago = Instant::now()
            .checked_sub(Limits::default().time * 2)
            .unwrap();
        let memory = mlua::Error::MemoryError("not enough memory".into());
        assert!(matches!(
            script.inner.run_error(&lua, &memory, long_ago),
            ScriptError::Memory { .. }
        ));
        let other = mlua::Error::RuntimeError(sandbox::TIMEOUT_MESSAGE.into());
        assert!(matches!(
            script.inner.run_error(&lua, &other, long_ago),
            ScriptError::Timeout { .. }
        ));
    }
}
