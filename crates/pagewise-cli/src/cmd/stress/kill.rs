//! The kill loop: start a child, SIGKILL it (at a random moment, inside a
//! checkpoint, or during the next child's recovery), reopen the database in
//! this process and verify it against the expected-state file.

use super::child_proc::{ChildProc, End, Event, Mean, Track};
use super::expected::{self, ExpectedLog, Model, Record};
use super::value::Layout;
use super::workers::Sabotage;
use super::{verify, Args, DB_FILE, EXPECTED_FILE};
use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use pagewise::Db;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a child may take to open before it counts as a hang.
const OPEN_LIMIT: Duration = Duration::from_secs(60);
/// How long to wait for a child to announce the work a kill aims at.
const AIM_WAIT: Duration = Duration::from_secs(3);

#[derive(Debug, Default, serde::Serialize)]
pub struct Summary {
    pub seed: u64,
    pub kinds: String,
    pub kills: u64,
    /// Kills by how they were aimed (`Mode`).
    pub aimed_random: u64,
    pub aimed_checkpoint: u64,
    pub aimed_consolidation: u64,
    pub aimed_write_back: u64,
    pub aimed_flush: u64,
    pub kills_in_recovery: u64,
    /// Recovery kills that landed before the child finished opening.
    pub kills_before_ready: u64,
    /// Kills by where they landed, however aimed: inside work the child
    /// had announced as begun and not as ended (`child.rs`, `Announcer`).
    pub kills_in_checkpoint: u64,
    /// Inside a checkpoint writing nodes consolidated from delta blocks.
    pub kills_in_consolidation: u64,
    /// Inside a B-epsilon leaf write-back.
    pub kills_in_write_back: u64,
    /// Inside a B-epsilon buffer flush.
    pub kills_in_flush: u64,
    /// Children that ran with delta flushes on.
    pub children_with_delta: u64,
    pub batches_acknowledged: u64,
    pub in_doubt_applied: u64,
    pub in_doubt_absent: u64,
    pub verified: u64,
    pub entries_last_verified: u64,
    pub violations: u64,
    pub first_violation: Option<String>,
    pub duration_s: f64,
    /// On-disk structures the verified files held, over every
    /// verification (`Db::file_map`'s names): which forms the kills met.
    pub structures: BTreeSet<String>,
}

struct Run<'a> {
    a: &'a Args,
    lay: Layout,
    rng: SmallRng,
    model: Model,
    /// The expected-state file is verified up to here.
    offset: u64,
    /// This round's children open the Db with delta flushes.
    delta: bool,
    spawn_to_ready_us: Mean,
    /// Durations of what the children announced, for aiming.
    ckpt_us: Mean,
    write_back_us: Mean,
    flush_us: Mean,
    s: Summary,
}

/// How a kill is aimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Uniformly 0..`--max-delay-ms` after the child opened.
    Random,
    /// Inside a checkpoint (the engine's or the child's checkpointer's).
    Checkpoint,
    /// Inside a checkpoint that writes consolidated delta nodes.
    Consolidation,
    /// Inside a B-epsilon leaf write-back.
    WriteBack,
    /// Inside a B-epsilon buffer flush.
    Flush,
    /// A random kill, then the next child killed while it recovers.
    Recovery,
}

/// Kills after which, while none has landed inside a B-epsilon flush or
/// write-back, half the rounds aim at flushes: at the stress's 16 KiB nodes
/// a flush lasts about as long as a kill takes to land, write-backs are
/// rare (a small Db checkpoints first), and with 8% of draws two of three
/// runs looked at (25 s, and a CI's 63 s) had no such kill.
const STEER_AFTER_KILLS: u64 = 8;

impl Summary {
    /// Whether rounds should be steered to flushes ([`STEER_AFTER_KILLS`]).
    fn uncovered(&self, bepsilon: bool) -> bool {
        bepsilon
            && self.kills >= STEER_AFTER_KILLS
            && self.kills_in_flush + self.kills_in_write_back == 0
    }
}

