//! The tune sweep: one test file, three parts (QD1 curves, a high-QD curve,
//! a queue-depth sweep at 4 KiB), merged into one results file.

use crate::{Phase, Reporter, TuneSpec};
use anyhow::Context;
use pagewise_model::units::fmt_bytes;
use pagewise_probe::{target, Engine, Limit, Mode, ProbeResults, Stage, SweepSpec, Topology};
use std::time::Instant;

/// Block sizes that matter for page-size decisions, 512 B..1 MiB.
pub const DEFAULT_BS: [u64; 9] = [
    512, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 1048576,
];

/// The sweep: randread, seqread and randwrite at QD1 and randread at a high
/// QD over the block sizes, then randread 4 KiB over queue depths. One test
/// file serves every part. The stop flag is checked between the parts.
pub fn sweep(args: &TuneSpec, rep: &mut Reporter) -> anyhow::Result<ProbeResults> {
    let topo = Topology::for_path(&args.dir).unwrap_or_default();
    let lbs = topo.logical_block_size.unwrap_or(512);
    let mut bs: Vec<u64> = if args.block_sizes.is_empty() {
        DEFAULT_BS.to_vec()
    } else {
        args.block_sizes.clone()
    };
    bs.retain(|b| b % lbs == 0);
    if bs.len() < 2 {
        let why = format!(
            "need two or more block sizes that are multiples of the device's {lbs} B logical block"
        );
        return Err(crate::InvalidSpec(why).into());
    }
    let small = if bs.contains(&4096) { 4096 } else { bs[0] };
    let base = SweepSpec {
        block_sizes: bs.clone(),
        warmup_secs: args.warmup_secs,
        limit: Limit::Seconds(args.duration_secs),
        tolerance: 0.05,
        min_reps: 2,
        max_reps: 3,
        file_size: args.file_size_bytes,
        engine: Engine::Uring,
        ..SweepSpec::default()
    };
    let all = SweepSpec {
        modes: vec![Mode::RandRead, Mode::SeqRead, Mode::RandWrite],
        ..base.clone()
    };
    let mut on_progress = |p: pagewise_probe::Progress| {
        if let Stage::Filling { done, total } = p.stage {
            let label = format!(
                "writing the test file {}/{}",
                fmt_bytes(done as f64),
                fmt_bytes(total as f64)
            );
            rep.report(Phase::Fill, done, total, label);
        }
    };
    let start = Instant::now();
    let mut prepared = target::prepare(&args.dir, &all, &mut on_progress)
        .with_context(|| format!("cannot prepare a test file in {}", args.dir.display()))?;
    let clock = match &args.emulate {
        Some(profile) => Some(prepared.emulate(profile)?),
        None => None,
    };
    // A synchronous engine keeps one I/O in flight per thread: reach the same
    // concurrency with threads instead (the model only sees qd x threads).
    let sync = prepared.info.engine == "sync";
    let concurrent = |levels: Vec<usize>, sizes: Vec<u64>| {
        let (qds, threads) = if sync {
            (vec![1], levels)
        } else {
            (levels, vec![1])
        };
        SweepSpec {
            modes: vec![Mode::RandRead],
            block_sizes: sizes,
            queue_depths: qds,
            threads,
            ..base.clone()
        }
    };
    let parts: Vec<SweepSpec> = vec![
        SweepSpec {
            modes: vec![Mode::RandRead, Mode::SeqRead, Mode::RandWrite],
            queue_depths: vec![1],
            ..base.clone()
        },
        concurrent(vec![args.qd_high], bs.clone()),
        concurrent(args.qd_sweep.clone(), vec![small]),
    ]
    .into_iter()
    .filter(|p| !p.queue_depths.is_empty() && !p.threads.is_empty())
    .collect();
    let total = parts.iter().map(|p| p.points().len()).sum::<usize>() as u64;
    let mut done_before = 0usize;
    let mut merged: Option<ProbeResults> = None;
    rep.report(Phase::Sweep, 0, total, String::new());
    for part in &parts {
        rep.check()?;
        let mut cb = |p: pagewise_probe::Progress| {
            if let Stage::PointDone { .. } = p.stage {
                let at = (done_before + p.point + 1) as u64;
                rep.report(Phase::Sweep, at, total, p.label.clone());
            } else if let Stage::PointStarted = p.stage {
                let at = (done_before + p.point) as u64;
                rep.report(Phase::Sweep, at, total, p.label.clone());
            }
        };
        let r = pagewise_probe::run_sweep_on(prepared.backend.as_ref(), part, &mut cb)
            .context("the probe failed")?;
        done_before += part.points().len();
        match merged.as_mut() {
            None => merged = Some(r),
            Some(m) => m.points.extend(r.points),
        }
    }
    let mut results = merged.context("empty sweep")?;
    results.target = prepared.info.clone();
    results.topology = prepared.topology.clone();
    results
        .warnings
        .splice(0..0, prepared.warnings.iter().cloned());
    results.spec = all;
    results.emulated = prepared.emulated.clone();
    results
        .warnings
        .extend(clock.as_deref().and_then(target::overrun_warning));
    results.elapsed_secs = start.elapsed().as_secs_f64();
    drop(prepared);
    Ok(results)
}
