//! Behaviour of every customization operation, the `kube` library, the sandbox and the limits
//! (the cases of Karmada's luavm tests, as behaviour checks).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use karmada_apis::config::v1alpha1::{
    CustomizationRules, CustomizationTarget, LuaScript, ResourceInterpreterCustomization,
    ResourceInterpreterCustomizationSpec,
};
use karmada_apis::work::v1alpha1::ResourceHealth;
use karmada_apis::work::v1alpha2::AggregatedStatusItem;
use karmada_interpreter::{Interpreter, InterpreterLayer, Operation};
use karmada_luavm::{Conflict, Customizations, Limits, LuaOperation, Script, ScriptError};
use serde_json::{Value, json};

fn script(op: LuaOperation, source: &str) -> Script {
    Script::compile("test", op, source, Limits::default()).expect("compiles")
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"namespace": "foo", "name": "bar", "annotations": {}},
        "spec": {"replicas": 1, "paused": false, "template": {"spec": {
            "nodeSelector": {"foo": "foo1"},
            "tolerations": [{"key": "bar", "operator": "Exists"}],
            "volumes": [],
            "containers": [
                {"name": "a", "resources": {"limits": {"cpu": "100m", "memory": "100M"}}},
                {"name": "b", "resources": {"limits": {"cpu": "1.2", "memory": "1.2G"}}}
            ]}}},
        "status": {"readyReplicas": 1}
    })
}

#[test]
fn get_replicas_with_accurate_pod_requirements() {
    let s = script(
        LuaOperation::GetReplicas,
        r#"local kube = require("kube")
        function GetReplicas(desiredObj)
          replica = desiredObj.spec.replicas
          requires = kube.accuratePodRequirements(desiredObj.spec.template)
          return replica, requires
        end"#,
    );
    let (replicas, requirements) = s.get_replicas(&deployment()).unwrap();
    assert_eq!(replicas, 1);
    let requirements = serde_json::to_value(requirements.unwrap()).unwrap();
    assert_eq!(
        requirements["nodeClaim"]["nodeSelector"],
        json!({"foo": "foo1"})
    );
    assert_eq!(
        requirements["nodeClaim"]["tolerations"],
        json!([{"key": "bar", "operator": "Exists"}])
    );
    let quantity = |q: &Value| apimachinery::Quantity::parse(q.as_str().unwrap()).unwrap();
    let request = &requirements["resourceRequest"];
    assert_eq!(quantity(&request["cpu"]).milli_value(), 1300);
    assert_eq!(quantity(&request["memory"]).value(), 1_300_000_000);
}

#[test]
fn get_replicas_with_resource_add_and_numbers() {
    let s = script(
        LuaOperation::GetReplicas,
        r#"local kube = require("kube")
        function GetReplicas(obj)
          local requires = {nodeClaim = {nodeSelector = obj.spec.template.spec.nodeSelector},
                            resourceRequest = {}}
          local c = obj.spec.template.spec.containers
          for i = 1, #c do
            requires.resourceRequest.cpu = kube.resourceAdd(requires.resourceRequest.cpu, c[i].resources.limits.cpu)
          end
          requires.resourceRequest.pods = 2
          return obj.spec.replicas + 1.7, requires
        end"#,
    );
    let (replicas, requirements) = s.get_replicas(&deployment()).unwrap();
    assert_eq!(replicas, 2, "truncated toward zero, as Go's int32(float64)");
    let r = requirements.unwrap();
    assert_eq!(r.resource_request["cpu"].0, "1300m");
    assert_eq!(r.resource_request["pods"].0, "2");
}

#[test]
fn get_replicas_requirements_nil_or_empty() {
    let nil = script(
        LuaOperation::GetReplicas,
        "function GetReplicas(o) return 3 end",
    );
    assert_eq!(nil.get_replicas(&deployment()).unwrap(), (3, None));
    let empty = script(
        LuaOperation::GetReplicas,
        "function GetReplicas(o) return 3, {} end",
    );
    assert_eq!(
        empty.get_replicas(&deployment()).unwrap(),
        (3, Some(Default::default()))
    );
}