impl Mode {
    /// The mode for a draw in 0..100: random 35%, checkpoint 20%,
    /// consolidation 10%, write-back 10%, flush 8%, recovery 17%; a mode
    /// the round cannot aim at (no B-epsilon trees, no delta flushes) is a
    /// checkpoint or random kill instead.
    fn pick(draw: u32, bepsilon: bool, delta: bool) -> Mode {
        match draw {
            0..=34 => Mode::Random,
            35..=54 => Mode::Checkpoint,
            55..=64 if delta => Mode::Consolidation,
            55..=64 => Mode::Checkpoint,
            65..=74 if bepsilon => Mode::WriteBack,
            75..=82 if bepsilon => Mode::Flush,
            65..=82 => Mode::Random,
            _ => Mode::Recovery,
        }
    }
}

pub fn run(a: &Args, seed: u64) -> Result<()> {
    let lay = a.shape.layout()?;
    ExpectedLog::open(&a.dir.join(EXPECTED_FILE), 0, true)?;
    let mut r = Run {
        a,
        model: Model::new(lay.trees.len()),
        lay,
        rng: SmallRng::seed_from_u64(seed),
        offset: 0,
        delta: false,
        spawn_to_ready_us: Mean::default(),
        ckpt_us: Mean::default(),
        write_back_us: Mean::default(),
        flush_us: Mean::default(),
        s: Summary {
            seed,
            kinds: a.shape.kinds.clone(),
            ..Default::default()
        },
    };
    let limit = a.duration.unwrap_or(if a.kills.is_some() {
        Duration::MAX
    } else {
        Duration::from_secs(60)
    });
    let max_kills = a.kills.unwrap_or(u64::MAX);
    let t0 = Instant::now();
    let mut last_progress = Instant::now();
    let mut failure = None;
    while t0.elapsed() < limit && r.s.kills < max_kills {
        r.delta = r.lay.delta_flush(r.rng.gen_bool(0.5));
        let bepsilon = r.lay.trees.iter().any(|(_, k)| k.upsert);
        let draw = r.rng.gen_range(0..100);
        let mode = match r.s.uncovered(bepsilon) && r.rng.gen_bool(0.5) {
            true => Mode::Flush,
            false => Mode::pick(draw, bepsilon, r.delta),
        };
        let dog = watchdog(seed, r.s.kills);
        let result = r.round(mode).and_then(|()| r.verify());
        drop(dog);
        if let Err(e) = result {
            failure = Some(format!("{e:#}"));
            break;
        }
        if last_progress.elapsed() >= Duration::from_secs(5) {
            last_progress = Instant::now();
            let s = &r.s;
            eprintln!(
                "stress: {:>5.0}s  kills {:>5} (in checkpoint {}, consolidation {}, write-back {}, flush {}, recovery {})  batches {:>7}  verified {}",
                t0.elapsed().as_secs_f64(), s.kills, s.kills_in_checkpoint, s.kills_in_consolidation,
                s.kills_in_write_back, s.kills_in_flush, s.kills_in_recovery, r.model.acked, s.verified
            );
        }
    }
    r.s.batches_acknowledged = r.model.acked;
    r.s.in_doubt_applied = r.model.resolved_applied;
    r.s.in_doubt_absent = r.model.resolved_absent;
    r.s.duration_s = t0.elapsed().as_secs_f64();
    if let Some(f) = &failure {
        r.s.violations = 1;
        r.s.first_violation = Some(f.clone());
    }
    print_summary(&r.s, a.json)?;
    if let Some(f) = failure {
        bail!(
            "stress: VIOLATION after {} kills (seed {seed}): {f}",
            r.s.kills
        );
    }
    Ok(())
}

/// A whole round (child open, kill, reopen, verification) taking longer than
/// this is a hang: the run stops with an error rather than waiting forever.
const ROUND_LIMIT: Duration = Duration::from_secs(300);

