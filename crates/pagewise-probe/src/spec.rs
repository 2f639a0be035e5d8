//! What to measure: the sweep specification and the points it expands to.
//!
//! A [`SweepSpec`] lists values for each workload axis; [`SweepSpec::points`]
//! is their cartesian product. Both serialize to JSON and are embedded in the
//! results file, so a result always carries the exact request that produced it.

use crate::dist::Dist;
use crate::ProbeError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Smallest and largest block size the probe accepts.
pub const MIN_BS: u64 = 512;
pub const MAX_BS: u64 = 4 << 20;

/// Access pattern of one point. JSON: `"randread"`, `"randwrite"`, `"seqread"`,
/// `"seqwrite"`, or `"mixed:70"` (70% reads, 30% writes, random offsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Mode {
    RandRead,
    RandWrite,
    SeqRead,
    SeqWrite,
    /// Random offsets; each I/O is a read with probability `read_pct`/100.
    Mixed {
        read_pct: u8,
    },
}

impl Mode {
    /// True if this mode writes to the target.
    pub fn writes(self) -> bool {
        !matches!(self, Mode::RandRead | Mode::SeqRead) && self != Mode::Mixed { read_pct: 100 }
    }

    pub fn is_sequential(self) -> bool {
        matches!(self, Mode::SeqRead | Mode::SeqWrite)
    }

    /// Fraction of I/Os that are reads, in percent.
    pub fn read_pct(self) -> u8 {
        match self {
            Mode::RandRead | Mode::SeqRead => 100,
            Mode::RandWrite | Mode::SeqWrite => 0,
            Mode::Mixed { read_pct } => read_pct,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mode::RandRead => f.write_str("randread"),
            Mode::RandWrite => f.write_str("randwrite"),
            Mode::SeqRead => f.write_str("seqread"),
            Mode::SeqWrite => f.write_str("seqwrite"),
            Mode::Mixed { read_pct } => write!(f, "mixed:{read_pct}"),
        }
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase();
        Ok(match s.as_str() {
            "randread" => Mode::RandRead,
            "randwrite" => Mode::RandWrite,
            "seqread" | "read" => Mode::SeqRead,
            "seqwrite" | "write" => Mode::SeqWrite,
            _ => {
                let pct = s.strip_prefix("mixed:").ok_or_else(|| {
                    format!("unknown mode '{s}': use randread, randwrite, seqread, seqwrite or mixed:READPCT (e.g. mixed:70)")
                })?;
                match pct.parse::<u8>() {
                    Ok(p) if p <= 100 => Mode::Mixed { read_pct: p },
                    _ => {
                        return Err(format!(
                        "mixed:{pct}: the read percentage must be an integer 0..100, e.g. mixed:70"
                    ))
                    }
                }
            }
        })
    }
}

impl From<Mode> for String {
    fn from(m: Mode) -> String {
        m.to_string()
    }
}

impl TryFrom<String> for Mode {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

/// I/O engine. JSON: `"uring"` or `"sync"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// io_uring: `qd` I/Os in flight per thread from one ring.
    Uring,
    /// pread/pwrite: one I/O at a time per thread whatever `qd` says.
    Sync,
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Engine::Uring => "uring",
            Engine::Sync => "sync",
        })
    }
}

impl FromStr for Engine {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "uring" | "io_uring" => Ok(Engine::Uring),
            "sync" | "psync" => Ok(Engine::Sync),
            o => Err(format!("unknown engine '{o}': use uring or sync")),
        }
    }
}

/// How long one repetition of a point runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// Wall-clock seconds of measurement per repetition.
    Seconds(f64),
    /// Completed I/Os per repetition, split evenly over the threads.
    Ops(u64),
}

