//! An emulated drive with in-storage transparent compression (seed 003) that
//! any engine can run on: a FUSE mount (the `fuser` crate, pure Rust, no
//! libfuse) passing every file through to a backing directory and metering,
//! per 4 KiB block written, what such a drive would store (`meter`).
//!
//! Mounts run in this process (background threads). Known hazard of that:
//! a munmap of a shared mapping of a file on the mount (LMDB at close) holds
//! the process's address-space lock while waiting for the mount's writeback;
//! if a server thread needs that lock at that moment (its allocator growing
//! the heap) the process deadlocks. Seen once in the tests with several mounts
//! busy in parallel, never in bench runs; the fix is serving the mount from a
//! separate process. Recovery: `echo 1 > /sys/fs/fuse/connections/N/abort`. Dropping a [`CsdMount`]
//! unmounts it; a run killed outright leaves a dead mount named
//! `run-ENGINE-PID.csd`, which `loopfs::sweep_stale` unmounts at the next
//! start in the same work directory.

pub mod fs;
pub mod meter;

pub use meter::{lz4_stored_bytes, zlib_stored_bytes, CsdMeter, CsdStats, BLOCK_BYTES, ZLIB_LEVEL};

use crate::{BenchError, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// A mounted emulated compressing drive; dropping it unmounts.
pub struct CsdMount {
    session: Option<fuser::BackgroundSession>,
    mnt: PathBuf,
    meter: Arc<CsdMeter>,
}

impl std::fmt::Debug for CsdMount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsdMount")
            .field("mnt", &self.mnt)
            .field("mounted", &self.session.is_some())
            .finish()
    }
}

impl CsdMount {
    /// Mounts a pass-through view of `backing` at `mnt` (created if missing;
    /// both must be directories). Counters start at zero.
    pub fn mount(backing: &Path, mnt: &Path) -> Result<Self> {
        if let Some(why) = unavailable_reason() {
            return Err(BenchError::Command {
                cmd: format!("mount emulated compressing drive at {}", mnt.display()),
                stderr: why,
            });
        }
        std::fs::create_dir_all(mnt).map_err(|e| BenchError::os("create mount point", mnt, e))?;
        let meter = Arc::new(CsdMeter::default());
        let fs = fs::PassFs::new(backing, meter.clone());
        let mut cfg = fuser::Config::default();
        cfg.mount_options = vec![
            fuser::MountOption::FSName("pagewise-csd".into()),
            fuser::MountOption::Subtype("pagewise-csd".into()),
            fuser::MountOption::DefaultPermissions,
            fuser::MountOption::NoAtime,
        ];
        cfg.n_threads = Some(2);
        let session = fuser::spawn_mount(fs, mnt, &cfg).map_err(|e| {
            BenchError::os(
                "mount the emulated compressing drive (FUSE; needs /dev/fuse and root or fusermount3)",
                mnt,
                e,
            )
        })?;
        Ok(Self {
            session: Some(session),
            mnt: mnt.to_path_buf(),
            meter,
        })
    }

    pub fn mount_point(&self) -> &Path {
        &self.mnt
    }

    /// Counters so far (writes still in the kernel's page cache not included:
    /// read them after [`Self::unmount`] for a complete figure).
    pub fn stats(&self) -> CsdStats {
        self.meter.stats()
    }

    /// Unmounts (the kernel writes back dirty mapped pages first) and waits
    /// for the server threads. Requires: nothing on the mount is open.
    pub fn unmount(&mut self) -> Result<CsdStats> {
        if let Some(s) = self.session.take() {
            // Unmounted here: the server thread sees the end and exits.
            let joined = if unmount_retrying_busy(&self.mnt) {
                s.join()
            } else {
                s.umount_and_join()
            };
            if let Err(e) = joined {
                detach(&self.mnt);
                return Err(BenchError::os(
                    "unmount the emulated compressing drive (detached lazily instead)",
                    &self.mnt,
                    e,
                ));
            }
        }
        let _ = std::fs::remove_dir(&self.mnt);
        Ok(self.meter.stats())
    }
}

impl Drop for CsdMount {
    fn drop(&mut self) {
        let _ = self.unmount();
    }
}

/// Unmounts `mnt`, retrying for up to 2 s while it is busy (a file closed by
/// the engine can be held a moment longer by a forked child between fork and
/// exec). Leaves it mounted if it stays busy: the caller then detaches it.
/// Returns whether it was unmounted.
fn unmount_retrying_busy(mnt: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(mnt.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    for _ in 0..100 {
        // SAFETY: a valid C string.
        if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
            return true;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EBUSY) {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    false
}

/// Lazy unmount: the name disappears now, the mount when its last user closes.
pub(crate) fn detach(mnt: &Path) {
    if let Ok(c) = std::ffi::CString::new(mnt.as_os_str().as_encoded_bytes()) {
        // SAFETY: a valid C string; MNT_DETACH cannot hurt other mounts.
        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    }
}