/// Exits the process when not dropped within `ROUND_LIMIT` (the children
/// die with it, through PR_SET_PDEATHSIG).
fn watchdog(seed: u64, kills: u64) -> mpsc::Sender<()> {
    let (tx, rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(ROUND_LIMIT) {
            eprintln!(
                "error: stress: VIOLATION after {kills} kills (seed {seed}): a round did not finish within {ROUND_LIMIT:?} (a hang in open, recovery or verification)"
            );
            std::process::exit(1);
        }
    });
    tx
}

fn print_summary(s: &Summary, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(s)?);
        return Ok(());
    }
    println!("seed                  {}", s.seed);
    println!(
        "kinds                 {} ({} children with delta flushes)",
        s.kinds, s.children_with_delta
    );
    println!(
        "kills                 {} aimed: random {}, checkpoint {}, consolidation {}, write-back {}, flush {}, recovery {} ({} before open finished)",
        s.kills, s.aimed_random, s.aimed_checkpoint, s.aimed_consolidation, s.aimed_write_back,
        s.aimed_flush, s.kills_in_recovery, s.kills_before_ready
    );
    println!(
        "kills landed inside   checkpoint {} (consolidating {}), write-back {}, flush {}",
        s.kills_in_checkpoint, s.kills_in_consolidation, s.kills_in_write_back, s.kills_in_flush
    );
    println!("batches acknowledged  {}", s.batches_acknowledged);
    println!(
        "in-doubt batches      {} applied, {} absent",
        s.in_doubt_applied, s.in_doubt_absent
    );
    println!(
        "verifications passed  {} (last: {} entries)",
        s.verified, s.entries_last_verified
    );
    println!("violations            {}", s.violations);
    println!("duration              {:.1} s", s.duration_s);
    let held: Vec<&str> = s.structures.iter().map(String::as_str).collect();
    println!("structures verified   {}", held.join(", "));
    Ok(())
}