/// A full sweep request. Every list is one axis; the sweep is their product.
///
/// JSON example (all fields; `serde(default)` fills missing ones):
/// ```json
/// {"modes":["randread"],"block_sizes":[4096],"alignments":[],"distributions":["uniform"],
///  "threads":[1],"queue_depths":[1],"engine":"uring","direct":true,"fsync_every":0,
///  "warmup_secs":1.0,"limit":{"seconds":2.0},"tolerance":0.05,"min_reps":2,"max_reps":5,
///  "file_size":1073741824,"allow_write":false,"destroy_data":false,"seed":1}
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SweepSpec {
    pub modes: Vec<Mode>,
    /// Bytes per I/O, MIN_BS..=MAX_BS.
    pub block_sizes: Vec<u64>,
    /// Offset alignment ("stride") of random I/Os in bytes. Empty: each point
    /// uses its block size. Ignored by sequential modes.
    pub alignments: Vec<u64>,
    pub distributions: Vec<Dist>,
    pub threads: Vec<usize>,
    /// I/Os in flight per thread.
    pub queue_depths: Vec<usize>,
    pub engine: Engine,
    /// O_DIRECT (bypass the page cache). Falls back to buffered, with a
    /// warning in the results, only where the filesystem refuses O_DIRECT.
    pub direct: bool,
    /// fdatasync after every N writes per thread; 0 = never.
    pub fsync_every: u64,
    /// Seconds of unmeasured I/O before the first repetition of each point.
    pub warmup_secs: f64,
    pub limit: Limit,
    /// Stop repeating when the 95% confidence interval half-width of the
    /// IOPS mean is at most this fraction of the mean.
    pub tolerance: f64,
    pub min_reps: u32,
    pub max_reps: u32,
    /// Size in bytes of the test file the probe creates in a directory target
    /// (reduced when free space is short). Ignored for existing files and devices.
    pub file_size: u64,
    /// Permits write modes on an existing file (its contents are destroyed).
    pub allow_write: bool,
    /// Permits write modes on an unmounted block device (its contents are destroyed).
    pub destroy_data: bool,
    /// Seed of every random choice (offsets, mix, file contents).
    pub seed: u64,
}

impl Default for SweepSpec {
    fn default() -> Self {
        Self {
            modes: vec![Mode::RandRead],
            block_sizes: (9..=20).map(|k| 1u64 << k).collect(),
            alignments: Vec::new(),
            distributions: vec![Dist::Uniform],
            threads: vec![1],
            queue_depths: vec![1],
            engine: Engine::Uring,
            direct: true,
            fsync_every: 0,
            warmup_secs: 1.0,
            limit: Limit::Seconds(2.0),
            tolerance: 0.05,
            min_reps: 2,
            max_reps: 5,
            file_size: 1 << 30,
            allow_write: false,
            destroy_data: false,
            seed: 0x5eed_0f9a_9e00,
        }
    }
}

/// One combination of the axes: what a single measurement runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PointSpec {
    pub mode: Mode,
    /// Bytes per I/O.
    pub bs: u64,
    /// Offset alignment in bytes (random modes); equals `bs` for sequential modes.
    pub align: u64,
    pub dist: Dist,
    pub threads: usize,
    pub qd: usize,
}

impl PointSpec {
    /// Short label for progress and tables, e.g. "randread 4 KiB @4 KiB uniform t1 qd32".
    pub fn label(&self) -> String {
        format!(
            "{} {} @{} {} t{} qd{}",
            self.mode,
            fmt_size(self.bs),
            fmt_size(self.align),
            self.dist,
            self.threads,
            self.qd
        )
    }
}

impl SweepSpec {
    /// The cartesian product of the axes, in a stable order
    /// (mode, distribution, threads, qd, block size, alignment).
    pub fn points(&self) -> Vec<PointSpec> {
        let mut out = Vec::new();
        for &mode in &self.modes {
            for &dist in &self.distributions {
                for &threads in &self.threads {
                    for &qd in &self.queue_depths {
                        for &bs in &self.block_sizes {
                            let aligns = if self.alignments.is_empty() || mode.is_sequential() {
                                vec![bs]
                            } else {
                                self.alignments.clone()
                            };
                            for align in aligns {
                                out.push(PointSpec {
                                    mode,
                                    bs,
                                    align,
                                    dist,
                                    threads,
                                    qd,
                                });
                            }
                        }
                    }
                }
            }
        }
        out
    }

    pub fn writes(&self) -> bool {
        self.modes.iter().any(|m| m.writes())
    }

    pub fn max_bs(&self) -> u64 {
        self.block_sizes.iter().copied().max().unwrap_or(0)
    }

