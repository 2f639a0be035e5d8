//! With `cap_scope: All` a fill runs under the same memory cap as a 5%-cache
//! read (engine cache + slack over what the process held at phase start,
//! page cache included) and its result records the limit and the peak; with
//! `SmallCache` it runs uncapped, as before.
//!
//! The test binary runs itself as a child (the run moves the whole process
//! into a memory cgroup, which must not confine the test harness). Skipped,
//! with the reason printed, where memory cgroups cannot be used (not root).

use pagewise_bench::cachelimit::slack;
use pagewise_bench::exec::NoProgress;
use pagewise_bench::{
    memcap, run_with, CacheLimiter, CapChoice, CapScope, Measure, Params, PhaseResult, RunConfig,
    Settings, Spec,
};
use std::process::Command;

const ROLE: &str = "PAGEWISE_FAIR_FILLS_CHILD";
const TEST: &str = "fills_are_capped_only_with_scope_all";
const CACHE: u64 = 4 << 20;
const KEYS: u64 = 20_000;

#[test]
fn fills_are_capped_only_with_scope_all() {
    if let Ok(role) = std::env::var(ROLE) {
        child(&role);
        return;
    }
    if let Some(why) = memcap::unavailable_reason() {
        eprintln!("SKIPPED: memory cgroups unavailable: {why}");
        return;
    }
    let all = run_child("all");
    let (fill, read) = (&all[0], &all[1]);
    for r in [fill, read] {
        let cap = r.memory_cap.as_ref().unwrap();
        assert!(cap.method.starts_with("cgroup-v"), "{}: {cap:?}", r.spec);
        let limit = cap.limit_bytes.unwrap();
        // Base (what the child held outside the page cache) + cache + slack;
        // the base of a small test process is well under 64 MiB.
        assert!(
            limit >= CACHE + slack(CACHE) && limit < CACHE + slack(CACHE) + (64 << 20),
            "{}: limit {limit}",
            r.spec
        );
        if let Some(peak) = cap.peak_bytes {
            assert!(peak <= limit, "{}: peak {peak} over limit {limit}", r.spec);
        }
    }
    assert_eq!(fill.workload, "fillrandom");
    assert_eq!(read.found, 500, "reads after a capped fill find the keys");
    let small = run_child("small-cache");
    assert_eq!(small[0].memory_cap.as_ref().unwrap().method, "none");
    assert_eq!(small[1].memory_cap.as_ref().unwrap().method, "none");
}

/// Runs this test in a child process with `scope`; returns its results.
fn run_child(scope: &str) -> Vec<PhaseResult> {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(ROLE, scope)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{scope} child failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<PhaseResult> = stdout
        .lines()
        .filter_map(|l| l.split_once("RESULT ").map(|(_, j)| j))
        .map(|j| serde_json::from_str(j).unwrap())
        .collect();
    assert_eq!(results.len(), 2, "{stdout}");
    results
}

fn child(scope: &str) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let base = Params {
        keys: KEYS,
        ..Params::default()
    };
    let cfg = RunConfig {
        engine: "pagewise".into(),
        // Direct I/O, as the bench measures pagewise (`--direct`): buffered
        // writes leave dirty page cache that a v1 memory cgroup cannot reclaim
        // until writeback runs, and one CI run saw this child OOM-killed
        // (SIGKILL) 0.3 s into the capped fill.
        settings: Settings {
            cache_bytes: CACHE,
            direct_io: true,
            ..Settings::default()
        },
        specs: ["fillrandom", "readrandom:ops=500"]
            .iter()
            .map(|s| Spec::parse(s, &base).unwrap())
            .collect(),
        measure: Measure::Plain {
            dir: dir.path().into(),
        },
        csd: false,
        cap_scope: scope.parse::<CapScope>().unwrap(),
    };
    let capped = cfg.cap_scope == CapScope::All;
    let mut limiter = CacheLimiter::new(CapChoice::Cgroup, capped).unwrap();
    run_with(&cfg, &mut limiter, &NoProgress, &mut |r| {
        println!("RESULT {}", serde_json::to_string(r).unwrap());
        Ok(())
    })
    .unwrap();
}
