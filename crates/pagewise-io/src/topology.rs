//! What the kernel says about the device behind a path (sysfs, ioctls,
//! /proc/self/mountinfo). The probe records it beside every result and the
//! advisor picks page sizes from it, so a missing entry is `None`, never a panic.

use crate::{IoError, Result};
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

/// The device and filesystem behind a path, as sysfs and mountinfo describe it.
/// Every field is optional in JSON so older results files still load.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Topology {
    /// The path asked about.
    pub path: PathBuf,
    /// `MAJ:MIN` of the device holding the path (or of the device node itself).
    pub dev: String,
    /// Kernel name of that device, e.g. `vda` or `vda1`.
    pub device: Option<String>,
    /// Kernel name of the whole disk (equal to `device` unless a partition).
    pub disk: Option<String>,
    /// `device/model` of the disk, when the driver exports one.
    pub model: Option<String>,
    /// Size in bytes of `device`.
    pub size: Option<u64>,
    pub logical_block_size: Option<u64>,
    pub physical_block_size: Option<u64>,
    pub minimum_io_size: Option<u64>,
    pub optimal_io_size: Option<u64>,
    pub rotational: Option<bool>,
    /// The active I/O scheduler (the bracketed entry of `queue/scheduler`).
    pub scheduler: Option<String>,
    pub nr_requests: Option<u64>,
    pub discard_granularity: Option<u64>,
    /// `queue/write_cache`: "write back" means the drive has a volatile cache
    /// and only a flush makes writes durable.
    pub write_cache: Option<String>,
    /// Filesystem type when the path lives in a filesystem (not a device node).
    pub fs_type: Option<String>,
    pub mount_point: Option<PathBuf>,
}

impl Topology {
    /// Describes the device behind a regular file, directory or block device.
    pub fn for_path(path: &Path) -> Result<Topology> {
        let meta = std::fs::metadata(path).map_err(|source| IoError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        let is_dev = meta.file_type().is_block_device();
        let dev = if is_dev { meta.rdev() } else { meta.dev() };
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        let mut t = Topology {
            path: path.to_path_buf(),
            dev: format!("{major}:{minor}"),
            ..Default::default()
        };
        let mut sys = sysfs_dev_dir(major, minor);
        if !is_dev {
            // btrfs and overlay report an anonymous st_dev: fall back to the
            // device node the filesystem was mounted from.
            let source = t.fill_mount(path, &t.dev.clone());
            sys = sys.or_else(|| source.and_then(|s| source_sysfs_dir(&s)));
        }
        if let Some(dir) = sys {
            t.fill_from_sysfs(&dir);
        }
        Ok(t)
    }

    fn fill_from_sysfs(&mut self, dir: &Path) {
        let disk = whole_disk_dir(dir);
        self.device = file_name(dir);
        self.disk = file_name(&disk);
        self.model = read_sys_string(&disk, "device/model");
        self.size = read_sys_u64(dir, "size").map(|sectors| sectors * 512);
        let q = |rel: &str| read_sys_u64(&disk, &format!("queue/{rel}"));
        self.logical_block_size = q("logical_block_size");
        self.physical_block_size = q("physical_block_size");
        self.minimum_io_size = q("minimum_io_size");
        self.optimal_io_size = q("optimal_io_size");
        self.rotational = q("rotational").map(|v| v != 0);
        self.nr_requests = q("nr_requests");
        self.discard_granularity = q("discard_granularity");
        self.scheduler = read_sys_string(&disk, "queue/scheduler").and_then(|s| selected(&s));
        self.write_cache = read_sys_string(&disk, "queue/write_cache");
    }

    /// Sets fs type and mount point; returns the mount source.
    fn fill_mount(&mut self, path: &Path, dev: &str) -> Option<String> {
        let canon = std::fs::canonicalize(path).ok()?;
        let mounts = mountinfo();
        let best = mounts
            .iter()
            .filter(|m| canon.starts_with(&m.mount_point))
            .max_by_key(|m| (m.dev == dev, m.mount_point.as_os_str().len()));
        let m = best?;
        self.mount_point = Some(m.mount_point.clone());
        self.fs_type = Some(m.fs_type.clone());
        Some(m.source.clone())
    }
}

/// sysfs directory of a mount source that is a block device node.
fn source_sysfs_dir(source: &str) -> Option<PathBuf> {
    let dev = source_dev(source)?;
    let (major, minor) = dev.split_once(':')?;
    sysfs_dev_dir(major.parse().ok()?, minor.parse().ok()?)
}

/// The entry marked `[like-this]` in a sysfs choice list.
fn selected(list: &str) -> Option<String> {
    let start = list.find('[')? + 1;
    let end = start + list[start..].find(']')?;
    Some(list[start..end].to_string())
}

fn file_name(p: &Path) -> Option<String> {
    p.file_name().map(|n| n.to_string_lossy().into_owned())
}

fn read_sys_string(dir: &Path, rel: &str) -> Option<String> {
    let s = std::fs::read_to_string(dir.join(rel)).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// `/sys/devices/...` directory of block device `major:minor`.
fn sysfs_dev_dir(major: u32, minor: u32) -> Option<PathBuf> {
    sysfs_dev_dir_in(Path::new("/sys"), major, minor)
}

/// As [`sysfs_dev_dir`] under another sysfs root (tests use a fake tree).
fn sysfs_dev_dir_in(sys: &Path, major: u32, minor: u32) -> Option<PathBuf> {
    std::fs::canonicalize(sys.join(format!("dev/block/{major}:{minor}"))).ok()
}

/// A partition's queue/ and device/ live in its parent disk's directory.
fn whole_disk_dir(dir: &Path) -> PathBuf {
    match dir.parent() {
        Some(parent) if dir.join("partition").exists() => parent.to_path_buf(),
        _ => dir.to_path_buf(),
    }
}

/// One line of /proc/self/mountinfo, the fields we use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// `MAJ:MIN` of the mounted device (anonymous for btrfs/overlay/tmpfs).
    pub dev: String,
    pub mount_point: PathBuf,
    pub fs_type: String,
    /// What was mounted, e.g. `/dev/vda`.
    pub source: String,
}

/// Parses /proc/self/mountinfo; an unreadable file yields no entries.
pub fn mountinfo() -> Vec<MountEntry> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|s| s.lines().filter_map(parse_mountinfo_line).collect())
        .unwrap_or_default()
}

