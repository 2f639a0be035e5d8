//! A real, small probe on a temp file: the figures it reports must match what
//! an accounting backend saw reach the file.

use pagewise_io::{
    open_engine, Accounted, Backend, DirectMode, Engine as IoEngine, IoStats, OpenOptions,
};
use pagewise_probe::{
    run_sweep, run_sweep_on, target, Dist, Engine, Limit, Mode, Progress, Stage, SweepSpec,
    TargetKind,
};
use std::sync::Arc;

const SIZE: u64 = 8 << 20;

fn test_file(dir: &std::path::Path, engine: IoEngine) -> Arc<dyn Backend> {
    let opts = OpenOptions {
        write: true,
        create: true,
        create_new: true,
        direct: DirectMode::Try,
    };
    let b = open_engine(dir.join("probe.dat"), &opts, engine).unwrap();
    target::fill_random(b.as_ref(), SIZE, 7, &mut |_| {}).unwrap();
    b
}

fn small_spec() -> SweepSpec {
    SweepSpec {
        modes: vec![
            Mode::RandRead,
            Mode::RandWrite,
            Mode::SeqRead,
            Mode::Mixed { read_pct: 50 },
        ],
        block_sizes: vec![4096, 16384],
        distributions: vec![Dist::Uniform],
        threads: vec![1, 2],
        queue_depths: vec![1, 4],
        warmup_secs: 0.0,
        limit: Limit::Ops(150),
        min_reps: 1,
        max_reps: 2,
        tolerance: 0.5,
        fsync_every: 16,
        ..Default::default()
    }
}

#[test]
fn reported_ops_are_the_ops_that_reached_the_file() {
    for engine in [IoEngine::Uring, IoEngine::Sync] {
        let dir = tempfile::tempdir().unwrap();
        let stats = IoStats::new();
        let backend = Accounted::new(test_file(dir.path(), engine), stats.clone());
        let spec = SweepSpec {
            engine: if engine == IoEngine::Uring {
                Engine::Uring
            } else {
                Engine::Sync
            },
            ..small_spec()
        };
        let mut per_point = Vec::new();
        let mut before = stats.snapshot();
        let results = run_sweep_on(&backend, &spec, &mut |p: Progress| match p.stage {
            Stage::PointStarted => before = stats.snapshot(),
            Stage::PointDone { .. } => per_point.push(stats.snapshot().since(&before)),
            _ => {}
        })
        .unwrap();
        assert_eq!(results.points.len(), spec.points().len());
        assert_eq!(per_point.len(), results.points.len());
        for (r, seen) in results.points.iter().zip(&per_point) {
            let what = format!("{engine:?} {}", r.params.label());
            let reps = r.repetitions.count as u64;
            assert!((1..=2).contains(&reps), "{what}");
            assert_eq!(r.ops, 150 * reps, "{what}: ops");
            assert_eq!(
                seen.read_ops + seen.write_ops,
                r.ops,
                "{what}: accounted ops"
            );
            assert_eq!(
                (seen.read_ops, seen.write_ops),
                (r.reads, r.writes),
                "{what}: read/write split"
            );
            assert_eq!(r.bytes, r.ops * r.params.bs, "{what}: bytes");
            assert_eq!(
                seen.read_bytes + seen.write_bytes,
                r.bytes,
                "{what}: accounted bytes"
            );
            assert_eq!(seen.syncs, r.fsyncs, "{what}: accounted fsyncs");
            if r.params.mode == Mode::RandWrite {
                // Each thread syncs after every 16 of its 150 / threads writes.
                let t = r.params.threads as u64;
                assert_eq!(r.fsyncs, reps * t * (150 / t / 16), "{what}: fsyncs");
            }
            match r.params.mode {
                Mode::RandRead | Mode::SeqRead => assert_eq!(r.writes, 0, "{what}"),
                Mode::RandWrite => assert_eq!(r.reads, 0, "{what}"),
                _ => assert!(r.reads > 0 && r.writes > 0, "{what}: mixed did both"),
            }
            let l = &r.latency_us;
            assert!(
                0.0 < l.min
                    && l.min <= l.p50
                    && l.p50 <= l.p90
                    && l.p90 <= l.p99
                    && l.p99 <= l.p999
                    && l.p999 <= l.max,
                "{what}: {l:?}"
            );
            assert!(r.iops > 0.0, "{what}");
            assert!(
                (r.mb_per_s - r.iops * r.params.bs as f64 / 1e6).abs() < 1e-6 * r.mb_per_s.max(1.0),
                "{what}"
            );
            assert_eq!(r.repetitions.iops.len() as u64, reps);
            let want_qd = if engine == IoEngine::Sync {
                1
            } else {
                r.params.qd
            };
            assert_eq!(r.effective_qd, want_qd, "{what}");
        }
        // Writes stayed inside the file.
        assert_eq!(backend.size().unwrap(), SIZE);
        let json = results.to_json();
        let back = pagewise_probe::ProbeResults::from_json(&json).unwrap();
        assert_eq!(back.points.len(), results.points.len());
        for (a, b) in back.points.iter().zip(&results.points) {
            assert_eq!(
                (a.params, a.ops, a.bytes, a.fsyncs),
                (b.params, b.ops, b.bytes, b.fsyncs)
            );
            assert!((a.iops - b.iops).abs() <= 1e-9 * b.iops);
        }
        assert_eq!(back.spec, results.spec);
    }
}