    /// Checks what can be checked without the target.
    pub fn validate(&self) -> Result<(), ProbeError> {
        let bad = |s: String| Err(ProbeError::InvalidSpec(s));
        if self.modes.is_empty() || self.block_sizes.is_empty() || self.distributions.is_empty() {
            return bad("the sweep is empty: give at least one --mode, --bs and --dist".into());
        }
        if self.threads.is_empty() || self.queue_depths.is_empty() {
            return bad("give at least one --threads and one --qd value".into());
        }
        for &bs in &self.block_sizes {
            if !(MIN_BS..=MAX_BS).contains(&bs) {
                return bad(format!("block size {} is out of range: use 512 B..4 MiB (e.g. --bs 4k or --bs 512..1m)", fmt_size(bs)));
            }
        }
        if let Some(&a) = self.alignments.iter().find(|&&a| a == 0) {
            return bad(format!(
                "alignment {a} is invalid: use a positive size such as 4k"
            ));
        }
        if self
            .threads
            .iter()
            .chain(&self.queue_depths)
            .any(|&n| n == 0 || n > 4096)
        {
            return bad("--threads and --qd must be 1..4096".into());
        }
        if !(self.tolerance > 0.0 && self.tolerance < 1.0) {
            return bad(format!(
                "tolerance {} is invalid: give a fraction such as 0.05 (5%)",
                self.tolerance
            ));
        }
        if self.max_reps == 0 || self.min_reps > self.max_reps {
            return bad(format!(
                "repetitions: need 1 <= min ({}) <= max ({})",
                self.min_reps, self.max_reps
            ));
        }
        match self.limit {
            Limit::Seconds(s) if !(s > 0.0 && s.is_finite()) => {
                return bad("--duration must be positive, e.g. 2s".into())
            }
            Limit::Ops(0) => return bad("--ops must be positive".into()),
            _ => {}
        }
        if !(self.warmup_secs >= 0.0 && self.warmup_secs.is_finite()) {
            return bad("--warmup must be zero or positive".into());
        }
        for d in &self.distributions {
            d.validate().map_err(ProbeError::InvalidSpec)?;
        }
        Ok(())
    }

    /// Checks the block sizes and alignments against the device's logical block
    /// size, as O_DIRECT requires them to be multiples of it.
    pub fn validate_for_device(&self, lbs: u64, device: &str) -> Result<(), ProbeError> {
        if !self.direct || lbs <= 1 {
            return Ok(());
        }
        if let Some(&bs) = self.block_sizes.iter().find(|&&bs| bs % lbs != 0) {
            return Err(ProbeError::BlockSizeNotMultiple {
                bs,
                lbs,
                device: device.into(),
            });
        }
        if let Some(&align) = self.alignments.iter().find(|&&a| a < lbs || a % lbs != 0) {
            return Err(ProbeError::AlignmentTooSmall {
                align,
                lbs,
                device: device.into(),
            });
        }
        Ok(())
    }
}

/// "4 KiB", "512 B", "1 MiB" for exact binary sizes; bytes otherwise.
pub fn fmt_size(v: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (unit, name) in UNITS {
        if v >= unit && v.is_multiple_of(unit) {
            return format!("{} {name}", v / unit);
        }
    }
    if v >= 1 << 20 {
        return format!("{:.1} MiB", v as f64 / (1 << 20) as f64);
    }
    format!("{v} B")
}

/// Parses "4096", "4k", "4KiB", "1m", "1g" (binary multiples).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t
        .strip_suffix("ib")
        .or_else(|| t.strip_suffix('b'))
        .unwrap_or(&t);
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        Some('t') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let n: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a size: use bytes or a k/m/g suffix, e.g. 4k or 1m"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("size '{s}' is too large"))
}

/// Parses a list of sizes or power-of-two ranges: "512,4k,64k", "4k..1m",
/// "512..4k,1m" (a range includes both ends and every power of two between).
pub fn parse_size_list(s: &str) -> Result<Vec<u64>, String> {
    parse_list(s, parse_size)
}

/// Like [`parse_size_list`] for plain counts: "1,2,4" or "1..32".
pub fn parse_count_list(s: &str) -> Result<Vec<u64>, String> {
    parse_list(s, |x| {
        x.trim()
            .parse::<u64>()
            .map_err(|_| format!("'{x}' is not a count: use integers like 1,4,32 or a range 1..32"))
    })
}

