//! `pagewise tune` verification end to end on tiny knobs: one entry per
//! verified size with predicted and measured rates, a verdict, and no file
//! left behind (also after Ctrl-C).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn tune(data: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pagewise"));
    c.args([
        "tune",
        data.to_str().unwrap(),
        "--bs",
        "4k,8k,16k,64k",
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
        "10M",
        "--cache",
        "8MiB",
        "--json",
    ]);
    c.args(extra);
    c
}

/// Files in `dir` other than the three tune keeps.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            ![
                "report.html",
                "probe-results.json",
                "engine-costs.json",
                "tuned.json",
            ]
            .contains(&n.as_str())
        })
        .collect()
}

/// B/2, B, 2B clamped to 512 B..64 KiB, without repeats.
fn super_sizes(best: u64) -> Vec<u64> {
    let best = best.clamp(512, 65536);
    [best / 2, best, best * 2]
        .into_iter()
        .map(|p| p.clamp(512, 65536))
        .fold(Vec::new(), |mut v, p| {
            if v.last() != Some(&p) {
                v.push(p);
            }
            v
        })
}

#[test]
fn verification_reports_every_size_and_cleans_up() {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = tempfile::tempdir_in(base).unwrap();
    let data = dir.path().join("pagewise-data");
    let o = tune(&data, &["--verify-secs", "0.2", "--verify-rows", "30000"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "tune failed: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let best = v["best_page_size"].as_u64().unwrap();
    let ver = &v["verification"];
    let sizes: Vec<u64> = ver["sizes"]
        .as_array()
        .expect("verification entry per size")
        .iter()
        .map(|s| s["page_size"].as_u64().unwrap())
        .collect();
    // Verified around the device-only advice, then any range extension's
    // sizes; the engine-aware recommendation is one of the verified sizes.
    let device_only = ver["device_only_best"].as_u64().unwrap();
    let around = super_sizes(device_only);
    let extended = |unit: &str| -> Vec<u64> {
        let e = ver["extensions"].as_array().expect("extensions listed");
        e.iter()
            .filter(|e| e["unit"] == unit)
            .map(|e| {
                // One step past the edge: half or double, within the limits.
                let (edge, next) = (e["edge"].as_u64().unwrap(), e["next"].as_u64().unwrap());
                assert!(next * 2 == edge || edge * 2 == next, "{e}");
                next
            })
            .collect()
    };
    let page_ext = extended("pages");
    assert!(page_ext.len() <= 2 && page_ext.iter().all(|p| (512..=65536).contains(p)));
    assert_eq!(
        sizes,
        [around.clone(), page_ext.clone()].concat(),
        "verified sizes around {device_only}"
    );
    assert!(sizes.contains(&best), "recommended {best} not verified");
    // The headline never contradicts the table: its measured mix is within
    // the 3% noise of the best measured.
    let mix = |p: u64| {
        let s = ver["sizes"].as_array().unwrap().iter();
        s.filter(|s| s["page_size"].as_u64() == Some(p))
            .map(|s| s["measured"]["mix_ops"].as_f64().unwrap())
            .next()
            .unwrap()
    };
    let top = sizes.iter().map(|&p| mix(p)).fold(0.0, f64::max);
    // The range extension: when the best of the sizes around the advice is
    // the smallest or largest of them and inside 512 B..64 KiB, the first
    // extra size is the next one past it (the tiny run is far within the
    // time budget).
    let first_ext = |around: &[u64], ext: &[u64], best: u64, lo: u64, hi: u64| {
        let want = if best == around[0] && best > lo {
            Some(best / 2)
        } else if best == around[around.len() - 1] && best < hi {
            Some(best * 2)
        } else {
            None
        };
        assert_eq!(ext.first().copied(), want, "best {best} of {around:?}");
    };
    let best_around = *around
        .iter()
        .max_by(|a, b| mix(**a).total_cmp(&mix(**b)))
        .unwrap();
    first_ext(&around, &page_ext, best_around, 512, 65536);
    assert!(
        mix(best) >= 0.97 * top,
        "headline {best} measured {} of {top}",
        mix(best)
    );
    // tuned.json holds the answer.
    let tuned: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("tuned.json")).unwrap()).unwrap();
    assert_eq!(tuned["page_size"].as_u64(), Some(best));
    assert_eq!(tuned["tree_kind"], v["tree_kind"]);
    let kind = v["answer"]["kind"]["kind"]
        .as_str()
        .expect("both kinds measured");
    assert_eq!(tuned["tree_kind"].as_str(), Some(kind));
    // The kind tie rule: medians within the larger of 3% and the rounds'
    // spread tie (then the model's preference decides).
    let k = &v["answer"]["kind"];
    let f = |x: &serde_json::Value| x.as_f64().unwrap();
    let (b, e, tol) = (
        f(&k["btree_mix_ops"]),
        f(&k["bepsilon_mix_ops"]),
        f(&k["tolerance"]),
    );
    let spread = |s: &serde_json::Value| (f(&s["max"]) - f(&s["min"])) / f(&s["median"]);
    let want = [
        0.03,
        spread(&k["btree_spread"]),
        spread(&k["bepsilon_spread"]),
    ];
    assert!(
        (tol - want.iter().cloned().fold(0.0, f64::max)).abs() < 1e-9,
        "{k}"
    );
    assert_eq!(
        k["tie"].as_bool(),
        Some(b.min(e) > b.max(e) * (1.0 - tol)),
        "{k}"
    );
    for s in ver["sizes"].as_array().unwrap() {
        for rate in [
            &s["measured"]["point_qps"],
            &s["measured"]["mix_ops"],
            &s["predicted"]["point_qps"],
            &s["predicted"]["mix_ops"],
            &s["corrected"]["point_qps"],
            &s["corrected"]["mix_ops"],
            &s["calibrated"]["point_qps"],
            &s["loo"]["point_qps"],
        ] {
            let r = rate.as_f64().unwrap_or(-1.0);
            assert!(r.is_finite() && r > 0.0, "bad rate {rate} in {s}");
        }
        // 30,000 rows loaded (well under the load-time cap).
        assert_eq!(s["scaled"]["dataset"]["rows"].as_u64(), Some(30_000), "{s}");
        let h = s["measured"]["height"].as_u64().unwrap();
        assert!((1..=6).contains(&h), "height {h}");
    }
    // The calibration ran on its own Dbs at the ends of the device-only
    // range, a quarter of the rows each.
    let cal: Vec<u64> = ver["calibration"]["sizes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["page_size"].as_u64().unwrap())
        .collect();
    assert_eq!(
        cal,
        vec![around[0], around[around.len() - 1]],
        "calibrated sizes"
    );
    for s in ver["calibration"]["sizes"].as_array().unwrap() {
        assert_eq!(s["scaled"]["dataset"]["rows"].as_u64(), Some(7_500), "{s}");
    }
    for k in ["device_only", "calibrated", "leave_one_out", "in_sample"] {
        let e = ver["max_point_error"][k].as_f64().unwrap_or(-1.0);
        assert!(e.is_finite() && e >= 0.0, "{k}: {e}");
    }
    // The learned costs are kept for later runs.
    let kept: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("engine-costs.json")).unwrap()).unwrap();
    assert_eq!(kept["drive"], "real drive");
    assert_eq!(kept["calibrated"], ver["calibration"]["correction"]);
    let verdict = ver["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with("confirmed") || verdict.starts_with("measured best is"),
        "{verdict}"
    );
    // The B-epsilon node size, checked the same way: the advised node and
    // its neighbours, an eighth of the rows, measured rates > 0.
    let b = &ver["bepsilon"];
    let advised = b["recommended_node_bytes"].as_u64().unwrap();
    let nodes: Vec<u64> = b["sizes"]
        .as_array()
        .expect("a B-epsilon entry per node size")
        .iter()
        .map(|s| s["shape"]["node_bytes"].as_u64().unwrap())
        .collect();
    let want = advised.clamp(16 << 10, 16 << 20);
    assert!(nodes.contains(&want), "{nodes:?} lacks {want}");
    let node_ext = extended("nodes");
    assert!(node_ext.len() <= 2 && node_ext.iter().all(|n| nodes.contains(n)));
    let node_mix = |n: u64| {
        let s = b["sizes"].as_array().unwrap().iter();
        s.filter(|s| s["shape"]["node_bytes"].as_u64() == Some(n))
            .map(|s| s["mix_ops"].as_f64().unwrap())
            .next()
            .unwrap()
    };
    let around_nodes = &nodes[..nodes.len() - node_ext.len()];
    let best_node = *around_nodes
        .iter()
        .max_by(|a, b| node_mix(**a).total_cmp(&node_mix(**b)))
        .unwrap();
    // Node sizes stay within the dirty budget (75%) of the smallest node
    // Db's cache, rounded down to a power of two.
    let least_cache = (b["sizes"].as_array().unwrap().iter())
        .map(|s| s["cache_bytes"].as_u64().unwrap())
        .min()
        .unwrap();
    let budget = least_cache * 3 / 4;
    let node_hi = (1u64 << (63 - budget.leading_zeros())).clamp(16 << 10, 16 << 20);
    assert!(
        nodes.iter().all(|&n| n <= node_hi),
        "{nodes:?} above {node_hi}"
    );
    first_ext(around_nodes, &node_ext, best_node, 16 << 10, node_hi);
    for s in b["sizes"].as_array().unwrap() {
        assert_eq!(s["rows"].as_u64(), Some(3_750), "{s}");
        // Measured in the interleaved rounds: a rate per round, the
        // median between the lowest and highest.
        let m = &s["measured"];
        assert_eq!(m["mix_rounds"].as_array().map(|r| r.len()), Some(4), "{s}");
        let (lo, med, hi) = (
            m["mix_spread"]["min"].as_f64().unwrap(),
            m["mix_spread"]["median"].as_f64().unwrap(),
            m["mix_spread"]["max"].as_f64().unwrap(),
        );
        assert!(
            lo <= med && med <= hi && med == s["mix_ops"].as_f64().unwrap(),
            "{s}"
        );
        for r in [
            &s["inserts_per_s"],
            &s["point_qps"],
            &s["predicted"]["inserts_per_s"],
            &s["mix_ops"],
        ] {
            let r = r.as_f64().unwrap_or(-1.0);
            assert!(r.is_finite() && r > 0.0, "bad rate in {s}");
        }
    }
    // Its costs are kept too, with the sizes and the rows they hold for.
    let kb = &kept["bepsilon"];
    assert_eq!(kb["costs"], b["costs"]);
    let kept_nodes: Vec<u64> = (kb["node_sizes"].as_array().unwrap().iter())
        .map(|n| n.as_u64().unwrap())
        .collect();
    assert_eq!(kept_nodes, nodes);
    assert_eq!(kb["rows"].as_u64(), Some(3_750));
    let bv = b["verdict"].as_str().unwrap();
    assert!(
        bv.starts_with("confirmed") || bv.starts_with("measured best is"),
        "{bv}"
    );
    let html = std::fs::read_to_string(data.join("report.html")).unwrap();
    assert!(html.contains("Verification: the advice measured on the engine"));
    assert!(html.contains("B-epsilon node size on the engine"));
    assert!(html.contains(verdict.split(':').next().unwrap()));
    assert_eq!(leftovers(&data), Vec::<String>::new(), "files left behind");
    // A later run without verification advises with the kept costs.
    let o = tune(&data, &["--verify", "off"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let off: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let notes = off["notes"].as_array().expect("notes in the JSON");
    // They rank the node sizes, or (when this run's tiny probe gave no
    // B-epsilon advice) a note says why they were not used.
    let ranked =
        (notes.iter().filter_map(|n| n.as_str())).any(|n| n.starts_with("B-epsilon nodes: "));
    assert!(
        ranked,
        "the kept B-epsilon costs were not looked at: {notes:?}"
    );
    let html = std::fs::read_to_string(data.join("report.html")).unwrap();
    assert!(
        html.contains("learned by an earlier verification"),
        "the kept engine costs were not used"
    );
}

#[test]
fn ctrl_c_during_verification_removes_its_files() {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = tempfile::tempdir_in(base).unwrap();
    let data = dir.path().join("pagewise-data");
    let mut child = tune(&data, &["--verify-secs", "5", "--verify-rows", "30000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut seen = false;
    while start.elapsed() < Duration::from_secs(30) {
        if data.exists()
            && leftovers(&data)
                .iter()
                .any(|n| n.starts_with("pagewise-verify") || n.starts_with("pagewise-calibrate"))
        {
            seen = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        seen,
        "no calibration or verification Db appeared within 30 s"
    );
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert!(!status.success(), "tune ignored Ctrl-C");
    assert_eq!(
        leftovers(&data),
        Vec::<String>::new(),
        "files left after Ctrl-C"
    );
}
