//! The engine's learned costs, kept in the tune directory
//! (`DIR/engine-costs.json`) so that later runs, `--verify off` included,
//! advise with them. Written after every verification; read back only for
//! the same drive (the real one, or the same emulated profile).

use anyhow::Context;
use pagewise_model::advise::correct::Correction;
use pagewise_model::advise::BEpsilonCosts;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const FILE: &str = "engine-costs.json";
/// Format version of [`FILE`].
const VERSION: u32 = 1;

/// The file's contents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineCosts {
    pub version: u32,
    /// "real drive" or the emulated profile's banner.
    pub drive: String,
    /// Fitted on the calibration Dbs (the constants advice uses).
    pub calibrated: Correction,
    /// Fitted on the verified sizes themselves (in-sample), when known.
    pub verified: Option<Correction>,
    pub page_sizes: Vec<u64>,
    pub unix_secs: u64,
    /// The B-epsilon tree's, when node sizes were verified (absent in
    /// files written before they were kept).
    #[serde(default)]
    pub bepsilon: Option<KeptNodes>,
}

/// The B-epsilon costs one verification fitted, and where they hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeptNodes {
    /// Fitted on every verified node size (in sample).
    pub costs: BEpsilonCosts,
    /// The node sizes measured (the range the costs may rank within).
    pub node_sizes: Vec<u64>,
    /// The median of the records their loads inserted: the dataset size
    /// the costs rank node sizes at (the verification's scale).
    pub rows: u64,
}

impl EngineCosts {
    pub fn new(drive: String, calibrated: Correction, page_sizes: Vec<u64>) -> Self {
        let unix_secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Self {
            version: VERSION,
            drive,
            calibrated,
            verified: None,
            page_sizes,
            unix_secs,
            bepsilon: None,
        }
    }
}

pub fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// The costs learned earlier in `dir` for `drive`; `None` (with the reason
/// in `notes`) when there are none, they are for another drive, or the file
/// is unreadable.
pub fn load(dir: &Path, drive: &str, notes: &mut Vec<String>) -> Option<EngineCosts> {
    let p = path(dir);
    let text = std::fs::read_to_string(&p).ok()?;
    match serde_json::from_str::<EngineCosts>(&text) {
        Ok(c) if c.version == VERSION && c.drive == drive => Some(c),
        Ok(c) => {
            notes.push(format!(
                "{} was learned on another drive ({}), not used",
                p.display(),
                c.drive
            ));
            None
        }
        Err(e) => {
            notes.push(format!(
                "{} is unreadable ({e}), not used: delete it, the next verification rewrites it",
                p.display()
            ));
            None
        }
    }
}

pub fn save(dir: &Path, c: &EngineCosts) -> anyhow::Result<()> {
    let p = path(dir);
    let tmp = dir.join(format!("{FILE}.tmp"));
    std::fs::write(&tmp, serde_json::to_string_pretty(c)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &p).with_context(|| format!("cannot write {}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_drive_check() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = EngineCosts::new(
            "real drive".into(),
            Correction {
                cpu_level_s: 1e-6,
                ..Correction::NONE
            },
            vec![4096, 16384],
        );
        c.bepsilon = Some(KeptNodes {
            costs: BEpsilonCosts {
                range_record_s: 2e-6,
                ..BEpsilonCosts::NONE
            },
            node_sizes: vec![32 << 10, 64 << 10],
            rows: 250_000,
        });
        save(dir.path(), &c).unwrap();
        let mut notes = Vec::new();
        assert_eq!(load(dir.path(), "real drive", &mut notes), Some(c.clone()));
        assert!(notes.is_empty());
        assert_eq!(load(dir.path(), "emulated", &mut notes), None);
        assert_eq!(notes.len(), 1, "{notes:?}");
        std::fs::write(path(dir.path()), "{").unwrap();
        assert_eq!(load(dir.path(), "real drive", &mut notes), None);
        assert!(notes[1].contains("unreadable"), "{notes:?}");
        // A file from before the B-epsilon costs were kept still loads.
        let mut old: serde_json::Value = serde_json::to_value(&c).unwrap();
        old.as_object_mut().unwrap().remove("bepsilon");
        std::fs::write(path(dir.path()), old.to_string()).unwrap();
        let back = load(dir.path(), "real drive", &mut notes).unwrap();
        assert_eq!(back.bepsilon, None);
        assert_eq!(back.calibrated, c.calibrated);
    }
}
