//! The neutral measurement every input format (probe JSON, fio JSON, CSV) converts to.

use crate::ModelError;
use serde::{Deserialize, Serialize};
use std::fmt;

/// What the drive was asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    Read,
    Write,
    /// Reads and writes interleaved (fio randrw, probe `mixed`).
    Mixed,
}

/// Where the offsets go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    Random,
    Sequential,
}

/// One measured point: a workload and the throughput it achieved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    pub op: OpKind,
    pub pattern: Pattern,
    /// Bytes per I/O.
    pub block_size: u64,
    /// Outstanding I/Os per thread.
    pub qd: u32,
    pub threads: u32,
    /// Completed I/Os per second, all threads together.
    pub iops: f64,
    /// Mean completion latency in microseconds, when the source reports it.
    pub latency_us: Option<f64>,
    /// Half-width of the 95% confidence interval of `iops` over repetitions,
    /// relative to it (0.05 = +-5%), when the source reports it (the probe does).
    #[serde(default)]
    pub ci95_rel: Option<f64>,
}

impl Measurement {
    /// A QD1, single-thread measurement without latency.
    pub fn simple(op: OpKind, pattern: Pattern, block_size: u64, iops: f64) -> Self {
        Self {
            op,
            pattern,
            block_size,
            qd: 1,
            threads: 1,
            iops,
            latency_us: None,
            ci95_rel: None,
        }
    }

    /// I/Os in flight: queue depth per thread times threads.
    pub fn concurrency(&self) -> u32 {
        self.qd.saturating_mul(self.threads)
    }

    /// Seconds one I/O occupies one of the `concurrency` slots: by Little's law,
    /// concurrency / IOPS. At QD1 this is the mean latency.
    pub fn service_time(&self) -> f64 {
        self.concurrency() as f64 / self.iops
    }

    /// Bytes per second.
    pub fn bandwidth(&self) -> f64 {
        self.iops * self.block_size as f64
    }

    /// Rejects values no model can use (zero or negative IOPS, zero block size or QD).
    pub fn validate(&self) -> Result<(), ModelError> {
        let bad = |what: &str, value: String| {
            Err(ModelError::NotPositive {
                what: what.into(),
                value,
            })
        };
        if self.block_size == 0 {
            return bad("block_size", "0".into());
        }
        if !(self.iops.is_finite() && self.iops > 0.0) {
            return bad(
                &format!("iops at block size {}", self.block_size),
                self.iops.to_string(),
            );
        }
        if self.qd == 0 {
            return bad("qd", "0".into());
        }
        if self.threads == 0 {
            return bad("threads", "0".into());
        }
        if let Some(l) = self.latency_us {
            if !(l.is_finite() && l > 0.0) {
                return bad("latency_us", l.to_string());
            }
        }
        Ok(())
    }

    /// The workload name as the probe spells it (`randread`, `seqwrite`, `mixed`).
    pub fn workload(&self) -> &'static str {
        workload_name(self.op, self.pattern)
    }
}

/// `randread`, `seqwrite`, ...: the probe's spelling of an op and a pattern.
pub fn workload_name(op: OpKind, pattern: Pattern) -> &'static str {
    match (op, pattern) {
        (OpKind::Read, Pattern::Random) => "randread",
        (OpKind::Read, Pattern::Sequential) => "seqread",
        (OpKind::Write, Pattern::Random) => "randwrite",
        (OpKind::Write, Pattern::Sequential) => "seqwrite",
        (OpKind::Mixed, Pattern::Random) => "mixed",
        (OpKind::Mixed, Pattern::Sequential) => "seqmixed",
    }
}

/// Parses a workload name as the probe and fio spell it: `read` and `write`
/// alone are sequential (fio's `rw=read`), `randread`/`randwrite` random;
/// `mixed`, `mixed:70` and `randrw` are random mixed reads and writes.
pub fn parse_workload(s: &str) -> Result<(OpKind, Pattern), ModelError> {
    let t = s.trim().to_ascii_lowercase();
    let name = t.split(':').next().unwrap_or("");
    Ok(match name {
        "randread" => (OpKind::Read, Pattern::Random),
        "randwrite" => (OpKind::Write, Pattern::Random),
        "seqread" | "read" => (OpKind::Read, Pattern::Sequential),
        "seqwrite" | "write" => (OpKind::Write, Pattern::Sequential),
        "mixed" | "randrw" | "randmixed" => (OpKind::Mixed, Pattern::Random),
        "seqmixed" | "readwrite" | "rw" => (OpKind::Mixed, Pattern::Sequential),
        _ => return Err(ModelError::UnknownOp(s.into())),
    })
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Mixed => "mixed",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_time_is_littles_law() {
        let m = Measurement {
            qd: 8,
            threads: 2,
            ..Measurement::simple(OpKind::Read, Pattern::Random, 4096, 16_000.0)
        };
        assert_eq!(m.concurrency(), 16);
        assert!((m.service_time() - 0.001).abs() < 1e-12);
    }

    #[test]
    fn workload_names_round_trip() {
        for op in [OpKind::Read, OpKind::Write, OpKind::Mixed] {
            for p in [Pattern::Random, Pattern::Sequential] {
                assert_eq!(parse_workload(workload_name(op, p)).unwrap(), (op, p));
            }
        }
        assert!(parse_workload("trim").is_err());
    }

    #[test]
    fn validation_rejects_zero_and_negative() {
        let ok = Measurement::simple(OpKind::Read, Pattern::Random, 4096, 100.0);
        assert!(ok.validate().is_ok());
        assert!(Measurement {
            iops: 0.0,
            ..ok.clone()
        }
        .validate()
        .is_err());
        assert!(Measurement {
            iops: -5.0,
            ..ok.clone()
        }
        .validate()
        .is_err());
        assert!(Measurement {
            block_size: 0,
            ..ok.clone()
        }
        .validate()
        .is_err());
        assert!(Measurement { qd: 0, ..ok }.validate().is_err());
    }
}
