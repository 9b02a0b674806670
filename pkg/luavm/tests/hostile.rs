//! Hostile scripts: binary chunks are refused before anything runs; scripts that spend their
//! time inside library functions (backtracking patterns, quadratic plain finds, concatenation,
//! sorting, table growth, deep nesting) stop within their deadline; a script that keeps
//! overrunning is suspended and fails fast until it changes; and Lua never blocks an async
//! runtime's threads.
// test-runner: alone. Its bounds are wall-clock times (a 300 ms deadline met within 1.5 s, a
// suspended script failing within 50 ms): a second test binary beside it on 2 cores stretches them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use karmada_apis::config::v1alpha1::{
    CustomizationRules, CustomizationTarget, LuaScript, ResourceInterpreterCustomization,
    ResourceInterpreterCustomizationSpec,
};
use karmada_interpreter::Interpreter;
use karmada_luavm::{Customizations, Limits, LuaOperation, SUSPEND_AFTER, Script, ScriptError};
use serde_json::{Value, json};

/// The Lua threads are shared by the whole process: the tests here take turns, so one's
/// hostile calls do not queue another's past its deadline.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn object() -> Value {
    json!({"apiVersion": "example.io/v1", "kind": "Widget",
        "metadata": {"namespace": "ns", "name": "w"}, "spec": {"size": 3}})
}

fn limits() -> Limits {
    Limits {
        time: Duration::from_millis(300),
        memory: 32 << 20,
        ..Limits::default()
    }
}

/// A real precompiled chunk, made by an unsandboxed Lua.
fn binary_chunk() -> String {
    let lua = mlua::Lua::new();
    let dumped: mlua::LuaString = lua
        .load("return string.dump(function() function GetReplicas(o) return 1 end end)")
        .eval()
        .unwrap();
    // Scripts are text in the API; the bytes after the signature are what an attacker picks.
    String::from_utf8_lossy(&dumped.as_bytes()).into_owned()
}

#[test]
fn binary_chunks_are_refused_before_running() {
    let _serial = serial();
    let chunk = binary_chunk();
    assert!(chunk.starts_with("\x1bLua"));
    for compiled in [
        Script::compile("bin", LuaOperation::GetReplicas, chunk.clone(), limits()),
        Script::lazy("bin", LuaOperation::GetReplicas, chunk.clone(), limits()),
        Script::compile(
            "bin",
            LuaOperation::GetReplicas,
            "\x1bLua\x51garbage",
            limits(),
        ),
    ] {
        let err = compiled.unwrap_err();
        assert!(matches!(err, ScriptError::BinaryChunk { .. }), "{err:?}");
        assert!(err.to_string().contains("bin: "), "{err}");
        assert!(err.to_string().contains("binary"), "{err}");
    }
    // Nothing inside the sandbox makes or loads one either.
    for body in [
        "return load(string.char(27) .. 'Lua')",
        "return loadstring(string.char(27) .. 'Lua')",
        "return dofile('/etc/passwd')",
        "return string.dump(GetReplicas)",
        "return require('os')",
        "return package.loadlib('/lib/libc.so.6', 'system')",
    ] {
        let s = Script::compile(
            "s",
            LuaOperation::GetReplicas,
            format!("function GetReplicas(o) {body} end"),
            limits(),
        )
        .unwrap();
        let err = s.get_replicas(&object());
        assert!(err.is_err(), "{body}: {err:?}");
    }
    // A customization whose script is a binary chunk fails its kind with a clear error.
    let layer = Arc::new(Customizations::fixed(
        vec![customization("bin-rules", &chunk)],
        limits(),
    ));
    let errors = layer.compile_errors();
    assert_eq!(errors.len(), 1);
    assert!(matches!(errors[0].1, ScriptError::BinaryChunk { .. }));
    let err = Interpreter::default()
        .with_layer(layer)
        .get_replicas(&object())
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("ResourceInterpreterCustomization bin-rules replicaResource"),
        "{err}"
    );
}