#[test]
fn wrong_return_types_are_errors() {
    let cases = [
        (
            LuaOperation::GetReplicas,
            "function GetReplicas(o) return '3' end",
        ),
        (
            LuaOperation::GetReplicas,
            "function GetReplicas(o) return 3, 'x' end",
        ),
        (
            LuaOperation::GetReplicas,
            "function GetReplicas(o) return 1e12 end",
        ),
        (
            LuaOperation::InterpretHealth,
            "function InterpretHealth(o) end",
        ),
        (
            LuaOperation::InterpretHealth,
            "function InterpretHealth(o) return 1 end",
        ),
        (
            LuaOperation::ReflectStatus,
            "function ReflectStatus(o) return 'ok' end",
        ),
        (LuaOperation::Retain, "function Retain(d, o) return nil end"),
        (
            LuaOperation::Retain,
            "function Retain(d, o) return {spec = {}} end",
        ),
        (
            LuaOperation::GetDependencies,
            "function GetDependencies(o) return 1 end",
        ),
        (
            LuaOperation::GetComponents,
            "function GetComponents(o) return 'x' end",
        ),
    ];
    for (op, source) in cases {
        let s = script(op, source);
        let d = deployment();
        let err = match op {
            LuaOperation::GetReplicas => s.get_replicas(&d).err(),
            LuaOperation::InterpretHealth => s.interpret_health(&d).err(),
            LuaOperation::ReflectStatus => s.reflect_status(&d).err(),
            LuaOperation::Retain => s.retain(&d, &d).err(),
            LuaOperation::GetDependencies => s.get_dependencies(&d).err(),
            LuaOperation::GetComponents => s.get_components(&d).err(),
            _ => unreachable!(),
        };
        assert!(
            matches!(err, Some(ScriptError::Result { .. })),
            "{source}: {err:?}"
        );
    }
}

#[test]
fn revise_replica_keeps_empty_fields_of_the_object() {
    let s = script(
        LuaOperation::ReviseReplica,
        "function ReviseReplica(obj, desiredReplica)
           obj.spec.replicas = desiredReplica
           obj.spec.added = {}
           return obj
         end",
    );
    let revised = s.revise_replica(&deployment(), 5).unwrap();
    assert_eq!(revised["spec"]["replicas"], json!(5));
    assert!(revised["spec"]["replicas"].is_i64());
    assert_eq!(revised["metadata"]["annotations"], json!({}));
    assert_eq!(revised["spec"]["template"]["spec"]["volumes"], json!([]));
    assert_eq!(revised["spec"]["paused"], json!(false));
    assert!(
        revised["spec"].get("added").is_none(),
        "new empty tables are dropped"
    );
}

#[test]
fn retain_takes_values_from_the_observed_object() {
    let s = script(
        LuaOperation::Retain,
        "function Retain(desiredObj, observedObj)
           desiredObj.spec.paused = observedObj.spec.paused
           return desiredObj
         end",
    );
    let mut observed = deployment();
    observed["spec"]["paused"] = json!(true);
    let retained = s.retain(&deployment(), &observed).unwrap();
    assert_eq!(retained["spec"]["paused"], json!(true));
}

#[test]
fn aggregate_status_sees_items_and_returns_the_object() {
    let s = script(
        LuaOperation::AggregateStatus,
        "function AggregateStatus(desiredObj, statusItems)
           local ready = 0
           for i = 1, #statusItems do
             ready = ready + statusItems[i].status.readyReplicas
           end
           desiredObj.status = {readyReplicas = ready, clusters = #statusItems,
             applied = statusItems[1].applied, health = statusItems[1].health}
           return desiredObj
         end",
    );
    let items = vec![
        AggregatedStatusItem {
            cluster_name: "m1".into(),
            status: Some(json!({"readyReplicas": 2}).into()),
            applied: true,
            health: Some(ResourceHealth::Healthy),
            ..Default::default()
        },
        AggregatedStatusItem {
            cluster_name: "m2".into(),
            status: Some(json!({"readyReplicas": 3}).into()),
            ..Default::default()
        },
    ];
    let out = s.aggregate_status(&deployment(), &items).unwrap();
    assert_eq!(
        out["status"],
        json!({"readyReplicas": 5, "clusters": 2, "applied": true, "health": "Healthy"})
    );
}

