//! A memory cgroup must really bound the page cache a process can hold,
//! memory-mapped pages included (the case fadvise trimming cannot handle).
//!
//! The test binary runs itself as a child (so the harness is never confined):
//! the child maps a 64 MiB file it wrote and dropped from the page cache,
//! touches every page, and counts resident pages with mincore(2). Capped at a
//! 16 MiB budget, at most budget + slack may stay resident; uncapped, nearly
//! all do, so a cap that does nothing fails the test.

use pagewise_bench::cachelimit::slack;
use pagewise_bench::memcap::{self, MemCap};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

const FILE_BYTES: usize = 64 << 20;
const BUDGET: u64 = 16 << 20;
const PAGE: usize = 4096;
const ROLE: &str = "PAGEWISE_MEMCAP_CHILD";
const TEST: &str = "mapped_pages_resident_stay_within_the_cap";

#[test]
fn mapped_pages_resident_stay_within_the_cap() {
    if let Ok(role) = std::env::var(ROLE) {
        child(role == "capped");
        return;
    }
    if let Some(why) = memcap::unavailable_reason() {
        eprintln!("SKIPPED: memory cgroups unavailable: {why}");
        return;
    }
    let pages = FILE_BYTES / PAGE;
    let (capped, limit) = run_child("capped");
    let limit = limit.expect("the capped child reports its limit");
    // The limit is budget + slack over what the child held outside the page
    // cache (a few MiB at most); file pages can fill all of it, not more.
    assert!(
        limit >= BUDGET + slack(BUDGET) && limit < BUDGET + slack(BUDGET) + (16 << 20),
        "limit {limit} is not budget + slack over a small base"
    );
    assert!(
        capped <= limit as usize / PAGE,
        "capped: {capped} of {pages} pages resident, more than the {limit}-byte limit"
    );
    let (free, _) = run_child("uncapped");
    assert!(
        free >= pages * 9 / 10,
        "uncapped: only {free} of {pages} pages resident, so the capped figure proves nothing"
    );
}

/// Runs this test in a child process; returns the resident pages and the
/// limit it reports.
fn run_child(role: &str) -> (usize, Option<u64>) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{role} child failed: {}\n{stdout}\n{stderr}",
        out.status
    );
    // The harness prints "test NAME ... " before the child's own line.
    let report = stdout.split_once("MEMCAP ").map(|(_, r)| r);
    eprintln!(
        "{role} child: {}",
        report.and_then(|r| r.lines().next()).unwrap_or("?")
    );
    let field = |name: &str| {
        let r = report?.lines().next()?;
        r.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.parse::<u64>().ok())
    };
    let resident = field("resident=")
        .unwrap_or_else(|| panic!("{role} child printed no count:\n{stdout}\n{stderr}"));
    (resident as usize, field("limit="))
}

fn child(capped: bool) {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("memcap-{}.dat", std::process::id()));
    let f = write_uncached(&path);
    let home = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let cap = capped.then(|| {
        let cap = MemCap::create().expect("memory cgroup");
        let base = cap.group().unreclaimable().unwrap();
        let limit = base + BUDGET + slack(BUDGET);
        cap.group().set_limit(limit).unwrap();
        (cap, limit)
    });
    let resident = touch_and_count(&f);
    let peak = cap.as_ref().map(|(c, _)| c.group().usage().unwrap());
    let dir = cap.as_ref().map(|(c, _)| c.group().dir().to_path_buf());
    let limit = cap.as_ref().map_or("none".into(), |c| c.1.to_string());
    println!(
        "MEMCAP resident={resident} pages={} limit={limit} usage_after={peak:?}",
        FILE_BYTES / PAGE
    );
    drop(cap);
    drop(f);
    let _ = std::fs::remove_file(&path);
    // Dropping moves the process home and removes the group.
    assert_eq!(std::fs::read_to_string("/proc/self/cgroup").unwrap(), home);
    if let Some(d) = dir {
        assert!(!d.exists(), "{} left behind", d.display());
    }
}

/// Writes the file, syncs it and drops it from the page cache, so the pages
/// are charged to whoever touches them next (not to this process's old group).
fn write_uncached(path: &Path) -> std::fs::File {
    std::fs::write(path, vec![0x5au8; FILE_BYTES]).unwrap();
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    // SAFETY: a valid fd; fadvise only changes cache state.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    f
}

/// Maps the file, reads a byte of every page, and counts resident pages.
fn touch_and_count(f: &std::fs::File) -> usize {
    // SAFETY: a read-only shared mapping of an open file of FILE_BYTES bytes,
    // read within its length and unmapped before returning.
    unsafe {
        let addr = libc::mmap(
            std::ptr::null_mut(),
            FILE_BYTES,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(addr, libc::MAP_FAILED);
        let base = addr as *const u8;
        let mut sum = 0u64;
        for i in (0..FILE_BYTES).step_by(PAGE) {
            sum += std::ptr::read_volatile(base.add(i)) as u64;
        }
        assert_eq!(sum, 0x5a * (FILE_BYTES / PAGE) as u64);
        let mut vec = vec![0u8; FILE_BYTES / PAGE];
        assert_eq!(libc::mincore(addr, FILE_BYTES, vec.as_mut_ptr()), 0);
        libc::munmap(addr, FILE_BYTES);
        vec.iter().filter(|&&b| b & 1 == 1).count()
    }
}
