//! `run` with `csd`: every phase of a run on the emulated compressing drive
//! yields its stored-bytes figures, and nothing stays mounted afterwards.
//! Skipped, with the reason printed, where FUSE cannot be mounted.

use pagewise_bench::exec::NoProgress;
use pagewise_bench::{run, Measure, Params, PhaseResult, RunConfig, Settings, Spec};

#[test]
fn a_csd_run_reports_physical_write_amplification_per_phase() {
    // SAFETY: geteuid has no preconditions.
    let why = pagewise_bench::csd::unavailable_reason()
        .or_else(|| (unsafe { libc::geteuid() } != 0).then(|| "not root".to_string()));
    if let Some(why) = why {
        eprintln!("skipped: {why}");
        return;
    }
    pagewise_bench::csd::set_server_program(std::path::Path::new(env!(
        "CARGO_BIN_EXE_pagewise-csd-server"
    )));
    let dir = tempfile::tempdir().unwrap();
    let base = Params {
        keys: 3000,
        ..Params::default()
    };
    let cfg = RunConfig {
        engine: "pagewise".into(),
        settings: Settings {
            cache_bytes: 8 << 20,
            ..Settings::default()
        },
        specs: ["fillrandom", "readrandom:ops=500"]
            .iter()
            .map(|s| Spec::parse(s, &base).unwrap())
            .collect(),
        measure: Measure::Plain {
            dir: dir.path().into(),
        },
        csd: true,
        cap_scope: Default::default(),
    };
    let mut out: Vec<PhaseResult> = Vec::new();
    run(&cfg, &NoProgress, &mut |r| {
        out.push(r.clone());
        Ok(())
    })
    .unwrap();
    assert_eq!(out.len(), 2);
    let fill = &out[0];
    let c = fill.csd.as_ref().expect("csd stats on a csd run");
    assert!(c.logical_bytes >= fill.user_bytes_written, "{c:?}");
    let wa = fill.write_amp_csd_zlib.unwrap();
    let by_hand = c.zlib_bytes as f64 / fill.user_bytes_written as f64;
    assert!((wa - by_hand).abs() < 1e-12);
    assert!(fill.write_amp_csd_lz4.unwrap() > 0.0);
    // The server is another process: wchar is the engine's own writes.
    assert!(fill.syscall_write_bytes.unwrap() > 0);
    // pagewise's own lz4 meter (1 block in 8 sampled) saw the same writes
    // as the mount's lz4 figure, give or take its sampling.
    let own = fill.engine_stats.as_ref().unwrap()["compressing_drive"]["logical_bytes_written"]
        .as_u64()
        .unwrap();
    assert_eq!(own, c.logical_bytes, "engine and mount saw the same bytes");
    let read = &out[1];
    assert_eq!(read.found, 500);
    // Open and close write a little (pagewise's header); the reads nothing.
    let rc = read.csd.as_ref().unwrap();
    assert!(rc.logical_bytes * 20 < c.logical_bytes, "{rc:?}");
    // Nothing left behind: no mount, no run directories.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!info.contains(&dir.path().to_string_lossy().to_string()));
}
