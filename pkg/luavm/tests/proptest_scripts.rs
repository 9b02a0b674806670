//! Property tests of the Lua script text path: random and adversarial script text, and random
//! JSON objects, through the interpreter's entry points (compile, every operation, the
//! customizations layer). Never a panic, always an answer within a bound, and every error
//! names the script.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use karmada_apis::config::v1alpha1::{
    CustomizationRules, CustomizationTarget, LuaScript, ResourceInterpreterCustomization,
    ResourceInterpreterCustomizationSpec,
};
use karmada_interpreter::Interpreter;
use karmada_luavm::{Customizations, Limits, LuaOperation, Script, ScriptError};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn limits() -> Limits {
    Limits {
        time: Duration::from_millis(200),
        memory: 16 << 20,
        ..Limits::default()
    }
}

/// The longest any one call may take: queueing (2 limits), running (1), slack.
const BOUND: Duration = Duration::from_secs(3);

/// Pieces scripts are made of: valid Lua, hostile Lua and plain garbage.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("function F(o) ".to_owned()),
        Just("return o ".to_owned()),
        Just("return o.spec.size ".to_owned()),
        Just("end ".to_owned()),
        Just("local t = {} ".to_owned()),
        Just("for i = 1, 10 do t[i] = i end ".to_owned()),
        Just("while true do end ".to_owned()),
        Just("string.find(('a'):rep(30), 'a*a*a*b') ".to_owned()),
        Just("local s = 'x' for i = 1, 30 do s = s .. s end ".to_owned()),
        Just("return string.match(tostring(o), '%b()') ".to_owned()),
        Just("error('boom') ".to_owned()),
        Just("return nil ".to_owned()),
        Just("return {kind = 'Widget'} ".to_owned()),
        Just("return true ".to_owned()),
        Just("return 0/0 ".to_owned()),
        Just("return {1, nil, 3} ".to_owned()),
        Just("local a = {} a.a = a return a ".to_owned()),
        Just("pcall(error) ".to_owned()),
        Just("require('kube') ".to_owned()),
        Just("load('x') ".to_owned()),
        Just("\x1bLua".to_owned()),
        Just("[[ ".to_owned()),
        Just("( ".to_owned()),
        Just("goto x ".to_owned()),
        "[ -~]{0,12}",
        any::<String>().prop_map(|s| s.chars().take(8).collect()),
    ]
}

fn script_text() -> impl Strategy<Value = String> {
    prop::collection::vec(fragment(), 0..10).prop_map(|v| v.concat())
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn object(extra: Value) -> Value {
    json!({"apiVersion": "example.io/v1", "kind": "Widget",
        "metadata": {"namespace": "ns", "name": "w"}, "spec": extra, "status": extra})
}

fn renamed(source: &str, op: LuaOperation) -> String {
    source.replace("function F(", &format!("function {}(", op.function()))
}

fn check(error: &ScriptError, name: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        error.to_string().starts_with(name),
        "error does not name the script: {}",
        error
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_script_and_object_give_an_answer_in_time(
        source in script_text(),
        extra in json_value(),
    ) {
        let o = object(extra);
        for op in LuaOperation::ALL {
            let started = Instant::now();
            let compiled = Script::compile("prop", op, renamed(&source, op), limits());
            prop_assert!(started.elapsed() < BOUND, "compile took {:?}", started.elapsed());
            let s = match compiled {
                Ok(s) => s,
                Err(e) => {
                    check(&e, "prop")?;
                    continue;
                }
            };
            let started = Instant::now();
            let outcome: Result<(), ScriptError> = match op {
                LuaOperation::Retain => s.retain(&o, &o).map(drop),
                LuaOperation::GetReplicas => s.get_replicas(&o).map(drop),
                LuaOperation::GetComponents => s.get_components(&o).map(drop),
                LuaOperation::ReviseReplica => s.revise_replica(&o, 3).map(drop),
                LuaOperation::ReflectStatus => s.reflect_status(&o).map(drop),
                LuaOperation::AggregateStatus => s.aggregate_status(&o, &[]).map(drop),
                LuaOperation::InterpretHealth => s.interpret_health(&o).map(drop),
                LuaOperation::GetDependencies => s.get_dependencies(&o).map(drop),
            };
            prop_assert!(started.elapsed() < BOUND, "{:?} took {:?}", op, started.elapsed());
            if let Err(e) = outcome {
                check(&e, "prop")?;
            }
        }
    }

    #[test]
    fn any_customization_through_the_layer(source in script_text(), extra in json_value()) {
        let mut c = ResourceInterpreterCustomization::new(
            "prop-rules",
            ResourceInterpreterCustomizationSpec {
                target: CustomizationTarget {
                    api_version: "example.io/v1".into(),
                    kind: "Widget".into(),
                },
                customizations: CustomizationRules {
                    replica_resource: Some(LuaScript::new(renamed(&source, LuaOperation::GetReplicas))),
                    health_interpretation: Some(LuaScript::new(renamed(&source, LuaOperation::InterpretHealth))),
                    dependency_interpretation: Some(LuaScript::new(renamed(&source, LuaOperation::GetDependencies))),
                    ..Default::default()
                },
            },
        );
        c.metadata.resource_version = Some("1".into());
        let interpreter =
            Interpreter::default().with_layer(Arc::new(Customizations::fixed(vec![c], limits())));
        let o = object(extra);
        let started = Instant::now();
        if let Err(e) = interpreter.get_replicas(&o) {
            prop_assert!(
                e.to_string().contains("ResourceInterpreterCustomization prop-rules"),
                "{}",
                e
            );
        }
        let _ = interpreter.try_interpret_health(&o);
        let _ = interpreter.layered_dependencies(&o);
        prop_assert!(started.elapsed() < 3 * BOUND, "took {:?}", started.elapsed());
    }
}
