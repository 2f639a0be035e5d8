//! Workload names, parameters, and the `name:key=value,...` spec syntax used on
//! the command line (e.g. `readrandom:cache=5%,threads=4`).

use crate::keys::KeyDist;
use crate::values::Compressibility;
use crate::{BenchError, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The YCSB core workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ycsb {
    A,
    B,
    C,
    D,
    E,
    F,
}

/// What one phase does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    FillSeq,
    FillRandom,
    Overwrite,
    /// Counter increments on uniformly random existing keys (`batch` per
    /// batch): blind upserts where the engine has them, else read-modify-write.
    IncRandom,
    ReadRandom,
    MultiReadRandom,
    ReadSeq,
    Scan,
    Ycsb(Ycsb),
    IiBench,
    /// `threads` readers doing point reads through consistent views (one
    /// view per `view_reads` reads) while one more thread overwrites
    /// uniformly random existing keys in batches of `batch` at full speed,
    /// as db_bench's readwhilewriting. Ops are the reads; the writer's
    /// writes are reported beside them.
    ReadWhileWriting,
    /// Write transactions of `txn_reads` point reads and `txn_writes`
    /// puts on existing keys of `dist`, committed one by one; ops are
    /// committed transactions, conflicts are counted.
    Txn,
}

impl Kind {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "fillseq" => Self::FillSeq,
            "fillrandom" => Self::FillRandom,
            "overwrite" => Self::Overwrite,
            "incrandom" => Self::IncRandom,
            "readrandom" => Self::ReadRandom,
            "multireadrandom" => Self::MultiReadRandom,
            "readseq" => Self::ReadSeq,
            "scan" => Self::Scan,
            "iibench" => Self::IiBench,
            "readwhilewriting" => Self::ReadWhileWriting,
            "txn" => Self::Txn,
            "ycsb-a" | "ycsba" => Self::Ycsb(Ycsb::A),
            "ycsb-b" | "ycsbb" => Self::Ycsb(Ycsb::B),
            "ycsb-c" | "ycsbc" => Self::Ycsb(Ycsb::C),
            "ycsb-d" | "ycsbd" => Self::Ycsb(Ycsb::D),
            "ycsb-e" | "ycsbe" => Self::Ycsb(Ycsb::E),
            "ycsb-f" | "ycsbf" => Self::Ycsb(Ycsb::F),
            _ => return None,
        })
    }

    pub fn name(&self) -> String {
        match self {
            Self::FillSeq => "fillseq".into(),
            Self::FillRandom => "fillrandom".into(),
            Self::Overwrite => "overwrite".into(),
            Self::IncRandom => "incrandom".into(),
            Self::ReadRandom => "readrandom".into(),
            Self::MultiReadRandom => "multireadrandom".into(),
            Self::ReadSeq => "readseq".into(),
            Self::Scan => "scan".into(),
            Self::IiBench => "iibench".into(),
            Self::ReadWhileWriting => "readwhilewriting".into(),
            Self::Txn => "txn".into(),
            Self::Ycsb(y) => format!("ycsb-{}", format!("{y:?}").to_lowercase()),
        }
    }
}

/// Cache for one phase: absolute bytes or a share of the Db's size on disk.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheSpec {
    Bytes(u64),
    PercentOfDb(f64),
}

impl CacheSpec {
    pub fn resolve(&self, db_bytes: u64) -> u64 {
        match *self {
            Self::Bytes(b) => b,
            // At least 1 MiB so engines with a minimum cache still open.
            Self::PercentOfDb(p) => ((db_bytes as f64 * p / 100.0) as u64).max(1 << 20),
        }
    }
}

/// Parameters of a phase; a spec's overrides are applied on a copy of the run's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Params {
    /// Keys loaded by fill phases (rows for iibench).
    pub keys: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub values: Compressibility,
    pub dist: KeyDist,
    pub threads: usize,
    /// Operations per phase (all threads together); None = `keys`.
    pub ops: Option<u64>,
    /// Stop after this long even if `ops` are not done.
    #[serde(with = "secs_opt")]
    pub duration: Option<Duration>,
    /// Writes per batch in fills, overwrite and iibench (rows per batch).
    pub batch: usize,
    /// Keys per multi-get.
    pub multiget: usize,
    /// Entries per scan (YCSB-E draws 1..=scan_len uniformly).
    pub scan_len: usize,
    pub cache: Option<CacheSpec>,
    pub seed: u64,
    /// Read the whole main table once before the timed ops (fills the caches).
    #[serde(default)]
    pub warm: bool,
    /// readwhilewriting: point reads per consistent view (at least 1).
    #[serde(default = "default_view_reads")]
    pub view_reads: usize,
    /// txn: point reads per transaction.
    #[serde(default = "default_txn_reads")]
    pub txn_reads: usize,
    /// txn: puts per transaction.
    #[serde(default = "default_txn_writes")]
    pub txn_writes: usize,
}

