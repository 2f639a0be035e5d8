//! Keeps the OS page cache from holding a run's files while a phase with a
//! small engine cache runs, so "cache = 5% of the Db" means that for engines
//! that read through the page cache (buffered pread) too, not only for those
//! with direct I/O. Every `period` it asks the kernel to drop the cached pages
//! of every file under the run directory (`posix_fadvise(DONTNEED)`).
//!
//! Limits: pages that are memory-mapped by the process (LMDB's map) or dirty
//! are not dropped by the kernel, so LMDB stays fully cached, and buffered
//! engines read from the page cache between rounds; results say so. This is
//! the fallback: a memory cgroup ([`crate::memcap`], chosen in
//! [`crate::cachelimit`]) caps all of it where the bench may make one.

use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// A background thread trimming the page cache until dropped.
pub struct Trimmer {
    stop: Arc<AtomicBool>,
    rounds: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Drops the cached pages of every regular file under `dir`; returns how many files.
pub fn drop_cached(dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for e in rd.flatten() {
        let p: PathBuf = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => n += drop_cached(&p),
            Ok(t) if t.is_file() => {
                if let Ok(f) = std::fs::File::open(&p) {
                    // SAFETY: a valid fd; fadvise only changes cache state.
                    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
                    n += 1;
                }
            }
            _ => {}
        }
    }
    n
}

impl Trimmer {
    pub fn start(dir: &Path, period: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(AtomicU64::new(0));
        let (s, r, d) = (stop.clone(), rounds.clone(), dir.to_path_buf());
        let thread = std::thread::spawn(move || {
            while !s.load(Relaxed) {
                drop_cached(&d);
                r.fetch_add(1, Relaxed);
                std::thread::sleep(period);
            }
        });
        Self {
            stop,
            rounds,
            thread: Some(thread),
        }
    }

    pub fn rounds(&self) -> u64 {
        self.rounds.load(Relaxed)
    }
}

impl Drop for Trimmer {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident pages of a file, from mincore on a mapping of it.
    fn resident_pages(path: &Path) -> usize {
        let f = std::fs::File::open(path).unwrap();
        let len = f.metadata().unwrap().len() as usize;
        let page = 4096;
        // SAFETY: read-only shared mapping of a file we keep open; unmapped below.
        unsafe {
            let addr = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            );
            assert_ne!(addr, libc::MAP_FAILED);
            let mut vec = vec![0u8; len.div_ceil(page)];
            assert_eq!(libc::mincore(addr, len, vec.as_mut_ptr()), 0);
            libc::munmap(addr, len);
            vec.iter().filter(|&&b| b & 1 == 1).count()
        }
    }

    #[test]
    fn dropping_empties_the_page_cache_of_clean_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub").join("f");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, vec![7u8; 1 << 20]).unwrap();
        std::fs::File::open(&p).unwrap().sync_all().unwrap();
        let _ = std::fs::read(&p).unwrap();
        let before = resident_pages(&p);
        if before == 0 {
            eprintln!("SKIPPED: this filesystem does not keep the file in the page cache (tmpfs?)");
            return;
        }
        assert_eq!(drop_cached(dir.path()), 1);
        let after = resident_pages(&p);
        assert!(
            after < before / 4,
            "{after} of {before} pages still resident"
        );
    }
}