fn customization(name: &str, get_replicas: &str) -> ResourceInterpreterCustomization {
    let mut c = ResourceInterpreterCustomization::new(
        name,
        ResourceInterpreterCustomizationSpec {
            target: CustomizationTarget {
                api_version: "example.io/v1".into(),
                kind: "Widget".into(),
            },
            customizations: CustomizationRules {
                replica_resource: Some(LuaScript::new(get_replicas)),
                ..Default::default()
            },
        },
    );
    c.metadata.resource_version = Some("1".into());
    c
}

/// Scripts whose time goes into library functions; each must stop by the deadline.
pub const HOSTILE: [(&str, &str); 9] = [
    (
        "backtracking pattern",
        "local s = 'a' for i = 1, 15 do s = s .. s end return string.find(s, 'a*a*a*a*a*a*b')",
    ),
    (
        "backtracking match",
        "local s = 'a' for i = 1, 15 do s = s .. s end return s:match('(.-)(.-)(.-)(.-)b')",
    ),
    (
        "backtracking gmatch",
        "local s = 'a' for i = 1, 15 do s = s .. s end for x in s:gmatch('a*a*a*a*a*b') do end return 1",
    ),
    (
        "quadratic plain find",
        "local s = 'a' for i = 1, 19 do s = s .. s end local n = s:sub(1, 200000) .. 'b' while true do s:find(n, 1, true) end",
    ),
    (
        "concatenation loop",
        "local s = 'x' for i = 1, 23 do s = s .. s end while true do local t = s .. s end",
    ),
    (
        "sort",
        "local t = {} for i = 1, 200000 do t[i] = (i * 7919) % 200003 end while true do table.sort(t) end",
    ),
    (
        "table.concat",
        "local t = {} for i = 1, 100000 do t[i] = 'abcdefgh' end while true do local s = table.concat(t, ',') end",
    ),
    (
        "deep recursion",
        "local function f(n) return 1 + f(n + 1) end return f(1)",
    ),
    ("endless loop", "while true do end"),
];

#[test]
fn library_functions_stop_at_the_deadline() {
    let _serial = serial();
    for (what, body) in HOSTILE {
        let s = Script::compile(
            what,
            LuaOperation::GetReplicas,
            format!("function GetReplicas(o) {body} end"),
            limits(),
        )
        .unwrap();
        let started = Instant::now();
        let err = s.get_replicas(&object()).unwrap_err();
        let took = started.elapsed();
        assert!(
            took < Duration::from_millis(1500),
            "{what}: took {took:?} ({err})"
        );
        assert!(
            matches!(
                err,
                ScriptError::Timeout { .. }
                    | ScriptError::Memory { .. }
                    | ScriptError::Runtime { .. }
            ),
            "{what}: {err:?}"
        );
    }
}

#[test]
fn growth_and_nesting_are_bounded() {
    let _serial = serial();
    for (what, body, memory) in [
        (
            "table growth",
            "local t = {} local i = 0 while true do i = i + 1 t[i] = {i} end",
            true,
        ),
        (
            "string growth",
            "local s = 'x' while true do s = s .. s end",
            true,
        ),
        (
            "deep result",
            "local t = {} for i = 1, 100000 do t = {t} end return 1, t",
            false,
        ),
    ] {
        let s = Script::compile(
            what,
            LuaOperation::GetReplicas,
            format!("function GetReplicas(o) {body} end"),
            Limits {
                time: Duration::from_secs(5),
                ..limits()
            },
        )
        .unwrap();
        let err = s.get_replicas(&object()).unwrap_err();
        if memory {
            assert!(matches!(err, ScriptError::Memory { .. }), "{what}: {err:?}");
        } else {
            assert!(
                matches!(err, ScriptError::Result { .. }) && err.to_string().contains("deep"),
                "{what}: {err:?}"
            );
        }
    }
}

