//! The child process a kill run starts (hidden subcommand `stress-child`):
//! opens the database (replaying its log: the recovery a kill may hit),
//! decides the batches its killed predecessor left in doubt, then loads the
//! database until killed.
//!
//! Protocol on stdout, one line each: `ready US` (open took US µs), then
//! the engine's events as [`Announcer`] prints them. Exit status: 3 for a violation
//! (the message on stderr starts with `VIOLATION:`), 4 for an engine error,
//! 0 after `--max-secs` without a kill.

use super::expected::{self, ExpectedLog, Record};
use super::workers::{self, Counters, FileJournal, Load, Sabotage};
use super::{verify, Shape, DB_FILE, EXPECTED_FILE};
use anyhow::{Context, Result};
use pagewise::{Db, Event, EventListener};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const EXIT_VIOLATION: i32 = 3;
pub const EXIT_ENGINE_ERROR: i32 = 4;

#[derive(clap::Args)]
pub struct Args {
    pub dir: PathBuf,
    #[command(flatten)]
    pub shape: Shape,
    /// Byte offset of the expected-state file the parent has verified up to.
    #[arg(long, default_value_t = 0)]
    pub scan_from: u64,
    /// First unused batch number at `scan_from`.
    #[arg(long, default_value_t = 1)]
    pub next_batch: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Exit on its own after this long (a kill normally comes first).
    #[arg(long, default_value_t = 120)]
    pub max_secs: u64,
    #[arg(long, value_enum, default_value = "none", hide = true)]
    pub sabotage: Sabotage,
}

fn violation(what: &str) -> ! {
    eprintln!("VIOLATION: {what}");
    std::process::exit(EXIT_VIOLATION)
}

fn engine_error(what: &str) -> ! {
    eprintln!("ENGINE ERROR: {what}");
    std::process::exit(EXIT_ENGINE_ERROR)
}

/// Dies with the parent, so an interrupted run leaves no loader behind.
fn die_with_parent() {
    // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number only.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    }
}

/// Prints the engine's events for the parent, one line each, so it can aim
/// kills inside them: `ckpt-begin GEN CONSOLIDATIONS`, `ckpt-end US`,
/// `wb-begin`, `wb-end US`, `flush-begin`, `flush-end US`. stdout is line
/// buffered: each line is written before the engine goes on.
struct Announcer;

impl EventListener for Announcer {
    fn on_event(&self, e: &Event) {
        match *e {
            Event::CheckpointBegin {
                generation,
                consolidations,
                ..
            } => say(format_args!("ckpt-begin {generation} {consolidations}")),
            Event::CheckpointEnd { elapsed_us, .. } => say(format_args!("ckpt-end {elapsed_us}")),
            Event::WriteBackBegin { .. } => say(format_args!("wb-begin")),
            Event::WriteBackEnd { elapsed_us, .. } => say(format_args!("wb-end {elapsed_us}")),
            Event::FlushBegin { .. } => say(format_args!("flush-begin")),
            Event::FlushEnd { elapsed_us, .. } => say(format_args!("flush-end {elapsed_us}")),
            _ => {}
        }
    }
}

/// One line on stdout; a parent gone away is no reason to panic.
fn say(line: std::fmt::Arguments) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{line}");
}

pub fn run(a: Args) -> Result<()> {
    die_with_parent();
    let lay = a.shape.layout()?;
    let exp = a.dir.join(EXPECTED_FILE);
    let (recs, end) = expected::scan(&exp, a.scan_from)?;
    let mut pending = BTreeMap::new();
    let mut next_batch = a.next_batch;
    for r in recs {
        match r {
            Record::Intent { batch, ops } => {
                next_batch = next_batch.max(batch + 1);
                pending.insert(batch, ops);
            }
            Record::Ack { batch } | Record::Resolve { batch, .. } => {
                pending.remove(&batch);
            }
        }
    }
    let mut log = ExpectedLog::open(&exp, end, true)?;
    let t0 = Instant::now();
    let opts = a.shape.options().event_listener(Arc::new(Announcer));
    let db = match Db::open_or_create(a.dir.join(DB_FILE), opts) {
        Ok(db) => db,
        Err(e) => violation(&format!("open after a kill failed: {e}")),
    };
    println!("ready {}", t0.elapsed().as_micros());
    let _ = verify::trees(&db, &lay).unwrap_or_else(|v| violation(&v));
    let trees = verify::create_trees(&db, &lay).unwrap_or_else(|e| engine_error(&e));
    for (batch, ops) in &pending {
        let applied = verify::resolve(&trees, &lay, *batch, ops).unwrap_or_else(|v| violation(&v));
        log.append(&Record::Resolve {
            batch: *batch,
            applied,
        })
        .context("recording a resolved batch")?;
    }
    let load = Arc::new(Load {
        db,
        trees,
        lay,
        journal: Arc::new(FileJournal {
            log: Mutex::new(log),
            next_batch: AtomicU64::new(next_batch),
        }),
        remove_pct: a.shape.remove_pct,
        txn_pct: a.shape.txn_pct,
        recent: Mutex::new(Default::default()),
        sabotage: a.sabotage,
        stop: AtomicBool::new(false),
        counters: Counters::default(),
        failure: Mutex::new(None),
    });
    let deadline = Instant::now() + Duration::from_secs(a.max_secs);
    let failure = workers::run(&load, a.shape.readers, true, a.seed, || {
        Instant::now() >= deadline
    });
    match failure {
        Some(f) if f.starts_with("reader") => violation(&f),
        Some(f) => engine_error(&f),
        None => Ok(()),
    }
}
