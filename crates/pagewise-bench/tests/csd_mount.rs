//! The emulated compressing drive mounted for real: data written through the
//! mount (buffered, O_DIRECT, shared mmap) lands in the backing directory and
//! is metered exactly; unmounting leaves nothing behind; a dead run's mount is
//! swept; a server told to stop detaches its mount. Every engine runs on it,
//! LMDB included (the server is a process of its own, so LMDB's munmap cannot
//! deadlock against it). Skipped, with the reason printed, where FUSE cannot
//! be mounted.

use pagewise_bench::csd::{self, zlib_stored_bytes, CsdMount, BLOCK_BYTES};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

fn skip() -> bool {
    csd::set_server_program(std::path::Path::new(env!(
        "CARGO_BIN_EXE_pagewise-csd-server"
    )));
    // SAFETY: geteuid has no preconditions.
    let why = csd::unavailable_reason()
        .or_else(|| (unsafe { libc::geteuid() } != 0).then(|| "not root".to_string()));
    if let Some(why) = why {
        eprintln!("skipped: {why}");
        return true;
    }
    false
}

fn mounted(path: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let want = path.to_string_lossy();
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|m| m == want)
}

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ salt ^ (i / 251) as u8)
        .collect()
}

/// A 4 KiB-aligned buffer for O_DIRECT.
struct Aligned {
    ptr: *mut u8,
    len: usize,
}
impl Aligned {
    fn new(data: &[u8]) -> Self {
        let layout = std::alloc::Layout::from_size_align(data.len(), 4096).unwrap();
        // SAFETY: non-zero size; freed in Drop with the same layout.
        let ptr = unsafe { std::alloc::alloc(layout) };
        assert!(!ptr.is_null());
        // SAFETY: ptr holds data.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, data.len()) };
        Self {
            ptr,
            len: data.len(),
        }
    }
    fn slice(&self) -> &[u8] {
        // SAFETY: allocated and initialised in new.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}
impl Drop for Aligned {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(self.len, 4096).unwrap();
        // SAFETY: allocated in new with this layout.
        unsafe { std::alloc::dealloc(self.ptr, layout) };
    }
}

#[test]
fn buffered_and_direct_writes_reach_the_backing_files_and_are_metered_exactly() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (backing, mnt) = (dir.path().join("backing"), dir.path().join("mnt"));
    std::fs::create_dir(&backing).unwrap();
    let mut m = CsdMount::mount(&backing, &mnt).unwrap();
    assert!(mounted(&mnt));

    // Buffered: 10 000 bytes in one write, then a subdirectory and a rename.
    let a = pattern(10_000, 1);
    std::fs::write(mnt.join("a"), &a).unwrap();
    std::fs::create_dir(mnt.join("sub")).unwrap();
    std::fs::rename(mnt.join("a"), mnt.join("sub/a2")).unwrap();
    assert_eq!(std::fs::read(backing.join("sub/a2")).unwrap(), a);
    assert_eq!(std::fs::read(mnt.join("sub/a2")).unwrap(), a);
    let s = m.stats().unwrap();
    assert_eq!(s.logical_bytes, 10_000);
    assert_eq!(
        s.blocks_written, 3,
        "10 000 bytes from offset 0 span 3 blocks"
    );

    // O_DIRECT: 8 KiB at offset 4096 of a new file.
    let d = pattern(8192, 2);
    let buf = Aligned::new(&d);
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(mnt.join("direct"))
        .expect("O_DIRECT open through the mount");
    f.seek(SeekFrom::Start(4096)).unwrap();
    f.write_all(buf.slice()).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let back = std::fs::read(backing.join("direct")).unwrap();
    assert_eq!(back.len(), 4096 + 8192);
    assert!(back[..4096].iter().all(|&b| b == 0));
    assert_eq!(&back[4096..], &d[..]);
    let s2 = m.stats().unwrap().since(&s);
    assert_eq!(s2.logical_bytes, 8192);
    assert_eq!(s2.direct_opens, 1);
    assert_eq!(s2.blocks_written, 2);
    let expect = zlib_stored_bytes(&d[..BLOCK_BYTES]) + zlib_stored_bytes(&d[BLOCK_BYTES..]);
    assert_eq!(s2.zlib_bytes, expect);