#[test]
fn health_and_status_reflection() {
    let health = script(
        LuaOperation::InterpretHealth,
        "function InterpretHealth(o) return o.status.readyReplicas == o.spec.replicas end",
    );
    assert!(health.interpret_health(&deployment()).unwrap());
    let reflect = script(
        LuaOperation::ReflectStatus,
        "function ReflectStatus(o)
           return {readyReplicas = o.status.readyReplicas, conditions = {}}
         end",
    );
    assert_eq!(
        reflect.reflect_status(&deployment()).unwrap(),
        json!({"readyReplicas": 1})
    );
    let empty = script(
        LuaOperation::ReflectStatus,
        "function ReflectStatus(o) return {} end",
    );
    assert_eq!(empty.reflect_status(&deployment()).unwrap(), json!({}));
}

#[test]
fn dependencies_and_components() {
    let deps = script(
        LuaOperation::GetDependencies,
        "function GetDependencies(o)
           return {{apiVersion = 'v1', kind = 'ConfigMap', namespace = o.metadata.namespace,
                    name = 'cm'}}
         end",
    );
    let found = deps.get_dependencies(&deployment()).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(
        (found[0].kind.as_str(), found[0].name.as_str()),
        ("ConfigMap", "cm")
    );
    let none = script(
        LuaOperation::GetDependencies,
        "function GetDependencies(o) return {} end",
    );
    assert!(none.get_dependencies(&deployment()).unwrap().is_empty());

    let components = script(
        LuaOperation::GetComponents,
        "local kube = require('kube')
         function GetComponents(o)
           return {{name = 'main', replicas = o.spec.replicas,
                    replicaRequirements = kube.accuratePodRequirements(o.spec.template)}}
         end",
    );
    let c = components.get_components(&deployment()).unwrap();
    assert_eq!((c[0].name.as_str(), c[0].replicas), ("main", 1));
    let nil = script(
        LuaOperation::GetComponents,
        "function GetComponents(o) return nil end",
    );
    assert!(nil.get_components(&deployment()).unwrap().is_empty());
}

#[test]
fn kube_get_resource_quantity() {
    let s = script(
        LuaOperation::GetReplicas,
        "local kube = require('kube')
         function GetReplicas(o)
           return kube.getResourceQuantity('1500m') * 2 + kube.getResourceQuantity(nil)
         end",
    );
    assert_eq!(s.get_replicas(&deployment()).unwrap().0, 3);
    let bad = script(
        LuaOperation::GetReplicas,
        "local kube = require('kube')
         function GetReplicas(o) return kube.getResourceQuantity('-1') end",
    );
    assert!(matches!(
        bad.get_replicas(&deployment()),
        Err(ScriptError::Runtime { .. })
    ));
}

#[test]
fn sandbox_takes_away_what_karmada_does() {
    for call in [
        "loadstring('return 1')",
        "setmetatable({}, {})",
        "getmetatable('')",
        "rawget({}, 1)",
        "string.rep('x', 10)",
        "('x'):gsub('x', 'y')",
        "os.exit(1)",
        "io.open('/etc/passwd')",
        "require('os').exit(1)",
        "require('io')",
        "coroutine.create(function() end)",
        "debug.getinfo(1)",
        "package.loadlib('x', 'y')",
    ] {
        let s = script(
            LuaOperation::InterpretHealth,
            &format!("function InterpretHealth(o) {call} return true end"),
        );
        assert!(
            matches!(
                s.interpret_health(&deployment()),
                Err(ScriptError::Runtime { .. })
            ),
            "{call} must fail"
        );
    }
    let allowed = script(
        LuaOperation::InterpretHealth,
        "function InterpretHealth(o)
           return os.time() > 0 and string.format('%d', 3) == '3' and math.max(1, 2) == 2
             and table.concat({'a', 'b'}) == 'ab' and select('#', 1, 2) == 2 and pcall(error) == false
         end",
    );
    assert!(allowed.interpret_health(&deployment()).unwrap());
}

#[test]
fn bad_scripts_give_clear_errors() {
    let syntax = Script::compile(
        "s",
        LuaOperation::InterpretHealth,
        "function (",
        Limits::default(),
    );
    assert!(
        matches!(syntax, Err(ScriptError::Syntax { .. })),
        "{syntax:?}"
    );
    let missing = Script::compile(
        "s",
        LuaOperation::InterpretHealth,
        "x = 1",
        Limits::default(),
    );
    assert!(matches!(missing, Err(ScriptError::MissingFunction { .. })));
    let runtime = script(
        LuaOperation::InterpretHealth,
        "function InterpretHealth(o) return o.spec.nothing.deeper end",
    );
    let err = runtime.interpret_health(&deployment()).unwrap_err();
    assert!(matches!(err, ScriptError::Runtime { .. }));
    assert!(err.to_string().contains("test:1:"), "{err}");
}

