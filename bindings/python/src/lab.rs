//! The lab from Python: run a probe sweep (the library call `pagewise
//! probe` makes) with a progress callback, and load the result files the
//! CLI writes, as Python objects.

use crate::db::to_python;
use crate::errors::{self, Error};
use pagewise_io::DriveProfile;
use pagewise_probe::{Engine, Limit, Mode, ProbeResults, Progress, Stage, SweepSpec};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

fn modes(names: Vec<String>) -> PyResult<Vec<Mode>> {
    names
        .iter()
        .map(|m| {
            m.parse::<Mode>()
                .map_err(|e| errors::options(format!("mode {m:?}: {e}")))
        })
        .collect()
}

/// A progress report as a dict: {"stage", "point", "points", "label", ...}.
fn progress_dict<'py>(py: Python<'py>, p: &Progress) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("point", p.point)?;
    d.set_item("points", p.points)?;
    d.set_item("label", &p.label)?;
    match p.stage {
        Stage::Filling { done, total } => {
            d.set_item("stage", "filling")?;
            d.set_item("done_bytes", done)?;
            d.set_item("total_bytes", total)?;
        }
        Stage::PointStarted => d.set_item("stage", "point_started")?,
        Stage::Repetition {
            rep,
            max_reps,
            iops,
            rel_ci,
        } => {
            d.set_item("stage", "repetition")?;
            d.set_item("rep", rep)?;
            d.set_item("max_reps", max_reps)?;
            d.set_item("iops", iops)?;
            d.set_item("rel_ci", rel_ci)?;
        }
        Stage::PointDone { iops } => {
            d.set_item("stage", "point_done")?;
            d.set_item("iops", iops)?;
        }
    }
    Ok(d)
}

/// Measures the drive under `path` (a directory: a test file of
/// `file_size_bytes` is created there and removed) over modes x block
/// sizes x queue depths x threads, like `pagewise probe`, and returns the
/// same results the CLI writes with `--out`. `engine` is parsed as the
/// CLI's `--engine`, `emulate` (a preset such as "nvme" or "S,W,P") as its
/// `--emulate`: every measured I/O then goes through that drive profile and
/// the results name it. `progress(dict)` is called
/// for every stage; an exception it raises stops the calls and is raised
/// when the sweep ends (the probe's stop flag is process-wide and
/// permanent, so it is not used).
#[pyfunction]
#[pyo3(signature = (
    path, *, modes = vec!["randread".to_string()], block_sizes = vec![4096, 65536],
    queue_depths = vec![1], threads = vec![1], duration_secs = 2.0, warmup_secs = 1.0,
    file_size_bytes = 256 << 20, direct_io = true, engine = "uring", min_reps = 2,
    max_reps = 5, seed = None, emulate = None, progress = None
))]
#[allow(clippy::too_many_arguments)]
pub fn probe<'py>(
    py: Python<'py>,
    path: PathBuf,
    modes: Vec<String>,
    block_sizes: Vec<u64>,
    queue_depths: Vec<usize>,
    threads: Vec<usize>,
    duration_secs: f64,
    warmup_secs: f64,
    file_size_bytes: u64,
    direct_io: bool,
    engine: &str,
    min_reps: u32,
    max_reps: u32,
    seed: Option<u64>,
    emulate: Option<&str>,
    progress: Option<PyObject>,
) -> PyResult<Bound<'py, PyAny>> {
    let engine = engine
        .parse::<Engine>()
        .map_err(|e| errors::options(format!("engine: {e}")))?;
    let emulate = emulate_arg(emulate)?;
    check_callable(py, &progress)?;
    let defaults = SweepSpec::default();
    let spec = SweepSpec {
        modes: self::modes(modes)?,
        block_sizes,
        queue_depths,
        threads,
        limit: Limit::Seconds(duration_secs),
        warmup_secs,
        file_size: file_size_bytes,
        direct: direct_io,
        engine,
        min_reps,
        max_reps,
        seed: seed.unwrap_or(defaults.seed),
        ..defaults
    };
    let results = run(py, &path, &spec, emulate.as_ref(), progress)?;
    to_python(py, &results)
}

/// The `emulate` argument (a preset or "S,W,P") as a drive profile.
pub fn emulate_arg(emulate: Option<&str>) -> PyResult<Option<DriveProfile>> {
    emulate
        .map(DriveProfile::parse)
        .transpose()
        .map_err(|e| errors::options(format!("emulate: {e}")))
}

/// A TypeError unless `progress` is None or callable.
pub fn check_callable(py: Python<'_>, progress: &Option<PyObject>) -> PyResult<()> {
    match progress {
        Some(cb) if !cb.bind(py).is_callable() => {
            Err(PyTypeError::new_err("progress must be callable"))
        }
        _ => Ok(()),
    }
}

fn run(
    py: Python<'_>,
    path: &std::path::Path,
    spec: &SweepSpec,
    emulate: Option<&DriveProfile>,
    progress: Option<PyObject>,
) -> PyResult<ProbeResults> {
    let mut failed: Option<PyErr> = None;
    let r = py.allow_threads(|| {
        let mut report = |p: Progress| {
            let Some(cb) = &progress else { return };
            if failed.is_some() {
                return;
            }
            Python::with_gil(|py| {
                let called = progress_dict(py, &p).and_then(|d| cb.call1(py, (d,)));
                if let Err(e) = called {
                    failed = Some(e);
                }
            });
        };
        pagewise_probe::run_sweep_on_drive(path, spec, emulate, &mut report)
    });
    if let Some(e) = failed {
        return Err(e);
    }
    r.map_err(|e| Error::new_err(e.to_string()))
}

/// Loads a probe results file (`probe-results.json`, `pagewise probe
/// --out`), checked against the results schema, as a dict.
#[pyfunction]
pub fn load_probe_results<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyAny>> {
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::new_err(format!("cannot read {}: {e}", path.display())))?;
    let r = ProbeResults::from_json(&text).map_err(|e| {
        Error::new_err(format!("{}: not probe results ({e}); write them with `pagewise probe --out` or `pagewise tune`", path.display()))
    })?;
    to_python(py, &r)
}

/// Loads the summary `pagewise tune --json` prints (saved to a file) as a
/// dict: report and results paths, best_page_size, reason, verification.
#[pyfunction]
pub fn load_tune_results<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyAny>> {
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::new_err(format!("cannot read {}: {e}", path.display())))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Error::new_err(format!("{}: not JSON ({e})", path.display())))?;
    if v.get("best_page_size").and_then(|b| b.as_u64()).is_none() {
        return Err(Error::new_err(format!(
            "{}: not a tune summary (no best_page_size); save the output of `pagewise tune --json`",
            path.display()
        )));
    }
    to_python(py, &v)
}
