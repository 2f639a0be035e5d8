//! An emulated drive with in-storage transparent compression (seed 003) that
//! any engine can run on: a FUSE mount (the `fuser` crate, pure Rust, no
//! libfuse) passing every file through to a backing directory and metering,
//! per 4 KiB block written, what such a drive would store (`meter`).
//!
//! Each mount is served by a process of its own ([`server`]: the current
//! executable re-run with the hidden subcommand `csd-serve`, or the program
//! set by [`set_server_program`]), so the engine
//! under test can never deadlock against the server (LMDB's munmap did, with
//! the server in the bench process). Dropping a [`CsdMount`] unmounts it; a
//! bench killed outright leaves the server to detach the mount when its
//! stdin closes, and a mount named `run-ENGINE-PID.csd` whose bench process
//! is gone is unmounted by `loopfs::sweep_stale` at the next start in the
//! same work directory.

pub mod fs;
pub mod meter;
pub mod server;

pub use meter::{lz4_stored_bytes, zlib_stored_bytes, CsdMeter, CsdStats, BLOCK_BYTES, ZLIB_LEVEL};

use crate::{BenchError, Result};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

/// The program run as the mount's server, if set (see [`server_program`]).
static SERVER_PROGRAM: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Runs `program csd-serve ...` as every later mount's server (a binary that
/// calls [`server::main`] for that subcommand). Tests set the crate's own
/// `pagewise-csd-server`; `pagewise` needs nothing set (it re-runs itself).
pub fn set_server_program(program: &Path) {
    *SERVER_PROGRAM.lock().unwrap_or_else(|e| e.into_inner()) = Some(program.to_path_buf());
}

/// The server program: [`set_server_program`], else the running executable.
fn server_program() -> Result<PathBuf> {
    if let Some(p) = SERVER_PROGRAM
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
    {
        return Ok(p);
    }
    std::env::current_exe()
        .map_err(|e| BenchError::os("find the running executable", "/proc/self/exe", e))
}

/// Why a FUSE mount cannot be made here, if it cannot.
pub fn unavailable_reason() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is missing (no FUSE module; `modprobe fuse`)".into());
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let helper = std::process::Command::new("fusermount3")
        .arg("--version")
        .output()
        .is_ok();
    if !root && !helper {
        return Some(
            "not root and `fusermount3` is not installed (`apt-get install fuse3`)".into(),
        );
    }
    None
}

/// A mounted emulated compressing drive, served by a child process;
/// dropping it unmounts.
pub struct CsdMount {
    mnt: PathBuf,
    server: Option<Server>,
    /// How the server tuned the mount (its `ready` line), for notes.
    note: String,
}

/// The server process and both ends of its control pipe.
struct Server {
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
}

impl std::fmt::Debug for CsdMount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsdMount")
            .field("mnt", &self.mnt)
            .field("mounted", &self.server.is_some())
            .finish()
    }
}

fn server_error(mnt: &Path, what: impl std::fmt::Display) -> BenchError {
    BenchError::Command {
        cmd: format!("emulated compressing drive server for {}", mnt.display()),
        stderr: what.to_string(),
    }
}

impl Server {
    /// Sends one request line.
    fn send(&mut self, mnt: &Path, request: &str) -> Result<()> {
        writeln!(self.to, "{request}")
            .and_then(|_| self.to.flush())
            .map_err(|e| server_error(mnt, format!("request {request:?} not delivered: {e}")))
    }

    /// Reads one reply line: its first word and the rest.
    fn receive(&mut self, mnt: &Path) -> Result<(String, String)> {
        let mut line = String::new();
        match self.from.read_line(&mut line) {
            Ok(0) => Err(server_error(
                mnt,
                "the server exited without a reply (its stderr says why)",
            )),
            Ok(_) => {
                let line = line.trim_end();
                let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
                Ok((word.to_string(), rest.to_string()))
            }
            Err(e) => Err(server_error(mnt, format!("reading its reply: {e}"))),
        }
    }
}

fn parse_stats(mnt: &Path, text: &str) -> Result<CsdStats> {
    serde_json::from_str(text).map_err(|e| server_error(mnt, format!("bad counters {text:?}: {e}")))
}