#[test]
fn a_script_that_keeps_overrunning_is_suspended_until_it_changes() {
    let _serial = serial();
    let source = "function GetReplicas(o) while true do end end";
    let s = Script::compile("looper", LuaOperation::GetReplicas, source, limits()).unwrap();
    for _ in 0..SUSPEND_AFTER {
        let err = s.get_replicas(&object()).unwrap_err();
        assert!(matches!(err, ScriptError::Timeout { .. }), "{err:?}");
    }
    assert!(s.suspended());
    let started = Instant::now();
    let err = s.get_replicas(&object()).unwrap_err();
    assert!(started.elapsed() < Duration::from_millis(50), "fails fast");
    assert!(matches!(err, ScriptError::Suspended { .. }), "{err:?}");
    assert!(err.to_string().contains("looper: suspended"), "{err}");
    // A changed customization is a new script: it runs again.
    let changed = Script::compile(
        "looper",
        LuaOperation::GetReplicas,
        "function GetReplicas(o) return 2 end",
        limits(),
    )
    .unwrap();
    assert_eq!(changed.get_replicas(&object()).unwrap().0, 2);

    // Through the layer: a new resourceVersion resets the breaker.
    let mut c = customization("looper-rules", source);
    let list = Arc::new(std::sync::Mutex::new(vec![Arc::new(c.clone())]));
    let source_list = list.clone();
    let layer = Customizations::new(
        Box::new(move || Some(source_list.lock().unwrap().clone())),
        limits(),
    );
    let interpreter = Interpreter::default().with_layer(Arc::new(layer));
    for _ in 0..SUSPEND_AFTER {
        assert!(interpreter.get_replicas(&object()).is_err());
    }
    let err = interpreter.get_replicas(&object()).unwrap_err();
    assert!(err.to_string().contains("suspended"), "{err}");
    c.metadata.resource_version = Some("2".into());
    c.spec.customizations.replica_resource =
        Some(LuaScript::new("function GetReplicas(o) return 5 end"));
    *list.lock().unwrap() = vec![Arc::new(c)];
    assert_eq!(
        interpreter
            .get_replicas(&object())
            .unwrap()
            .unwrap()
            .replicas,
        5
    );
}

/// Many hostile calls at once from async tasks: the runtime keeps running its other tasks while
/// they run. The runtime has one worker thread, so a call that held it would stop the ticker for
/// the call's whole length: a tick counted while a call is in flight only happens because the
/// call handed the worker over. (Counted, not timed: a loaded machine delays the ticks but
/// cannot make them happen.)
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
// The guard only keeps the sync tests of this file out while this one runs.
#[allow(clippy::await_holding_lock)]
async fn hostile_calls_never_block_the_async_runtime() {
    let _serial = tokio::task::block_in_place(serial);
    let in_flight = Arc::new(AtomicUsize::new(0));
    let ticks_in_flight = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let ticker = tokio::spawn({
        let (in_flight, ticks_in_flight, stop) =
            (in_flight.clone(), ticks_in_flight.clone(), stop.clone());
        async move {
            while !stop.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(10)).await;
                if in_flight.load(Ordering::SeqCst) > 0 {
                    ticks_in_flight.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    });
    let started = Instant::now();
    let mut calls = Vec::new();
    for (i, (what, body)) in HOSTILE.iter().enumerate() {
        let s = Arc::new(
            Script::lazy(
                format!("{what} {i}"),
                LuaOperation::GetReplicas,
                format!("function GetReplicas(o) {body} end"),
                limits(),
            )
            .unwrap(),
        );
        for _ in 0..2 {
            let (s, in_flight) = (s.clone(), in_flight.clone());
            calls.push(tokio::spawn(async move {
                for _ in 0..3 {
                    in_flight.fetch_add(1, Ordering::SeqCst);
                    let _ = s.get_replicas(&object());
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                }
            }));
        }
    }
    for c in calls {
        c.await.unwrap();
    }
    let took = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    ticker.await.unwrap();
    let ticks = ticks_in_flight.load(Ordering::SeqCst);
    // Held workers give exactly 0; the calls last seconds, 10 ms ticks give hundreds.
    assert!(
        ticks >= 10,
        "the runtime's only worker ran {ticks} ticks while the hostile calls ran ({took:?} in all)"
    );
}
