//! What a tune is asked to do: the dataset to advise for, the probe sweep's
//! knobs and the verification level. `Default` is `pagewise tune`'s.

use crate::verify::VerifySpec;
use crate::InvalidSpec;
use pagewise_io::DriveProfile;
use pagewise_model::advise::{Dataset, Mix};
use std::path::PathBuf;

/// A tune's settings (the CLI's flags, clap-free).
#[derive(Debug, Clone, PartialEq)]
pub struct TuneSpec {
    /// Directory on the drive to tune for: holds the probe's temporary test
    /// file, probe-results.json and tuned.json (created if missing).
    pub dir: PathBuf,
    /// Records in the dataset to advise for.
    pub rows: u64,
    pub key_bytes: u64,
    pub value_bytes: u64,
    /// Cache (buffer pool) size.
    pub cache_bytes: u64,
    /// Workload mix as relative weights.
    pub mix: Mix,
    /// Records per range query.
    pub range_rows: u64,
    /// Tune for an emulated drive instead of the real one.
    pub emulate: Option<DriveProfile>,
    /// Block sizes to sweep; empty: [`crate::DEFAULT_BS`].
    pub block_sizes: Vec<u64>,
    /// Seconds measured per repetition of a probe point.
    pub duration_secs: f64,
    /// Warm-up seconds per probe point.
    pub warmup_secs: f64,
    /// Size of the probe's test file.
    pub file_size_bytes: u64,
    /// The higher queue depth for random reads.
    pub qd_high: usize,
    /// Queue depths swept at 4 KiB for parallelism.
    pub qd_sweep: Vec<usize>,
    pub verify: VerifySpec,
}

impl Default for TuneSpec {
    fn default() -> Self {
        TuneSpec {
            dir: PathBuf::from("./pagewise-data"),
            rows: 100_000_000,
            key_bytes: 16,
            value_bytes: 100,
            cache_bytes: 1 << 30,
            mix: Mix::parse("point=0.8,range=0.1,insert=0.1").expect("a valid constant mix"),
            range_rows: 100,
            emulate: None,
            block_sizes: Vec::new(),
            duration_secs: 0.6,
            warmup_secs: 0.2,
            file_size_bytes: 1 << 30,
            qd_high: 32,
            qd_sweep: vec![2, 4, 8, 16, 64],
            verify: VerifySpec::default(),
        }
    }
}

impl TuneSpec {
    /// The dataset the advice is for.
    pub fn dataset(&self) -> Dataset {
        Dataset {
            rows: self.rows,
            key_bytes: self.key_bytes,
            value_bytes: self.value_bytes,
            cache_bytes: self.cache_bytes,
            range_records: self.range_rows,
            ..Dataset::default()
        }
    }

    /// Refuses settings the sweep or the verification cannot run with.
    pub fn validate(&self) -> Result<(), InvalidSpec> {
        let bad = |s: String| Err(InvalidSpec(s));
        for (name, v) in [
            ("duration", self.duration_secs),
            ("warm-up", self.warmup_secs),
        ] {
            if !v.is_finite() || v < 0.0 {
                return bad(format!("the {name} must be zero or more seconds, not {v}"));
            }
        }
        if let Some(s) = self.verify.phase_secs {
            if !s.is_finite() || s <= 0.0 {
                return bad(format!("verification phases must last over 0 s, not {s}"));
            }
        }
        if self.qd_high == 0 || self.qd_sweep.contains(&0) {
            return bad("queue depths must be at least 1".into());
        }
        Ok(())
    }
}
