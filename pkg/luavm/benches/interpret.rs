//! Cost of one interpretation through a ResourceInterpreterCustomization script, beside the
//! native rule for the same operation (a Deployment with two containers).
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::semicolon_if_nothing_returned
)]

use criterion::{Criterion, criterion_group, criterion_main};
use karmada_apis::work::v1alpha2::AggregatedStatusItem;
use karmada_interpreter::Interpreter;
use karmada_luavm::{Limits, LuaOperation, Script};
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

criterion_group!(benches, bench);
criterion_main!(benches);
