//! Progress reports from a running sweep, for progress bars.

/// One progress report. `point` is 0-based; `points` the sweep's total.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    pub stage: Stage,
    pub point: usize,
    pub points: usize,
    /// Short description of the current point.
    pub label: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub enum Stage {
    /// Writing the test file: bytes done of total.
    Filling { done: u64, total: u64 },
    /// A point is starting (warm-up first).
    #[default]
    PointStarted,
    /// A repetition ended; `rel_ci` is the current CI half-width / mean, if known.
    Repetition {
        rep: u32,
        max_reps: u32,
        iops: f64,
        rel_ci: Option<f64>,
    },
    /// A point finished with this mean IOPS.
    PointDone { iops: f64 },
}
