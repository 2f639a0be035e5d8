//! What is stored and how it is queried: the advisor's inputs besides the drive.

use crate::units::parse_percent;
use crate::ModelError;
use serde::{Deserialize, Serialize};

/// The dataset and the machine's cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dataset {
    pub rows: u64,
    pub key_bytes: u64,
    /// 0: leaves hold entries like internal nodes (key + pointer to the row),
    /// the back-of-envelope model of the RethinkDB post.
    pub value_bytes: u64,
    pub pointer_bytes: u64,
    /// Internal-node entry size; key + pointer when `None`.
    pub entry_bytes: Option<u64>,
    /// Average node fill: ln 2 ~ 0.69 after random inserts (Yao, 1978).
    pub fill: f64,
    pub cache_bytes: u64,
    /// Records per range query.
    pub range_records: u64,
}

impl Default for Dataset {
    fn default() -> Self {
        Self {
            rows: 1_000_000_000,
            key_bytes: 16,
            value_bytes: 0,
            pointer_bytes: 8,
            entry_bytes: None,
            fill: std::f64::consts::LN_2,
            cache_bytes: 0,
            range_records: 100,
        }
    }
}

impl Dataset {
    pub fn internal_entry(&self) -> u64 {
        self.entry_bytes
            .unwrap_or(self.key_bytes + self.pointer_bytes)
    }

    pub fn leaf_entry(&self) -> u64 {
        if self.value_bytes > 0 {
            self.key_bytes + self.value_bytes
        } else {
            self.internal_entry()
        }
    }

    pub fn validate(&self) -> Result<(), ModelError> {
        let bad = |s: &str| Err(ModelError::Dataset(s.into()));
        if self.rows < 1 {
            return bad("--rows must be at least 1");
        }
        if self.internal_entry() == 0 {
            return bad("entry size is 0: give --key-bytes and --pointer-bytes, or --entry-bytes");
        }
        if !(self.fill > 0.0 && self.fill <= 1.0) {
            return bad("--fill must be in (0, 1], e.g. 0.69 for random inserts");
        }
        if self.range_records < 1 {
            return bad("--range must be at least 1 record");
        }
        Ok(())
    }
}

/// Relative weights of the operations in the workload (normalised to sum 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Mix {
    pub point: f64,
    pub range: f64,
    pub insert: f64,
}

impl Default for Mix {
    fn default() -> Self {
        Self {
            point: 1.0,
            range: 0.0,
            insert: 0.0,
        }
    }
}

impl Mix {
    /// `point=0.8,range=0.1,insert=0.1` (or percentages; normalised).
    pub fn parse(s: &str) -> Result<Self, ModelError> {
        let err = |hint| ModelError::Mix {
            input: s.into(),
            hint,
        };
        let mut m = Mix {
            point: 0.0,
            range: 0.0,
            insert: 0.0,
        };
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| err("write op=weight pairs, e.g. point=0.8,range=0.1,insert=0.1"))?;
            let w = if v.trim().ends_with('%') {
                parse_percent(v).map_err(|_| err("weights are numbers >= 0"))?
            } else {
                v.trim()
                    .parse::<f64>()
                    .map_err(|_| err("weights are numbers >= 0"))?
            };
            if !(w.is_finite() && w >= 0.0) {
                return Err(err("weights are numbers >= 0"));
            }
            match k.trim() {
                "point" | "get" => m.point += w,
                "range" | "scan" => m.range += w,
                "insert" | "put" | "write" => m.insert += w,
                _ => return Err(err("operations are point, range and insert")),
            }
        }
        let total = m.point + m.range + m.insert;
        if total <= 0.0 {
            return Err(err("at least one weight must be positive"));
        }
        Ok(Mix {
            point: m.point / total,
            range: m.range / total,
            insert: m.insert / total,
        })
    }

    /// `point 80%, range 10%, insert 10%`, leaving out zero weights.
    pub fn describe(&self) -> String {
        [
            ("point", self.point),
            ("range", self.range),
            ("insert", self.insert),
        ]
        .iter()
        .filter(|(_, w)| *w > 0.0)
        .map(|(k, w)| format!("{k} {:.0}%", w * 100.0))
        .collect::<Vec<_>>()
        .join(", ")
    }
}
