//! The corrected B-epsilon model against the node-size sweep at 5M rows
//! (docs/benchmarks.md, "B-epsilon tree": the node-size sweep against the
//! advisor; raw results docs/bench/bepsilon-node-sweep/node-*.jsonl, loaded
//! here).
//!
//! Drive: the QD1 random read and write IOPS of the `tune` probe run beside
//! the sweep (`/var/tmp/tune7/realc/probe-results.json`, 18:01 UTC), copied below; the
//! advisor on it reproduces the sweep table's predictions. Dataset: 5M rows
//! of 16 B keys and 100 B values, fill ln 2, the fill's 256 MiB cache for
//! inserts and the 5%-cache phase's own cache for gets; 16 KiB basements,
//! fanout 16. Run with `--nocapture` for the before/after table.

use pagewise_model::advise::{
    fit_bepsilon_costs, leave_one_out_bepsilon, predict_bepsilon, predict_bepsilon_engine_with,
    BEpsilonSample, BEpsilonShape, Dataset, Device, PartitionReads,
};

/// The swept engine read whole partitions (no segments before format 5).
const WHOLE: PartitionReads = PartitionReads::Whole;
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
/// 4.0 µs in the merged engine's 5M run (docs/bench/bepsilon-node-sweep/final-5m.jsonl,
/// "readrandom:cache=4G").
const CACHED_GET_S: f64 = 4.0e-6;
/// The sweep table's I/O-only predictions (256 MiB cache).
const TABLE_INSERTS_PER_S: [f64; 4] = [89_309.0, 229_501.0, 261_156.0, 280_622.0];

/// What one node size measured (the fill line and the 5%-cache line).
struct Measured {
    inserts_per_s: f64,
    cpu_insert_s: f64,
    gets_per_s: f64,
    reads_per_get: f64,
    kib_per_get: f64,
    get_cache_bytes: u64,
}

