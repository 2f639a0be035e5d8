//! `pagewise stress` as CI runs it: a short kill run must pass, a short soak
//! must pass, and a child that breaks the contract on purpose must be caught
//! (so the kill run's verdict means something).

use std::process::{Command, Output};

fn stress(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pagewise"))
        .arg("stress")
        .args(args)
        .output()
        .expect("run pagewise stress")
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "bad JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// 60 s of kills on a Db with trees of every kind (B+tree, B-epsilon with
/// upserts, B+tree with delta flushes) in the same batches: random moments,
/// inside checkpoints, consolidations, write-backs and flushes, during
/// recovery.
#[test]
fn kill_run_verifies_every_kill() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("run");
    let secs = std::env::var("PAGEWISE_STRESS_SECS").unwrap_or_else(|_| "60".into());
    let o = stress(&[
        dir.to_str().unwrap(),
        "--duration",
        &format!("{secs}s"),
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    eprintln!("{stderr}");
    assert!(o.status.success(), "stress run failed: {stderr}");
    let s = json(&o);
    let kills = s["kills"].as_u64().unwrap();
    assert!(kills >= 10, "only {kills} kills in {secs} s");
    assert_eq!(s["violations"], 0);
    assert_eq!(
        s["verified"].as_u64().unwrap() + s["kills_in_recovery"].as_u64().unwrap(),
        kills
    );
    assert!(s["batches_acknowledged"].as_u64().unwrap() > 0);
    assert!(stderr.contains("seed "), "the seed is not printed");
    assert_eq!(
        s["kinds"], "btree,bepsilon,delta",
        "the default runs every kind"
    );
    let n = |k: &str| s[k].as_u64().unwrap();
    assert!(n("children_with_delta") > 0 && n("children_with_delta") < n("kills"));
    // Where kills landed is told by the children's engine events; a minute
    // gives dozens inside checkpoints and some inside delta consolidations
    // and B-epsilon flushes or write-backs.
    assert!(
        n("kills_in_checkpoint") > 0 && n("kills_in_consolidation") > 0,
        "{s}"
    );
    assert!(n("kills_in_flush") + n("kills_in_write_back") > 0, "{s}");
    // The files the kills left held the on-disk forms of every kind,
    // buffers stored as segments among them (they appear within seconds).
    let held: Vec<&str> = s["structures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    use pagewise::structure as st;
    for want in [
        st::BTREE_OVERFLOW.to_string(),
        st::btree_delta_block(st::BTREE_LEAF),
        st::bepsilon_part(st::BEPSILON_INTERNAL, st::BUFFER_SEGMENT),
        st::BEPSILON_VALUE_RUN_PAGE.to_string(),
    ] {
        assert!(held.contains(&want.as_str()), "no {want} in {held:?}");
    }
}

fn caught(sabotage: &str, what: &str) {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("run");
    let o = stress(&[
        dir.to_str().unwrap(),
        "--kills",
        "40",
        "--seed",
        "3",
        "--sabotage",
        sabotage,
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "sabotage {sabotage} went unnoticed: {stderr}"
    );
    assert!(
        stderr.contains("VIOLATION") && stderr.contains(what),
        "{stderr}"
    );
    assert!(stderr.contains("seed 3"), "{stderr}");
}

#[test]
fn a_lost_acknowledged_batch_is_caught() {
    caught("lose-ack", "acknowledged");
}

#[test]
fn a_half_applied_batch_is_caught() {
    caught("half-batch", "half-applied");
}

#[test]
fn short_soak_stays_within_bounds() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("soak");
    let o = stress(&[
        dir.to_str().unwrap(),
        "--soak",
        "--duration",
        "12s",
        "--json",
    ]);
    assert!(
        o.status.success(),
        "soak failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s = json(&o);
    assert_eq!(s["violations"], 0);
    assert!(s["batches"].as_u64().unwrap() > 0 && s["reads"].as_u64().unwrap() > 0);
    assert!(s["rss_max_bytes"].as_u64().unwrap() <= s["rss_bound_bytes"].as_u64().unwrap());
    assert!(s["entries_final"].as_u64().unwrap() > 0);
}

#[test]
fn an_existing_run_directory_is_refused() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("stress.pw"), b"not ours").unwrap();
    let o = stress(&[d.path().to_str().unwrap(), "--kills", "1"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("already holds a stress run"));
    assert_eq!(
        std::fs::read(d.path().join("stress.pw")).unwrap(),
        b"not ours"
    );
}
