//! `pagewise bench run`'s pagewise settings: a bad value is refused before
//! anything runs, with a message naming the flag, and good values reach the
//! engine's options (the results' settings and engine stats say so).

use std::path::Path;
use std::process::{Command, Output};

fn scratch() -> tempfile::TempDir {
    // Under the target dir, not /tmp: tmpfs refuses O_DIRECT on some systems.
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// A tiny fillrandom in a plain directory, no memory cap, then `extra`.
fn bench_run(dir: &Path, engines: &str, extra: &[&str]) -> Output {
    let work = dir.join("work");
    let out = dir.join("results.jsonl");
    Command::new(env!("CARGO_BIN_EXE_pagewise"))
        .args([
            "bench", "run", "-e", engines, "--keys", "2000", "--cache", "8M",
        ])
        .args(["-w", "fillrandom", "--no-loop", "--json"])
        .args(["--memory-cap", "fadvise", "--cap-phases", "small-cache"])
        .arg("--dir")
        .arg(&work)
        .arg("--out")
        .arg(&out)
        .args(extra)
        .output()
        .expect("run pagewise")
}

fn refused(extra: &[&str], expect: &[&str]) {
    let dir = scratch();
    let o = bench_run(
        dir.path(),
        "pagewise,pagewise-bepsilon,pagewise-delta",
        extra,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{extra:?} accepted: {stderr}");
    for e in expect {
        assert!(stderr.contains(e), "{extra:?}: {e:?} not in {stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        !dir.path().join("results.jsonl").exists(),
        "{extra:?}: a run started before the settings were checked"
    );
}

#[test]
fn bad_pagewise_settings_are_refused_with_the_flag_named() {
    refused(
        &["--bepsilon-fanout", "1"],
        &["--bepsilon-fanout 1", "fanout 1 must be between 3 and 1024"],
    );
    refused(
        &["--bepsilon-node", "64k", "--bepsilon-basement", "64k"],
        &[
            "--bepsilon-node 65536 --bepsilon-basement 65536",
            "basement bytes",
        ],
    );
    refused(&["--bepsilon-leaf", "128"], &["leaf bytes 128"]);
    refused(
        &["--bepsilon-node", "5G"],
        &["--bepsilon-node", "too large"],
    );
    refused(
        &["--delta-threshold", "0"],
        &["--delta-threshold 0", "at least 1 byte"],
    );
    refused(
        &["--wal-limit", "4k"],
        &["--wal-limit 4096", "at least 64 KiB"],
    );
    refused(
        &["--dirty-percent", "95"],
        &["--dirty-percent 95", "between 10 and 90"],
    );
    refused(&["--bepsilon-fanout", "many"], &["--bepsilon-fanout"]);
}

fn lines(o: &Output) -> Vec<serde_json::Value> {
    let stdout = String::from_utf8_lossy(&o.stdout);
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("a JSON result line"))
        .collect()
}

#[test]
fn pagewise_settings_reach_the_engine_options() {
    let dir = scratch();
    let flags = [
        "--bepsilon-node",
        "64k",
        "--bepsilon-leaf",
        "32k",
        "--bepsilon-basement",
        "4k",
        "--bepsilon-fanout",
        "5",
        "--delta-threshold",
        "1k",
        "--wal-limit",
        "4m",
        "--dirty-percent",
        "60",
    ];
    let o = bench_run(dir.path(), "pagewise-bepsilon,pagewise-delta", &flags);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let results = lines(&o);
    assert_eq!(results.len(), 2, "one fillrandom per engine: {results:?}");
    for r in &results {
        let s = &r["settings"];
        assert_eq!(s["bepsilon_node_bytes"], 64 << 10);
        assert_eq!(s["bepsilon_leaf_bytes"], 32 << 10);
        assert_eq!(s["bepsilon_basement_bytes"], 4 << 10);
        assert_eq!(s["bepsilon_fanout"], 5);
        assert_eq!(s["delta_threshold_bytes"], 1024);
        assert_eq!(s["wal_limit_bytes"], 4 << 20);
        assert_eq!(s["dirty_percent"], 60);
        let options = &r["engine_stats"]["options"];
        assert_eq!(options["wal_limit_bytes"], 4 << 20, "{r}");
        assert_eq!(options["dirty_percent"], 60, "{r}");
    }
    let stats = |engine: &str| {
        let r = results.iter().find(|r| r["engine"] == engine).unwrap();
        r["engine_stats"].clone()
    };
    let beps = stats("pagewise-bepsilon");
    let trees = beps["trees"].as_array().expect("trees");
    assert!(!trees.is_empty());
    for t in trees {
        let o = &t["kind"]["bepsilon"];
        assert_eq!(o["node_bytes"], 64 << 10, "{t}");
        assert_eq!(o["leaf_bytes"], 32 << 10, "{t}");
        assert_eq!(o["basement_bytes"], 4 << 10, "{t}");
        assert_eq!(o["fanout"], 5, "{t}");
    }
    let delta = stats("pagewise-delta");
    assert_eq!(delta["options"]["delta_flush"]["threshold_bytes"], 1024);
    assert!(beps["options"]["delta_flush"].is_null());
}

#[test]
fn flags_for_engines_not_run_are_noted() {
    let dir = scratch();
    let o = bench_run(dir.path(), "pagewise", &["--bepsilon-fanout", "16"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("--bepsilon-* apply to pagewise-bepsilon only"),
        "{stderr}"
    );
}
