//! `pagewise.tune(...)`: the library call `pagewise tune` makes (crate
//! `pagewise-tune`), with a progress callback, returning what the CLI writes
//! as Python objects.

use crate::db::to_python;
use crate::errors::{self, Error};
use pagewise_model::advise::Mix;
use pagewise_tune::verify::{Level, VerifySpec};
use pagewise_tune::{Progress, TuneError, TuneSpec};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

fn level(name: &str) -> PyResult<Level> {
    match name {
        "off" => Ok(Level::Off),
        "quick" => Ok(Level::Quick),
        "full" => Ok(Level::Full),
        _ => Err(errors::options(format!(
            "verify {name:?}: must be \"off\", \"quick\" or \"full\""
        ))),
    }
}

/// Probes the drive under `dir` with a short sweep, fits the cost model,
/// advises the tree kind and its sizes for the described dataset and mix,
/// verifies the advice on the engine (`verify`: "off", "quick", "full"),
/// and writes `probe-results.json` and `tuned.json` in `dir`, as `pagewise
/// tune` does (the report.html it renders is the CLI's). Returns a dict of
/// everything it produced: results, model, advice, verification, answer,
/// tuned, notes, drive, paths and times. `progress(dict)` gets {"phase",
/// "step", "steps", "label"}; an exception it raises, or Ctrl-C, stops the
/// tune at its next check and is raised.
#[pyfunction]
#[pyo3(signature = (
    dir, *, rows = 100_000_000, key_bytes = 16, value_bytes = 100, cache_bytes = 1 << 30,
    mix = "point=0.8,range=0.1,insert=0.1", range_rows = 100, emulate = None,
    verify = "quick", block_sizes = None, duration_secs = 0.6, warmup_secs = 0.2,
    file_size_bytes = 1 << 30, progress = None
))]
#[allow(clippy::too_many_arguments)]
pub fn tune<'py>(
    py: Python<'py>,
    dir: PathBuf,
    rows: u64,
    key_bytes: u64,
    value_bytes: u64,
    cache_bytes: u64,
    mix: &str,
    range_rows: u64,
    emulate: Option<&str>,
    verify: &str,
    block_sizes: Option<Vec<u64>>,
    duration_secs: f64,
    warmup_secs: f64,
    file_size_bytes: u64,
    progress: Option<PyObject>,
) -> PyResult<Bound<'py, PyAny>> {
    let mix = Mix::parse(mix).map_err(|e| errors::options(format!("mix: {e}")))?;
    let emulate = crate::lab::emulate_arg(emulate)?;
    crate::lab::check_callable(py, &progress)?;
    let spec = TuneSpec {
        dir,
        rows,
        key_bytes,
        value_bytes,
        cache_bytes,
        mix,
        range_rows,
        emulate,
        block_sizes: block_sizes.unwrap_or_default(),
        duration_secs,
        warmup_secs,
        file_size_bytes,
        verify: VerifySpec {
            level: level(verify)?,
            ..VerifySpec::default()
        },
        ..TuneSpec::default()
    };
    let outcome = run(py, &spec, progress)?;
    to_python(py, &outcome)
}

fn progress_dict<'py>(py: Python<'py>, p: &Progress) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("phase", p.phase.name())?;
    d.set_item("step", p.step)?;
    d.set_item("steps", p.steps)?;
    d.set_item("label", &p.label)?;
    Ok(d)
}

/// Runs the tune with the GIL released; each progress report takes the GIL
/// to check for a signal and call `progress`, and the first exception of
/// either sets this call's own stop flag and is raised when the tune ends.
fn run(
    py: Python<'_>,
    spec: &TuneSpec,
    progress: Option<PyObject>,
) -> PyResult<pagewise_tune::TuneOutcome> {
    let stop = AtomicBool::new(false);
    let mut failed: Option<PyErr> = None;
    let r = py.allow_threads(|| {
        let mut report = |p: Progress| {
            if failed.is_some() {
                return;
            }
            Python::with_gil(|py| {
                let called = py.check_signals().and_then(|()| match &progress {
                    Some(cb) => progress_dict(py, &p).and_then(|d| cb.call1(py, (d,)).map(drop)),
                    None => Ok(()),
                });
                if let Err(e) = called {
                    failed = Some(e);
                    stop.store(true, Ordering::Release);
                }
            });
        };
        pagewise_tune::tune(spec, &mut report, &stop)
    });
    if let Some(e) = failed {
        return Err(e);
    }
    r.map_err(|e| match e {
        TuneError::Invalid(i) => errors::options(i.0),
        other => Error::new_err(other.to_string()),
    })
}
