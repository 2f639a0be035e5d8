//! The tune sweep: one test file, three parts (QD1 curves, a high-QD curve,
//! a queue-depth sweep at 4 KiB), merged into one results file.

use super::Args;
use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pagewise_model::units::fmt_bytes;
use pagewise_probe::{
    target, Engine, Limit, Mode, ProbeResults, Progress, Stage, SweepSpec, Topology,
};
use std::io::IsTerminal;
use std::time::Instant;

/// Block sizes that matter for page-size decisions, 512 B..1 MiB.
const DEFAULT_BS: [u64; 9] = [
    512, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 1048576,
];

/// The sweep: randread, seqread and randwrite at QD1 and randread at a high
/// QD over the block sizes, then randread 4 KiB over queue depths. One test
/// file serves every part.
pub fn sweep(args: &Args) -> anyhow::Result<ProbeResults> {
    let topo = Topology::for_path(&args.dir).unwrap_or_default();
    let lbs = topo.logical_block_size.unwrap_or(512);
    let mut bs: Vec<u64> = if args.bs.is_empty() {
        DEFAULT_BS.to_vec()
    } else {
        args.bs.clone()
    };
    bs.retain(|b| b % lbs == 0);
    anyhow::ensure!(
        bs.len() >= 2,
        "need two or more block sizes that are multiples of the device's {lbs} B logical block"
    );
    let small = if bs.contains(&4096) { 4096 } else { bs[0] };
    let base = SweepSpec {
        block_sizes: bs.clone(),
        warmup_secs: args.warmup,
        limit: Limit::Seconds(args.duration),
        tolerance: 0.05,
        min_reps: 2,
        max_reps: 3,
        file_size: args.file_size,
        engine: Engine::Uring,
        ..SweepSpec::default()
    };
    let all = SweepSpec {
        modes: vec![Mode::RandRead, Mode::SeqRead, Mode::RandWrite],
        ..base.clone()
    };
    let bar = progress_bar(args.json, 0);
    let mut on_progress = |p: Progress| {
        if let Stage::Filling { done, total } = p.stage {
            bar.set_message(format!(
                "writing the test file {}/{}",
                fmt_bytes(done as f64),
                fmt_bytes(total as f64)
            ));
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
    let total: usize = parts.iter().map(|p| p.points().len()).sum();
    bar.set_length(total as u64);
    let mut done_before = 0usize;
    let mut merged: Option<ProbeResults> = None;
    for part in &parts {
        let mut cb = |p: Progress| {
            if let Stage::PointDone { .. } = p.stage {
                bar.set_position((done_before + p.point + 1) as u64);
            } else if let Stage::PointStarted = p.stage {
                bar.set_message(p.label.clone());
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
    bar.finish_and_clear();
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

fn progress_bar(json: bool, total: u64) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::with_draw_target(Some(total.max(1)), ProgressDrawTarget::stderr());
    b.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} points, ETA {eta}  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    b
}
