//! Random page reads from T threads, each through its own pread or through
//! one shared io_uring (`SharedRing`), alternating 1 s slices so both see the
//! same background load. Reports reads/s and process CPU time per read.
//!
//! cargo run --release -p pagewise-io --example ring_reads -- FILE PAGE THREADS SLICES

use pagewise_io::{AlignedBuf, Backend, DirectMode, OpenOptions, SharedRing};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn process_cpu_us() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

/// Reads/s and CPU us per read of `threads` readers for one second.
fn slice(b: &dyn Backend, ps: usize, threads: u64, seed: u64) -> (f64, f64) {
    let pages = b.size().unwrap() / ps as u64;
    let done = AtomicU64::new(0);
    let (t0, c0) = (Instant::now(), process_cpu_us());
    std::thread::scope(|s| {
        for t in 0..threads {
            let done = &done;
            s.spawn(move || {
                let mut buf = AlignedBuf::new(ps, 4096);
                let mut x = (seed * 1000 + t) | 1;
                let mut n = 0;
                while t0.elapsed().as_secs_f64() < 1.0 {
                    // xorshift: cheap, different per thread and slice
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    b.read_at(&mut buf, (x % pages) * ps as u64).unwrap();
                    n += 1;
                }
                done.fetch_add(n, Ordering::Relaxed);
            });
        }
    });
    let n = done.load(Ordering::Relaxed) as f64;
    (n / t0.elapsed().as_secs_f64(), (process_cpu_us() - c0) / n)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let (path, ps, threads, slices) = (
        &a[0],
        a[1].parse::<usize>().unwrap(),
        a[2].parse::<u64>().unwrap(),
        a[3].parse::<u64>().unwrap(),
    );
    let o = OpenOptions {
        direct: DirectMode::On,
        ..Default::default()
    };
    let file: Arc<dyn Backend> = Arc::new(pagewise_io::open(path, &o).unwrap());
    let ring = SharedRing::new(file.clone()).unwrap();
    let mut r: Vec<Vec<(f64, f64)>> = vec![Vec::new(); 4];
    for i in 0..slices {
        r[0].push(slice(&*file, ps, 1, i * 4));
        r[1].push(slice(&ring, ps, 1, i * 4 + 1));
        r[2].push(slice(&*file, ps, threads, i * 4 + 2));
        r[3].push(slice(&ring, ps, threads, i * 4 + 3));
    }
    let names = ["pread 1", "ring 1", "pread T", "ring T"];
    for (name, v) in names.iter().zip(&r) {
        let rate = median(v.iter().map(|x| x.0).collect());
        let cpu = median(v.iter().map(|x| x.1).collect());
        println!("{name:8} threads={threads}: {rate:8.0} reads/s, {cpu:5.1} us CPU/read");
    }
    let s = ring.stats();
    println!(
        "ring: {} reads, {} submits ({:.2}/submit, max {}), {} hand-offs",
        s.reads,
        s.submits,
        s.submitted as f64 / s.submits as f64,
        s.max_batch,
        s.handoffs
    );
}