    // Reads, truncate, unlink and readdir pass through.
    let mut r = std::fs::File::open(mnt.join("direct")).unwrap();
    let mut got = Vec::new();
    r.read_to_end(&mut got).unwrap();
    assert_eq!(got, back);
    drop(r);
    std::fs::OpenOptions::new()
        .write(true)
        .open(mnt.join("direct"))
        .unwrap()
        .set_len(100)
        .unwrap();
    assert_eq!(
        std::fs::metadata(backing.join("direct")).unwrap().len(),
        100
    );
    let mut names: Vec<String> = std::fs::read_dir(&mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["direct", "sub"]);
    std::fs::remove_file(mnt.join("direct")).unwrap();
    assert!(!backing.join("direct").exists());

    let end = m.unmount().unwrap();
    assert_eq!(end.logical_bytes, 18_192);
    assert!(!mounted(&mnt) && !mnt.exists(), "unmounted and removed");
}

#[test]
fn shared_mmap_writes_reach_the_meter() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (backing, mnt) = (dir.path().join("backing"), dir.path().join("mnt"));
    std::fs::create_dir(&backing).unwrap();
    let mut m = CsdMount::mount(&backing, &mnt).unwrap();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(mnt.join("mapped"))
        .unwrap();
    f.set_len(4 * 4096).unwrap();
    let before = m.stats().unwrap();
    let page = pattern(4096, 3);
    // SAFETY: a fresh shared mapping of 16 KiB of an open file; unmapped below.
    unsafe {
        use std::os::unix::io::AsRawFd;
        let p = libc::mmap(
            std::ptr::null_mut(),
            4 * 4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "{}", std::io::Error::last_os_error());
        std::ptr::copy_nonoverlapping(page.as_ptr(), (p as *mut u8).add(2 * 4096), 4096);
        assert_eq!(libc::msync(p, 4 * 4096, libc::MS_SYNC), 0);
        libc::munmap(p, 4 * 4096);
    }
    drop(f);
    let s = m.stats().unwrap().since(&before);
    assert!(s.page_cache_writes >= 1, "{s:?}");
    assert!(s.logical_bytes >= 4096, "{s:?}");
    assert!(
        s.zlib_bytes >= zlib_stored_bytes(&page),
        "the dirty page was metered: {s:?}"
    );
    let back = std::fs::read(backing.join("mapped")).unwrap();
    assert_eq!(&back[2 * 4096..3 * 4096], &page[..]);
    assert!(back[..2 * 4096].iter().all(|&b| b == 0));
    m.unmount().unwrap();
    assert!(!mounted(&mnt));
}

#[test]
fn drop_unmounts_and_a_dead_runs_mount_is_swept() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("backing");
    std::fs::create_dir(&backing).unwrap();
    // Dropped while a file is still known to the kernel: unmounts anyway.
    let mnt = dir.path().join("dropped");
    {
        let m = CsdMount::mount(&backing, &mnt).unwrap();
        std::fs::write(m.mount_point().join("x"), b"x").unwrap();
    }
    assert!(!mounted(&mnt) && !mnt.exists());
    // A mount named after a process that no longer exists, left mounted.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = dir.path().join(format!("run-pagewise-{dead}.csd"));
    let m = CsdMount::mount(&backing, &stale).unwrap();
    std::mem::forget(m);
    assert!(mounted(&stale));
    let notes = pagewise_bench::loopfs::sweep_stale(dir.path());
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(!mounted(&stale) && !stale.exists());
    assert_eq!(std::fs::read(backing.join("x")).unwrap(), b"x");
}

