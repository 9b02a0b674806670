//! Cost of one interpretation through a ResourceInterpreterCustomization script, beside the
//! native rule for the same operation (a Deployment with two containers); and, in the
//! `thirdparty` group, the built-in third-party interpretations (`ThirdParty`) beside Karmada
//! v1.16's own Lua customization for the same kind run in this VM, on Karmada's test objects —
//! both read at run time from the pinned Go module
//! (`cd hack/tools/karmada && go mod download -json github.com/karmada-io/karmada@v1.16.0`).
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::semicolon_if_nothing_returned
)]

use criterion::{Criterion, criterion_group, criterion_main};
use karmada_apis::config::v1alpha1::ResourceInterpreterCustomization;
use karmada_apis::work::v1alpha2::AggregatedStatusItem;
use karmada_interpreter::{Interpreter, InterpreterLayer, InterpreterOptions, ThirdParty};
use karmada_luavm::{Customizations, Limits, LuaOperation, Script};
use serde_json::{Value, json};

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"namespace": "default", "name": "nginx", "generation": 2,
            "labels": {"app": "nginx"}, "annotations": {"a": "b"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": [
                {"name": "a", "image": "nginx", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}},
                {"name": "b", "image": "envoy", "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}}}]}}},
        "status": {"replicas": 3, "readyReplicas": 3, "updatedReplicas": 3, "availableReplicas": 3,
            "observedGeneration": 2}
    })
}

fn bench(c: &mut Criterion) {
    let object = deployment();
    let native = Interpreter::default();
    let script =
        |op, source: &str| Script::compile("bench", op, source, Limits::default()).unwrap();
    let health = script(
        LuaOperation::InterpretHealth,
        "function InterpretHealth(o) return o.status.readyReplicas == o.spec.replicas end",
    );
    let replicas = script(
        LuaOperation::GetReplicas,
        "local kube = require('kube')
         function GetReplicas(o) return o.spec.replicas, kube.accuratePodRequirements(o.spec.template) end",
    );
    let aggregate = script(
        LuaOperation::AggregateStatus,
        "function AggregateStatus(o, items)
           local ready = 0
           for i = 1, #items do ready = ready + items[i].status.readyReplicas end
           o.status = {readyReplicas = ready}
           return o
         end",
    );
    let items: Vec<AggregatedStatusItem> = ["m1", "m2"]
        .iter()
        .map(|c| AggregatedStatusItem {
            cluster_name: (*c).into(),
            status: Some(json!({"readyReplicas": 3}).into()),
            applied: true,
            ..Default::default()
        })
        .collect();
    let mut g = c.benchmark_group("interpret");
    g.bench_function("health/native", |b| {
        b.iter(|| native.interpret_health(&object))
    });
    g.bench_function("health/lua", |b| {
        b.iter(|| health.interpret_health(&object).unwrap())
    });
    g.bench_function("replicas/native", |b| {
        b.iter(|| native.get_replicas(&object).unwrap())
    });
    g.bench_function("replicas/lua", |b| {
        b.iter(|| replicas.get_replicas(&object).unwrap())
    });
    g.bench_function("aggregate/lua", |b| {
        b.iter(|| aggregate.aggregate_status(&object, &items).unwrap())
    });
    g.bench_function("compile", |b| {
        b.iter(|| {
            Script::compile(
                "bench",
                LuaOperation::InterpretHealth,
                "function InterpretHealth(o) return true end",
                Limits::default(),
            )
            .unwrap()
        })
    });
    g.finish();
}

