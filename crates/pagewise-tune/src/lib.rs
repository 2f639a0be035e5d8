//! `pagewise tune` as a library: probe the drive under a directory with a
//! short sweep, fit the cost model, advise page sizes for a dataset, verify
//! the advice on the engine, and write `probe-results.json` and
//! `tuned.json` there. The CLI (`pagewise tune`) and the Python binding
//! (`pagewise.tune`) both call [`tune`]; rendering (text, report.html) and
//! progress bars stay with them.
//!
//! Layer: above the engine, the probe, the model and the I/O crates, below
//! the CLI and the binding.

pub mod advise;
pub mod answer;
pub mod input;
mod spec;
mod sweep;
pub mod table;
pub mod verify;

pub use spec::TuneSpec;
pub use sweep::DEFAULT_BS;

use answer::Answer;
use anyhow::Context;
use pagewise::Tuned;
use pagewise_model::advise::{Advice, Dataset};
use pagewise_model::fit::{fit_all, ModelReport};
use pagewise_probe::ProbeResults;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use verify::Verification;

/// The part of the tune a [`Progress`] report is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Writing the probe's test file (`step`/`steps` in bytes).
    Fill,
    /// The probe sweep (`step`/`steps` in measured points).
    Sweep,
    /// Fitting the model and advising (one step).
    Model,
    /// Building and measuring Dbs (`steps` is 0: not known ahead).
    Verify,
    /// Finished (one step).
    Done,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Fill => "fill",
            Phase::Sweep => "sweep",
            Phase::Model => "model",
            Phase::Verify => "verify",
            Phase::Done => "done",
        }
    }
}

/// One progress report: `step` of `steps` in `phase` (steps never go back
/// within a phase), and a label such as the probe point being measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Progress {
    pub phase: Phase,
    pub step: u64,
    pub steps: u64,
    pub label: String,
}

/// The tune was stopped through its stop flag; its test file and Dbs are
/// removed. Travels inside `anyhow::Error` until [`tune`] returns it typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("stopped: the tune was asked to stop")]
pub struct Stopped;

/// An invalid [`TuneSpec`]: the message names the setting and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidSpec(pub String);

/// Why [`tune`] returned no outcome.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error(transparent)]
    Stopped(#[from] Stopped),
    #[error(transparent)]
    Invalid(#[from] InvalidSpec),
    /// The drive, the filesystem or the engine failed (the chain says where).
    #[error(transparent)]
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for TuneError {
    fn from(e: anyhow::Error) -> Self {
        if e.is::<Stopped>() {
            return TuneError::Stopped(Stopped);
        }
        match e.downcast::<InvalidSpec>() {
            Ok(i) => TuneError::Invalid(i),
            Err(e) => TuneError::Failed(e),
        }
    }
}

/// The progress callback and the stop flag, passed down the phases.
pub struct Reporter<'a> {
    progress: &'a mut dyn FnMut(Progress),
    stop: &'a AtomicBool,
}

impl<'a> Reporter<'a> {
    pub fn new(progress: &'a mut dyn FnMut(Progress), stop: &'a AtomicBool) -> Self {
        Reporter { progress, stop }
    }

    pub fn report(&mut self, phase: Phase, step: u64, steps: u64, label: String) {
        (self.progress)(Progress {
            phase,
            step,
            steps,
            label,
        });
    }

    /// `Err(Stopped)` once the stop flag is set.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(Stopped.into());
        }
        Ok(())
    }
}

/// Everything a tune produced: what the CLI writes and reports.
#[derive(Debug, Clone, Serialize)]
pub struct TuneOutcome {
    /// The probe sweep, as written to `probe-results.json`.
    pub results: ProbeResults,
    /// The cost model fitted on `results`.
    pub model: ModelReport,
    /// The advice, moved to the answer's configuration.
    pub advice: Advice,
    /// The measured verification; `None` when off or not possible (a note says why).
    pub verification: Option<Verification>,
    /// The one answer and the sentences that explain it.
    pub answer: Answer,
    /// The configuration written to `tuned.json`.
    pub tuned: Tuned,
    /// Notes on fallbacks and limits met on the way.
    pub notes: Vec<String>,
    /// "real drive" or the emulated profile's banner.
    pub drive: String,
    pub results_path: PathBuf,
    pub tuned_path: PathBuf,
    /// Seconds the probe sweep took.
    pub sweep_secs: f64,
    pub elapsed_secs: f64,
}

