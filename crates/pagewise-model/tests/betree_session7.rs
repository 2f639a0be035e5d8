//! The corrected B-epsilon model against the session-7 node-size sweep
//! (docs/benchmarks.md, "Node-size sweep at 5M against the advisor (session
//! 7)"; raw results docs/bench/session7/node-*.jsonl, loaded here).
//!
//! Drive: the QD1 random read and write IOPS of the session's `tune` probe
//! (`/var/tmp/tune7/realc/probe-results.json`, 18:01 UTC), copied below; the
//! advisor on it reproduces the sweep table's predictions. Dataset: 5M rows
//! of 16 B keys and 100 B values, fill ln 2, the fill's 256 MiB cache for
//! inserts and the 5%-cache phase's own cache for gets; 16 KiB basements,
//! fanout 16. Run with `--nocapture` for the before/after table.

use pagewise_model::advise::{
    fit_betree_costs, leave_one_out_betree, predict_betree, predict_betree_engine, BeTreeSample,
    BeTreeShape, Dataset, Device,
};
use pagewise_model::fit::{fit_all, ModelReport};
use pagewise_model::{Measurement, OpKind, Pattern};

/// randread / randwrite, 1 thread, QD1: (block bytes, IOPS).
const READS: [(u64, f64); 9] = [
    (512, 13398.7),
    (4096, 12208.4),
    (8192, 11448.4),
    (16384, 11573.6),
    (32768, 10918.2),
    (65536, 9017.7),
    (131072, 8268.0),
    (262144, 5646.7),
    (1048576, 1329.7),
];
const WRITES: [(u64, f64); 9] = [
    (512, 9009.8),
    (4096, 9750.9),
    (8192, 9653.2),
    (16384, 8998.4),
    (32768, 7938.7),
    (65536, 7591.5),
    (131072, 6236.5),
    (262144, 4985.9),
    (1048576, 1737.7),
];
const NODES_KIB: [u64; 4] = [64, 256, 1024, 4096];
/// CPU per cached get at 5M, 1 MiB nodes (the sweep ran no cached phase):
/// 4.0 µs in the merged session-7 run (docs/bench/session7/final-5m.jsonl,
/// "readrandom:cache=4G").
const CACHED_GET_CPU_S: f64 = 4.0e-6;
/// The sweep table's I/O-only predictions (256 MiB cache).
const TABLE_INSERTS_PER_S: [f64; 4] = [89_309.0, 229_501.0, 261_156.0, 280_622.0];

/// What one node size measured (the fill line and the 5%-cache line).
struct Measured {
    inserts_per_s: f64,
    cpu_insert_s: f64,
    gets_per_s: f64,
    cpu_get_s: f64,
    reads_per_get: f64,
    kib_per_get: f64,
    get_cache_bytes: u64,
}

fn load(node_kib: u64) -> Measured {
    let path = format!(
        "{}/../../docs/bench/session7/node-{node_kib}.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by = |w: &str| lines.iter().find(|l| l["workload"] == w).unwrap();
    let (f, g) = (by("fillrandom"), by("readrandom"));
    let x = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap();
    let cpu = |v| (x(v, "cpu_user_s") + x(v, "cpu_sys_s")) / x(v, "ops");
    let es = &g["engine_stats"];
    Measured {
        inserts_per_s: x(f, "ops_per_s"),
        cpu_insert_s: cpu(f),
        gets_per_s: x(g, "ops_per_s"),
        cpu_get_s: cpu(g),
        reads_per_get: x(es, "page_read_ops") / x(g, "ops"),
        kib_per_get: x(es, "page_read_bytes") / x(g, "ops") / 1024.0,
        get_cache_bytes: g["settings"]["cache_bytes"].as_u64().unwrap(),
    }
}

fn report() -> ModelReport {
    let ms: Vec<Measurement> = (READS.iter().map(|&(b, i)| (OpKind::Read, b, i)))
        .chain(WRITES.iter().map(|&(b, i)| (OpKind::Write, b, i)))
        .map(|(op, b, i)| Measurement::simple(op, Pattern::Random, b, i))
        .collect();
    fit_all(&ms).unwrap()
}

/// The random read and write curves of `r`, one parallel slot.
fn device(r: &ModelReport) -> Device<'_> {
    Device {
        read: r.find(OpKind::Read, Pattern::Random, None).unwrap(),
        write: r.find(OpKind::Write, Pattern::Random, None),
        read_parallelism: 1.0,
    }
}