fn parse_list(s: &str, one: impl Fn(&str) -> Result<u64, String>) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.trim().is_empty()) {
        if let Some((a, b)) = part.split_once("..") {
            let (lo, hi) = (one(a)?, one(b)?);
            if lo == 0 || !lo.is_power_of_two() || !hi.is_power_of_two() || lo > hi {
                return Err(format!(
                    "range '{part}': both ends must be powers of two, low..high (e.g. 4k..1m)"
                ));
            }
            let mut v = lo;
            while v <= hi {
                out.push(v);
                v *= 2;
            }
        } else {
            out.push(one(part)?);
        }
    }
    if out.is_empty() {
        return Err(format!("'{s}' is an empty list"));
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|v| seen.insert(*v));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_ranges() {
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("512").unwrap(), 512);
        assert!(parse_size("4x").is_err());
        assert_eq!(
            parse_size_list("512,4k,64k").unwrap(),
            vec![512, 4096, 65536]
        );
        assert_eq!(
            parse_size_list("4k..32k").unwrap(),
            vec![4096, 8192, 16384, 32768]
        );
        assert_eq!(
            parse_size_list("512..1k,4k,4k").unwrap(),
            vec![512, 1024, 4096]
        );
        assert!(parse_size_list("3k..8k").is_err());
        assert!(parse_size_list("8k..4k").is_err());
        assert_eq!(parse_count_list("1..8").unwrap(), vec![1, 2, 4, 8]);
    }

    #[test]
    fn modes_roundtrip() {
        for s in ["randread", "randwrite", "seqread", "seqwrite", "mixed:70"] {
            let m: Mode = s.parse().unwrap();
            assert_eq!(m.to_string(), s);
            assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{s}\""));
        }
        assert!("mixed:101".parse::<Mode>().is_err());
        assert!(Mode::Mixed { read_pct: 70 }.writes());
        assert!(!Mode::Mixed { read_pct: 100 }.writes());
        assert!(!Mode::SeqRead.writes());
    }

    #[test]
    fn product_of_axes() {
        let spec = SweepSpec {
            modes: vec![Mode::RandRead, Mode::SeqRead],
            block_sizes: vec![512, 4096],
            alignments: vec![512, 1024, 4096],
            queue_depths: vec![1, 32],
            ..Default::default()
        };
        let pts = spec.points();
        // randread: 2 bs x 3 align x 2 qd; seqread ignores alignments: 2 bs x 2 qd.
        assert_eq!(pts.len(), 12 + 4);
        assert!(pts
            .iter()
            .filter(|p| p.mode == Mode::SeqRead)
            .all(|p| p.align == p.bs));
    }

    #[test]
    fn spec_json_roundtrip_and_defaults() {
        let spec = SweepSpec::default();
        let json = serde_json::to_string(&spec).unwrap();
        let back: SweepSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(back, spec);
        let partial: SweepSpec =
            serde_json::from_str(r#"{"block_sizes":[4096],"limit":{"ops":100}}"#).unwrap();
        assert_eq!(partial.block_sizes, vec![4096]);
        assert_eq!(partial.limit, Limit::Ops(100));
        assert_eq!(partial.modes, vec![Mode::RandRead]);
    }

    #[test]
    fn device_checks() {
        let spec = SweepSpec {
            block_sizes: vec![4096, 6144],
            ..Default::default()
        };
        spec.validate().unwrap();
        assert!(matches!(
            spec.validate_for_device(4096, "vda"),
            Err(ProbeError::BlockSizeNotMultiple { bs: 6144, .. })
        ));
        let spec = SweepSpec {
            block_sizes: vec![4096],
            alignments: vec![512],
            ..Default::default()
        };
        assert!(matches!(
            spec.validate_for_device(4096, "vda"),
            Err(ProbeError::AlignmentTooSmall { align: 512, .. })
        ));
        spec.validate_for_device(512, "vda").unwrap();
        let buffered = SweepSpec {
            direct: false,
            ..spec
        };
        buffered.validate_for_device(4096, "vda").unwrap();
    }
}