/// Reads per view of `readwhilewriting` unless `view_reads=` says otherwise.
pub const DEFAULT_VIEW_READS: usize = 16;
/// Reads and writes per transaction of `txn` unless `reads=`/`writes=` say otherwise.
pub const DEFAULT_TXN_READS: usize = 10;
pub const DEFAULT_TXN_WRITES: usize = 10;

fn default_view_reads() -> usize {
    DEFAULT_VIEW_READS
}
fn default_txn_reads() -> usize {
    DEFAULT_TXN_READS
}
fn default_txn_writes() -> usize {
    DEFAULT_TXN_WRITES
}

mod secs_opt {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.map(Duration::from_secs_f64))
    }
}

impl Default for Params {
    fn default() -> Self {
        Self {
            keys: 100_000,
            key_size: 16,
            value_size: 100,
            values: Compressibility::Random,
            dist: KeyDist::Uniform,
            threads: 1,
            ops: None,
            duration: None,
            batch: 1000,
            multiget: 16,
            scan_len: 100,
            cache: None,
            seed: 1,
            warm: false,
            view_reads: DEFAULT_VIEW_READS,
            txn_reads: DEFAULT_TXN_READS,
            txn_writes: DEFAULT_TXN_WRITES,
        }
    }
}

/// One phase as asked for: the kind and its parameters after overrides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// As typed, e.g. `readrandom:cache=5%`.
    pub text: String,
    pub kind: Kind,
    pub params: Params,
}

/// Parses a size like `64M`, `1G`, `4096`, `1.5K` (binary units).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => {
            let m = match s[i..].to_ascii_lowercase().trim_end_matches(['b', 'i']) {
                "" => 1u64,
                "k" => 1 << 10,
                "m" => 1 << 20,
                "g" => 1 << 30,
                "t" => 1 << 40,
                _ => return None,
            };
            (&s[..i], m)
        }
        None => (s, 1),
    };
    let v: f64 = num.parse().ok()?;
    (v >= 0.0).then_some((v * mult as f64) as u64)
}

/// Parses a count like `5M` or `100000` or `1e6` (decimal units).
pub fn parse_count(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1e3),
        'm' | 'M' => (&s[..s.len() - 1], 1e6),
        'g' | 'G' | 'b' | 'B' => (&s[..s.len() - 1], 1e9),
        _ => (s, 1.0),
    };
    let v: f64 = num.parse().ok()?;
    (v >= 0.0).then_some((v * mult).round() as u64)
}

/// Parses `30s`, `2m`, `1.5` (seconds).
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num.parse().ok()?;
    (v >= 0.0).then_some(Duration::from_secs_f64(v * mult))
}

pub fn parse_dist(s: &str) -> Option<KeyDist> {
    let (name, theta) = match s.split_once('=') {
        Some((n, t)) => (n, t.parse::<f64>().ok().filter(|t| *t > 0.0)?),
        None => (s, 0.99),
    };
    match name {
        "uniform" => Some(KeyDist::Uniform),
        "zipf" | "zipfian" => Some(KeyDist::Zipf { theta }),
        "latest" => Some(KeyDist::Latest { theta }),
        _ => None,
    }
}

