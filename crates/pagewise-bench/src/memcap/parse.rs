//! Pure parsers for what the kernel says about memory cgroups, kept apart
//! from the file system so they can be tested on fixed text.

use std::path::PathBuf;

/// Which cgroup interface holds the memory controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// A `memory` hierarchy of its own: `memory.limit_in_bytes`.
    V1,
    /// The unified hierarchy: `memory.max`.
    V2,
}

impl Version {
    pub fn method(self) -> &'static str {
        match self {
            Self::V1 => "cgroup-v1",
            Self::V2 => "cgroup-v2",
        }
    }
}

/// Where this process's memory cgroup is: the hierarchy's mount point and the
/// group's path inside it (as /proc/self/cgroup gives it, starting with `/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub version: Version,
    pub mount: PathBuf,
    pub group: String,
}

impl Location {
    /// The group's directory.
    pub fn dir(&self) -> PathBuf {
        self.mount.join(self.group.trim_start_matches('/'))
    }
}

/// Finds the memory cgroup from the texts of /proc/self/cgroup and /proc/mounts.
/// A v1 memory hierarchy wins: the controller can be bound to only one
/// hierarchy, so when v1 has it the unified one does not.
pub fn locate(proc_cgroup: &str, mounts: &str) -> Result<Location, String> {
    let v1_group = proc_cgroup.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
        ctrl.split(',')
            .any(|c| c == "memory")
            .then(|| path.to_string())
    });
    let mount_of = |fstype: &str, needs_memory: bool| {
        mounts.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let ok = f.len() >= 4
                && f[2] == fstype
                && (!needs_memory || f[3].split(',').any(|o| o == "memory"));
            ok.then(|| PathBuf::from(unescape_mount(f[1])))
        })
    };
    if let Some(group) = v1_group {
        return match mount_of("cgroup", true) {
            Some(mount) => Ok(Location {
                version: Version::V1,
                mount,
                group,
            }),
            None => Err("this process has a v1 memory cgroup but no `cgroup` mount with the memory controller is in /proc/mounts".into()),
        };
    }
    let v2_group = proc_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::").map(String::from));
    match (v2_group, mount_of("cgroup2", false)) {
        (Some(group), Some(mount)) => Ok(Location {
            version: Version::V2,
            mount,
            group,
        }),
        (None, _) => {
            Err("no memory cgroup in /proc/self/cgroup (kernel without memory cgroups?)".into())
        }
        (Some(_), None) => Err("no cgroup2 file system is mounted (see /proc/mounts)".into()),
    }
}

/// /proc/mounts writes spaces and a few other bytes as octal escapes (`\040`).
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).and_then(|d| {
            std::str::from_utf8(d)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (b[i], octal) {
            (b'\\', Some(c)) => {
                out.push(c);
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

/// The figures of a group's memory.stat this harness uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stat {
    /// Anonymous memory: v1 `rss`, v2 `anon`.
    pub anon: u64,
    /// Page cache (mapped file pages included): v1 `cache`, v2 `file`.
    pub file: u64,
}

/// Parses memory.stat ("name value" per line) of either version.
pub fn stat(text: &str) -> Stat {
    let mut s = Stat::default();
    for l in text.lines() {
        let mut f = l.split_whitespace();
        let (Some(k), Some(v)) = (f.next(), f.next().and_then(|v| v.parse::<u64>().ok())) else {
            continue;
        };
        match k {
            "rss" | "anon" => s.anon = v,
            "cache" | "file" => s.file = v,
            _ => {}
        }
    }
    s
}

/// Parses a single-number cgroup file; v1 shows "no limit" as a huge number,
/// v2 as `max`, both read as `None`.
pub fn number(text: &str) -> Option<u64> {
    text.trim().parse::<u64>().ok().filter(|&v| v < (1 << 62))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS_HYBRID: &str = "\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
";

    #[test]
    fn v1_memory_line_is_found_among_other_controllers() {
        let cg = "9:name=systemd:/\n4:memory:/process_api/8b0d\n1:cpu,cpuacct:/\n0::/\n";
        let l = locate(cg, MOUNTS_HYBRID).unwrap();
        assert_eq!(l.version, Version::V1);
        assert_eq!(l.mount, PathBuf::from("/sys/fs/cgroup/memory"));
        assert_eq!(l.group, "/process_api/8b0d");
        assert_eq!(
            l.dir(),
            PathBuf::from("/sys/fs/cgroup/memory/process_api/8b0d")
        );
    }

    #[test]
    fn co_mounted_v1_controllers_still_count_as_memory() {
        let cg = "3:cpu,memory:/a\n";
        let mounts = "cgroup /cg cgroup rw,cpu,memory 0 0\n";
        let l = locate(cg, mounts).unwrap();
        assert_eq!((l.version, l.dir()), (Version::V1, PathBuf::from("/cg/a")));
    }

    #[test]
    fn unified_only_hierarchy_is_v2() {
        let cg = "0::/user.slice/session-1.scope\n";
        let mounts = "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n";
        let l = locate(cg, mounts).unwrap();
        assert_eq!(l.version, Version::V2);
        assert_eq!(
            l.dir(),
            PathBuf::from("/sys/fs/cgroup/user.slice/session-1.scope")
        );
        assert_eq!(
            Location {
                group: "/".into(),
                ..l
            }
            .dir(),
            PathBuf::from("/sys/fs/cgroup")
        );
    }

    #[test]
    fn missing_mounts_say_what_is_missing() {
        let e = locate("4:memory:/x\n", "proc /proc proc rw 0 0\n").unwrap_err();
        assert!(e.contains("memory controller"), "{e}");
        let e = locate("0::/\n", "proc /proc proc rw 0 0\n").unwrap_err();
        assert!(e.contains("cgroup2"), "{e}");
        let e = locate("", MOUNTS_HYBRID).unwrap_err();
        assert!(e.contains("no memory cgroup"), "{e}");
    }

    #[test]
    fn escaped_mount_points_are_decoded() {
        let mounts = "cgroup2 /mnt/my\\040cg cgroup2 rw 0 0\n";
        let l = locate("0::/a\n", mounts).unwrap();
        assert_eq!(l.dir(), PathBuf::from("/mnt/my cg/a"));
    }

    #[test]
    fn v1_stat_reads_rss_and_cache_not_their_totals() {
        let t = "cache 466944\nrss 1679360\nrss_huge 0\nmapped_file 4096\n\
                 total_cache 9999\ntotal_rss 8888\n";
        assert_eq!(
            stat(t),
            Stat {
                anon: 1_679_360,
                file: 466_944
            }
        );
    }

    #[test]
    fn v2_stat_reads_anon_and_file() {
        let t = "anon 3145728\nfile 7340032\nkernel 1048576\nfile_mapped 4096\nanon_thp 0\n";
        assert_eq!(
            stat(t),
            Stat {
                anon: 3_145_728,
                file: 7_340_032
            }
        );
        assert_eq!(stat("garbage\nanon x\n"), Stat::default());
    }

    #[test]
    fn no_limit_reads_as_none() {
        assert_eq!(number("9223372036854771712\n"), None);
        assert_eq!(number("max\n"), None);
        assert_eq!(number("16777216\n"), Some(16 << 20));
    }
}