impl CsdMount {
    /// Mounts a pass-through view of `backing` at `mnt` (created if missing;
    /// both must be directories), served by a child process. Counters start at zero.
    pub fn mount(backing: &Path, mnt: &Path) -> Result<Self> {
        if let Some(why) = unavailable_reason() {
            return Err(server_error(mnt, why));
        }
        std::fs::create_dir_all(mnt).map_err(|e| BenchError::os("create mount point", mnt, e))?;
        let program = server_program()?;
        let mut child = Command::new(&program)
            .arg(server::SUBCOMMAND)
            .arg(backing)
            .arg(mnt)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| {
                BenchError::os("start the emulated compressing drive's server", &program, e)
            })?;
        let to = child.stdin.take().expect("piped stdin");
        let from = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut server = Server { child, to, from };
        let ready = server.receive(mnt);
        match ready {
            Ok((word, note)) if word == "ready" => Ok(Self {
                mnt: mnt.to_path_buf(),
                server: Some(server),
                note,
            }),
            other => {
                let _ = server.child.kill();
                let _ = server.child.wait();
                let why = match other {
                    Ok((word, rest)) => format!("{word} {rest}"),
                    Err(e) => e.to_string(),
                };
                Err(server_error(
                    mnt,
                    format!("{} did not mount: {why}", program.display()),
                ))
            }
        }
    }

    pub fn mount_point(&self) -> &Path {
        &self.mnt
    }

    /// The server process's id while mounted.
    pub fn server_pid(&self) -> Option<u32> {
        self.server.as_ref().map(|s| s.child.id())
    }

    /// How the server set the mount up (writeback caching, dirty-page limits).
    pub fn note(&self) -> &str {
        &self.note
    }

    /// Counters so far (writes still in the kernel's page cache not included:
    /// read them after [`Self::unmount`] for a complete figure).
    pub fn stats(&mut self) -> Result<CsdStats> {
        let mnt = self.mnt.clone();
        let s = self
            .server
            .as_mut()
            .ok_or_else(|| server_error(&mnt, "not mounted"))?;
        s.send(&mnt, "stats")?;
        match s.receive(&mnt)? {
            (w, json) if w == "stats" || w == "final" => parse_stats(&mnt, &json),
            (w, rest) => Err(server_error(&mnt, format!("unexpected reply {w} {rest}"))),
        }
    }

    /// Unmounts (the kernel writes back dirty pages first) and waits for the
    /// server to exit; returns the final counters. Requires: nothing on the
    /// mount is open. If it stays busy, it is detached and this errs.
    pub fn unmount(&mut self) -> Result<CsdStats> {
        let mnt = self.mnt.clone();
        let Some(mut s) = self.server.take() else {
            return Err(server_error(&mnt, "already unmounted"));
        };
        let reply = s.send(&mnt, "unmount").and_then(|_| s.receive(&mnt));
        let out = match reply {
            Ok((w, json)) if w == "final" => parse_stats(&mnt, &json),
            Ok((w, rest)) => {
                // Busy: detach; the server exits when the last user closes.
                let _ = s.send(&mnt, "detach");
                Err(server_error(
                    &mnt,
                    format!("unmount failed ({w} {rest}); detached lazily instead"),
                ))
            }
            Err(e) => {
                detach(&mnt);
                Err(e)
            }
        };
        if out.is_ok() {
            let _ = s.child.wait();
            let _ = std::fs::remove_dir(&mnt);
        }
        // Otherwise dropping `s` closes the server's stdin; it exits once the
        // detached mount is released (reaped by nobody: init adopts it at exit).
        out
    }
}

impl Drop for CsdMount {
    fn drop(&mut self) {
        if self.server.is_some() {
            let _ = self.unmount();
        }
    }
}

/// Lazy unmount: the name disappears now, the mount when its last user closes.
pub(crate) fn detach(mnt: &Path) {
    if let Ok(c) = std::ffi::CString::new(mnt.as_os_str().as_encoded_bytes()) {
        // SAFETY: a valid C string; MNT_DETACH cannot hurt other mounts.
        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    }
}
