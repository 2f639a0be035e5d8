//! The tuned configuration in the engine: `pagewise db create --tuned DIR`
//! takes DIR/tuned.json, `db stats` says where the settings came from, and a
//! bad file is refused with a message naming it.

use std::path::Path;
use std::process::{Command, Output};

fn pagewise(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pagewise"))
        .args(args)
        .output()
        .unwrap()
}

const TUNED: &str = r#"{
  "schema": 1,
  "tree_kind": "bepsilon",
  "page_size": 16384,
  "bepsilon": {"node_bytes": 262144, "leaf_bytes": null, "basement_bytes": 16384, "fanout": 12},
  "cache_bytes": 8388608,
  "source": {"drive": "emulated test drive", "dir": "/somewhere", "mix": "insert 100%",
             "created_unix_secs": 1, "reason": "test"}
}"#;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn db_create_takes_the_tuned_configuration() {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = tempfile::tempdir_in(base).unwrap();
    std::fs::write(dir.path().join("tuned.json"), TUNED).unwrap();
    let db = dir.path().join("t.pw");
    let o = pagewise(&[
        "db",
        "create",
        s(&db),
        "--tuned",
        s(dir.path()),
        "--no-direct",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(dir.path().join("t.pw-tuned.json").exists());
    let o = pagewise(&["db", "stats", s(&db), "--no-direct", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["page_size"].as_u64(), Some(16384));
    assert_eq!(v["settings_from"]["source"]["drive"], "emulated test drive");
    let tree = &v["trees"].as_array().unwrap()[0];
    assert_eq!(tree["name"], "default");
    let k = &tree["kind"]["bepsilon"];
    assert_eq!(
        (k["node_bytes"].as_u64(), k["fanout"].as_u64()),
        (Some(262144), Some(12))
    );
    let o = pagewise(&["db", "stats", s(&db), "--no-direct"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(
            "settings from   pagewise tune in /somewhere on the emulated test drive (bepsilon tree"
        ),
        "{text}"
    );
    // A Db created without --tuned says so.
    let plain = dir.path().join("p.pw");
    assert!(pagewise(&["db", "create", s(&plain), "--no-direct"])
        .status
        .success());
    let o = pagewise(&["db", "stats", s(&plain), "--no-direct"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("settings from   flags or defaults"));
}

#[test]
fn a_bad_tuned_file_is_refused_with_its_name() {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = tempfile::tempdir_in(base).unwrap();
    let db = dir.path().join("t.pw");
    let missing = pagewise(&["db", "create", s(&db), "--tuned", s(dir.path())]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("run `pagewise tune DIR` first"));
    std::fs::write(
        dir.path().join("tuned.json"),
        TUNED.replace("16384,", "3000,"),
    )
    .unwrap();
    let o = pagewise(&["db", "create", s(&db), "--tuned", s(dir.path())]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("tuned.json: bad tuned configuration: page_size 3000"),
        "{err}"
    );
    assert!(!db.exists(), "a Db was created from a bad file");
}

#[test]
fn bench_run_takes_the_tuned_configuration() {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = tempfile::tempdir_in(base).unwrap();
    std::fs::write(dir.path().join("tuned.json"), TUNED).unwrap();
    let out = dir.path().join("b.jsonl");
    let o = pagewise(&[
        "bench",
        "run",
        "--tuned",
        s(dir.path()),
        "-w",
        "fillrandom",
        "--keys",
        "1000",
        "--no-loop",
        "--dir",
        s(&dir.path().join("work")),
        "--out",
        s(&out),
        "--memory-cap",
        "fadvise",
        "--cap-phases",
        "small-cache",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("engine pagewise runs as pagewise-bepsilon"),
        "{err}"
    );
    let line = std::fs::read_to_string(&out).unwrap();
    let v: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    assert_eq!(v["engine"], "pagewise-bepsilon");
    let st = &v["settings"];
    assert_eq!(st["page_size"].as_u64(), Some(16384));
    assert_eq!(st["bepsilon_node_bytes"].as_u64(), Some(262144));
    assert_eq!(st["bepsilon_fanout"].as_u64(), Some(12));
}