/// The fit's input: each node size's measured CPU, reads and KiB.
fn samples(m: &[Measured]) -> Vec<BeTreeSample> {
    (NODES_KIB.iter().zip(m))
        .map(|(&n, m)| BeTreeSample {
            node_bytes: n << 10,
            cpu_insert_s: m.cpu_insert_s,
            cpu_get_s: m.cpu_get_s,
            reads_per_get: m.reads_per_get,
            kib_per_get: m.kib_per_get,
            cpu_cached_get_s: Some(CACHED_GET_CPU_S),
        })
        .collect()
}

fn dataset(cache_bytes: u64) -> Dataset {
    Dataset {
        rows: 5_000_000,
        key_bytes: 16,
        value_bytes: 100,
        cache_bytes,
        ..Dataset::default()
    }
}

fn shape(node_kib: u64) -> BeTreeShape {
    BeTreeShape {
        node_bytes: node_kib << 10,
        basement_bytes: 16 << 10,
        fanout: 16,
    }
}

fn err(predicted: f64, measured: f64) -> f64 {
    predicted / measured - 1.0
}

#[test]
fn corrected_betree_model_against_the_session7_sweep() {
    let r = report();
    let dev = device(&r);
    let m: Vec<Measured> = NODES_KIB.iter().map(|&n| load(n)).collect();
    let samples = samples(&m);
    let all = fit_betree_costs(&samples);
    let loo = leave_one_out_betree(&samples);
    println!(
        "costs (all four sizes): {:.2} us per insert; per get {:.1} us + {:.1} us per read + {:.2} us per KiB",
        all.cpu_insert_s * 1e6,
        all.cpu_get_s * 1e6,
        all.cpu_read_s * 1e6,
        all.cpu_read_per_kib_s * 1e6
    );
    println!("node | inserts/s meas | I/O-only (err) | corrected LOO (err) | reads/get meas | I/O-only | corrected (err) | CPU/get meas | corrected LOO (err) | gets/s meas | I/O-only (err) | corrected LOO (err)");
    for (i, &n) in NODES_KIB.iter().enumerate() {
        let (mi, fill, get) = (&m[i], dataset(256 << 20), dataset(m[i].get_cache_bytes));
        // Before: the advisor as it was (I/O only, one basement per
        // uncached level), reproducing the sweep table.
        let before = predict_betree(dev, &fill, shape(n));
        let ratio = before.inserts_per_s / TABLE_INSERTS_PER_S[i];
        assert!((ratio - 1.0).abs() < 0.005, "{n} KiB: {ratio}");
        let before_get = predict_betree(dev, &get, shape(n));
        // After: out of sample (costs fitted on the other three sizes).
        let ins = predict_betree_engine(dev, &fill, shape(n), loo[i]);
        let g = predict_betree_engine(dev, &get, shape(n), loo[i]);
        let e = [
            err(before.inserts_per_s, mi.inserts_per_s),
            err(ins.inserts_per_s, mi.inserts_per_s),
            err(before_get.point_ios, mi.reads_per_get),
            err(g.reads.reads, mi.reads_per_get),
            err(g.get_cpu_s, mi.cpu_get_s),
            err(before_get.point_qps, mi.gets_per_s),
            err(g.point_qps, mi.gets_per_s),
        ];
        println!(
            "{n} KiB | {:.0} | {:.0} ({:+.0}%) | {:.0} ({:+.0}%) | {:.2} | {:.2} ({:+.0}%) | {:.2} ({:+.0}%) | {:.0} us | {:.0} us ({:+.0}%) | {:.0} | {:.0} ({:+.0}%) | {:.0} ({:+.0}%)",
            mi.inserts_per_s, before.inserts_per_s, e[0] * 100.0, ins.inserts_per_s, e[1] * 100.0,
            mi.reads_per_get, before_get.point_ios, e[2] * 100.0, g.reads.reads, e[3] * 100.0,
            mi.cpu_get_s * 1e6, g.get_cpu_s * 1e6, e[4] * 100.0,
            mi.gets_per_s, before_get.point_qps, e[5] * 100.0, g.point_qps, e[6] * 100.0,
        );
        // The I/O-only insert rate missed by 2.7x or more at every size.
        assert!(e[0] > 1.7, "{n} KiB: before {e:?}");
        check_after(n, &e);
    }
}