fn short_limits() -> Limits {
    Limits {
        time: Duration::from_millis(200),
        memory: 16 << 20,
        ..Limits::default()
    }
}

#[test]
fn endless_loops_stop_at_the_time_limit() {
    for body in [
        "while true do end",
        "while true do pcall(function() while true do end end) end",
        "local function f() return f() end return f()",
    ] {
        let s = Script::compile(
            "loop",
            LuaOperation::InterpretHealth,
            format!("function InterpretHealth(o) {body} end"),
            short_limits(),
        )
        .unwrap();
        let started = Instant::now();
        let err = s.interpret_health(&deployment()).unwrap_err();
        assert!(
            matches!(err, ScriptError::Timeout { .. }),
            "{body}: {err:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    let top_level = Script::compile(
        "loop",
        LuaOperation::InterpretHealth,
        "while true do end",
        short_limits(),
    );
    assert!(matches!(top_level, Err(ScriptError::Timeout { .. })));
}

#[test]
fn memory_bombs_stop_at_the_memory_limit() {
    for body in [
        "local t = {} local s = 'x' for i = 1, 40 do s = s .. s end return true",
        "local t = {} for i = 1, 1e9 do t[i] = {i, i, i} end return true",
    ] {
        let s = Script::compile(
            "bomb",
            LuaOperation::InterpretHealth,
            format!("function InterpretHealth(o) {body} end"),
            Limits {
                time: Duration::from_secs(30),
                ..short_limits()
            },
        )
        .unwrap();
        let err = s.interpret_health(&deployment()).unwrap_err();
        assert!(matches!(err, ScriptError::Memory { .. }), "{body}: {err:?}");
        // The script's next call runs on a fresh state.
        assert!(matches!(
            s.interpret_health(&deployment()),
            Err(ScriptError::Memory { .. })
        ));
    }
}

fn customization(name: &str, rules: CustomizationRules) -> ResourceInterpreterCustomization {
    let mut c = ResourceInterpreterCustomization::new(
        name,
        ResourceInterpreterCustomizationSpec {
            target: CustomizationTarget {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
            },
            customizations: rules,
        },
    );
    c.metadata.resource_version = Some("1".into());
    c
}

#[test]
fn customizations_merge_by_name_and_take_precedence_over_native_rules() {
    let a = customization(
        "a",
        CustomizationRules {
            health_interpretation: Some(LuaScript::new(
                "function InterpretHealth(o) return false end",
            )),
            dependency_interpretation: Some(LuaScript::new(
                "function GetDependencies(o) return {{apiVersion='v1', kind='Secret', namespace='foo', name='s'}} end",
            )),
            ..Default::default()
        },
    );
    let b = customization(
        "b",
        CustomizationRules {
            health_interpretation: Some(LuaScript::new(
                "function InterpretHealth(o) return true end",
            )),
            replica_resource: Some(LuaScript::new("function GetReplicas(o) return 7 end")),
            dependency_interpretation: Some(LuaScript::new(
                "function GetDependencies(o) return {{apiVersion='v1', kind='ConfigMap', namespace='foo', name='c'}, {apiVersion='v1', kind='Secret', namespace='foo', name='s'}} end",
            )),
            ..Default::default()
        },
    );
    let layer = std::sync::Arc::new(Customizations::fixed(vec![b, a], Limits::default()));
    let interpreter = Interpreter::default().with_layer(layer.clone());
    let d = deployment();
    assert_eq!(
        interpreter.interpret_health(&d),
        ResourceHealth::Unhealthy,
        "a wins over b"
    );
    assert_eq!(interpreter.get_replicas(&d).unwrap().unwrap().replicas, 7);
    assert!(interpreter.hook_enabled_for("apps/v1", "Deployment", Operation::InterpretHealth));
    assert!(!layer.hook_enabled("apps/v1beta1", "Deployment", Operation::InterpretHealth));
    let deps = interpreter.layered_dependencies(&d).unwrap().unwrap();
    let names: Vec<_> = deps
        .iter()
        .map(|d| (d.kind.as_str(), d.name.as_str()))
        .collect();
    assert_eq!(names, [("ConfigMap", "c"), ("Secret", "s")]);
    // Operations without a script use the native rule.
    assert!(interpreter.reflect_status(&d).unwrap().is_some());
}

/// Two customizations of one target defining the same operation conflict (Karmada's webhook
/// refuses the later one); the first by name is the one used. Dependency scripts, other targets
/// and other operations do not conflict.
#[test]
fn conflicts_name_the_other_customization_and_the_one_used() {
    let health = |body: &str| {
        Some(LuaScript::new(format!(
            "function InterpretHealth(o) {body} end"
        )))
    };
    let deps = Some(LuaScript::new("function GetDependencies(o) return {} end"));
    let a = customization(
        "a",
        CustomizationRules {
            health_interpretation: health("return false"),
            dependency_interpretation: deps.clone(),
            ..Default::default()
        },
    );
    let b = customization(
        "b",
        CustomizationRules {
            health_interpretation: health("return true"),
            replica_resource: Some(LuaScript::new("function GetReplicas(o) return 7 end")),
            dependency_interpretation: deps.clone(),
            ..Default::default()
        },
    );
    let c = customization(
        "c",
        CustomizationRules {
            health_interpretation: health("return true"),
            replica_resource: Some(LuaScript::new("function GetReplicas(o) return 1 end")),
            ..Default::default()
        },
    );
    let mut elsewhere = customization(
        "0-other-kind",
        CustomizationRules {
            health_interpretation: health("return true"),
            ..Default::default()
        },
    );
    elsewhere.spec.target.kind = "StatefulSet".into();
    let all: Vec<_> = [&c, &elsewhere, &b, &a]
        .into_iter()
        .map(|x| std::sync::Arc::new(x.clone()))
        .collect();
    let conflict = |operation, other: &str, used: &str| Conflict {
        operation,
        other: other.into(),
        used: used.into(),
    };
    assert_eq!(
        karmada_luavm::conflicts(&b, &all),
        [
            conflict(LuaOperation::GetReplicas, "c", "b"),
            conflict(LuaOperation::InterpretHealth, "a", "a"),
            conflict(LuaOperation::InterpretHealth, "c", "a"),
        ]
    );
    assert_eq!(
        karmada_luavm::conflicts(&a, &all),
        [
            conflict(LuaOperation::InterpretHealth, "b", "a"),
            conflict(LuaOperation::InterpretHealth, "c", "a"),
        ]
    );
    assert!(karmada_luavm::conflicts(&elsewhere, &all).is_empty());
    assert!(karmada_luavm::conflicts(&a, &[std::sync::Arc::new(a.clone())]).is_empty());
    assert_eq!(LuaOperation::GetReplicas.karmada_name(), "InterpretReplica");
}

#[test]
fn a_broken_customization_fails_only_its_kind() {
    let broken = customization(
        "broken",
        CustomizationRules {
            health_interpretation: Some(LuaScript::new("function InterpretHealth(o")),
            ..Default::default()
        },
    );
    let layer = std::sync::Arc::new(Customizations::fixed(vec![broken], Limits::default()));
    assert_eq!(layer.compile_errors().len(), 1);
    let interpreter = Interpreter::default().with_layer(layer);
    let err = interpreter.try_interpret_health(&deployment()).unwrap_err();
    assert!(
        err.to_string()
            .contains("ResourceInterpreterCustomization broken"),
        "{err}"
    );
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    assert_eq!(interpreter.interpret_health(&pod), ResourceHealth::Healthy);
}

#[test]
fn kube_get_pod_dependencies() {
    let s = script(
        LuaOperation::GetDependencies,
        "local kube = require('kube')
         function GetDependencies(o)
           return kube.getPodDependencies(o.spec.template, o.metadata.namespace)
         end",
    );
    let mut d = deployment();
    d["spec"]["template"]["spec"]["serviceAccountName"] = json!("robot");
    d["spec"]["template"]["spec"]["volumes"] =
        json!([{"name": "c", "configMap": {"name": "settings"}}]);
    let found = s.get_dependencies(&d).unwrap();
    let got: Vec<(&str, &str, &str)> = found
        .iter()
        .map(|r| (r.kind.as_str(), r.namespace.as_str(), r.name.as_str()))
        .collect();
    assert!(got.contains(&("ConfigMap", "foo", "settings")), "{got:?}");
    assert!(got.contains(&("ServiceAccount", "foo", "robot")), "{got:?}");
    assert_eq!(got.len(), 2, "{got:?}");
}