#[test]
fn a_server_told_to_stop_detaches_its_mount() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (backing, mnt) = (dir.path().join("backing"), dir.path().join("mnt"));
    std::fs::create_dir(&backing).unwrap();
    let mut m = CsdMount::mount(&backing, &mnt).unwrap();
    assert!(m.note().contains("writeback"), "{}", m.note());
    std::fs::write(mnt.join("x"), b"kept").unwrap();
    let pid = m.server_pid().unwrap();
    // SAFETY: kill with a pid we started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    // The server detaches and exits on its own: no mount is left.
    let mut polls = 0;
    while mounted(&mnt) && polls < 500 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        polls += 1;
    }
    assert!(!mounted(&mnt), "still mounted after SIGTERM to the server");
    // The server reported its last counters as it exited: unmount returns
    // them, or an error if the pipe closed first. Either way it returns.
    if let Ok(s) = m.unmount() {
        assert_eq!(s.logical_bytes, 4, "{s:?}");
    }
    assert_eq!(std::fs::read(backing.join("x")).unwrap(), b"kept");
}

/// Loads 2 000 keys into `engine` on the mount, closes, reopens and reads
/// them all back; returns what the drive saw.
fn engine_round_trip(engine: &str, settings: pagewise_bench::Settings) -> csd::CsdStats {
    use pagewise_bench::{open_engine, WriteOp};
    let dir = tempfile::tempdir().unwrap();
    let (backing, mnt) = (dir.path().join("backing"), dir.path().join("mnt"));
    std::fs::create_dir(&backing).unwrap();
    let mut m = CsdMount::mount(&backing, &mnt).unwrap();
    let db = mnt.join("db");
    let kv = |i: u32| (format!("key{i:08}").into_bytes(), pattern(100, i as u8));
    let e = open_engine(engine, &db, &settings, &["main"]).unwrap();
    for chunk in (0..2000u32).collect::<Vec<_>>().chunks(100) {
        let ops: Vec<WriteOp> = chunk
            .iter()
            .map(|&i| {
                let (key, value) = kv(i);
                WriteOp::Put {
                    table: 0,
                    key,
                    value,
                }
            })
            .collect();
        e.write_batch(ops).unwrap();
    }
    e.sync().unwrap();
    e.close().unwrap();
    let e = open_engine(engine, &db, &settings, &["main"]).unwrap();
    for i in (0..2000u32).step_by(7) {
        let (key, value) = kv(i);
        assert_eq!(e.get(0, &key).unwrap(), Some(value), "{engine}: key {i}");
    }
    e.close().unwrap();
    let s = m.unmount().unwrap();
    assert!(!mounted(&mnt));
    assert!(s.logical_bytes >= 2000 * 111, "{engine}: {s:?}");
    assert!(s.zlib_bytes > 0 && s.lz4_bytes > 0, "{engine}: {s:?}");
    eprintln!("{engine}: {s:?}");
    s
}

#[test]
fn pagewise_with_direct_io_runs_on_the_mount() {
    if skip() {
        return;
    }
    let s = engine_round_trip(
        "pagewise",
        pagewise_bench::Settings {
            direct_io: true,
            cache_bytes: 4 << 20,
            ..Default::default()
        },
    );
    assert!(s.direct_opens >= 1, "pagewise opened with O_DIRECT: {s:?}");
}

#[cfg(feature = "heed")]
#[test]
fn lmdb_runs_on_the_mount() {
    if skip() {
        return;
    }
    engine_round_trip("lmdb", Default::default());
}

#[cfg(feature = "rusqlite")]
#[test]
fn sqlite_runs_on_the_mount() {
    if skip() {
        return;
    }
    engine_round_trip("sqlite", Default::default());
}

#[cfg(feature = "redb")]
#[test]
fn redb_runs_on_the_mount() {
    if skip() {
        return;
    }
    engine_round_trip("redb", Default::default());
}