/// The directory of one kind's customization in Karmada's module.
fn karmada_kind(path: &str) -> std::path::PathBuf {
    let cache = std::env::var("GOMODCACHE")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| {
            let out = std::process::Command::new("go")
                .args(["env", "GOMODCACHE"])
                .output()
                .ok()?;
            Some(String::from_utf8(out.stdout).ok()?.trim().to_owned())
        })
        .expect("a Go module cache");
    let dir = std::path::Path::new(&cache)
        .join("github.com/karmada-io/karmada@v1.16.0")
        .join("pkg/resourceinterpreter/default/thirdparty/resourcecustomizations")
        .join(path);
    assert!(
        dir.is_dir(),
        "{} missing: run `cd hack/tools/karmada && go mod download -json github.com/karmada-io/karmada@v1.16.0`",
        dir.display()
    );
    dir
}

fn yaml_docs(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_saphyr::from_str_multiple::<Value, Vec<Value>>(&text).unwrap()
}

/// Karmada's customization of a kind as a layer, its test objects and member statuses.
fn karmada_case(
    path: &str,
    desired: &str,
    observed: &str,
) -> (Customizations, Value, Value, Vec<AggregatedStatusItem>) {
    let dir = karmada_kind(path);
    let customizations: Vec<ResourceInterpreterCustomization> =
        yaml_docs(&dir.join("customizations.yaml"))
            .into_iter()
            .map(|d| serde_json::from_value(d).unwrap())
            .collect();
    let object = |name: &str| yaml_docs(&dir.join("testdata").join(name)).remove(0);
    let items = yaml_docs(&dir.join("testdata/status-file.yaml"))
        .into_iter()
        .map(|d| serde_json::from_value(d).unwrap())
        .collect();
    (
        Customizations::fixed(customizations, Limits::default()),
        object(desired),
        object(observed),
        items,
    )
}

fn thirdparty(c: &mut Criterion) {
    let native = ThirdParty::new(InterpreterOptions::default());
    let (lua, desired, observed, items) = karmada_case(
        "apps.kruise.io/v1alpha1/CloneSet",
        "desired-cloneset-nginx.yaml",
        "observed-cloneset-nginx.yaml",
    );
    let mut g = c.benchmark_group("thirdparty");
    g.bench_function("cloneset-replicas/native", |b| {
        b.iter(|| native.get_replicas(&observed).unwrap().unwrap())
    });
    g.bench_function("cloneset-replicas/lua", |b| {
        b.iter(|| lua.get_replicas(&observed).unwrap().unwrap())
    });
    g.bench_function("cloneset-health/native", |b| {
        b.iter(|| native.interpret_health(&observed).unwrap().unwrap())
    });
    g.bench_function("cloneset-health/lua", |b| {
        b.iter(|| lua.interpret_health(&observed).unwrap().unwrap())
    });
    g.bench_function("cloneset-reflect/native", |b| {
        b.iter(|| native.reflect_status(&observed).unwrap().unwrap())
    });
    g.bench_function("cloneset-reflect/lua", |b| {
        b.iter(|| lua.reflect_status(&observed).unwrap().unwrap())
    });
    g.bench_function("cloneset-aggregate/native", |b| {
        b.iter(|| native.aggregate_status(&desired, &items).unwrap().unwrap())
    });
    g.bench_function("cloneset-aggregate/lua", |b| {
        b.iter(|| lua.aggregate_status(&desired, &items).unwrap().unwrap())
    });
    let (lua, desired, observed, items) = karmada_case(
        "helm.toolkit.fluxcd.io/v2beta1/HelmRelease",
        "desired-helmrelease.yaml",
        "observed-helmrelease.yaml",
    );
    g.bench_function("helmrelease-health/native", |b| {
        b.iter(|| native.interpret_health(&observed).unwrap().unwrap())
    });
    g.bench_function("helmrelease-health/lua", |b| {
        b.iter(|| lua.interpret_health(&observed).unwrap().unwrap())
    });
    g.bench_function("helmrelease-aggregate/native", |b| {
        b.iter(|| native.aggregate_status(&desired, &items).unwrap().unwrap())
    });
    g.bench_function("helmrelease-aggregate/lua", |b| {
        b.iter(|| lua.aggregate_status(&desired, &items).unwrap().unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench, thirdparty);
criterion_main!(benches);
