//! Quick check that queue depth reaches the device: 4 KiB random reads at
//! QD1 and QD32 on one O_DIRECT file, for each engine.
//! Usage: cargo run --release -p pagewise-io --example qd_iops -- DIR [SECONDS]

use pagewise_io::{open_engine, AlignedBuf, DirectMode, Engine, IoOp, OpKind, OpenOptions};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::time::{Duration, Instant};

const FILE_SIZE: u64 = 256 << 20;
const BS: usize = 4096;

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("usage: qd_iops DIR [SECONDS]"));
    let secs: f64 = args.next().map_or(3.0, |s| s.parse().expect("SECONDS"));
    let path = dir.join("qd_iops.dat");
    fill(&path);
    for engine in [Engine::Sync, Engine::Uring] {
        for qd in [1, 32] {
            let iops = run(&path, engine, qd, Duration::from_secs_f64(secs));
            println!("engine={engine} qd={qd} bs=4k randread direct: {iops:.0} IOPS");
        }
    }
    std::fs::remove_file(&path).ok();
}

fn fill(path: &std::path::Path) {
    let opts = OpenOptions {
        write: true,
        create: true,
        direct: DirectMode::On,
        ..Default::default()
    };
    let b = open_engine(path, &opts, Engine::Sync).expect("open");
    let mut buf = AlignedBuf::new(1 << 20, 4096);
    let mut rng = SmallRng::seed_from_u64(1);
    for off in (0..FILE_SIZE).step_by(1 << 20) {
        rng.fill(&mut buf[..]);
        b.write_at(&buf, off).expect("fill");
    }
    b.sync().expect("sync");
}

fn run(path: &std::path::Path, engine: Engine, qd: usize, dur: Duration) -> f64 {
    let opts = OpenOptions {
        direct: DirectMode::On,
        ..Default::default()
    };
    let b = open_engine(path, &opts, engine).expect("open");
    let mut q = b.queue(qd).expect("queue");
    let mut rng = SmallRng::seed_from_u64(2);
    let blocks = FILE_SIZE / BS as u64;
    let mut done = Vec::new();
    let mut bufs: Vec<AlignedBuf> = (0..qd).map(|_| AlignedBuf::new(BS, 4096)).collect();
    let (start, mut ios) = (Instant::now(), 0u64);
    while start.elapsed() < dur {
        while q.in_flight() < qd {
            let buf = bufs.pop().expect("buffer");
            let offset = rng.gen_range(0..blocks) * BS as u64;
            q.submit(IoOp {
                kind: OpKind::Read,
                offset,
                buf,
                tag: 0,
            })
            .expect("submit");
        }
        q.wait(1, &mut done).expect("wait");
        for c in done.drain(..) {
            c.result.expect("read");
            ios += 1;
            bufs.push(c.op.buf);
        }
    }
    ios as f64 / start.elapsed().as_secs_f64()
}
