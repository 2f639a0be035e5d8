//! Facts about the device behind a path: sysfs topology, mounts, free space.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// What the kernel reports about the disk behind the target (sysfs `queue/`).
/// Fields are `null` in JSON when the kernel does not say (tmpfs, overlay).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceTopology {
    /// Kernel name of the whole disk, e.g. "vda", "nvme0n1".
    pub device: Option<String>,
    /// Bytes; the O_DIRECT alignment unit.
    pub logical_block_size: Option<u64>,
    pub physical_block_size: Option<u64>,
    pub minimum_io_size: Option<u64>,
    pub optimal_io_size: Option<u64>,
    pub rotational: Option<bool>,
    /// The active I/O scheduler (the bracketed one in `queue/scheduler`).
    pub scheduler: Option<String>,
    pub model: Option<String>,
    /// Hardware queue depth limit (`queue/nr_requests`).
    pub nr_requests: Option<u64>,
    /// Size of the whole disk in bytes.
    pub disk_size: Option<u64>,
}

fn read_trim(dir: &Path, rel: &str) -> Option<String> {
    let s = std::fs::read_to_string(dir.join(rel)).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

fn read_u64(dir: &Path, rel: &str) -> Option<u64> {
    read_trim(dir, rel)?.parse().ok()
}

impl DeviceTopology {
    /// Reads the topology of the disk holding `file` (a regular file,
    /// directory or block device); empty when there is no such disk.
    pub fn of(file: &File) -> Self {
        let Some(dir) = pagewise_io::topology::sysfs_disk_dir(file) else {
            return Self::default();
        };
        let scheduler = read_trim(&dir, "queue/scheduler").map(|s| {
            s.split_whitespace()
                .find(|w| w.starts_with('['))
                .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
                .unwrap_or(s)
        });
        Self {
            device: dir.file_name().map(|n| n.to_string_lossy().into_owned()),
            logical_block_size: read_u64(&dir, "queue/logical_block_size"),
            physical_block_size: read_u64(&dir, "queue/physical_block_size"),
            minimum_io_size: read_u64(&dir, "queue/minimum_io_size"),
            optimal_io_size: read_u64(&dir, "queue/optimal_io_size"),
            rotational: read_u64(&dir, "queue/rotational").map(|v| v != 0),
            scheduler,
            model: read_trim(&dir, "device/model"),
            nr_requests: read_u64(&dir, "queue/nr_requests"),
            disk_size: read_u64(&dir, "size").map(|sectors| sectors * 512),
        }
    }
}

/// Free bytes available to this user on the filesystem holding `dir`.
pub fn free_space(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid C string and `st` a valid out-pointer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Where a block device (or one of its partitions) is mounted, or what holds
/// it: `Err(description)` if it is in use, `Ok(())` if it looks free.
pub fn device_in_use(dev: &Path) -> Result<(), InUse> {
    let meta = std::fs::metadata(dev).map_err(|_| InUse::Holder("unknown (cannot stat)".into()))?;
    if !meta.file_type().is_block_device() {
        return Ok(());
    }
    let rdev = meta.rdev();
    let mut ids = vec![(libc::major(rdev), libc::minor(rdev))];
    let sys = std::fs::canonicalize(format!("/sys/dev/block/{}:{}", ids[0].0, ids[0].1)).ok();
    if let Some(sys) = &sys {
        ids.extend(partitions(sys));
        if let Some(h) = holders(sys) {
            return Err(InUse::Holder(h));
        }
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for line in mountinfo.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(id), Some(mp)) = (f.get(2), f.get(4)) else {
            continue;
        };
        let Some((a, b)) = id.split_once(':') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) else {
            continue;
        };
        if ids.contains(&(a, b)) {
            return Err(InUse::Mounted(mp.to_string()));
        }
    }
    let canon = std::fs::canonicalize(dev).unwrap_or_else(|_| dev.to_path_buf());
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    for line in swaps.lines().skip(1) {
        if let Some(p) = line.split_whitespace().next() {
            if std::fs::canonicalize(p)
                .map(|c| c == canon)
                .unwrap_or(false)
            {
                return Err(InUse::Holder("swap".into()));
            }
        }
    }
    Ok(())
}

/// Why a device may not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InUse {
    Mounted(String),
    Holder(String),
}

fn partitions(sys: &Path) -> Vec<(u32, u32)> {
    let Ok(rd) = std::fs::read_dir(sys) else {
        return Vec::new();
    };
    rd.flatten()
        .map(|e| e.path())
        .filter(|p| p.join("partition").exists())
        .filter_map(|p| {
            let dev = read_trim(&p, "dev")?;
            let (a, b) = dev.split_once(':')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .collect()
}

fn holders(sys: &Path) -> Option<String> {
    let dirs = std::iter::once(sys.to_path_buf()).chain(
        std::fs::read_dir(sys)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("partition").exists()),
    );
    for d in dirs {
        let held: Vec<PathBuf> = std::fs::read_dir(d.join("holders"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        if let Some(h) = held.first() {
            return h.file_name().map(|n| n.to_string_lossy().into_owned());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block device holding `/`, if it has a device node here.
    fn root_device() -> Option<PathBuf> {
        let dev = std::fs::metadata("/").ok()?.dev();
        let sys = std::fs::canonicalize(format!(
            "/sys/dev/block/{}:{}",
            libc::major(dev),
            libc::minor(dev)
        ))
        .ok()?;
        let p = PathBuf::from("/dev").join(sys.file_name()?);
        p.exists().then_some(p)
    }

    #[test]
    fn root_device_is_reported_in_use() {
        let Some(dev) = root_device() else {
            eprintln!("skipped: / is not on a block device with a /dev node");
            return;
        };
        assert!(
            device_in_use(&dev).is_err(),
            "{} holds / but was reported free",
            dev.display()
        );
    }

    #[test]
    fn regular_files_are_never_in_use() {
        let f = tempfile::NamedTempFile::new().unwrap();
        assert_eq!(device_in_use(f.path()), Ok(()));
    }

    #[test]
    fn free_space_of_tmp_is_plausible() {
        let free = free_space(Path::new("/tmp")).unwrap();
        assert!(free > 0);
        assert!(free_space(Path::new("/nonexistent/dir")).is_err());
    }
}