/// `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw`:
/// field 3 is the device, 5 the mount point, then after `-` type and source.
fn parse_mountinfo_line(line: &str) -> Option<MountEntry> {
    let (pre, post) = line.split_once(" - ")?;
    let pre: Vec<&str> = pre.split(' ').collect();
    let mut post = post.split(' ');
    Some(MountEntry {
        dev: pre.get(2)?.to_string(),
        mount_point: PathBuf::from(unescape_octal(pre.get(4)?)),
        fs_type: post.next()?.to_string(),
        source: unescape_octal(post.next()?),
    })
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], oct) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What makes writing the block device at `device_path` unsafe, as a phrase
/// for messages ("mounted at /", "used as swap"), or None when nothing does:
/// the device, any partition of it, its parent disk, or any device stacked
/// on it (dm, md: sysfs `holders`) mounted or used as swap. The probe
/// refuses to write to such a device.
pub fn in_use(device_path: &Path) -> Result<Option<String>> {
    let meta = std::fs::metadata(device_path).map_err(|source| IoError::Open {
        path: device_path.to_path_buf(),
        source,
    })?;
    if !meta.file_type().is_block_device() {
        return Err(IoError::Invalid {
            path: device_path.to_path_buf(),
            what: "is not a block device; only block devices are checked for mounts and swap"
                .into(),
        });
    }
    let rdev = meta.rdev();
    let devs = related_devices(Path::new("/sys"), libc::major(rdev), libc::minor(rdev));
    let related = |dev: &str| devs.iter().any(|d| d == dev);
    let mount = mountinfo()
        .into_iter()
        .find(|m| related(&m.dev) || source_dev(&m.source).is_some_and(|d| related(&d)));
    if let Some(m) = mount {
        return Ok(Some(format!("mounted at {}", m.mount_point.display())));
    }
    Ok(swaps()
        .iter()
        .any(|d| related(d))
        .then(|| "used as swap".to_string()))
}

/// `MAJ:MIN` of a mount source that is a device node (`/dev/vda`), if any.
fn source_dev(source: &str) -> Option<String> {
    if !source.starts_with('/') {
        return None;
    }
    let m = std::fs::metadata(source).ok()?;
    m.file_type()
        .is_block_device()
        .then(|| format!("{}:{}", libc::major(m.rdev()), libc::minor(m.rdev())))
}

/// Devices of the active swap areas in /proc/swaps.
fn swaps() -> Vec<String> {
    let text = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    text.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(source_dev)
        .collect()
}