impl Spec {
    /// Parses `name[:key=value,...]` on top of `base`. YCSB phases default to
    /// zipfian keys (D to latest) unless `dist=` says otherwise.
    pub fn parse(text: &str, base: &Params) -> Result<Self> {
        let bad = |what: String| BenchError::BadSpec {
            spec: text.into(),
            what,
        };
        let (name, opts) = text.split_once(':').unwrap_or((text, ""));
        let kind = Kind::parse(name.trim()).ok_or_else(|| {
            bad(format!("unknown workload {name:?}; known: fillseq fillrandom overwrite incrandom readrandom multireadrandom readseq scan ycsb-a..ycsb-f iibench readwhilewriting txn"))
        })?;
        let mut p = base.clone();
        if let Kind::Ycsb(y) = kind {
            p.dist = match y {
                Ycsb::D => KeyDist::Latest { theta: 0.99 },
                _ => KeyDist::Zipf { theta: 0.99 },
            };
        }
        for kv in opts.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| bad(format!("option {kv:?} is not key=value")))?;
            let num = |v: &str| parse_count(v).ok_or_else(|| bad(format!("{k}={v}: not a count")));
            match k {
                "ops" => p.ops = Some(num(v)?),
                "keys" => p.keys = num(v)?,
                "threads" => p.threads = num(v)?.max(1) as usize,
                "batch" => p.batch = num(v)?.max(1) as usize,
                "multiget" => p.multiget = num(v)?.max(1) as usize,
                "scan" | "scan_len" => p.scan_len = num(v)?.max(1) as usize,
                "value_size" => p.value_size = num(v)? as usize,
                "seed" => p.seed = num(v)?,
                "warm" => p.warm = num(v)? != 0,
                "view_reads" => {
                    p.view_reads = Some(num(v)?)
                        .filter(|n| *n >= 1)
                        .ok_or_else(|| bad(format!("view_reads={v}: at least 1 read per view")))?
                        as usize
                }
                "reads" => p.txn_reads = num(v)? as usize,
                "writes" => p.txn_writes = num(v)? as usize,
                "duration" => {
                    p.duration = Some(
                        parse_duration(v)
                            .ok_or_else(|| bad(format!("duration={v}: use e.g. 30s")))?,
                    )
                }
                "dist" => {
                    p.dist = parse_dist(v).ok_or_else(|| {
                        bad(format!("dist={v}: use uniform, zipf[=theta] or latest"))
                    })?
                }
                "values" => p.values = v.parse().map_err(bad)?,
                "cache" => {
                    p.cache = Some(if let Some(pct) = v.strip_suffix('%') {
                        CacheSpec::PercentOfDb(
                            pct.parse()
                                .ok()
                                .filter(|x: &f64| *x > 0.0)
                                .ok_or_else(|| bad(format!("cache={v}: not a percentage")))?,
                        )
                    } else {
                        CacheSpec::Bytes(
                            parse_size(v)
                                .ok_or_else(|| bad(format!("cache={v}: use e.g. 64M or 5%")))?,
                        )
                    })
                }
                _ => return Err(bad(format!("unknown option {k:?}"))),
            }
        }
        if kind == Kind::Txn && p.txn_reads + p.txn_writes == 0 {
            return Err(bad("a transaction needs at least one read or write".into()));
        }
        Ok(Self {
            text: text.into(),
            kind,
            params: p,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs_with_overrides() {
        let base = Params::default();
        let s = Spec::parse("readrandom:cache=5%,threads=4,ops=1M,duration=30s", &base).unwrap();
        assert_eq!(s.kind, Kind::ReadRandom);
        assert_eq!(s.params.threads, 4);
        assert_eq!(s.params.ops, Some(1_000_000));
        assert_eq!(s.params.duration, Some(Duration::from_secs(30)));
        assert_eq!(s.params.cache, Some(CacheSpec::PercentOfDb(5.0)));
        assert_eq!(CacheSpec::PercentOfDb(5.0).resolve(1000 << 20), 50 << 20);
        let y = Spec::parse("ycsb-d", &base).unwrap();
        assert_eq!(y.params.dist, KeyDist::Latest { theta: 0.99 });
        assert!(Spec::parse("readrandom:bogus=1", &base).is_err());
        assert!(Spec::parse("nosuch", &base).is_err());
        assert!(Spec::parse("scan:cache=lots", &base).is_err());
    }

    #[test]
    fn parses_readwhilewriting_and_txn() {
        let base = Params::default();
        let r = Spec::parse("readwhilewriting:threads=2,view_reads=4,batch=10", &base).unwrap();
        assert_eq!(r.kind, Kind::ReadWhileWriting);
        assert_eq!((r.params.threads, r.params.view_reads), (2, 4));
        assert_eq!(r.params.batch, 10);
        assert_eq!(r.kind.name(), "readwhilewriting");
        let d = Spec::parse("readwhilewriting", &base).unwrap();
        assert_eq!(d.params.view_reads, DEFAULT_VIEW_READS);
        let e = Spec::parse("readwhilewriting:view_reads=0", &base).unwrap_err();
        assert!(e.to_string().contains("at least 1 read per view"), "{e}");
        let t = Spec::parse("txn:reads=3,writes=7,threads=2", &base).unwrap();
        assert_eq!(t.kind, Kind::Txn);
        assert_eq!((t.params.txn_reads, t.params.txn_writes), (3, 7));
        assert_eq!(t.kind.name(), "txn");
        let d = Spec::parse("txn", &base).unwrap();
        assert_eq!((d.params.txn_reads, d.params.txn_writes), (10, 10));
        assert!(Spec::parse("txn:reads=0,writes=0", &base).is_err());
        assert!(Spec::parse("txn:writes=many", &base).is_err());
        // Results written before these parameters existed read the defaults.
        let mut old = serde_json::to_value(&base).unwrap();
        for k in ["view_reads", "txn_reads", "txn_writes"] {
            old.as_object_mut().unwrap().remove(k);
        }
        let back: Params = serde_json::from_value(old).unwrap();
        assert_eq!(back, base);
    }

    #[test]
    fn sizes_counts_durations() {
        assert_eq!(parse_size("64M"), Some(64 << 20));
        assert_eq!(parse_size("1GiB"), Some(1 << 30));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_count("5M"), Some(5_000_000));
        assert_eq!(parse_count("1.5k"), Some(1500));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_size("x"), None);
    }
}
