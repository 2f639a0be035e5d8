//! The emulated compressing drive's server process: `EXE csd-serve BACKING
//! MOUNTPOINT`. [`super::CsdMount`] starts it and talks to it over its
//! stdin/stdout, one line per message:
//!
//! | from    | line                | meaning                                         |
//! |---------|---------------------|-------------------------------------------------|
//! | server  | `ready NOTE`        | mounted; NOTE says how the mount's writeback is tuned |
//! | server  | `error TEXT`        | could not mount; the server exits               |
//! | bench   | `stats`             | asks for the counters                           |
//! | server  | `stats JSON`        | [`CsdStats`] so far                             |
//! | bench   | `unmount`           | unmount now (retrying while busy, up to 2 s)    |
//! | server  | `busy TEXT`         | still busy after 2 s: still mounted and serving |
//! | bench   | `detach`            | lazy unmount: gone when its last user closes    |
//! | server  | `final JSON`        | the session ended; last counters; the server exits |
//!
//! Why a process of its own: the engine under test must never be able to
//! deadlock against the server. In one process, a munmap of a shared mapping
//! of a file on the mount (LMDB at close) holds the address-space lock while
//! the kernel waits for the mount's writeback, and a server thread needing
//! that lock at the same moment (its allocator growing the heap) can never
//! answer.
//!
//! Signals: the server runs in a process group of its own, so a Ctrl-C at
//! the terminal reaches only the bench, which closes its files and asks for
//! the unmount. SIGINT, SIGTERM or SIGHUP sent to the server itself, or the
//! end of its stdin (the bench died), detach the mount, and the server exits
//! when the kernel ends the session.

use super::fs::PassFs;
use super::meter::{CsdMeter, CsdStats};
use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The hidden subcommand that runs the server.
pub const SUBCOMMAND: &str = "csd-serve";

/// Entry point of the server process; `args` are the arguments after the
/// program name (`csd-serve BACKING MOUNTPOINT`). Returns the exit code.
pub fn main(args: &[OsString]) -> i32 {
    let (backing, mnt) = match args {
        [cmd, backing, mnt] if cmd == SUBCOMMAND => (PathBuf::from(backing), PathBuf::from(mnt)),
        _ => {
            say(&format!(
                "error usage: {SUBCOMMAND} BACKING MOUNTPOINT (got {args:?})"
            ));
            return 2;
        }
    };
    // Before any thread exists, so every thread inherits the mask and only
    // the signal thread receives them.
    let signals = block_stop_signals();
    // As the kernel will name it in mountinfo (fuser mounts the canonical path).
    let mnt = std::fs::canonicalize(&mnt).unwrap_or(mnt);
    let meter = Arc::new(CsdMeter::default());
    let fs = PassFs::new(&backing, meter.clone(), true);
    let mut session = match fuser::Session::new(fs, &mnt, &config()) {
        Ok(s) => s,
        Err(e) => {
            say(&format!(
                "error cannot mount {} over {}: {e}",
                mnt.display(),
                backing.display()
            ));
            return 1;
        }
    };
    say(&format!("ready {}", tune_writeback(&mnt)));
    let unmounter = std::sync::Mutex::new(session.unmount_callable());
    let ctl = Control {
        mnt: mnt.clone(),
        meter: meter.clone(),
        unmounter,
    };
    let ctl = Arc::new(ctl);
    let c = ctl.clone();
    std::thread::spawn(move || c.serve_requests());
    let c = ctl.clone();
    std::thread::spawn(move || c.wait_for_signal(signals));
    let end = session.run();
    let stats = meter.stats();
    if let Err(e) = end {
        eprintln!("pagewise csd server: session ended with {e}");
    }
    say(&format!("final {}", json(&stats)));
    0
}

fn config() -> fuser::Config {
    let mut cfg = fuser::Config::default();
    cfg.mount_options = vec![
        fuser::MountOption::FSName("pagewise-csd".into()),
        fuser::MountOption::Subtype("pagewise-csd".into()),
        fuser::MountOption::DefaultPermissions,
        fuser::MountOption::NoAtime,
    ];
    cfg.n_threads = Some(2);
    cfg
}

