//! The kill loop: start a child, SIGKILL it (at a random moment, inside a
//! checkpoint, or during the next child's recovery), reopen the database in
//! this process and verify it against the expected-state file.

use super::child_proc::{ChildProc, End, Event};
use super::expected::{self, ExpectedLog, Model, Record};
use super::value::Layout;
use super::workers::Sabotage;
use super::{verify, Args, DB_FILE, EXPECTED_FILE};
use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use pagewise::Db;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a child may take to open before it counts as a hang.
const OPEN_LIMIT: Duration = Duration::from_secs(60);
/// How long to wait for a child to announce a checkpoint.
const CKPT_WAIT: Duration = Duration::from_secs(3);

#[derive(Debug, Default, serde::Serialize)]
pub struct Summary {
    pub seed: u64,
    pub kills: u64,
    pub kills_random: u64,
    pub kills_in_checkpoint: u64,
    pub kills_in_recovery: u64,
    /// Recovery kills that landed before the child finished opening.
    pub kills_before_ready: u64,
    pub batches_acknowledged: u64,
    pub in_doubt_applied: u64,
    pub in_doubt_absent: u64,
    pub verified: u64,
    pub entries_last_verified: u64,
    pub violations: u64,
    pub first_violation: Option<String>,
    pub duration_s: f64,
}

/// A running mean, for aiming kills at checkpoints and opens.
#[derive(Default)]
struct Mean(f64, u64);

impl Mean {
    fn add(&mut self, x: u64) {
        self.1 += 1;
        self.0 += (x as f64 - self.0) / self.1 as f64;
    }
    fn get(&self, default: f64) -> f64 {
        if self.1 == 0 {
            default
        } else {
            self.0
        }
    }
}

struct Run<'a> {
    a: &'a Args,
    lay: Layout,
    rng: SmallRng,
    model: Model,
    /// The expected-state file is verified up to here.
    offset: u64,
    open_us: Mean,
    spawn_to_ready_us: Mean,
    ckpt_us: Mean,
    s: Summary,
}

#[derive(Clone, Copy)]
enum Mode {
    Random,
    Checkpoint,
    Recovery,
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
        open_us: Mean::default(),
        spawn_to_ready_us: Mean::default(),
        ckpt_us: Mean::default(),
        s: Summary {
            seed,
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
        let mode = match r.rng.gen_range(0..100) {
            0..=54 => Mode::Random,
            55..=79 => Mode::Checkpoint,
            _ => Mode::Recovery,
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
            eprintln!(
                "stress: {:>5.0}s  kills {:>5} (random {}, checkpoint {}, recovery {})  batches {:>7}  verified {}",
                t0.elapsed().as_secs_f64(), r.s.kills, r.s.kills_random, r.s.kills_in_checkpoint,
                r.s.kills_in_recovery, r.model.acked, r.s.verified
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
    println!("kills                 {} (random {}, in checkpoint {}, in recovery {} of which {} before open finished)",
        s.kills, s.kills_random, s.kills_in_checkpoint, s.kills_in_recovery, s.kills_before_ready);
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
    Ok(())
}

impl Run<'_> {
    fn child_args(&mut self) -> Vec<String> {
        let mut v = self.a.shape.to_args();
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
        ChildProc::spawn(&self.a.dir, &args)
    }

    /// Starts a child, waits until it has opened, returns it.
    fn spawn_ready(&mut self) -> Result<ChildProc> {
        let mut c = self.spawn()?;
        let ev = c.wait_for(OPEN_LIMIT, |e| matches!(e, Event::Ready { .. }), |_| ());
        if let Some(Event::Ready { open_us }) = ev {
            self.open_us.add(open_us);
            self.spawn_to_ready_us
                .add(c.spawned.elapsed().as_micros() as u64);
            return Ok(c);
        }
        match c.kill()? {
            End::Failed(msg) => bail!("{msg}"),
            End::Killed => {
                bail!("child did not finish opening within {OPEN_LIMIT:?} (a hang in recovery?)")
            }
        }
    }

    fn kill(&mut self, c: ChildProc) -> Result<()> {
        match c.kill()? {
            End::Killed => {
                self.s.kills += 1;
                Ok(())
            }
            End::Failed(msg) => bail!("{msg}"),
        }
    }

    fn sleep_random(&mut self, max_us: u64) {
        std::thread::sleep(Duration::from_micros(self.rng.gen_range(0..=max_us.max(1))));
    }

    fn round(&mut self, mode: Mode) -> Result<()> {
        let mut c = self.spawn_ready()?;
        let max_delay_us = self.a.max_delay_ms * 1000;
        match mode {
            Mode::Random | Mode::Recovery => {
                self.sleep_random(max_delay_us);
                self.s.kills_random += 1;
            }
            Mode::Checkpoint => {
                let ckpt_us = &mut self.ckpt_us;
                let got = c.wait_for(
                    CKPT_WAIT,
                    |e| *e == Event::Ckpt,
                    |e| {
                        if let Event::CkptDone { us } = e {
                            ckpt_us.add(*us)
                        }
                    },
                );
                let mean = self.ckpt_us.get(2000.0);
                self.sleep_random((1.5 * mean) as u64);
                if got.is_some() {
                    self.s.kills_in_checkpoint += 1
                } else {
                    self.s.kills_random += 1
                }
            }
        }
        let mut ckpt = Vec::new();
        c.drain(|e| {
            if let Event::CkptDone { us } = e {
                ckpt.push(*us)
            }
        });
        ckpt.into_iter().for_each(|us| self.ckpt_us.add(us));
        self.kill(c)?;
        if let Mode::Recovery = mode {
            // The next child replays the log the kill left; kill it while it does.
            let c = self.spawn()?;
            let aim = (1.2 * self.spawn_to_ready_us.get(20_000.0)) as u64;
            self.sleep_random(aim);
            let mut c = c;
            c.drain(|_| ());
            if !c.ready {
                self.s.kills_before_ready += 1;
            }
            self.s.kills_in_recovery += 1;
            self.kill(c)?;
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
        verify::check(&db).map_err(anyhow::Error::msg)?;
        db.close().context("closing after verification")?;
        self.s.verified += 1;
        self.s.entries_last_verified = entries;
        Ok(())
    }
}
