//! A private ext4 filesystem on a loop device for one run, so the bytes that
//! reach the "device" can be read from `/sys/block/loopN/stat` (field 7,
//! sectors written, 512 B each) the same way for every engine.
//!
//! What the figure includes: everything the kernel sent to the loop device
//! (file data, ext4 metadata and its jbd2 journal). `umount` flushes all of it,
//! so each phase is measured unmounted-to-unmounted, and the cost of one empty
//! mount + umount (superblock and journal updates, measured on this filesystem
//! before the run) is subtracted, leaving what the engine caused.
//!
//! Set-up choices: the image is a sparse file; the loop device uses direct I/O
//! on it (`--direct-io=on`) so the backing file does not occupy page cache a
//! second time; mkfs initialises inode tables and journal up front
//! (`lazy_itable_init=0,lazy_journal_init=0`) so no background ext4lazyinit
//! writes land in a measurement; mounted `noatime` so reads write nothing.

use crate::{BenchError, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Why loop devices cannot be used here, if they cannot.
pub fn unavailable_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not running as root (loop devices and mount need root)".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("/dev/loop-control is missing (no loop driver)".into());
    }
    for tool in ["losetup", "mkfs.ext4", "mount", "umount"] {
        let found = Command::new(tool).arg("--version").output().is_ok();
        if !found {
            return Some(format!("`{tool}` is not installed"));
        }
    }
    None
}

fn run(cmd: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| BenchError::os(format!("run {cmd}"), cmd, e))?;
    if !out.status.success() {
        return Err(BenchError::Command {
            cmd: format!("{cmd} {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().into(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().into())
}

/// A loop-mounted ext4 filesystem; dropping it unmounts, detaches and deletes the image.
#[derive(Debug)]
pub struct LoopFs {
    image: PathBuf,
    dev: String,
    mnt: PathBuf,
    mounted: bool,
}

impl LoopFs {
    /// Creates a `size`-byte sparse image at `image`, attaches it, makes ext4
    /// on it, and mounts it at `mnt` (created if missing). Refuses an existing image.
    pub fn create(image: &Path, mnt: &Path, size: u64) -> Result<Self> {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(image)
            .map_err(|e| {
                BenchError::os(
                    "create loop image (remove it if left from a crashed run)",
                    image,
                    e,
                )
            })?;
        f.set_len(size)
            .map_err(|e| BenchError::os("size loop image", image, e))?;
        drop(f);
        let img = image.to_string_lossy().to_string();
        let dev = match run("losetup", &["--find", "--show", "--direct-io=on", &img]) {
            Ok(d) => d,
            Err(e) => {
                let _ = std::fs::remove_file(image);
                return Err(e);
            }
        };
        let mut fs = Self {
            image: image.to_path_buf(),
            dev,
            mnt: mnt.to_path_buf(),
            mounted: false,
        };
        run(
            "mkfs.ext4",
            &[
                "-q",
                "-F",
                "-m",
                "0",
                "-N",
                "65536",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0,nodiscard",
                &fs.dev,
            ],
        )?;
        std::fs::create_dir_all(mnt).map_err(|e| BenchError::os("create mount point", mnt, e))?;
        fs.mount()?;
        Ok(fs)
    }

    pub fn device(&self) -> &str {
        &self.dev
    }

    pub fn mount_point(&self) -> &Path {
        &self.mnt
    }

    pub fn mount(&mut self) -> Result<()> {
        if !self.mounted {
            run(
                "mount",
                &["-o", "noatime", &self.dev, &self.mnt.to_string_lossy()],
            )?;
            self.mounted = true;
        }
        Ok(())
    }

    /// Unmounts, which writes back every dirty page and commits the journal.
    pub fn umount(&mut self) -> Result<()> {
        if self.mounted {
            run("umount", &[&self.mnt.to_string_lossy()])?;
            self.mounted = false;
        }
        Ok(())
    }

    /// Bytes written to the loop device since it was attached (field 7 x 512).
    pub fn bytes_written(&self) -> Result<u64> {
        let name = Path::new(&self.dev)
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let path = PathBuf::from(format!("/sys/block/{name}/stat"));
        let s = std::fs::read_to_string(&path)
            .map_err(|e| BenchError::os("read device stats", &path, e))?;
        let sectors: u64 = s
            .split_whitespace()
            .nth(6)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| BenchError::Command {
                cmd: format!("parse {}", path.display()),
                stderr: format!("unexpected contents {s:?}"),
            })?;
        Ok(sectors * 512)
    }

    /// Device bytes of an empty mount + umount: the median of `cycles` cycles.
    /// Leaves the filesystem mounted as it found it.
    pub fn mount_cycle_baseline(&mut self, cycles: usize) -> Result<u64> {
        let was_mounted = self.mounted;
        self.umount()?;
        let mut v = Vec::new();
        for _ in 0..cycles.max(1) {
            let a = self.bytes_written()?;
            self.mount()?;
            self.umount()?;
            v.push(self.bytes_written()? - a);
        }
        v.sort_unstable();
        if was_mounted {
            self.mount()?;
        }
        Ok(v[v.len() / 2])
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        if self.mounted {
            let _ = self.umount();
        }
        let _ = run("losetup", &["-d", &self.dev]);
        let _ = std::fs::remove_file(&self.image);
        let _ = std::fs::remove_dir(&self.mnt);
    }
}

/// The pid in a run's image or mount-point name (`run-ENGINE-PID[.img|.csd]`;
/// `.csd` is the emulated compressing drive's FUSE mount point).
fn run_pid(name: &str) -> Option<i32> {
    let stem = name
        .strip_suffix(".img")
        .or_else(|| name.strip_suffix(".csd"))
        .unwrap_or(name);
    let rest = stem.strip_prefix("run-")?;
    rest.rsplit_once('-')?.1.parse().ok()
}

/// A process that exists and is not a zombie (a killed run whose parent has
/// not reaped it yet holds no mount or loop device any more).
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    let exists = r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('Z')))
        .unwrap_or(false);
    exists && !zombie
}