/// `MAJ:MIN` of the devices whose data a write to `major:minor` can destroy:
/// the device, its partitions (for a disk) or its disk itself (for a
/// partition; sibling partitions are independent), and everything holding
/// any of these, transitively.
fn related_devices(sys: &Path, major: u32, minor: u32) -> Vec<String> {
    let mut out = vec![format!("{major}:{minor}")];
    let Some(dir) = sysfs_dev_dir_in(sys, major, minor) else {
        return out;
    };
    let disk = whole_disk_dir(&dir);
    if disk != dir {
        out.extend(read_sys_string(&disk, "dev"));
    }
    let mut todo = vec![dir.clone()];
    todo.extend(partitions(&dir));
    let mut seen = Vec::new();
    while let Some(d) = todo.pop() {
        if seen.contains(&d) {
            continue;
        }
        if let Some(dev) = read_sys_string(&d, "dev") {
            out.push(dev);
        }
        todo.extend(holders(&d));
        seen.push(d);
    }
    out
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default()
}

fn partitions(disk: &Path) -> Vec<PathBuf> {
    subdirs(disk)
        .into_iter()
        .filter(|p| p.join("partition").exists())
        .collect()
}

/// Devices stacked on `dir` (dm, md, bcache), resolved to their sysfs dirs.
fn holders(dir: &Path) -> Vec<PathBuf> {
    subdirs(&dir.join("holders"))
        .into_iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect()
}