/// One line to the bench.
fn say(line: &str) {
    debug_assert!(!line.contains('\n'));
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn json(s: &CsdStats) -> String {
    serde_json::to_string(s).expect("stats serialise")
}

/// Blocks SIGINT, SIGTERM and SIGHUP in this thread (and so in every thread
/// started later); returns the set for `sigwait`.
fn block_stop_signals() -> libc::sigset_t {
    // SAFETY: a zeroed sigset_t initialised by sigemptyset; plain libc calls.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Lets the mount hold dirty pages like a local filesystem does. The kernel
/// limits a FUSE mount to 1% of the dirty-page budget (`max_ratio`), strictly
/// (`strict_limit`), so it would write pages back far sooner than ext4 above
/// the loop device, coalescing fewer rewrites; root may lift both
/// (`/sys/class/bdi/MAJ:MIN/`). Returns what it did, for the results' notes.
///
/// Never stats the mount: its requests would wait for this very process,
/// whose session loop is not running yet.
fn tune_writeback(mnt: &Path) -> String {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let Some(dev) = mount_device(&info, mnt) else {
        return format!(
            "FUSE writeback cache; dirty-page limits not tuned ({} not found in /proc/self/mountinfo)",
            mnt.display()
        );
    };
    let bdi = PathBuf::from(format!("/sys/class/bdi/{dev}"));
    let mut done = Vec::new();
    for (knob, value) in [("max_ratio", "100"), ("strict_limit", "0")] {
        let p = bdi.join(knob);
        let before = std::fs::read_to_string(&p).unwrap_or_default();
        match std::fs::write(&p, value) {
            Ok(()) => done.push(format!("{knob} {} -> {value}", before.trim())),
            Err(e) => done.push(format!("{knob} left at {} ({e})", before.trim())),
        }
    }
    format!(
        "FUSE writeback cache; dirty-page limits of {}: {}",
        bdi.display(),
        done.join(", ")
    )
}

/// The `MAJ:MIN` of the last mount at `mnt` in a mountinfo text (field 3;
/// field 5 is the mount point, spaces escaped as `\040`).
pub fn mount_device(mountinfo: &str, mnt: &Path) -> Option<String> {
    let want = mnt.to_string_lossy().replace(' ', "\\040");
    mountinfo.lines().rev().find_map(|l| {
        let mut f = l.split(' ');
        let dev = f.nth(2)?;
        (f.nth(1)? == want).then(|| dev.to_string())
    })
}

/// What the request and signal threads share.
struct Control {
    mnt: PathBuf,
    meter: Arc<CsdMeter>,
    unmounter: std::sync::Mutex<fuser::SessionUnmounter>,
}

impl Control {
    /// Answers the bench's requests until its end of the pipe closes; then
    /// detaches the mount (the bench is gone or gave up on it).
    fn serve_requests(&self) {
        let stdin = std::io::stdin();
        // Bounded by the bench: one line per request, ends at EOF.
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            match line.trim() {
                "stats" => say(&format!("stats {}", json(&self.meter.stats()))),
                "unmount" => {
                    if let Err(e) = self.unmount() {
                        say(&format!("busy {e}"));
                    }
                }
                "detach" => self.detach(),
                other => say(&format!("error unknown request {other:?}")),
            }
        }
        self.detach();
    }

    fn wait_for_signal(&self, set: libc::sigset_t) {
        let mut sig = 0;
        // SAFETY: `set` was initialised by block_stop_signals; sig is a valid out pointer.
        let rc = unsafe { libc::sigwait(&set, &mut sig) };
        if rc == 0 {
            eprintln!(
                "pagewise csd server: signal {sig}, detaching {}",
                self.mnt.display()
            );
            self.detach();
        }
    }

    /// Unmounts, retrying for up to 2 s while busy (a file the engine just
    /// closed can be held a moment longer by a child between fork and exec).
    fn unmount(&self) -> std::io::Result<()> {
        let c = cstr(&self.mnt)?;
        let mut last = std::io::Error::from_raw_os_error(libc::EBUSY);
        for _ in 0..100 {
            // SAFETY: a valid C string.
            if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
                return Ok(());
            }
            last = std::io::Error::last_os_error();
            match last.raw_os_error() {
                Some(libc::EBUSY) => std::thread::sleep(std::time::Duration::from_millis(20)),
                // Not root: fuser unmounts through fusermount3.
                Some(libc::EPERM) => return self.lock_unmounter().unmount(),
                _ => return Err(last),
            }
        }
        Err(last)
    }

    /// Lazy unmount: the name goes now, the mount when its last user closes.
    fn detach(&self) {
        let Ok(c) = cstr(&self.mnt) else { return };
        // SAFETY: a valid C string; MNT_DETACH cannot hurt other mounts.
        if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
            let _ = std::process::Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(&self.mnt)
                .output();
        }
    }

    fn lock_unmounter(&self) -> std::sync::MutexGuard<'_, fuser::SessionUnmounter> {
        self.unmounter.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn cstr(p: &Path) -> std::io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mount_device_comes_from_its_mountinfo_line() {
        let info = "22 1 254:0 / / rw - ext4 /dev/vda rw\n\
                    97 22 0:63 / /var/tmp/w/run-x-1.csd rw,nosuid - fuse.pagewise-csd pagewise-csd rw\n\
                    98 22 0:64 / /var/tmp/a\\040b rw - fuse.pagewise-csd pagewise-csd rw\n";
        let dev = |p: &str| mount_device(info, Path::new(p));
        assert_eq!(dev("/var/tmp/w/run-x-1.csd").as_deref(), Some("0:63"));
        assert_eq!(dev("/var/tmp/a b").as_deref(), Some("0:64"));
        assert_eq!(dev("/"), Some("254:0".into()));
        assert_eq!(dev("/var/tmp/w"), None);
    }
}
