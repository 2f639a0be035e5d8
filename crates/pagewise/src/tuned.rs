//! The configuration `pagewise tune` chose, as a small JSON file the engine
//! reads: `DIR/tuned.json` ([`TUNED_FILE`]). Schema (version [`TUNED_SCHEMA`]):
//!
//! ```json
//! {
//!   "schema": 1,
//!   "tree_kind": "btree",          // or "bepsilon"
//!   "page_size": 8192,             // B+tree page size, power of two, 512..65536
//!   "bepsilon": {                  // present exactly when tree_kind is "bepsilon"
//!     "node_bytes": 1048576, "leaf_bytes": 524288,
//!     "basement_bytes": 16384, "fanout": 8
//!   },
//!   "cache_bytes": 1073741824,     // the cache tune was told about (optional)
//!   "source": { "drive": "real drive", "dir": "/data/pw", "mix": "...",
//!               "created_unix_secs": 1764300000, "reason": "..." }
//! }
//! ```
//!
//! [`Options::from_tuned`] and [`Tuned::load`] read it; a bad file is an
//! [`Error::Tuned`] naming the file and the field, never a panic.
//! `pagewise db create --tuned DIR` keeps a copy beside the Db
//! (`PATH-tuned.json`, [`sidecar_path`]) so `pagewise db stats` can say where
//! the Db's settings came from without a change to the Db's file format.

use crate::error::{Error, Result};
use crate::index::bepsilon::BEpsilonOptions;
use crate::index::TreeKind;
use crate::options::{Options, MAX_PAGE_SIZE, MIN_PAGE_SIZE};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file `pagewise tune` writes in its directory.
pub const TUNED_FILE: &str = "tuned.json";
/// The schema version this build reads and writes.
pub const TUNED_SCHEMA: u32 = 1;

/// Which tree kind the tuned configuration creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TunedKind {
    Btree,
    Bepsilon,
}

/// B-epsilon node settings (see [`BEpsilonOptions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TunedBEpsilon {
    pub node_bytes: u32,
    pub leaf_bytes: Option<u32>,
    pub basement_bytes: u32,
    pub fanout: u16,
}

/// Where the configuration came from (shown by `pagewise db stats`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct TunedSource {
    /// "real drive" or the emulated profile's banner.
    pub drive: String,
    /// The directory tune ran in.
    pub dir: String,
    /// The described workload mix, e.g. "80% point gets, 10% ranges, 10% inserts".
    pub mix: String,
    pub created_unix_secs: u64,
    /// The headline's one-line reason.
    pub reason: String,
}

/// The contents of `tuned.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tuned {
    pub schema: u32,
    pub tree_kind: TunedKind,
    pub page_size: usize,
    pub bepsilon: Option<TunedBEpsilon>,
    pub cache_bytes: Option<usize>,
    pub source: TunedSource,
}

/// `PATH-tuned.json`: the copy of the tuned file kept beside Db `path`.
pub fn sidecar_path(db_path: &Path) -> PathBuf {
    let mut s = db_path.as_os_str().to_owned();
    s.push("-tuned.json");
    PathBuf::from(s)
}

fn bad(path: &Path, why: impl Into<String>) -> Error {
    Error::Tuned {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

impl Tuned {
    /// Reads and validates `dir/tuned.json`.
    pub fn load(dir: &Path) -> Result<Tuned> {
        Self::read_file(&dir.join(TUNED_FILE))
    }

    /// Reads and validates one tuned file at `path`.
    pub fn read_file(path: &Path) -> Result<Tuned> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            bad(
                path,
                format!("cannot read it ({e}); run `pagewise tune DIR` first"),
            )
        })?;
        let t: Tuned =
            serde_json::from_str(&text).map_err(|e| bad(path, format!("not a tuned file: {e}")))?;
        t.validate().map_err(|why| bad(path, why))?;
        Ok(t)
    }

    /// The copy beside Db `db_path`, if there is one.
    pub fn beside(db_path: &Path) -> Result<Option<Tuned>> {
        let p = sidecar_path(db_path);
        if !p.exists() {
            return Ok(None);
        }
        Self::read_file(&p).map(Some)
    }

    /// Writes `dir/tuned.json` (validated first).
    pub fn save(&self, dir: &Path) -> Result<PathBuf> {
        let path = dir.join(TUNED_FILE);
        self.write_file(&path)?;
        Ok(path)
    }

    /// Writes the copy beside Db `db_path`.
    pub fn save_beside(&self, db_path: &Path) -> Result<PathBuf> {
        let path = sidecar_path(db_path);
        self.write_file(&path)?;
        Ok(path)
    }

    fn write_file(&self, path: &Path) -> Result<()> {
        self.validate().map_err(|why| bad(path, why))?;
        let text = serde_json::to_string_pretty(self).expect("a Tuned serialises");
        std::fs::write(path, text + "\n")
            .map_err(|e| bad(path, format!("cannot write it ({e}); check permissions")))
    }

    /// Checks the schema version, the page size and the B-epsilon settings.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.schema != TUNED_SCHEMA {
            return Err(format!(
                "schema {} is not {TUNED_SCHEMA}, the version this build reads; run `pagewise tune` again",
                self.schema
            ));
        }
        let ps = self.page_size;
        if !ps.is_power_of_two() || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&ps) {
            return Err(format!(
                "page_size {ps} must be a power of two between {MIN_PAGE_SIZE} and {MAX_PAGE_SIZE}"
            ));
        }
        match (self.tree_kind, &self.bepsilon) {
            (TunedKind::Bepsilon, None) => {
                return Err("tree_kind is \"bepsilon\" but the \"bepsilon\" settings are missing".into())
            }
            (TunedKind::Btree, Some(_)) => {
                return Err("tree_kind is \"btree\" but \"bepsilon\" settings are given; remove them or set tree_kind to \"bepsilon\"".into())
            }
            _ => {}
        }
        if let TreeKind::BEpsilon(o) = self.kind() {
            o.validate().map_err(|e| format!("bepsilon: {e}"))?;
        }
        Ok(())
    }

    /// The tree kind (with its options) the configuration creates.
    pub fn kind(&self) -> TreeKind {
        match (self.tree_kind, self.bepsilon) {
            (TunedKind::Bepsilon, Some(b)) => {
                let mut o = BEpsilonOptions::default()
                    .node_bytes(b.node_bytes)
                    .basement_bytes(b.basement_bytes)
                    .fanout(b.fanout);
                if let Some(l) = b.leaf_bytes {
                    o = o.leaf_bytes(l);
                }
                TreeKind::BEpsilon(o)
            }
            _ => TreeKind::BTree,
        }
    }

    /// `base` with the tuned page size and cache.
    pub fn apply(&self, base: Options) -> Options {
        let o = base.page_size(self.page_size);
        match self.cache_bytes {
            Some(c) => o.cache_bytes(c),
            None => o,
        }
    }
}

