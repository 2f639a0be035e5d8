//! Confines this process's memory, page cache included, with a memory cgroup
//! of its own, so that "engine cache = 5% of the Db" holds for every engine:
//! buffered reads and memory-mapped pages (LMDB) are charged to the group of
//! the process that first touches them and reclaimed when the group is over
//! its limit, which a periodic `posix_fadvise(DONTNEED)` cannot do for mapped
//! pages and only does between its rounds for buffered ones.
//!
//! Life cycle: [`MemCap::create`] makes a uniquely named child of the current
//! group and moves the whole process (every thread) into it; a capped phase
//! calls [`MemCap::set_limit`], then [`MemCap::lift`]; dropping moves the
//! process back to its original group and removes the child.
//!
//! Charges are not moved with the process (v1's `move_charge_at_immigrate` is
//! deprecated, v2 never had it): pages touched before the move stay with the
//! old group. The bench therefore creates the group before its first phase,
//! and every phase reopens the Db on a just-remounted file system, whose
//! page cache starts empty, so the file pages a phase reads are charged here.

mod parse;

pub use parse::{locate, number, stat, Location, Stat, Version};

use crate::{BenchError, Result};
use std::path::{Path, PathBuf};

/// Why memory cgroups cannot be used by this process, if they cannot.
pub fn unavailable_reason() -> Option<String> {
    location().err()
}

fn location() -> std::result::Result<Location, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not running as root (creating a cgroup needs root)".into());
    }
    let read = |p: &str| std::fs::read_to_string(p).map_err(|e| format!("cannot read {p}: {e}"));
    let loc = locate(&read("/proc/self/cgroup")?, &read("/proc/mounts")?)?;
    let dir = loc.dir();
    if !dir.join("cgroup.procs").exists() {
        return Err(format!(
            "this process's cgroup directory {} is not visible (a container without its own cgroup mount?)",
            dir.display()
        ));
    }
    if loc.version == Version::V2 {
        let ctrl = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
        if !ctrl.split_whitespace().any(|c| c == "memory") {
            return Err(format!(
                "the memory controller is not available to cgroup {} (cgroup.controllers: {:?})",
                dir.display(),
                ctrl.trim()
            ));
        }
    }
    Ok(loc)
}

/// A memory cgroup's files: cheap to clone for a watchdog thread.
#[derive(Debug, Clone)]
pub struct Group {
    version: Version,
    dir: PathBuf,
}

/// A memory cgroup holding this process until dropped.
#[derive(Debug)]
pub struct MemCap {
    /// The child group this process was moved into.
    group: Group,
    /// The group it came from, to go back to.
    home: PathBuf,
    /// v2: memory was enabled in `home`'s subtree_control by us, to undo.
    enabled_in_home: bool,
    /// v2: memory.peak, reset and read through one descriptor (kernel 6.12+).
    peak_fd: Option<std::fs::File>,
}

fn write(path: &Path, value: &str) -> std::io::Result<()> {
    std::fs::write(path, value)
}

fn os(what: &str, path: &Path, e: std::io::Error) -> BenchError {
    BenchError::os(what.to_string(), path, e)
}

