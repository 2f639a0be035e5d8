//! Write accounting against a known write pattern: the btreemap reference
//! engine writes exactly one dump file of known size at close, so a fillseq
//! of K keys through the full harness must report exactly that many syscall
//! bytes, and (when loop devices are usable) that many device bytes plus a
//! little ext4 metadata and journal.
//!
//! One test function on purpose: `wchar` is per process, so nothing else may
//! write while it measures, and this file is its own test binary.

use pagewise_bench::exec::NoProgress;
use pagewise_bench::runner::{run, Measure, PhaseResult, RunConfig};
use pagewise_bench::{Settings, Spec};

const KEYS: u64 = 20_000;
/// Dump record: table, key length, value length (u32 each), key, value.
const DUMP_BYTES: u64 = KEYS * (12 + 16 + 100);

fn fillseq(measure: Measure) -> PhaseResult {
    let base = pagewise_bench::Params {
        keys: KEYS,
        ..Default::default()
    };
    let cfg = RunConfig {
        engine: "btreemap".into(),
        settings: Settings::default(),
        specs: vec![Spec::parse("fillseq", &base).unwrap()],
        measure,
        csd: false,
        cap_scope: Default::default(),
    };
    let mut out = Vec::new();
    run(&cfg, &NoProgress, &mut |r| {
        out.push(r.clone());
        Ok(())
    })
    .unwrap();
    assert_eq!(out.len(), 1);
    out.pop().unwrap()
}

#[test]
fn harness_reports_exactly_the_bytes_written() {
    let dir = tempfile::tempdir().unwrap();
    let r = fillseq(Measure::Plain {
        dir: dir.path().to_path_buf(),
    });
    assert_eq!(r.user_bytes_written, KEYS * 116);
    assert_eq!(
        r.syscall_write_bytes,
        Some(DUMP_BYTES),
        "wchar of a {DUMP_BYTES}-byte dump"
    );
    assert_eq!(r.device_writes, None);
    assert!(r.notes.iter().any(|n| n.contains("syscall figure only")));
    assert_eq!(
        r.db_bytes.div_ceil(4096),
        DUMP_BYTES.div_ceil(4096),
        "db bytes on disk"
    );

    if let Some(why) = pagewise_bench::loopfs::unavailable_reason() {
        eprintln!("SKIPPED loop-device accounting: {why}");
        return;
    }
    let r = fillseq(Measure::Loop {
        work_dir: dir.path().to_path_buf(),
        image_bytes: 1 << 30,
    });
    let d = r.device_writes.expect("device figure with loop devices");
    eprintln!(
        "loop device: {} raw, {} baseline, {} net for {DUMP_BYTES} file bytes",
        d.raw_bytes, d.baseline_bytes, d.bytes
    );
    assert_eq!(r.syscall_write_bytes, Some(DUMP_BYTES));
    // The file's data blocks reach the device in full; ext4 adds its inode,
    // bitmaps, extent and journal blocks on top (tens of KiB).
    let data = DUMP_BYTES.div_ceil(4096) * 4096;
    assert!(
        d.bytes >= data,
        "device saw {} < {data} data bytes",
        d.bytes
    );
    assert!(
        d.bytes <= data + (512 << 10),
        "device saw {} bytes, more than {data} + 512 KiB of metadata",
        d.bytes
    );
    assert!(
        d.baseline_bytes > 0 && d.baseline_bytes < 1 << 20,
        "baseline {}",
        d.baseline_bytes
    );
    let wa = r.write_amp_device.unwrap();
    assert!((wa - d.bytes as f64 / (KEYS * 116) as f64).abs() < 1e-9);
}