impl Options {
    /// The default options with the page size and cache `pagewise tune`
    /// wrote in `dir/tuned.json`; create trees with [`Tuned::kind`] (from
    /// [`Tuned::load`]) to get the tuned tree kind as well.
    pub fn from_tuned(dir: impl AsRef<Path>) -> Result<Options> {
        Ok(Tuned::load(dir.as_ref())?.apply(Options::default()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Tuned {
        Tuned {
            schema: TUNED_SCHEMA,
            tree_kind: TunedKind::Bepsilon,
            page_size: 8192,
            bepsilon: Some(TunedBEpsilon {
                node_bytes: 256 << 10,
                leaf_bytes: Some(128 << 10),
                basement_bytes: 16 << 10,
                fanout: 16,
            }),
            cache_bytes: Some(32 << 20),
            source: TunedSource {
                drive: "real drive".into(),
                ..Default::default()
            },
        }
    }

    #[test]
    fn round_trip_gives_the_same_options_and_kind() {
        let dir = tempfile::tempdir().unwrap();
        let t = sample();
        t.save(dir.path()).unwrap();
        let back = Tuned::load(dir.path()).unwrap();
        assert_eq!(back, t);
        let o = Options::from_tuned(dir.path()).unwrap();
        assert_eq!((o.page_size, o.cache_bytes), (8192, 32 << 20));
        let TreeKind::BEpsilon(b) = back.kind() else {
            panic!("expected a B-epsilon kind");
        };
        assert_eq!((b.node_bytes, b.leaf_bytes), (262144, Some(131072)));
        assert_eq!((b.basement_bytes, b.fanout), (16384, 16));
    }

    #[test]
    fn sidecar_sits_beside_the_db() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("a.pw");
        assert_eq!(Tuned::beside(&db).unwrap(), None);
        sample().save_beside(&db).unwrap();
        assert!(dir.path().join("a.pw-tuned.json").exists());
        assert_eq!(Tuned::beside(&db).unwrap(), Some(sample()));
    }

    fn load_err(text: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(TUNED_FILE), text).unwrap();
        match Tuned::load(dir.path()) {
            Err(e @ Error::Tuned { .. }) => e.to_string(),
            other => panic!("expected Error::Tuned, got {other:?}"),
        }
    }

    #[test]
    fn bad_files_are_typed_errors() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(Tuned::load(dir.path()), Err(Error::Tuned { .. })));
        assert!(load_err("{").contains("not a tuned file"));
        let mut t = serde_json::to_value(sample()).unwrap();
        t["page_size"] = 3000.into();
        assert!(load_err(&t.to_string()).contains("page_size 3000"));
        t["page_size"] = 4096.into();
        t["bepsilon"] = serde_json::Value::Null;
        assert!(load_err(&t.to_string()).contains("settings are missing"));
        let mut t = serde_json::to_value(sample()).unwrap();
        t["bepsilon"]["fanout"] = 1.into();
        assert!(load_err(&t.to_string()).contains("bepsilon: "));
        t["schema"] = 2.into();
        assert!(load_err(&t.to_string()).contains("schema 2"));
        let mut t = serde_json::to_value(sample()).unwrap();
        t["extra"] = 1.into();
        assert!(load_err(&t.to_string()).contains("unknown field"));
    }
}