impl MemCap {
    /// Makes a child of this process's memory cgroup and moves the process in.
    /// Errors say why (not root, no memory controller, not permitted, v2
    /// controller not delegatable) so callers can fall back to trimming.
    pub fn create() -> Result<Self> {
        let loc = location().map_err(|why| BenchError::MemCap { why })?;
        let home = loc.dir();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = home.join(format!("pagewise-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| os("create memory cgroup", &dir, e))?;
        let mut cap = Self {
            group: Group {
                version: loc.version,
                dir,
            },
            home,
            enabled_in_home: false,
            peak_fd: None,
        };
        // On error the partly made group is undone by Drop.
        cap.enter()?;
        Ok(cap)
    }

    fn enter(&mut self) -> Result<()> {
        let g = self.group.clone();
        let procs = g.dir.join("cgroup.procs");
        write(&procs, &std::process::id().to_string())
            .map_err(|e| os("move this process into its memory cgroup", &procs, e))?;
        match g.version {
            Version::V1 => {
                // Without swap this changes nothing; with it, prefer dropping
                // page cache to swapping out the engine's own cache.
                let _ = write(&g.dir.join("memory.swappiness"), "0");
            }
            Version::V2 => {
                if !g.dir.join("memory.max").exists() {
                    // v2 lets a non-root group hand controllers to children only
                    // when no process is left in it: we just moved out of it.
                    let sc = self.home.join("cgroup.subtree_control");
                    write(&sc, "+memory").map_err(|e| BenchError::MemCap {
                        why: format!("cannot enable the memory controller in {} ({e}): other processes share this cgroup; run the bench in a group of its own, e.g. `systemd-run --scope -p Delegate=yes pagewise bench run ...`", sc.display()),
                    })?;
                    self.enabled_in_home = true;
                }
                let _ = write(&g.dir.join("memory.swap.max"), "0");
            }
        }
        Ok(())
    }

    /// Moves process `pid` (a helper this process started, which inherited
    /// the group) back to the group this process came from, so its memory is
    /// not charged to the engine under test.
    pub fn release(&self, pid: u32) -> Result<()> {
        let procs = self.home.join("cgroup.procs");
        write(&procs, &pid.to_string()).map_err(|e| {
            os(
                "move a helper process out of the bench's memory cgroup",
                &procs,
                e,
            )
        })
    }

    /// The group's files, for reading usage and setting limits.
    pub fn group(&self) -> &Group {
        &self.group
    }

    /// Starts a new peak-usage window; false where the kernel cannot reset it
    /// (v2 before 6.12), and then [`MemCap::peak`] returns `None`.
    pub fn reset_peak(&mut self) -> bool {
        let g = &self.group;
        match g.version {
            Version::V1 => write(&g.dir.join("memory.max_usage_in_bytes"), "0").is_ok(),
            Version::V2 => {
                use std::io::Write;
                self.peak_fd = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(g.dir.join("memory.peak"))
                    .ok()
                    .and_then(|mut f| f.write_all(b"reset").is_ok().then_some(f));
                self.peak_fd.is_some()
            }
        }
    }

    /// Highest usage since [`MemCap::reset_peak`].
    pub fn peak(&mut self) -> Option<u64> {
        match self.group.version {
            Version::V1 => {
                std::fs::read_to_string(self.group.dir.join("memory.max_usage_in_bytes"))
                    .ok()
                    .and_then(|t| number(&t))
            }
            Version::V2 => {
                use std::io::{Read, Seek};
                let f = self.peak_fd.as_mut()?;
                let mut t = String::new();
                f.rewind().ok()?;
                f.read_to_string(&mut t).ok()?;
                number(&t)
            }
        }
    }
}

impl Group {
    /// "cgroup-v1" or "cgroup-v2".
    pub fn method(&self) -> &'static str {
        self.version.method()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self, v1: &str, v2: &str) -> PathBuf {
        self.dir.join(match self.version {
            Version::V1 => v1,
            Version::V2 => v2,
        })
    }

    /// Anonymous memory and page cache charged to the group now.
    pub fn stat(&self) -> Result<Stat> {
        let p = self.dir.join("memory.stat");
        let text = std::fs::read_to_string(&p).map_err(|e| os("read memory stats", &p, e))?;
        Ok(stat(&text))
    }

    /// Bytes charged to the group now (anonymous, page cache and kernel objects).
    pub fn usage(&self) -> Result<u64> {
        let p = self.file("memory.usage_in_bytes", "memory.current");
        let text = std::fs::read_to_string(&p).map_err(|e| os("read memory usage", &p, e))?;
        Ok(number(&text).unwrap_or(0))
    }

    /// Everything charged but the page cache: anonymous memory plus kernel
    /// objects (page tables, dentries), i.e. what reclaim cannot take back
    /// without swap.
    pub fn unreclaimable(&self) -> Result<u64> {
        let s = self.stat()?;
        Ok(self.usage()?.saturating_sub(s.file).max(s.anon))
    }

    /// Caps the group at `bytes`; the kernel reclaims page cache down to it
    /// now and whenever a charge would exceed it.
    pub fn set_limit(&self, bytes: u64) -> Result<()> {
        let p = self.file("memory.limit_in_bytes", "memory.max");
        write(&p, &bytes.to_string()).map_err(|e| os("set memory limit", &p, e))
    }

    /// Removes the cap.
    pub fn lift(&self) -> Result<()> {
        let p = self.file("memory.limit_in_bytes", "memory.max");
        let none = match self.version {
            Version::V1 => "-1",
            Version::V2 => "max",
        };
        write(&p, none).map_err(|e| os("lift memory limit", &p, e))
    }
}

impl Drop for MemCap {
    fn drop(&mut self) {
        let _ = self.group.lift();
        self.peak_fd = None;
        // v2: `home` cannot take processes back while it hands memory to children.
        if self.enabled_in_home {
            let _ = write(&self.home.join("cgroup.subtree_control"), "-memory");
        }
        let _ = write(
            &self.home.join("cgroup.procs"),
            &std::process::id().to_string(),
        );
        // Empty now; charged page cache goes to the parent with it.
        let _ = std::fs::remove_dir(&self.group.dir);
    }
}
