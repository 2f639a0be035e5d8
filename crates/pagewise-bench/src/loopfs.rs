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
