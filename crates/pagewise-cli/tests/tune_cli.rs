//! `pagewise tune` end to end on a tiny sweep: the report is written, is
//! self-contained and carries the recommendation.

use std::process::Command;

#[test]
fn tune_writes_a_self_contained_report() {
    // Under the target dir, not /tmp: tmpfs refuses O_DIRECT on some systems.
    let base = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = tempfile::tempdir_in(base).unwrap();
    let data = dir.path().join("pagewise-data");
    let o = Command::new(env!("CARGO_BIN_EXE_pagewise"))
        .args([
            "tune",
            data.to_str().unwrap(),
            "--bs",
            "4k,16k,64k",
            "--duration",
            "0.02",
            "--warmup",
            "0",
            "--file-size",
            "8MiB",
            "--qd-high",
            "4",
            "--qd-sweep",
            "2",
            "--rows",
            "1M",
            "--json",
            "--verify",
            "off",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "tune failed: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let best = v["best_page_size"].as_u64().unwrap();
    assert!(
        best.is_power_of_two() && (4096..=65536).contains(&best),
        "{best}"
    );

    let html = std::fs::read_to_string(data.join("report.html")).unwrap();
    assert!(html.contains("Recommended configuration"));
    let kib = format!("{} KiB", best / 1024);
    assert!(
        html.contains(&format!("<div class=\"big\">B+tree, {kib} pages</div>")),
        "best {kib} not headlined"
    );
    // Without verification: the model's B+tree page, written for the engine.
    assert_eq!(v["tree_kind"], "btree");
    let tuned: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("tuned.json")).unwrap()).unwrap();
    assert_eq!(tuned["page_size"].as_u64(), Some(best));
    assert_eq!(tuned["tree_kind"], "btree");
    assert!(
        html.contains("Why") || html.contains("pages: fanout"),
        "no reason given"
    );
    for section in [
        "Device topology",
        "fitted model",
        "Wear",
        "B-epsilon",
        "<svg",
    ] {
        assert!(html.contains(section), "report lacks {section}");
    }
    // Self-contained: no external fetches.
    for external in ["http://", "https://", "<script", "<link"] {
        let hits: Vec<_> = html.match_indices(external).collect();
        // SVG namespaces are the only URLs allowed.
        let bad = hits
            .iter()
            .filter(|(i, _)| !html[i.saturating_sub(10)..*i].contains("xmlns"))
            .count();
        assert_eq!(bad, 0, "report references {external}");
    }
    assert!(data.join("probe-results.json").exists());
    // The probe's test file is gone.
    let leftovers: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "dat"))
        .collect();
    assert!(leftovers.is_empty(), "test file left behind: {leftovers:?}");
}
