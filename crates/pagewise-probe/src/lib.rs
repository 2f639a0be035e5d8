//! pagewise-probe: measure a drive the way a database uses it.
//!
//! The heir of RethinkDB's Rebench: sweep block size x alignment x access
//! pattern x concurrency, with warm-up, repetitions until the IOPS confidence
//! interval is tight, HDR latency histograms and the probe's own CPU cost.
//!
//! Entry points:
//! - [`run_sweep`]: prepare a target path safely (see [`target`]) and measure
//!   every point of a [`SweepSpec`], returning [`ProbeResults`] (JSON schema in
//!   [`results`]).
//! - [`run_sweep_emulated`]: the same through an emulated drive
//!   ([`pagewise_io::EmulatedDrive`]: T = S + B/W on P channels).
//! - [`run_sweep_on`]: the same on a backend you opened (tests, emulated drives).
//!
//! All I/O goes through `pagewise_io::Backend` and its `IoQueue`.
//!
//! ```no_run
//! use pagewise_probe::{run_sweep, Limit, Mode, SweepSpec};
//! let spec = SweepSpec {
//!     modes: vec![Mode::RandRead, Mode::RandWrite],
//!     block_sizes: vec![4096, 16384, 65536],
//!     limit: Limit::Seconds(2.0),
//!     ..SweepSpec::default()
//! };
//! let results = run_sweep("/mnt/ssd/tmp".as_ref(), &spec, &mut |_progress| {})?;
//! for p in &results.points {
//!     println!("{} {} B: {:.0} IOPS, p99 {:.0} µs", p.params.mode, p.params.bs, p.iops, p.latency_us.p99);
//! }
//! std::fs::write("probe.json", results.to_json())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod dist;
mod error;
pub mod progress;
pub mod results;
pub mod runner;
pub mod spec;
pub mod stats;
pub mod target;
mod uring;

pub use dist::Dist;
pub use error::ProbeError;
pub use pagewise_io::topology::Topology;
pub use progress::{Progress, Stage};
pub use results::{HostInfo, Latency, PointResult, ProbeResults, SCHEMA};
pub use spec::{
    fmt_size, parse_count_list, parse_size, parse_size_list, Engine, Limit, Mode, PointSpec,
    SweepSpec,
};
pub use stats::Repetitions;
pub use target::{TargetInfo, TargetKind};

use pagewise_io::{Backend, DriveProfile};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Asks a running sweep to stop soon; it then returns [`ProbeError::Interrupted`]
/// after removing its test file. Async-signal-safe: call it from a SIGINT handler.
pub fn interrupt() {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// True once [`interrupt`] was called.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// [`run_sweep_emulated`] when `emulate` names a drive profile, else
/// [`run_sweep`]: the one entry point of `pagewise probe` and the Python
/// binding's `probe`.
pub fn run_sweep_on_drive(
    target: &Path,
    spec: &SweepSpec,
    emulate: Option<&DriveProfile>,
    progress: &mut dyn FnMut(Progress),
) -> Result<ProbeResults, ProbeError> {
    match emulate {
        None => run_sweep(target, spec, progress),
        Some(profile) => run_sweep_emulated(target, spec, profile, progress),
    }
}

/// Prepares `target` (directory, file or block device) for `spec`, runs every
/// point and cleans up. Nothing is written unless every safety check passes.
pub fn run_sweep(
    target: &Path,
    spec: &SweepSpec,
    progress: &mut dyn FnMut(Progress),
) -> Result<ProbeResults, ProbeError> {
    let start = (SystemTime::now(), Instant::now());
    let prepared = target::prepare(target, spec, progress)?;
    run_prepared(&prepared, spec, progress, start)
}

/// [`run_sweep`] on an emulated drive: the test file is prepared (and filled)
/// on the real device, then every measured I/O goes through `profile`. The
/// results carry the profile, and a warning when the real device was slower
/// than the emulated one for some I/Os.
pub fn run_sweep_emulated(
    target: &Path,
    spec: &SweepSpec,
    profile: &DriveProfile,
    progress: &mut dyn FnMut(Progress),
) -> Result<ProbeResults, ProbeError> {
    let start = (SystemTime::now(), Instant::now());
    let mut prepared = target::prepare(target, spec, progress)?;
    let clock = prepared.emulate(profile)?;
    let mut results = run_prepared(&prepared, spec, progress, start)?;
    results.warnings.extend(target::overrun_warning(&clock));
    Ok(results)
}

fn run_prepared(
    prepared: &target::Prepared,
    spec: &SweepSpec,
    progress: &mut dyn FnMut(Progress),
    start: (SystemTime, Instant),
) -> Result<ProbeResults, ProbeError> {
    let mut results = run_sweep_on(prepared.backend.as_ref(), spec, progress)?;
    results.emulated = prepared.emulated.clone();
    results.target = prepared.info.clone();
    results.topology = prepared.topology.clone();
    results
        .warnings
        .splice(0..0, prepared.warnings.iter().cloned());
    stamp(&mut results, start);
    Ok(results)
}

/// Runs every point of `spec` on an opened backend (whose whole size is used).
pub fn run_sweep_on(
    backend: &dyn Backend,
    spec: &SweepSpec,
    progress: &mut dyn FnMut(Progress),
) -> Result<ProbeResults, ProbeError> {
    let start = (SystemTime::now(), Instant::now());
    spec.validate()?;
    let size = backend.size()?;
    if size < spec.max_bs() {
        return Err(ProbeError::FileTooSmall {
            path: backend.path().into(),
            size,
            bs: spec.max_bs(),
        });
    }
    if backend.is_direct() {
        spec.validate_for_device(
            backend.alignment() as u64,
            &backend.path().display().to_string(),
        )?;
    }
    let points = spec.points();
    let mut out = Vec::with_capacity(points.len());
    for (i, p) in points.iter().enumerate() {
        let label = p.label();
        let report = |stage| Progress {
            stage,
            point: i,
            points: points.len(),
            label: label.clone(),
        };
        progress(report(Stage::PointStarted));
        let seed = spec.seed ^ (i as u64).wrapping_mul(0xd134_2543_de82_ef95);
        let r = runner::run_point(backend, size, spec, p, seed, &mut |rep, iops, rel_ci| {
            progress(report(Stage::Repetition {
                rep,
                max_reps: spec.max_reps,
                iops,
                rel_ci,
            }))
        })?;
        progress(report(Stage::PointDone { iops: r.iops }));
        out.push(r);
    }
    let mut results = ProbeResults {
        schema: SCHEMA.into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        host: HostInfo::current(),
        timestamp: String::new(),
        unix_time: 0,
        elapsed_secs: 0.0,
        target: TargetInfo {
            path: backend.path().into(),
            file: backend.path().into(),
            kind: TargetKind::ExistingFile,
            size,
            direct: backend.is_direct(),
            engine: backend.engine().into(),
        },
        topology: Topology::default(),
        spec: spec.clone(),
        warnings: Vec::new(),
        points: out,
        emulated: None,
    };
    stamp(&mut results, start);
    Ok(results)
}

fn stamp(r: &mut ProbeResults, (wall, mono): (SystemTime, Instant)) {
    r.unix_time = wall.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    r.timestamp = results::rfc3339(r.unix_time);
    r.elapsed_secs = mono.elapsed().as_secs_f64();
}