#[test]
fn directory_target_creates_fills_and_removes_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let spec = SweepSpec {
        modes: vec![Mode::RandRead, Mode::RandWrite],
        block_sizes: vec![4096],
        file_size: SIZE,
        warmup_secs: 0.0,
        limit: Limit::Ops(64),
        min_reps: 1,
        max_reps: 1,
        ..Default::default()
    };
    let mut filled = 0;
    let mut seen_file = false;
    let results = run_sweep(dir.path(), &spec, &mut |p: Progress| {
        if let Stage::Filling { done, .. } = p.stage {
            filled = done;
        }
        if p.stage == Stage::PointStarted {
            seen_file = std::fs::read_dir(dir.path()).unwrap().count() == 1;
        }
    })
    .unwrap();
    assert!(seen_file, "the test file existed while measuring");
    assert_eq!(filled, SIZE);
    assert_eq!(results.target.kind, TargetKind::CreatedFile);
    assert_eq!(results.target.size, SIZE);
    assert_eq!(results.points.len(), 2);
    assert!(results.points.iter().all(|p| p.ops == 64));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "test file removed"
    );
}

#[test]
fn fill_is_incompressible() {
    let dir = tempfile::tempdir().unwrap();
    let b = test_file(dir.path(), IoEngine::Sync);
    let mut data = vec![0u8; SIZE as usize];
    let mut off = 0;
    for chunk in data.chunks_mut(1 << 20) {
        let mut buf = pagewise_io::AlignedBuf::new(chunk.len(), 4096);
        b.read_at(&mut buf, off).unwrap();
        chunk.copy_from_slice(&buf);
        off += chunk.len() as u64;
    }
    let mut hist = [0u64; 256];
    data.iter().for_each(|&x| hist[x as usize] += 1);
    let expect = SIZE as f64 / 256.0;
    // Chi-square with 255 degrees of freedom: mean 255, sd ~22.6; 400 is > 6 sd.
    let chi2: f64 = hist
        .iter()
        .map(|&c| (c as f64 - expect).powi(2) / expect)
        .sum();
    assert!(chi2 < 400.0, "byte histogram not uniform: chi2 {chi2}");
    // No two 4 KiB blocks are equal, so a deduplicating drive gains nothing.
    let mut blocks: Vec<&[u8]> = data.chunks(4096).collect();
    blocks.sort();
    blocks.dedup();
    assert_eq!(blocks.len() as u64, SIZE / 4096);
}