/// Bytes an unprivileged writer may still use under `dir` (statvfs
/// `f_bavail * f_frsize`: reserved root blocks are not counted).
pub fn free_space(dir: &Path) -> Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(|_| IoError::Invalid {
        path: dir.to_path_buf(),
        what: "path contains a NUL byte".into(),
    })?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid C string and st a properly sized out-parameter.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(IoError::Open {
            path: dir.to_path_buf(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sys(rel: &str) -> Option<String> {
        read_sys_string(Path::new("/sys/block/vda"), rel)
    }

    fn num(rel: &str) -> Option<u64> {
        sys(rel).and_then(|s| s.parse().ok())
    }

    #[test]
    fn tmp_file_matches_sysfs() {
        if !Path::new("/sys/block/vda").exists() {
            return; // not the project VM
        }
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x");
        std::fs::write(&f, b"x").unwrap();
        let t = Topology::for_path(&f).unwrap();
        assert_eq!(t.disk.as_deref(), Some("vda"));
        assert_eq!(t.logical_block_size, Some(512));
        assert_eq!(t.physical_block_size, num("queue/physical_block_size"));
        assert_eq!(t.optimal_io_size, num("queue/optimal_io_size"));
        assert_eq!(t.nr_requests, num("queue/nr_requests"));
        assert_eq!(t.rotational, num("queue/rotational").map(|r| r == 1));
        assert_eq!(t.size, num("size").map(|s| s * 512));
        let sched = sys("queue/scheduler").unwrap();
        let want = t.scheduler.clone().unwrap();
        assert!(sched.contains(&format!("[{want}]")), "{sched} vs {want}");
        assert_eq!(t.fs_type.as_deref(), Some("ext4"));
        assert!(f.starts_with(t.mount_point.as_ref().unwrap()));
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<Topology>(&json).unwrap(), t);
    }

    #[test]
    fn device_node_and_mount_state() {
        let vda = Path::new("/dev/vda");
        if !vda.exists() {
            return;
        }
        let t = Topology::for_path(vda).unwrap();
        assert_eq!(t.device.as_deref(), Some("vda"));
        assert_eq!(t.fs_type, None, "a device node is not in a filesystem");
        assert!(in_use(vda).unwrap().is_some(), "/ is on vda");
        let unused = Path::new("/dev/loop7");
        if unused.exists() && num_loop_size(unused) == Some(0) {
            assert_eq!(in_use(unused).unwrap(), None);
        }
    }

    fn num_loop_size(dev: &Path) -> Option<u64> {
        let name = dev.file_name()?.to_string_lossy().into_owned();
        read_sys_u64(&Path::new("/sys/block").join(name), "size")
    }

    #[test]
    fn errors_not_panics() {
        assert!(Topology::for_path(Path::new("/nonexistent/x")).is_err());
        assert!(matches!(
            in_use(Path::new("/etc/hostname")),
            Err(IoError::Invalid { .. }) | Err(IoError::Open { .. })
        ));
        // /proc has no block device: everything device-related is None.
        let t = Topology::for_path(Path::new("/proc/self")).unwrap();
        assert_eq!(t.logical_block_size, None);
        assert_eq!(t.fs_type.as_deref(), Some("proc"));
        if Path::new("/dev/shm").is_dir() {
            let t = Topology::for_path(Path::new("/dev/shm")).unwrap();
            assert_eq!((t.fs_type.as_deref(), t.device), (Some("tmpfs"), None));
        }
    }

    #[test]
    fn free_space_matches_df_arithmetic() {
        let dir = tempfile::tempdir().unwrap();
        let free = free_space(dir.path()).unwrap();
        assert!(free > 0);
        let out = std::process::Command::new("df")
            .args(["-B1", "--output=avail"])
            .arg(dir.path())
            .output();
        if let Ok(out) = out {
            let text = String::from_utf8_lossy(&out.stdout);
            if let Some(avail) = text
                .lines()
                .nth(1)
                .and_then(|l| l.trim().parse::<u64>().ok())
            {
                // Other helpers write meanwhile: allow 1 GiB of drift.
                assert!(free.abs_diff(avail) < 1 << 30, "{free} vs df {avail}");
            }
        }
    }

    /// A fake sysfs: disk sdz (8:0) with partitions sdz1 (8:1) and sdz2
    /// (8:2); sdz2 is held by dm-0 (252:0), which is held by dm-1 (252:1).
    fn fake_sysfs() -> tempfile::TempDir {
        use std::os::unix::fs::symlink;
        let t = tempfile::tempdir().unwrap();
        let devs = t.path().join("devices/virtual/block");
        let node = |rel: &str, dev: &str| {
            std::fs::create_dir_all(devs.join(rel).join("holders")).unwrap();
            std::fs::write(devs.join(rel).join("dev"), format!("{dev}\n")).unwrap();
            let link = t.path().join(format!("dev/block/{dev}"));
            std::fs::create_dir_all(link.parent().unwrap()).unwrap();
            symlink(devs.join(rel), link).unwrap();
        };
        node("sdz", "8:0");
        node("sdz/sdz1", "8:1");
        node("sdz/sdz2", "8:2");
        node("dm-0", "252:0");
        node("dm-1", "252:1");
        node("sdy", "8:16");
        for p in ["sdz/sdz1", "sdz/sdz2"] {
            std::fs::write(devs.join(p).join("partition"), "1\n").unwrap();
        }
        symlink(devs.join("dm-0"), devs.join("sdz/sdz2/holders/dm-0")).unwrap();
        symlink(devs.join("dm-1"), devs.join("dm-0/holders/dm-1")).unwrap();
        t
    }

    #[test]
    fn related_devices_follow_partitions_parents_and_holders() {
        let t = fake_sysfs();
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v.dedup();
            v
        };
        let all = ["252:0", "252:1", "8:0", "8:1", "8:2"]
            .map(String::from)
            .to_vec();
        assert_eq!(sorted(related_devices(t.path(), 8, 0)), all, "disk");
        let p1 = ["8:0", "8:1"].map(String::from).to_vec();
        assert_eq!(sorted(related_devices(t.path(), 8, 1)), p1, "not sdz2");
        let p2 = ["252:0", "252:1", "8:0", "8:2"].map(String::from).to_vec();
        assert_eq!(sorted(related_devices(t.path(), 8, 2)), p2, "sdz2 is held");
        assert_eq!(
            sorted(related_devices(t.path(), 8, 16)),
            vec!["8:16".to_string()]
        );
        assert_eq!(
            related_devices(t.path(), 9, 9),
            vec!["9:9".to_string()],
            "unknown"
        );
    }

    #[test]
    fn parsing_helpers() {
        assert_eq!(
            selected("none [mq-deadline] kyber").as_deref(),
            Some("mq-deadline")
        );
        assert_eq!(selected("none"), None);
        let e = parse_mountinfo_line(
            "36 35 98:0 /mnt1 /mnt\\040two rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
        )
        .unwrap();
        assert_eq!(e.dev, "98:0");
        assert_eq!(e.mount_point, PathBuf::from("/mnt two"));
        assert_eq!(
            (e.fs_type.as_str(), e.source.as_str()),
            ("ext3", "/dev/root")
        );
        assert_eq!(unescape_octal("a\\134b\\"), "a\\b\\");
    }
}