fn load(node_kib: u64) -> Measured {
    let path = format!(
        "{}/../../docs/bench/bepsilon-node-sweep/node-{node_kib}.jsonl",
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

/// The fit's input: each node size's measured times, CPU, reads and KiB,
/// with the drive's read time at its bytes per read and the flush I/O the
/// advisor counts for its fill.
fn samples(dev: Device, m: &[Measured]) -> Vec<BEpsilonSample> {
    (NODES_KIB.iter().zip(m))
        .map(|(&n, m)| BEpsilonSample {
            node_bytes: n << 10,
            insert_s: 1.0 / m.inserts_per_s,
            cpu_insert_s: m.cpu_insert_s,
            predicted_insert_io_s: 1.0
                / predict_bepsilon(dev, &dataset(256 << 20), shape(n)).inserts_per_s,
            get_s: 1.0 / m.gets_per_s,
            reads_per_get: m.reads_per_get,
            kib_per_get: m.kib_per_get,
            read_s: 1.0
                / dev
                    .read
                    .iops((m.kib_per_get * 1024.0 / m.reads_per_get) as u64)
                    .0,
            cached_get_s: Some(CACHED_GET_S),
            range_s: None,
            range_records: 0,
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

fn shape(node_kib: u64) -> BEpsilonShape {
    BEpsilonShape {
        node_bytes: node_kib << 10,
        basement_bytes: 16 << 10,
        fanout: 16,
    }
}

fn err(predicted: f64, measured: f64) -> f64 {
    predicted / measured - 1.0
}

#[test]
fn corrected_bepsilon_model_against_the_node_sweep() {
    let r = report();
    let dev = device(&r);
    let m: Vec<Measured> = NODES_KIB.iter().map(|&n| load(n)).collect();
    let samples = samples(dev, &m);
    let all = fit_bepsilon_costs(&samples);
    let loo = leave_one_out_bepsilon(&samples);
    println!(
        "costs (all four sizes): {:.2} us CPU per insert, insert I/O {:.2}x the counted; per get {:.1} us cached, a miss {:.1} us + {:.2} us per KiB on top of the drive's read",
        all.cpu_insert_s * 1e6,
        all.insert_io_factor,
        all.cpu_get_s * 1e6,
        all.miss_extra_s * 1e6,
        all.miss_extra_per_kib_s * 1e6
    );
    println!("node | inserts/s meas | I/O-only (err) | corrected LOO (err) | reads/get meas | I/O-only | corrected (err) | gets/s meas | I/O-only (err) | corrected LOO (err)");
    for (i, &n) in NODES_KIB.iter().enumerate() {
        let (mi, fill, get) = (&m[i], dataset(256 << 20), dataset(m[i].get_cache_bytes));
        // Before: the advisor as it was (I/O only, one basement per
        // uncached level), reproducing the sweep table.
        let before = predict_bepsilon(dev, &fill, shape(n));
        let ratio = before.inserts_per_s / TABLE_INSERTS_PER_S[i];
        assert!((ratio - 1.0).abs() < 0.005, "{n} KiB: {ratio}");
        let before_get = predict_bepsilon(dev, &get, shape(n));
        // After: out of sample (costs fitted on the other three sizes).
        let ins = predict_bepsilon_engine_with(dev, &fill, shape(n), loo[i], WHOLE);
        let g = predict_bepsilon_engine_with(dev, &get, shape(n), loo[i], WHOLE);
        let e: [f64; 6] = [
            err(before.inserts_per_s, mi.inserts_per_s),
            err(ins.inserts_per_s, mi.inserts_per_s),
            err(before_get.point_ios, mi.reads_per_get),
            err(g.reads.reads, mi.reads_per_get),
            err(before_get.point_qps, mi.gets_per_s),
            err(g.point_qps, mi.gets_per_s),
        ];
        println!(
            "{n} KiB | {:.0} | {:.0} ({:+.0}%) | {:.0} ({:+.0}%) | {:.2} | {:.2} ({:+.0}%) | {:.2} ({:+.0}%) | {:.0} | {:.0} ({:+.0}%) | {:.0} ({:+.0}%)",
            mi.inserts_per_s, before.inserts_per_s, e[0] * 100.0, ins.inserts_per_s, e[1] * 100.0,
            mi.reads_per_get, before_get.point_ios, e[2] * 100.0, g.reads.reads, e[3] * 100.0,
            mi.gets_per_s, before_get.point_qps, e[4] * 100.0, g.point_qps, e[5] * 100.0,
        );
        // The I/O-only insert rate missed by 2.7x or more at every size.
        assert!(e[0] > 1.7, "{n} KiB: before {e:?}");
        check_after(n, &e);
    }
}

/// The stated errors of the corrected model, out of sample (constants
/// fitted on the other three sizes), and where it still misses.
fn check_after(n: u64, e: &[f64; 6]) {
    // Inserts: within 15% (I/O-only: 2.8-4.5x the measured rate).
    assert!(e[1].abs() < 0.15, "{n} KiB inserts: {e:?}");
    // Reads per get: within 10% at every size (I/O-only at the same
    // cache: 1.37-1.38 against 1.10-1.73, -20% to +25%).
    assert!(e[3].abs() < 0.10, "{n} KiB reads per get: {e:?}");
    // Gets/s: within 35%, not 25%: the sweep's load (a 5M fill on the same
    // disk) made a read cost 2-6x the probe's time, by a different amount
    // at each size, and the miss cost fitted on three sizes carries that
    // to the fourth. I/O-only: 3.7-6.6x the measured rate.
    assert!(e[5].abs() < 0.35, "{n} KiB gets/s: {e:?}");
    assert!(e[4] > 2.5, "{n} KiB gets/s, I/O-only: {e:?}");
}

/// The merged engine's 5M run after the sweep (`docs/bench/bepsilon-node-sweep/`,
/// one binary, one run; load 2.8 -> 1.6, quieter than the sweep): 1 MiB nodes, 16 KiB basements, fanout 16, its
/// 5%-cache gets predicted with the costs fitted on the sweep (out of
/// sample for this run but for `c_get`, which is its cached phase).
#[test]
fn corrected_reads_against_the_merged_5m_run() {
    let path = format!(
        "{}/../../docs/bench/bepsilon-node-sweep/final-5m.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let g: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|l| {
            (l["engine"] == "pagewise-bepsilon" || l["engine"] == "pagewise-beps")
                && l["spec"] == "readrandom:cache=5%,duration=20s"
        })
        .expect("the B-epsilon 5%-cache line");
    let measured = g["ops_per_s"].as_f64().unwrap();
    let reads = g["engine_stats"]["page_read_ops"].as_f64().unwrap() / g["ops"].as_f64().unwrap();
    let cache = g["settings"]["cache_bytes"].as_u64().unwrap();
    let r = report();
    let dev = device(&r);
    let m: Vec<Measured> = NODES_KIB.iter().map(|&n| load(n)).collect();
    let costs = fit_bepsilon_costs(&samples(dev, &m));
    let before = predict_bepsilon(dev, &dataset(cache), shape(1024));
    let after = predict_bepsilon_engine_with(dev, &dataset(cache), shape(1024), costs, WHOLE);
    println!(
        "merged run, 5% cache, 1 MiB: reads per get measured {reads:.3}, I/O-only {:.2} ({:+.0}%), corrected {:.3} ({:+.0}%); gets/s measured {measured:.0}, I/O-only {:.0} ({:+.0}%), corrected with the sweep's constants {:.0} ({:+.0}%)",
        before.point_ios,
        err(before.point_ios, reads) * 100.0,
        after.reads.reads,
        err(after.reads.reads, reads) * 100.0,
        before.point_qps,
        err(before.point_qps, measured) * 100.0,
        after.point_qps,
        err(after.point_qps, measured) * 100.0
    );
    // The reads per get carry over (within 10%); the miss cost fitted
    // under the sweep's load does not: on this quieter run it predicts
    // gets at less than half the measured rate, which is why `tune` fits
    // it on the drive it verifies, in the same minutes.
    assert!(err(before.point_ios, reads) > 0.2);
    assert!(err(after.reads.reads, reads).abs() < 0.10);
    assert!(err(after.point_qps, measured) < -0.4);
}
