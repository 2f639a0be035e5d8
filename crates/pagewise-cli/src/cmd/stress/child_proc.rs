//! The parent's handle on one child: spawn, its stdout events, SIGKILL.

use super::child::{EXIT_ENGINE_ERROR, EXIT_VIOLATION};
use anyhow::{Context, Result};
use std::io::BufRead;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Ready { open_us: u64 },
    CkptBegin { consolidations: u64 },
    CkptEnd { us: u64 },
    WriteBackBegin,
    WriteBackEnd { us: u64 },
    FlushBegin,
    FlushEnd { us: u64 },
}

/// One line of a child's stdout (`child.rs`, `Announcer`), or None.
fn parse(line: &str) -> Option<Event> {
    let mut w = line.split_whitespace();
    let what = w.next()?;
    let mut num = || w.next().and_then(|n| n.parse::<u64>().ok());
    Some(match what {
        "ready" => Event::Ready { open_us: num()? },
        "ckpt-begin" => {
            let _generation = num()?;
            Event::CkptBegin {
                consolidations: num()?,
            }
        }
        "ckpt-end" => Event::CkptEnd { us: num()? },
        "wb-begin" => Event::WriteBackBegin,
        "wb-end" => Event::WriteBackEnd { us: num()? },
        "flush-begin" => Event::FlushBegin,
        "flush-end" => Event::FlushEnd { us: num()? },
        _ => return None,
    })
}

/// A running mean of durations in µs, mergeable.
#[derive(Debug, Default, Clone, Copy)]
pub struct Mean {
    sum: f64,
    count: u64,
}

impl Mean {
    pub fn add(&mut self, x: u64) {
        self.sum += x as f64;
        self.count += 1;
    }
    pub fn merge(&mut self, o: Mean) {
        self.sum += o.sum;
        self.count += o.count;
    }
    pub fn get(&self, default: f64) -> f64 {
        if self.count == 0 {
            default
        } else {
            self.sum / self.count as f64
        }
    }
}

/// What a child was doing, from the events it announced: at its death,
/// where the kill landed (work begun and not announced as ended).
#[derive(Debug, Default, Clone)]
pub struct Track {
    /// Seen `ready`: the open (recovery) had finished.
    pub ready: bool,
    /// A checkpoint in progress, with the consolidations it writes.
    pub checkpoint: Option<u64>,
    pub write_back: bool,
    /// B-epsilon flushes in progress (they nest).
    pub flush_depth: u32,
    pub checkpoint_us: Mean,
    pub write_back_us: Mean,
    pub flush_us: Mean,
}

impl Track {
    fn see(&mut self, ev: &Event) {
        match *ev {
            Event::Ready { .. } => self.ready = true,
            Event::CkptBegin { consolidations } => self.checkpoint = Some(consolidations),
            Event::CkptEnd { us } => {
                self.checkpoint = None;
                self.checkpoint_us.add(us);
            }
            Event::WriteBackBegin => self.write_back = true,
            Event::WriteBackEnd { us } => {
                self.write_back = false;
                self.write_back_us.add(us);
            }
            Event::FlushBegin => self.flush_depth += 1,
            Event::FlushEnd { us } => {
                self.flush_depth = self.flush_depth.saturating_sub(1);
                self.flush_us.add(us);
            }
        }
    }
}

pub struct ChildProc {
    proc: std::process::Child,
    events: Receiver<Event>,
    pub spawned: Instant,
    stderr_path: PathBuf,
    /// Every event seen so far, folded.
    pub track: Track,
}

/// How a child ended.
#[derive(Debug)]
pub enum End {
    Killed,
    /// Exited by itself: the message says why (a violation, an engine error).
    Failed(String),
}

impl ChildProc {
    pub fn spawn(dir: &Path, args: &[String]) -> Result<Self> {
        let exe = std::env::current_exe().context("finding the pagewise binary")?;
        let stderr_path = dir.join("child-stderr.txt");
        let err = std::fs::File::create(&stderr_path)
            .with_context(|| format!("creating {}", stderr_path.display()))?;
        let mut proc = Command::new(exe)
            .arg("stress-child")
            .arg(dir)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .context("starting a stress child")?;
        let out = proc.stdout.take().expect("piped stdout");
        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let Some(ev) = parse(&line) else { continue };
                if tx.send(ev).is_err() {
                    break;
                }
            }
        });
        Ok(Self {
            proc,
            events,
            spawned: Instant::now(),
            stderr_path,
            track: Track::default(),
        })
    }

    /// Waits up to `limit` for an event matching `want`. None on timeout or
    /// when the child's output ends.
    pub fn wait_for(&mut self, limit: Duration, want: impl Fn(&Event) -> bool) -> Option<Event> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(ev) => {
                    self.track.see(&ev);
                    if want(&ev) {
                        return Some(ev);
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// SIGKILL (unless it already exited) and reap; then read what it
    /// announced before it died, so `track` says where the kill landed.
    /// Returns how it ended and its track.
    pub fn kill(mut self) -> Result<(End, Track)> {
        let _ = self.proc.kill();
        let status = self.proc.wait().context("waiting for a stress child")?;
        // Its stdout is closed now: the reader ends after the last line.
        while let Ok(ev) = self.events.recv_timeout(Duration::from_secs(5)) {
            self.track.see(&ev);
        }
        if status.signal() == Some(libc::SIGKILL) {
            return Ok((End::Killed, self.track));
        }
        let msg = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
        let what = match status.code() {
            Some(EXIT_VIOLATION) => "reported a violation",
            Some(EXIT_ENGINE_ERROR) => "hit an engine error",
            _ => "exited unexpectedly",
        };
        let end = End::Failed(format!("child {what} ({status}): {}", msg.trim()));
        Ok((end, self.track))
    }
}
