//! `pagewise db`: create, read, write, scan, inspect and check a database.

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use pagewise::{Db, Durability, Options, Tuned};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args)]
struct Common {
    /// Database file (its log is PATH-wal, its lock PATH-lock).
    path: PathBuf,
    /// Tree (named key space) to use.
    #[arg(long, default_value = "default")]
    tree: String,
    /// Keys and values are hex strings instead of UTF-8 text.
    #[arg(long)]
    hex: bool,
    /// Bypass O_DIRECT (use the page cache).
    #[arg(long)]
    no_direct: bool,
    /// Cache size in MiB.
    #[arg(long, default_value_t = 64)]
    cache_mib: usize,
}

#[derive(Subcommand)]
enum Cmd {
    /// Create a new, empty database.
    Create {
        path: PathBuf,
        /// Page size in bytes: a power of two from 512 to 65536 (default
        /// 4096, or the tuned one with --tuned).
        #[arg(long, conflicts_with = "tuned")]
        page_size: Option<usize>,
        /// Take the page size and tree kind `pagewise tune DIR` chose
        /// (DIR/tuned.json): the tree "default" is created with the tuned kind,
        /// and a copy of the file is kept beside the Db as PATH-tuned.json
        /// (shown by `db stats`).
        #[arg(long, value_name = "DIR")]
        tuned: Option<PathBuf>,
        #[arg(long)]
        no_direct: bool,
    },
    /// Set KEY to VALUE (durable when the command returns).
    Put {
        #[command(flatten)]
        c: Common,
        key: String,
        value: String,
    },
    /// Print the value of KEY (exit status 1 if absent).
    Get {
        #[command(flatten)]
        c: Common,
        key: String,
    },
    /// Remove KEY.
    Delete {
        #[command(flatten)]
        c: Common,
        key: String,
    },
    /// Print entries in key order.
    Scan {
        #[command(flatten)]
        c: Common,
        /// First key (inclusive).
        #[arg(long)]
        from: Option<String>,
        /// End key (exclusive).
        #[arg(long)]
        to: Option<String>,
        /// Only keys with this prefix.
        #[arg(long, conflicts_with_all = ["from", "to"])]
        prefix: Option<String>,
        /// Descending order.
        #[arg(long)]
        reverse: bool,
        /// At most this many entries.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Page size, trees, I/O by category, cache and fill figures.
    Stats {
        #[command(flatten)]
        c: Common,
        #[arg(long)]
        json: bool,
    },
    /// Write a consistent copy of a database (a snapshot of it) to DST while
    /// it stays usable; the copy is checked after it is written.
    Backup {
        #[command(flatten)]
        c: Common,
        /// Path of the copy (must not exist; its -wal and -lock files are
        /// created beside it).
        dst: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Verify every page checksum and the tree invariants; exit 1 on problems.
    Check {
        #[command(flatten)]
        c: Common,
        #[arg(long)]
        json: bool,
    },
}

/// `db create`: defaults or `--page-size`, or the tuned configuration in
/// `tuned` (its tree kind for the tree "default", its copy kept beside).
fn create(
    path: &std::path::Path,
    page_size: Option<usize>,
    tuned: Option<&std::path::Path>,
    no_direct: bool,
) -> Result<()> {
    let t = tuned.map(Tuned::load).transpose()?;
    let base = Options::default().direct_io(!no_direct);
    let o = match &t {
        Some(t) => t.apply(base),
        None => base.page_size(page_size.unwrap_or(4096)),
    };
    let ps = o.page_size;
    let db = Db::create(path, o)?;
    let Some(t) = t else {
        db.close()?;
        println!("created {} (page size {ps} B)", path.display());
        return Ok(());
    };
    db.tree_with("default", t.kind())?;
    db.close()?;
    let side = t.save_beside(path)?;
    println!(
        "created {} (page size {ps} B, tree \"default\" a {} tree, from {}; provenance in {})",
        path.display(),
        t.kind().name(),
        tuned.unwrap_or(path).join(pagewise::TUNED_FILE).display(),
        side.display()
    );
    Ok(())
}

/// `db stats`' line on where the settings came from.
fn settings_from(path: &std::path::Path, t: Option<&Tuned>) -> String {
    let Some(t) = t else {
        return format!(
            "flags or defaults (no {} beside the Db)",
            pagewise::sidecar_path(path).display()
        );
    };
    format!(
        "pagewise tune in {} on the {} ({} tree; {})",
        t.source.dir,
        t.source.drive,
        t.kind().name(),
        pagewise::sidecar_path(path).display()
    )
}

type KvResult = pagewise::Result<(Vec<u8>, Vec<u8>)>;

fn open(c: &Common) -> Result<Db> {
    let o = Options::default()
        .direct_io(!c.no_direct)
        .cache_bytes(c.cache_mib << 20)
        .durability(Durability::Sync);
    Db::open(&c.path, o).with_context(|| format!("opening {}", c.path.display()))
}

/// Opens for a command that only reads: nothing is written, unless the log
/// holds commits a crash left unapplied, which are recovered first (saying so).
fn open_for_reading(c: &Common) -> Result<Db> {
    let o = Options::default()
        .direct_io(!c.no_direct)
        .cache_bytes(c.cache_mib << 20)
        .read_only(true);
    match Db::open(&c.path, o) {
        Err(pagewise::Error::NeedsRecovery { records, .. }) => {
            eprintln!(
                "note: {} has {records} log record(s) left by a crash; recovering them (this writes to the database)",
                c.path.display()
            );
            open(c)
        }
        r => r.with_context(|| format!("opening {}", c.path.display())),
    }
}

fn parse(c: &Common, s: &str) -> Result<Vec<u8>> {
    if !c.hex {
        return Ok(s.as_bytes().to_vec());
    }
    if !s.len().is_multiple_of(2) {
        bail!("hex string {s:?} has an odd number of digits");
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).with_context(|| format!("{s:?} is not hex")))
        .collect()
}

fn show(c: &Common, b: &[u8]) -> String {
    if c.hex {
        return b.iter().map(|x| format!("{x:02x}")).collect();
    }
    String::from_utf8_lossy(b).escape_debug().to_string()
}

pub fn run(a: Args) -> Result<()> {
    match a.cmd {
        Cmd::Create {
            path,
            page_size,
            tuned,
            no_direct,
        } => create(&path, page_size, tuned.as_deref(), no_direct)?,
        Cmd::Put { c, key, value } => {
            let db = open(&c)?;
            db.tree(&c.tree)?
                .insert(parse(&c, &key)?, parse(&c, &value)?)?;
            db.close()?;
        }
        Cmd::Get { c, key } => {
            let db = open_for_reading(&c)?;
            match db.tree(&c.tree)?.get(parse(&c, &key)?)? {
                Some(v) => println!("{}", show(&c, &v)),
                None => bail!("key {key:?} not found in tree {:?}", c.tree),
            }
        }
        Cmd::Delete { c, key } => {
            let db = open(&c)?;
            db.tree(&c.tree)?.remove(parse(&c, &key)?)?;
            db.close()?;
        }
        Cmd::Scan {
            c,
            from,
            to,
            prefix,
            reverse,
            limit,
        } => {
            let db = open_for_reading(&c)?;
            let t = db.tree(&c.tree)?;
            let it = match prefix {
                Some(p) => t.prefix(parse(&c, &p)?),
                None => {
                    use std::ops::Bound::*;
                    let lo = from
                        .map(|k| parse(&c, &k))
                        .transpose()?
                        .map_or(Unbounded, Included);
                    let hi = to
                        .map(|k| parse(&c, &k))
                        .transpose()?
                        .map_or(Unbounded, Excluded);
                    t.range::<Vec<u8>, _>((lo, hi))
                }
            };
            let it: Box<dyn Iterator<Item = KvResult>> = if reverse {
                Box::new(it.rev())
            } else {
                Box::new(it)
            };
            for kv in it.take(limit.unwrap_or(usize::MAX)) {
                let (k, v) = kv?;
                println!("{}\t{}", show(&c, &k), show(&c, &v));
            }
        }
        Cmd::Backup { c, dst, json } => {
            let db = open_for_reading(&c)?;
            let r = db
                .backup(&dst)
                .with_context(|| format!("backing up {} to {}", c.path.display(), dst.display()))?;
            let copy = Db::open(
                &dst,
                Options::default().direct_io(!c.no_direct).read_only(true),
            )?;
            let check = copy.check()?;
            if json {
                let out = serde_json::json!({"backup": r, "check": check});
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                println!(
                    "{} -> {}: {} trees, {} entries, {} bytes of keys and values, {} bytes of file, in {:.2} s; check {}",
                    c.path.display(),
                    dst.display(),
                    r.trees,
                    r.entries,
                    r.user_bytes,
                    r.file_bytes,
                    r.elapsed.as_secs_f64(),
                    if check.is_ok() { "ok" } else { "FAILED" }
                );
            }
            if !check.is_ok() {
                bail!("the copy failed its check: {:?}", check.problems);
            }
        }
        Cmd::Stats { c, json } => {
            let db = open_for_reading(&c)?;
            let s = db.stats();
            let origin = Tuned::beside(&c.path)?;
            if json {
                let mut v = serde_json::to_value(&s)?;
                v["settings_from"] = serde_json::to_value(&origin)?;
                println!("{}", serde_json::to_string_pretty(&v)?);
                return Ok(());
            }
            println!(
                "settings from   {}",
                settings_from(&c.path, origin.as_ref())
            );
            println!("page size       {} B", s.page_size);
            println!("direct I/O      {}", s.direct_io);
            println!(
                "file            {} pages ({} free)",
                s.file_pages, s.free_pages
            );
            println!(
                "cache           {} of {} bytes, {} hits, {} misses",
                s.cache_bytes, s.cache_capacity, s.cache_hits, s.cache_misses
            );
            println!("checkpoints     {}", s.checkpoints);
            println!();
            println!(
                "{:<10} {:>10} {:>12} {:>10} {:>12} {:>7}",
                "I/O", "reads", "read bytes", "writes", "write bytes", "syncs"
            );
            for (name, io) in [("wal", &s.wal), ("pages", &s.pages), ("meta", &s.meta)] {
                println!(
                    "{name:<10} {:>10} {:>12} {:>10} {:>12} {:>7}",
                    io.read_ops, io.read_bytes, io.write_ops, io.write_bytes, io.syncs
                );
            }
            println!();
            println!(
                "{:<16} {:<8} {:>10} {:>6} {:>10} {:>10} {:>10} {:>9} {:>8}",
                "tree",
                "kind",
                "entries",
                "height",
                "leaves",
                "branches",
                "overflow",
                "leaf fill",
                "nodes"
            );
            for t in &s.trees {
                println!(
                    "{:<16} {:<8} {:>10} {:>6} {:>10} {:>10} {:>10} {:>8.1}% {:>8}",
                    t.name,
                    t.kind.name(),
                    t.entries,
                    t.height,
                    t.leaf_pages,
                    t.branch_pages,
                    t.overflow_pages,
                    t.avg_leaf_fill * 100.0,
                    t.nodes
                );
            }
        }
        Cmd::Check { c, json } => {
            let db = open_for_reading(&c)?;
            let r = db.check()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                println!(
                    "{} node pages and {} overflow pages verified, {} trees, {} entries, {} of {} pages free",
                    r.pages_checked, r.overflow_pages_checked, r.trees, r.entries, r.free_pages, r.file_pages
                );
                for p in &r.problems {
                    println!("PROBLEM: {p}");
                }
            }
            if !r.is_ok() {
                bail!(
                    "{} problems found in {}",
                    r.problems.len(),
                    c.path.display()
                );
            }
            if !json {
                println!("ok");
            }
        }
    }
    Ok(())
}
