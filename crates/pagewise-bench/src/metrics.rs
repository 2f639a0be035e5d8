//! Per-thread recording of ops (latency histogram, per-second throughput),
//! merged into one summary when the phase ends.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// What one thread saw.
pub struct Recorder {
    start: Instant,
    hist: Histogram<u64>,
    per_sec: Vec<u64>,
    pub ops: u64,
    pub user_bytes: u64,
    pub found: u64,
    pub missing: u64,
    /// Writes done beside the measured ops (readwhilewriting's writer).
    pub side_writes: u64,
    /// Transaction commits refused by a conflict and run again.
    pub conflicts: u64,
}

impl Recorder {
    pub fn new(start: Instant) -> Self {
        Self {
            start,
            hist: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"),
            per_sec: Vec::new(),
            ops: 0,
            user_bytes: 0,
            found: 0,
            missing: 0,
            side_writes: 0,
            conflicts: 0,
        }
    }

    /// One operation (or batch) that began at `began` and covered `ops` ops.
    pub fn record(&mut self, began: Instant, ops: u64) -> Instant {
        let now = Instant::now();
        let ns = now.duration_since(began).as_nanos().max(1) as u64;
        self.hist.saturating_record(ns);
        let sec = now.duration_since(self.start).as_secs() as usize;
        if self.per_sec.len() <= sec {
            self.per_sec.resize(sec + 1, 0);
        }
        self.per_sec[sec] += ops;
        self.ops += ops;
        now
    }

    pub fn merge(&mut self, other: &Recorder) {
        self.hist.add(&other.hist).expect("same bounds");
        if self.per_sec.len() < other.per_sec.len() {
            self.per_sec.resize(other.per_sec.len(), 0);
        }
        for (a, b) in self.per_sec.iter_mut().zip(&other.per_sec) {
            *a += b;
        }
        self.ops += other.ops;
        self.user_bytes += other.user_bytes;
        self.found += other.found;
        self.missing += other.missing;
        self.side_writes += other.side_writes;
        self.conflicts += other.conflicts;
    }

    pub fn latency(&self, unit: String) -> Latency {
        let h = &self.hist;
        let q = |x: f64| h.value_at_quantile(x);
        // CDF points dense in the tail, where engines differ.
        let mut cdf = Vec::new();
        for x in [
            0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995,
            0.999, 0.9995, 0.9999, 1.0,
        ] {
            cdf.push((x, q(x)));
        }
        Latency {
            unit,
            count: h.len(),
            mean_ns: h.mean(),
            p50_ns: q(0.5),
            p90_ns: q(0.9),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            max_ns: h.max(),
            cdf,
        }
    }

    /// Ops in each whole second of the phase (the last, partial second dropped
    /// unless it is the only one).
    pub fn throughput(&self, elapsed: Duration) -> Vec<u64> {
        let whole = (elapsed.as_secs() as usize).max(1).min(self.per_sec.len());
        self.per_sec[..whole].to_vec()
    }
}

/// Latency summary of one phase, in nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// What one sample is: "op", or "batch of N" for batched writes.
    pub unit: String,
    pub count: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    /// (quantile, latency ns) points of the CDF.
    pub cdf: Vec<(f64, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_sums_counts_and_buckets() {
        let t0 = Instant::now();
        let mut a = Recorder::new(t0);
        let mut b = Recorder::new(t0);
        for _ in 0..10 {
            a.record(Instant::now(), 2);
        }
        b.record(Instant::now(), 5);
        b.side_writes = 7;
        b.conflicts = 2;
        a.side_writes = 1;
        a.merge(&b);
        assert_eq!(a.ops, 25);
        assert_eq!((a.side_writes, a.conflicts), (8, 2));
        assert_eq!(a.per_sec.iter().sum::<u64>(), 25);
        assert_eq!(a.latency("op".into()).count, 11);
    }
}
