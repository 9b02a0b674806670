//! Cache memory: resident bytes per cached object for 10,000 ConfigMaps of about 1 KiB, against
//! the raw JSON size, and the peak during a relist. Memory is measured with a counting global
//! allocator; criterion times the initial fill.
//!
//! Run: `cargo bench -p lariat --bench cache_memory`
// A benchmark harness: a failed setup should stop it at once; criterion_group! makes an
// undocumented pub fn.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use criterion::{Criterion, Throughput, criterion_group};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::PartialObjectMeta;
use lariat::cache::{Store, strip_for_cache};
use serde_json::json;

struct Counting;

static CURRENT: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(layout.size() as isize, Ordering::Relaxed)
                + layout.size() as isize;
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            let delta = new_size as isize - layout.size() as isize;
            let now = CURRENT.fetch_add(delta, Ordering::Relaxed) + delta;
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const OBJECTS: usize = 10_000;

/// One ConfigMap as the API server sends it: ~1 KiB of data, usual metadata, one managedFields entry.
fn raw(i: usize, rv: usize) -> String {
    raw_with(i, rv, false)
}

/// The same object as `kubectl apply` leaves it: plus the last-applied annotation.
fn raw_with(i: usize, rv: usize, last_applied: bool) -> String {
    let mut v = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": format!("config-{i:05}"),
            "namespace": format!("ns-{}", i % 50),
            "uid": format!("6f1c7d2e-4b7a-4c1e-9d3f-{i:012}"),
            "resourceVersion": rv.to_string(),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": format!("app-{}", i % 100), "example.io/managed": "true"},
            "annotations": {"resourcetemplate.example.io/uid": "3b9a2c4d-0000-0000-0000-000000000000"},
            "managedFields": [{
                "manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
                "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {"f:config.yaml": {}, "f:extra": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}
            }]
        },
        "data": {
            "config.yaml": "x".repeat(768),
            "extra": "y".repeat(200),
        }
    });
    if last_applied {
        let mut copy = v.clone();
        copy["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        v["metadata"]["annotations"][lariat::cache::LAST_APPLIED_ANNOTATION] =
            json!(copy.to_string());
    }
    v.to_string()
}

fn stripped_len(s: &str) -> usize {
    let mut v: serde_json::Value = serde_json::from_str(s).unwrap();
    v["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    v.to_string().len()
}

fn fill(store: &Store<ConfigMap>, raws: &[String]) {
    for r in raws {
        let mut cm: ConfigMap = serde_json::from_str(r).unwrap();
        strip_for_cache(&mut cm);
        store.apply(cm);
    }
}

fn report() {
    let raws: Vec<String> = (0..OBJECTS).map(|i| raw(i, 1)).collect();
    let raw_bytes: usize = raws.iter().map(String::len).sum();
    let stripped_bytes: usize = raws.iter().map(|r| stripped_len(r)).sum();

    let before = CURRENT.load(Ordering::Relaxed);
    let store = Store::<ConfigMap>::new(None);
    fill(&store, &raws);
    let resident = CURRENT.load(Ordering::Relaxed) - before;

    // relist: every object comes again with a new resourceVersion (kube-rs would buffer a
    // second full copy and swap; lariat replaces in place)
    let raws2: Vec<String> = (0..OBJECTS).map(|i| raw(i, 2)).collect();
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    store.begin_relist();
    fill(&store, &raws2);
    let gone = store.end_relist();
    assert!(gone.is_empty());
    let relist_peak = PEAK.load(Ordering::Relaxed) - base;
    let after_relist = CURRENT.load(Ordering::Relaxed) - base;

    let per = resident as f64 / OBJECTS as f64;
    println!("cache_memory: {OBJECTS} ConfigMaps");
    println!(
        "  raw JSON as served:           {:>8.0} B/object",
        raw_bytes as f64 / OBJECTS as f64
    );
    println!(
        "  raw JSON without managedFields:{:>7.0} B/object",
        stripped_bytes as f64 / OBJECTS as f64
    );
    println!("  cached (Arc<ConfigMap> + key): {per:>7.0} B/object");
    println!(
        "  ratio cached / raw JSON:       {:>7.2}x",
        resident as f64 / raw_bytes as f64
    );
    println!(
        "  ratio cached / stripped JSON:  {:>7.2}x",
        resident as f64 / stripped_bytes as f64
    );
    println!(
        "  relist peak above steady state: {:.1} MiB ({:.1}% of the store), {} B retained after",
        relist_peak as f64 / 1_048_576.0,
        100.0 * relist_peak as f64 / resident as f64,
        after_relist
    );
    drop(store);

    // objects applied with kubectl carry a copy of themselves in an annotation, which is stripped
    let applied: Vec<String> = (0..OBJECTS).map(|i| raw_with(i, 1, true)).collect();
    let applied_bytes: usize = applied.iter().map(String::len).sum();
    let before = CURRENT.load(Ordering::Relaxed);
    let store = Store::<ConfigMap>::new(None);
    fill(&store, &applied);
    let resident_applied = CURRENT.load(Ordering::Relaxed) - before;
    println!(
        "  kubectl-applied variant: raw {:.0} B/object, cached {:.0} B/object, ratio {:.2}x",
        applied_bytes as f64 / OBJECTS as f64,
        resident_applied as f64 / OBJECTS as f64,
        resident_applied as f64 / applied_bytes as f64
    );
    drop(store);

    // metadata-only cache of the same objects
    let before = CURRENT.load(Ordering::Relaxed);
    let meta = Store::<PartialObjectMeta<ConfigMap>>::new(None);
    for r in &raws {
        let mut m: PartialObjectMeta<ConfigMap> = serde_json::from_str(r).unwrap();
        strip_for_cache(&mut m);
        meta.apply(m);
    }
    let resident_meta = CURRENT.load(Ordering::Relaxed) - before;
    println!(
        "  metadata-only (PartialObjectMeta): {:.0} B/object",
        resident_meta as f64 / OBJECTS as f64
    );
}

fn fill_time(c: &mut Criterion) {
    let raws: Vec<String> = (0..OBJECTS).map(|i| raw(i, 1)).collect();
    let mut g = c.benchmark_group("cache_fill");
    g.throughput(Throughput::Elements(OBJECTS as u64));
    g.sample_size(10);
    g.bench_function("decode_strip_apply_10k_configmaps", |b| {
        b.iter(|| {
            let store = Store::<ConfigMap>::new(None);
            fill(&store, &raws);
            store
        });
    });
    g.finish();
}

criterion_group!(benches, fill_time);

fn main() {
    report();
    benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