fn is_mount_point(path: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let want = path.to_string_lossy();
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|mnt| mnt == want)
}

/// Removes what runs killed before they could clean up left in `work_dir`
/// (a dead FUSE mount of the emulated compressing drive, a mounted
/// filesystem, an attached loop device, the image): anything named after a
/// process that no longer exists. FUSE mounts go first: their backing files
/// live on the loop filesystems. Returns a note per run removed.
pub fn sweep_stale(work_dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(work_dir) else {
        return Vec::new();
    };
    let mut entries: Vec<std::fs::DirEntry> = rd.flatten().collect();
    entries.sort_by_key(|e| !e.file_name().to_string_lossy().ends_with(".csd"));
    let mut notes = Vec::new();
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = run_pid(&name).filter(|p| !alive(*p)) else {
            continue;
        };
        let path = e.path();
        if name.ends_with(".img") {
            let attached = run("losetup", &["-j", &path.to_string_lossy()]).unwrap_or_default();
            for dev in attached.lines().filter_map(|l| l.split(':').next()) {
                let _ = run("losetup", &["-d", dev]);
            }
            let _ = std::fs::remove_file(&path);
        } else {
            if is_mount_point(&path) && run("umount", &[&path.to_string_lossy()]).is_err() {
                crate::csd::detach(&path);
            }
            if std::fs::remove_dir(&path).is_err() && !is_mount_point(&path) {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
        notes.push(format!(
            "removed {} left by an earlier run (process {pid}, no longer running)",
            path.display()
        ));
    }
    notes
}

#[cfg(test)]
mod sweep_tests {
    use super::*;

    #[test]
    fn run_names_give_their_pid() {
        assert_eq!(run_pid("run-pagewise-1234.img"), Some(1234));
        assert_eq!(run_pid("run-pagewise-1234"), Some(1234));
        assert_eq!(run_pid("run-lmdb-99.csd"), Some(99));
        assert_eq!(run_pid("run-my-engine-77"), Some(77));
        assert_eq!(run_pid("results.jsonl"), None);
        assert_eq!(run_pid("run-pagewise-x.img"), None);
    }

    #[test]
    fn an_unreaped_child_counts_as_gone() {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        // Until waited for, the exited child is a zombie.
        let t0 = std::time::Instant::now();
        while alive(pid) && t0.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(
            !alive(pid),
            "an exited, unreaped child still counts as running"
        );
        child.wait().unwrap();
        assert!(alive(std::process::id() as i32));
    }

    #[test]
    fn sweep_removes_dead_runs_and_keeps_live_ones() {
        let d = tempfile::tempdir().unwrap();
        let mut child = Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let live = std::process::id();
        for pid in [dead, live] {
            std::fs::write(d.path().join(format!("run-pagewise-{pid}.img")), b"x").unwrap();
            std::fs::create_dir(d.path().join(format!("run-pagewise-{pid}"))).unwrap();
        }
        std::fs::write(d.path().join("keep.jsonl"), b"{}").unwrap();
        let notes = sweep_stale(d.path());
        assert_eq!(notes.len(), 2, "{notes:?}");
        let left: std::collections::BTreeSet<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let want: std::collections::BTreeSet<String> = [
            format!("run-pagewise-{live}.img"),
            format!("run-pagewise-{live}"),
            "keep.jsonl".to_string(),
        ]
        .into();
        assert_eq!(left, want);
    }
}
