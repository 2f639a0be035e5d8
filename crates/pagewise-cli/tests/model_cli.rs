//! `pagewise model`, `advise` and `wear` as a user runs them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn pagewise(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pagewise"))
        .args(args)
        .output()
        .expect("run pagewise")
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../pagewise-model/tests/data")
        .join(name)
        .display()
        .to_string()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Asserts a clean failure: non-zero exit, one `error:` line, no panic.
fn fails_cleanly(args: &[&str], needle: &str) {
    let o = pagewise(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{args:?} should fail");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        lines.len() == 1 || lines[0].starts_with("error:"),
        "{args:?}: want one line, got {err}"
    );
    assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
}

// Synthetic drive: S = 60 us, W = 1 GB/s, QD1 random reads.
const SIZES: [u64; 6] = [512, 4096, 16384, 65536, 262144, 1048576];
fn iops(b: u64) -> f64 {
    1.0 / (60e-6 + b as f64 / 1e9)
}

fn as_csv() -> String {
    let mut s = "block_size,iops\n".to_string();
    for b in SIZES {
        s.push_str(&format!("{b},{}\n", iops(b)));
    }
    s
}

fn as_fio() -> String {
    let jobs: Vec<String> = SIZES
        .iter()
        .map(|&b| {
            format!(
                r#"{{"jobname":"j{b}","groupid":0,"error":0,"job options":{{"rw":"randread","bs":"{b}","ioengine":"psync"}},"read":{{"iops":{},"lat_ns":{{"mean":1000.0}}}},"write":{{"iops":0.0}}}}"#,
                iops(b)
            )
        })
        .collect();
    format!(
        r#"{{"fio version":"fio-3.36","global options":{{"direct":"1"}},"jobs":[{}]}}"#,
        jobs.join(",")
    )
}

fn as_probe() -> String {
    let pts: Vec<String> = SIZES
        .iter()
        .map(|&b| {
            format!(
                r#"{{"params":{{"mode":"randread","bs":{b},"align":{b},"dist":"uniform","threads":1,"qd":1}},"engine":"sync","direct":true,"effective_qd":1,"iops":{},"latency_us":{{"mean":50.0}}}}"#,
                iops(b)
            )
        })
        .collect();
    format!(
        r#"{{"schema":"pagewise-probe/1","tool_version":"0.1.0","topology":{{}},"points":[{}]}}"#,
        pts.join(",")
    )
}

fn summary(out: &Output) -> (f64, f64) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &v["summary"][0];
    (
        s["setup_us"].as_f64().unwrap(),
        s["bandwidth_mb_s"].as_f64().unwrap(),
    )
}

#[test]
fn same_data_same_fit_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let csv = write(dir.path(), "d.csv", &as_csv());
    let fio = write(dir.path(), "d.fio.json", &as_fio());
    let probe = write(dir.path(), "d.probe.json", &as_probe());
    let mut fits = Vec::new();
    for p in [&csv, &fio, &probe] {
        fits.push(summary(&pagewise(&[
            "model",
            "--json",
            p.to_str().unwrap(),
        ])));
    }
    for f in &fits {
        assert!((f.0 - 60.0).abs() < 0.6, "S {f:?}");
        assert!((f.1 - 1000.0).abs() < 10.0, "W {f:?}");
        assert!((f.0 - fits[0].0).abs() < 1e-9 && (f.1 - fits[0].1).abs() < 1e-9);
    }
}

#[test]
fn model_table_and_plot_from_real_fio_output() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("fit.svg");
    let o = pagewise(&[
        "model",
        &fixture("fio_randread_sweep.json"),
        &fixture("fio_qd_threads_mixed.json"),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("randread qd1"), "{out}");
    assert!(out.contains("PDAM P"), "{out}");
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(
        svg.starts_with("<svg") || svg.starts_with("<?xml"),
        "{}",
        &svg[..svg.len().min(80)]
    );
    assert!(svg.contains("randread qd1"));
}

