//! Errors of the model crate: each says what is wrong, where, and what to do.

/// Everything that can go wrong turning user input into a model or advice.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("the input is empty: give a probe results JSON, a fio JSON output or a CSV with header block_size,iops")]
    Empty,
    #[error("invalid JSON: {0}")]
    Json(String),
    #[error("this JSON is not fio output (no \"jobs\" array); run fio with --output-format=json")]
    NotFio,
    #[error("fio job {job}: {what}")]
    FioJob { job: String, what: String },
    #[error("CSV header {found:?} lacks column {missing:?}; expected block_size,iops[,op,qd,threads,latency_us]")]
    CsvMissingColumn {
        found: String,
        missing: &'static str,
    },
    #[error(
        "CSV column {column:?} is unknown; accepted: block_size, iops, op, qd, threads, latency_us"
    )]
    CsvUnknownColumn { column: String },
    #[error("CSV line {line}: {what}")]
    CsvRow { line: usize, what: String },
    #[error("{what} must be positive, got {value}")]
    NotPositive { what: String, value: String },
    #[error("cannot parse {input:?} as {what}: {hint}")]
    Unit {
        input: String,
        what: &'static str,
        hint: &'static str,
    },
    #[error(
        "unknown operation {0:?}: use randread, randwrite, seqread (or read), seqwrite (or write), mixed or mixed:READPCT"
    )]
    UnknownOp(String),
    #[error("need measurements at two or more block sizes for the same operation and queue depth to fit T = S + B/W (got {0})")]
    TooFewPoints(String),
    #[error("no random-read measurements: the advisor needs randread IOPS at several block sizes")]
    NoReadCurve,
    #[error("invalid dataset: {0}")]
    Dataset(String),
    #[error("invalid mix {input:?}: {hint}")]
    Mix { input: String, hint: &'static str },
}