/// The stated errors of the corrected model, out of sample, and where it
/// still misses.
fn check_after(n: u64, e: &[f64; 7]) {
    // Inserts: within 25% from 256 KiB up; at 64 KiB the device time under
    // the sweep's load (17.7 µs per insert of wall minus CPU against the
    // model's 11.2 µs) leaves it about 40% high.
    let insert_bound = if n == 64 { 0.45 } else { 0.25 };
    assert!(e[1].abs() < insert_bound, "{n} KiB inserts: {e:?}");
    // Reads per get: within 10% at every size (I/O-only: 1.00 against
    // 1.10-1.73, up to 42% low).
    assert!(e[3].abs() < 0.10, "{n} KiB reads per get: {e:?}");
    // CPU per get: within 25% up to 1 MiB. At 4 MiB the model's bytes per
    // get (size-biased buffer reads at 4/3 of the mean share) are half the
    // measured, so its CPU is predicted low.
    if n <= 1024 {
        assert!(e[4].abs() < 0.25, "{n} KiB CPU per get: {e:?}");
    } else {
        assert!(e[4] < -0.25, "{n} KiB CPU per get now fits: {e:?}");
    }
    // Gets/s still miss high: the sweep's drive answered a read in 2-4x
    // the probe's time (a 5M fill ran on the same disk), which no model of
    // the engine predicts; the correction moves them the right way.
    assert!(e[6] > 0.0 && e[6] < e[5], "{n} KiB gets/s: {e:?}");
}

/// The merged engine's 5M run of session 7 (docs/benchmarks.md, "The merged
/// engine at 5M rows, one binary, one run (session 7)"; load 2.8 -> 1.6,
/// quieter than the sweep): 1 MiB nodes, 16 KiB basements, fanout 16, its
/// 5%-cache gets predicted with the costs fitted on the sweep (out of
/// sample for this run but for `c_get`, which is its cached phase).
#[test]
fn corrected_gets_against_the_merged_5m_run() {
    let path = format!(
        "{}/../../docs/bench/session7/final-5m.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let g: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|l| l["engine"] == "pagewise-beps" && l["spec"] == "readrandom:cache=5%,duration=20s")
        .expect("the B-epsilon 5%-cache line");
    let measured = g["ops_per_s"].as_f64().unwrap();
    let cache = g["settings"]["cache_bytes"].as_u64().unwrap();
    let r = report();
    let dev = device(&r);
    let m: Vec<Measured> = NODES_KIB.iter().map(|&n| load(n)).collect();
    let costs = fit_betree_costs(&samples(&m));
    let before = predict_betree(dev, &dataset(cache), shape(1024)).point_qps;
    let after = predict_betree_engine(dev, &dataset(cache), shape(1024), costs).point_qps;
    println!(
        "merged run, 5% cache, 1 MiB: measured {measured:.0} gets/s, I/O-only {before:.0} ({:+.0}%), corrected {after:.0} ({:+.0}%)",
        err(before, measured) * 100.0,
        err(after, measured) * 100.0
    );
    assert!(err(before, measured) > 0.4, "{before} {measured}");
    assert!(err(after, measured).abs() < 0.25, "{after} {measured}");
}