#[test]
fn bad_inputs_fail_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let s = |p: PathBuf| p.display().to_string();
    fails_cleanly(&["model", &s(write(d, "empty.csv", ""))], "empty");
    fails_cleanly(
        &["model", &s(write(d, "cols.csv", "size,speed\n4096,100\n"))],
        "unknown",
    );
    fails_cleanly(
        &[
            "model",
            &s(write(d, "neg.csv", "block_size,iops\n4096,-1\n8192,5\n")),
        ],
        "positive",
    );
    fails_cleanly(
        &[
            "model",
            &s(write(d, "zero.csv", "block_size,iops\n4096,0\n8192,5\n")),
        ],
        "positive",
    );
    fails_cleanly(
        &[
            "model",
            &s(write(d, "one.csv", "block_size,iops\n4096,100\n")),
        ],
        "one point only",
    );
    fails_cleanly(&["model", &s(write(d, "junk.json", "{\"a\":1}"))], "fio");
    fails_cleanly(&["model", &s(d.join("missing.csv"))], "cannot read");
    fails_cleanly(
        &["wear", "--capacity", "12parsecs", "--write-rate", "10MB/s"],
        "size",
    );
    fails_cleanly(
        &[
            "wear",
            "--capacity",
            "256GB",
            "--write-rate",
            "10MB/fortnight",
        ],
        "rate",
    );
    fails_cleanly(
        &["wear", "--capacity", "256GB", "--write-rate", "0MB/s"],
        "positive",
    );
    fails_cleanly(
        &[
            "wear",
            "--capacity",
            "256GB",
            "--write-rate",
            "1MB/s",
            "--over-provisioning",
            "lots",
        ],
        "percentage",
    );
    let csv = s(write(d, "ok.csv", &as_csv()));
    fails_cleanly(
        &[
            "advise", "--device", &csv, "--rows", "1e9", "--cache", "1XB",
        ],
        "size",
    );
    fails_cleanly(&["advise", "--device", &csv, "--rows=-5"], "row count");
    fails_cleanly(
        &[
            "advise", "--device", &csv, "--rows", "1e9", "--mix", "point=0",
        ],
        "mix",
    );
    fails_cleanly(
        &["advise", "--device", &csv, "--rows", "1e9", "--fill", "1.5"],
        "fill",
    );
    fails_cleanly(
        &["advise", "--device", &csv, "--rows", "1e9", "--qd", "7"],
        "7 I/Os in flight",
    );
}

#[test]
fn advise_recommends_with_reason() {
    let dir = tempfile::tempdir().unwrap();
    let csv = write(dir.path(), "d.csv", &as_csv());
    let o = pagewise(&[
        "advise",
        "--device",
        csv.to_str().unwrap(),
        "--rows",
        "1e9",
        "--cache",
        "1GiB",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.contains("Recommendation:") && out.contains("Why:"),
        "{out}"
    );
    assert!(out.contains("B-epsilon tree"), "{out}");
    // JSON: the best row has the highest ops/s of the table.
    let o = pagewise(&[
        "advise",
        "--device",
        csv.to_str().unwrap(),
        "--rows",
        "1e9",
        "--json",
        "--mix",
        "point=0.5,range=0.3,insert=0.2",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let best = v["advice"]["best"].as_u64().unwrap();
    let rows = v["advice"]["rows"].as_array().unwrap();
    let top = rows
        .iter()
        .max_by(|a, b| {
            a["mix_ops"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["mix_ops"].as_f64().unwrap())
        })
        .unwrap();
    assert_eq!(top["page_size"].as_u64().unwrap(), best);
}

#[test]
fn advise_predicts_bepsilon_node_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let csv = write(dir.path(), "d.csv", &as_csv());
    let c = csv.to_str().unwrap();
    let base = [
        "advise",
        "--device",
        c,
        "--rows",
        "5M",
        "--value-bytes",
        "100",
    ];
    let o = pagewise(&[&base[..], &["--bepsilon-nodes", "64k,1m", "--json"]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let sweep = v["bepsilon_sweep"].as_array().unwrap();
    assert_eq!(sweep.len(), 2);
    // No cache: a point query reads one 64 KiB basement per level, at this
    // drive's 1 / (60 us + 65,536 B / 1 GB/s) IOPS.
    for p in sweep {
        let want = iops(65536) / p["point_ios"].as_f64().unwrap();
        assert!(
            (p["point_qps"].as_f64().unwrap() / want - 1.0).abs() < 0.02,
            "{p}"
        );
        assert_eq!(p["shape"]["fanout"].as_u64(), Some(16));
    }
    // Larger nodes move more messages per flush: fewer I/Os per insert.
    assert_eq!(sweep[1]["shape"]["node_bytes"].as_u64(), Some(1 << 20));
    assert!(sweep[1]["insert_ios"].as_f64() < sweep[0]["insert_ios"].as_f64());
    let o = pagewise(&[&base[..], &["--bepsilon-nodes", "64k"]].concat());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("B-epsilon trees by node size"), "{out}");
    fails_cleanly(
        &[
            &base[..],
            &["--bepsilon-nodes", "64k", "--bepsilon-basement", "128k"],
        ]
        .concat(),
        "at most the node size",
    );
    fails_cleanly(
        &[
            &base[..],
            &["--bepsilon-nodes", "64k", "--bepsilon-fanout", "1"],
        ]
        .concat(),
        "at least 2 children",
    );
}

#[test]
fn wear_tokutek_example() {
    let o = pagewise(&[
        "wear",
        "--capacity",
        "256GB",
        "--pe-cycles",
        "1000",
        "--write-rate",
        "10MB/s",
        "--ftl-wa",
        "1",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!((v["days"].as_f64().unwrap() - 296.3).abs() < 0.1);
    let o = pagewise(&[
        "wear",
        "--capacity",
        "256GB",
        "--write-rate",
        "10MB/s",
        "--ftl-wa",
        "4",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("lifetime: 74 days"), "{out}");
}
