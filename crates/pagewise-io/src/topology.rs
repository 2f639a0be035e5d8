//! What the kernel says about the device behind a path (sysfs, ioctls).

use std::fs::File;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// The sysfs directory of the whole disk behind `file`
/// (`/sys/dev/block/MAJ:MIN`, resolved up from a partition to its disk).
pub fn sysfs_disk_dir(file: &File) -> Option<PathBuf> {
    let meta = file.metadata().ok()?;
    let dev = if meta.file_type().is_block_device() {
        meta.rdev()
    } else {
        meta.dev()
    };
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let dir = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    // A partition has a `partition` file and its queue/ lives in the parent.
    if dir.join("partition").exists() {
        return dir.parent().map(Path::to_path_buf);
    }
    Some(dir)
}

fn read_sys_u64(dir: &Path, rel: &str) -> Option<u64> {
    std::fs::read_to_string(dir.join(rel))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Logical block size of the device behind `file`: the O_DIRECT alignment unit.
pub fn logical_block_size(file: &File, _path: &Path) -> Option<usize> {
    let meta = file.metadata().ok()?;
    if meta.file_type().is_block_device() {
        let mut sz: libc::c_int = 0;
        // SAFETY: BLKSSZGET writes one int into `sz`.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), BLKSSZGET, &mut sz) };
        if rc == 0 && sz > 0 {
            return Some(sz as usize);
        }
    }
    let dir = sysfs_disk_dir(file)?;
    read_sys_u64(&dir, "queue/logical_block_size").map(|v| v as usize)
}

/// Size in bytes of a block device.
pub fn block_device_size(file: &File) -> std::io::Result<u64> {
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 into `size`.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64, &mut size) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(size)
}

// From <linux/fs.h>: _IO(0x12,104) and _IOR(0x12,114,size_t).
const BLKSSZGET: libc::c_ulong = 0x1268;
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
