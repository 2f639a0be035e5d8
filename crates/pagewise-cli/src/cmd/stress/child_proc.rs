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
    Ckpt,
    CkptDone { us: u64 },
}

pub struct ChildProc {
    proc: std::process::Child,
    events: Receiver<Event>,
    pub spawned: Instant,
    stderr_path: PathBuf,
    /// Seen `ready`: the open (recovery) had finished.
    pub ready: bool,
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
                let mut w = line.split_whitespace();
                let ev = match (w.next(), w.next().and_then(|n| n.parse().ok())) {
                    (Some("ready"), Some(n)) => Event::Ready { open_us: n },
                    (Some("ckpt"), _) => Event::Ckpt,
                    (Some("ckpt-done"), Some(n)) => Event::CkptDone { us: n },
                    _ => continue,
                };
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
            ready: false,
        })
    }

    /// Waits up to `limit` for an event matching `want`; events seen on the
    /// way are passed to `seen`. None on timeout or when the child's output ends.
    pub fn wait_for(
        &mut self,
        limit: Duration,
        want: impl Fn(&Event) -> bool,
        mut seen: impl FnMut(&Event),
    ) -> Option<Event> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(ev) => {
                    self.ready |= matches!(ev, Event::Ready { .. });
                    seen(&ev);
                    if want(&ev) {
                        return Some(ev);
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// Events already sent (non-blocking).
    pub fn drain(&mut self, mut seen: impl FnMut(&Event)) {
        while let Ok(ev) = self.events.try_recv() {
            self.ready |= matches!(ev, Event::Ready { .. });
            seen(&ev);
        }
    }

    /// SIGKILL (unless it already exited) and reap.
    pub fn kill(mut self) -> Result<End> {
        let _ = self.proc.kill();
        let status = self.proc.wait().context("waiting for a stress child")?;
        if status.signal() == Some(libc::SIGKILL) {
            return Ok(End::Killed);
        }
        let msg = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
        let what = match status.code() {
            Some(EXIT_VIOLATION) => "reported a violation",
            Some(EXIT_ENGINE_ERROR) => "hit an engine error",
            _ => "exited unexpectedly",
        };
        Ok(End::Failed(format!(
            "child {what} ({status}): {}",
            msg.trim()
        )))
    }
}
