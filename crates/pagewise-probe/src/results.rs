//! The results file: every measured point with its full parameters, plus the
//! device, host and tool that produced it.
//!
//! # JSON schema (`schema` = "pagewise-probe/1")
//!
//! The schema is stable: fields may be added, never renamed or removed, without
//! bumping the version in [`SCHEMA`]. Top level is [`ProbeResults`]:
//!
//! | field | type | meaning |
//! | --- | --- | --- |
//! | `schema` | string | "pagewise-probe/1" |
//! | `tool_version` | string | pagewise version |
//! | `host` | [`HostInfo`] | hostname, kernel, CPU, memory |
//! | `timestamp` | string | start time, RFC 3339 UTC |
//! | `unix_time` | integer | start time, seconds since 1970 |
//! | `elapsed_secs` | number | wall time of the whole sweep |
//! | `target` | [`TargetInfo`] | path, kind, size, direct, engine |
//! | `topology` | [`Topology`] | sysfs facts (block sizes, rotational, scheduler, model) |
//! | `spec` | [`SweepSpec`] | the exact request |
//! | `warnings` | [string] | e.g. O_DIRECT refused, file shrunk for free space |
//! | `points` | [[`PointResult`]] | one per combination, in [`SweepSpec::points`] order |
//! | `emulated` | [`DriveProfile`] | only when the sweep ran on an emulated drive (`--emulate`): its S, W, P |
//!
//! A [`PointResult`] holds `params` ([`PointSpec`]: `mode`, `bs`, `align`, `dist`,
//! `threads`, `qd`), `iops` (mean over repetitions), `mb_per_s` (10^6 B/s),
//! `latency_us` ([`Latency`], microseconds, submit to completion of each I/O,
//! over all repetitions), `repetitions` ([`Repetitions`]: per-repetition IOPS,
//! stddev, 95% CI), `cpu_us_per_io` (user+system CPU of the probe's I/O threads
//! per I/O), counts (`ops`, `bytes`, `reads`, `writes`, `fsyncs`) and
//! `measured_secs`.

use crate::spec::{PointSpec, SweepSpec};
use crate::stats::Repetitions;
use crate::target::TargetInfo;
use pagewise_io::topology::Topology;
use pagewise_io::DriveProfile;
use serde::{Deserialize, Serialize};

/// Version tag of the results schema.
pub const SCHEMA: &str = "pagewise-probe/1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeResults {
    pub schema: String,
    pub tool_version: String,
    pub host: HostInfo,
    pub timestamp: String,
    pub unix_time: u64,
    pub elapsed_secs: f64,
    pub target: TargetInfo,
    pub topology: Topology,
    pub spec: SweepSpec,
    pub warnings: Vec<String>,
    pub points: Vec<PointResult>,
    /// The emulated drive the sweep ran on, if any: then the figures describe
    /// that profile (as far as the real device under it is faster), not the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulated: Option<DriveProfile>,
}

/// Latency of single I/Os in microseconds (HDR histogram, 3 significant digits).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub mean: f64,
    pub stddev: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    pub params: PointSpec,
    /// "uring" or "sync".
    pub engine: String,
    pub direct: bool,
    /// I/Os actually in flight per thread: `qd` for uring, 1 for sync.
    pub effective_qd: usize,
    pub fsync_every: u64,
    /// Mean IOPS over the repetitions.
    pub iops: f64,
    /// Mean throughput, 10^6 bytes per second.
    pub mb_per_s: f64,
    pub latency_us: Latency,
    pub repetitions: Repetitions,
    /// CPU time (user + system) of the probe's I/O threads per completed I/O, µs.
    pub cpu_us_per_io: f64,
    /// Completed I/Os in the measured windows of all repetitions.
    pub ops: u64,
    pub bytes: u64,
    pub reads: u64,
    pub writes: u64,
    pub fsyncs: u64,
    /// Sum of the measured windows, seconds.
    pub measured_secs: f64,
}

/// The machine that ran the probe.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub memory_bytes: u64,
}

impl HostInfo {
    pub fn current() -> Self {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        let cpuinfo = read("/proc/cpuinfo");
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        let memory_bytes = read("/proc/meminfo")
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024);
        Self {
            hostname: read("/proc/sys/kernel/hostname"),
            kernel: read("/proc/sys/kernel/osrelease"),
            cpu_model,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes,
        }
    }
}

impl ProbeResults {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("results are plain data")
    }

    pub fn from_json(s: &str) -> serde_json::Result<Self> {
        serde_json::from_str(s)
    }

    /// One row per point; the header names the columns.
    pub fn to_csv(&self) -> String {
        let mut s = String::from(
            "mode,bs,align,dist,threads,qd,engine,direct,iops,mb_per_s,lat_mean_us,lat_p50_us,lat_p90_us,lat_p99_us,lat_p999_us,lat_max_us,reps,ci95_rel,cpu_us_per_io,ops,bytes\n",
        );
        for p in &self.points {
            let q = &p.params;
            let l = &p.latency_us;
            s.push_str(&format!(
                "{},{},{},{},{},{},{},{},{:.1},{:.3},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{},{},{:.3},{},{}\n",
                q.mode,
                q.bs,
                q.align,
                q.dist,
                q.threads,
                q.qd,
                p.engine,
                p.direct,
                p.iops,
                p.mb_per_s,
                l.mean,
                l.p50,
                l.p90,
                l.p99,
                l.p999,
                l.max,
                p.repetitions.count,
                p.repetitions.ci95_rel.map_or(String::new(), |r| format!("{r:.4}")),
                p.cpu_us_per_io,
                p.ops,
                p.bytes
            ));
        }
        s
    }
}

/// `secs` since the Unix epoch as RFC 3339 UTC ("2026-11-22T12:29:14Z").
pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil-from-days (proleptic Gregorian), shifted so years start in March.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_350_554), "2026-11-22T12:29:14Z");
    }
}