/// Runs the whole tune for `spec` (see the crate docs). `progress` is called
/// from this thread; `stop` is checked between probe parts and between
/// phases and verification steps: once set, the call removes its temporary
/// files and returns [`TuneError::Stopped`]. Writes `probe-results.json`,
/// `tuned.json` and `engine-costs.json` (after a verification) in `spec.dir`.
pub fn tune(
    spec: &TuneSpec,
    progress: &mut dyn FnMut(Progress),
    stop: &AtomicBool,
) -> Result<TuneOutcome, TuneError> {
    let mut rep = Reporter::new(progress, stop);
    rep.check()?;
    spec.validate()?;
    let started = Instant::now();
    std::fs::create_dir_all(&spec.dir)
        .with_context(|| format!("cannot create {}: check permissions", spec.dir.display()))?;
    let dataset = spec.dataset();
    dataset.validate().map_err(|e| InvalidSpec(e.to_string()))?;
    let results = sweep::sweep(spec, &mut rep)?;
    let results_path = spec.dir.join("probe-results.json");
    std::fs::write(&results_path, results.to_json())
        .with_context(|| format!("cannot write {}", results_path.display()))?;
    rep.check()?;
    rep.report(Phase::Model, 0, 1, "fitting the drive model".into());
    let mut notes = results.warnings.clone();
    let (model, mut advice) = fit_and_advise(spec, &results, &dataset, &mut notes)?;
    rep.report(Phase::Model, 1, 1, String::new());
    rep.check()?;
    let (drive, verification) = verify(spec, &model, &mut advice, &mut rep, &mut notes)?;
    rep.check()?;
    let answer = take_answer(&mut advice, verification.as_ref());
    let tuned = answer::tuned(&answer, &advice, &drive, &spec.dir);
    let tuned_path = tuned.save(&spec.dir).map_err(anyhow::Error::from)?;
    rep.report(Phase::Done, 1, 1, String::new());
    Ok(TuneOutcome {
        sweep_secs: results.elapsed_secs,
        results,
        model,
        advice,
        verification,
        answer,
        tuned,
        notes,
        drive,
        results_path,
        tuned_path,
        elapsed_secs: started.elapsed().as_secs_f64(),
    })
}

fn fit_and_advise(
    spec: &TuneSpec,
    results: &ProbeResults,
    dataset: &Dataset,
    notes: &mut Vec<String>,
) -> anyhow::Result<(ModelReport, Advice)> {
    let value = serde_json::to_value(results)?;
    let ms = input::from_probe(&value, notes)?;
    let model = fit_all(&ms).context("cannot fit the drive model")?;
    let advice = advise::advise_report(&model, dataset, spec.mix, None, &[], notes)?;
    Ok((model, advice))
}

/// Verification runs on the drive the advice is for: the emulated one when
/// `spec.emulate` is given. It calibrates the engine's costs first and moves
/// `advice.best` to the engine-aware best.
fn verify(
    spec: &TuneSpec,
    model: &ModelReport,
    advice: &mut Advice,
    rep: &mut Reporter,
    notes: &mut Vec<String>,
) -> anyhow::Result<(String, Option<Verification>)> {
    let real: Arc<dyn pagewise_io::Fs> = Arc::new(pagewise_io::RealFs);
    let fs: Arc<dyn pagewise_io::Fs> = match &spec.emulate {
        Some(profile) => Arc::new(pagewise_io::EmulatedFs::new(real, profile.clone())?),
        None => real,
    };
    let drive = verify::drive_name(spec.emulate.as_ref());
    let mut at = 0u64;
    let mut step = |label: String| {
        rep.check()?;
        at += 1;
        rep.report(Phase::Verify, at, 0, label);
        Ok(())
    };
    let v = verify::run(
        &spec.verify,
        &spec.dir,
        fs,
        &drive,
        model,
        advice,
        &mut step,
        notes,
    )?;
    Ok((drive, v))
}

/// tune's answer from the verification (or the advice without one), and
/// the advice moved to it so the rest of the report (wear, KPIs) is about
/// the configuration named.
fn take_answer(advice: &mut Advice, v: Option<&Verification>) -> Answer {
    let a = match v {
        Some(v) => answer::measured(advice, v),
        None => answer::unmeasured(advice),
    };
    advice.best = a.page_size;
    if let (Some(b), Some(s)) = (advice.bepsilon.as_mut(), a.bepsilon) {
        b.node_size = s.node_bytes;
        b.basement_size = s.basement_bytes;
        b.fanout = s.fanout;
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_stop_flag_stops_before_any_io() {
        let dir = tempfile::tempdir().unwrap();
        let spec = TuneSpec {
            dir: dir.path().join("never-created"),
            ..TuneSpec::default()
        };
        let stop = AtomicBool::new(true);
        let mut calls = 0;
        let r = tune(&spec, &mut |_| calls += 1, &stop);
        assert!(matches!(r, Err(TuneError::Stopped(Stopped))), "{r:?}");
        assert_eq!(calls, 0);
        assert!(!spec.dir.exists(), "no directory is created once stopped");
    }

    #[test]
    fn a_bad_spec_is_an_invalid_spec_error() {
        let dir = tempfile::tempdir().unwrap();
        let spec = TuneSpec {
            dir: dir.path().to_path_buf(),
            block_sizes: vec![4096],
            ..TuneSpec::default()
        };
        let r = tune(&spec, &mut |_| {}, &AtomicBool::new(false));
        let Err(TuneError::Invalid(InvalidSpec(m))) = r else {
            panic!("expected an InvalidSpec, got {r:?}");
        };
        assert!(m.contains("two or more block sizes"), "{m}");
    }
}