impl Run<'_> {
    fn child_args(&mut self) -> Vec<String> {
        let mut shape = self.a.shape.clone();
        shape.delta_flush = self.delta;
        let mut v = shape.to_args();
        for (k, x) in [
            ("--scan-from", self.offset),
            ("--next-batch", self.model.next_batch),
            ("--seed", self.rng.gen()),
        ] {
            v.push(k.into());
            v.push(x.to_string());
        }
        if self.a.sabotage != Sabotage::None {
            let name = self.a.sabotage.to_possible_value().expect("named variant");
            v.extend(["--sabotage".into(), name.get_name().to_string()]);
        }
        v
    }

    fn spawn(&mut self) -> Result<ChildProc> {
        let args = self.child_args();
        self.s.children_with_delta += self.delta as u64;
        ChildProc::spawn(&self.a.dir, &args)
    }

    /// Starts a child, waits until it has opened, returns it.
    fn spawn_ready(&mut self) -> Result<ChildProc> {
        let mut c = self.spawn()?;
        if c.wait_for(OPEN_LIMIT, |e| matches!(e, Event::Ready { .. }))
            .is_some()
        {
            self.spawn_to_ready_us
                .add(c.spawned.elapsed().as_micros() as u64);
            return Ok(c);
        }
        match c.kill()?.0 {
            End::Failed(msg) => bail!("{msg}"),
            End::Killed => {
                bail!("child did not finish opening within {OPEN_LIMIT:?} (a hang in recovery?)")
            }
        }
    }

    /// Kills `c` and counts where the kill landed.
    fn kill(&mut self, c: ChildProc) -> Result<Track> {
        let (end, t) = c.kill()?;
        if let End::Failed(msg) = end {
            bail!("{msg}");
        }
        self.s.kills += 1;
        self.ckpt_us.merge(t.checkpoint_us);
        self.write_back_us.merge(t.write_back_us);
        self.flush_us.merge(t.flush_us);
        let s = &mut self.s;
        if let Some(consolidations) = t.checkpoint {
            s.kills_in_checkpoint += 1;
            s.kills_in_consolidation += (consolidations > 0) as u64;
        }
        s.kills_in_write_back += t.write_back as u64;
        s.kills_in_flush += (t.flush_depth > 0) as u64;
        Ok(t)
    }

    fn sleep_random(&mut self, max_us: u64) {
        std::thread::sleep(Duration::from_micros(self.rng.gen_range(0..=max_us.max(1))));
    }

    /// Waits for the work `mode` aims at to begin, then sleeps a random part
    /// of its mean duration. Returns false when it did not begin in time
    /// (the kill is then a random one).
    fn aim(&mut self, c: &mut ChildProc, mode: Mode) -> bool {
        let (got, mean_us) = match mode {
            Mode::Checkpoint => (
                c.wait_for(AIM_WAIT, |e| matches!(e, Event::CkptBegin { .. })),
                1.5 * self.ckpt_us.get(2000.0),
            ),
            Mode::Consolidation => (
                c.wait_for(
                    AIM_WAIT,
                    |e| matches!(e, Event::CkptBegin { consolidations } if *consolidations > 0),
                ),
                1.5 * self.ckpt_us.get(2000.0),
            ),
            Mode::WriteBack => (
                c.wait_for(AIM_WAIT, |e| *e == Event::WriteBackBegin),
                1.2 * self.write_back_us.get(2000.0),
            ),
            Mode::Flush => (
                c.wait_for(AIM_WAIT, |e| *e == Event::FlushBegin),
                1.2 * self.flush_us.get(50.0),
            ),
            Mode::Random | Mode::Recovery => (None, 0.0),
        };
        self.sleep_random(mean_us as u64);
        got.is_some()
    }

    fn round(&mut self, mode: Mode) -> Result<()> {
        let mut c = self.spawn_ready()?;
        let aimed = mode != Mode::Random && mode != Mode::Recovery && self.aim(&mut c, mode);
        let s = &mut self.s;
        match (aimed, mode) {
            (true, Mode::Checkpoint) => s.aimed_checkpoint += 1,
            (true, Mode::Consolidation) => s.aimed_consolidation += 1,
            (true, Mode::WriteBack) => s.aimed_write_back += 1,
            (true, Mode::Flush) => s.aimed_flush += 1,
            _ => {
                s.aimed_random += 1;
                self.sleep_random(self.a.max_delay_ms * 1000);
            }
        }
        self.kill(c)?;
        if let Mode::Recovery = mode {
            // The next child replays the log the kill left; kill it while it does.
            let c = self.spawn()?;
            let aim = (1.2 * self.spawn_to_ready_us.get(20_000.0)) as u64;
            self.sleep_random(aim);
            let t = self.kill(c)?;
            self.s.kills_before_ready += !t.ready as u64;
            self.s.kills_in_recovery += 1;
        }
        Ok(())
    }

    /// Reopens the database here and holds it to the expected state.
    fn verify(&mut self) -> Result<()> {
        let path = self.a.dir.join(DB_FILE);
        let exp = self.a.dir.join(EXPECTED_FILE);
        let db = Db::open(&path, self.a.shape.options())
            .with_context(|| format!("reopening {} after kill {}", path.display(), self.s.kills))?;
        let (recs, end) = expected::scan(&exp, self.offset)?;
        for rec in recs {
            self.model.feed(rec)?;
        }
        let trees = verify::trees(&db, &self.lay).map_err(anyhow::Error::msg)?;
        let mut log = ExpectedLog::open(&exp, end, true)?;
        let pending: Vec<_> = self
            .model
            .pending
            .iter()
            .map(|(b, o)| (*b, o.clone()))
            .collect();
        for (batch, ops) in pending {
            let applied =
                verify::resolve(&trees, &self.lay, batch, &ops).map_err(anyhow::Error::msg)?;
            let rec = Record::Resolve { batch, applied };
            log.append(&rec)?;
            self.model.feed(rec)?;
        }
        self.offset = expected::scan(&exp, end)?.1;
        let entries =
            verify::compare(&db, &trees, &self.lay, &self.model).map_err(anyhow::Error::msg)?;
        let held = verify::check(&db).map_err(anyhow::Error::msg)?;
        self.s.structures.extend(held);
        db.close().context("closing after verification")?;
        self.s.verified += 1;
        self.s.entries_last_verified = entries;
        Ok(())
    }
}
