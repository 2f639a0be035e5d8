use super::*;
use crate::{AlignedBuf, DirectMode, OpKind, SimFs};
use std::time::Duration;

fn rw() -> OpenOptions {
    OpenOptions {
        write: true,
        create: true,
        direct: DirectMode::Off,
        ..Default::default()
    }
}

/// 1 ms + 4096 B / 4.096 MB/s = 2 ms per 4 KiB I/O.
fn two_ms_profile(channels: u32) -> DriveProfile {
    DriveProfile::new(1000.0, 4.096e6, channels)
}

/// Never faster than the model (the proof), and not grossly slower: the
/// upper bound allows for a busy 2-core machine stalling a thread (75 ms
/// stalls were seen at load 18).
fn within(took: Duration, want: Duration, slack: Duration) -> bool {
    took >= want && took <= want + slack
}

const STALL: Duration = Duration::from_millis(500);

#[test]
fn data_is_real_and_each_io_takes_its_service_time() {
    let fs = EmulatedFs::new(SimFs::new(), two_ms_profile(1)).unwrap();
    let f = fs.open(Path::new("/f"), &rw()).unwrap();
    let t0 = Instant::now();
    for i in 0..5u8 {
        f.write_at(&[i + 1; 4096], u64::from(i) * 4096).unwrap();
    }
    let took = t0.elapsed();
    // Five serial 2 ms writes: at least 10 ms, and not much more.
    assert!(within(took, Duration::from_millis(10), STALL), "{took:?}");
    let mut back = [0u8; 4096];
    f.read_at(&mut back, 3 * 4096).unwrap();
    assert!(back.iter().all(|&b| b == 4));
    let s = fs.stats();
    assert_eq!((s.ops, s.syncs, s.overruns), (6, 0, 0));
}

#[test]
fn queued_ios_overlap_on_p_channels() {
    let sim = SimFs::new();
    let file = sim.open(Path::new("/f"), &rw()).unwrap();
    file.set_len(1 << 20).unwrap();
    // 10 ms per I/O on 4 channels: 8 queued I/Os take 20 ms, serially 80 ms.
    let drive = EmulatedDrive::new(file, DriveProfile::new(10_000.0, 1e9, 4)).unwrap();
    let mut q = drive.queue(8).unwrap();
    let read = |tag: u64| IoOp {
        kind: OpKind::Read,
        offset: tag * 4096,
        buf: AlignedBuf::new(4096, 4096),
        tag,
    };
    let t0 = Instant::now();
    for tag in 0..8u64 {
        q.submit(read(tag)).unwrap();
    }
    assert!(q.submit(read(9)).is_err(), "depth 8 is full");
    let mut out = Vec::new();
    q.wait(4, &mut out).unwrap();
    let first = t0.elapsed();
    assert!(within(first, Duration::from_millis(10), STALL), "{first:?}");
    // The proof of overlap, independent of scheduling: only ops 5..8 waited
    // for a channel, one service time each (4 x 10 ms; serial would be 28).
    let queued_ms = drive.clock().stats().queued_ns as f64 / 1e6;
    assert!((queued_ms - 40.0).abs() < 2.0, "queued {queued_ms} ms");
    // The first four share the channels; their tags come back first.
    let mut tags: Vec<u64> = out.iter().map(|c| c.op.tag).collect();
    tags.sort_unstable();
    assert_eq!(tags[..4], [0, 1, 2, 3]);
    q.wait(8 - out.len(), &mut out).unwrap();
    let all = t0.elapsed();
    assert!(within(all, Duration::from_millis(20), STALL), "{all:?}");
    let mut tags: Vec<u64> = out.iter().map(|c| c.op.tag).collect();
    tags.sort_unstable();
    assert_eq!(tags, (0..8).collect::<Vec<_>>());
    assert_eq!(q.in_flight(), 0);
    // wait(0) never blocks, and with nothing in flight returns nothing.
    q.wait(0, &mut out).unwrap();
    assert_eq!(out.len(), 8);
}

#[test]
fn files_of_one_fs_share_the_channels() {
    let fs = EmulatedFs::new(SimFs::new(), two_ms_profile(1)).unwrap();
    let a = fs.open(Path::new("/a"), &rw()).unwrap();
    let b = fs.open(Path::new("/b"), &rw()).unwrap();
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for f in [&a, &b] {
            s.spawn(move || {
                for i in 0..4u64 {
                    f.write_at(&[7; 4096], i * 4096).unwrap();
                }
            });
        }
    });
    let took = t0.elapsed();
    // 8 I/Os on one channel: 16 ms, although two threads issued them.
    assert!(within(took, Duration::from_millis(16), STALL), "{took:?}");
    assert!(fs.stats().queued_ns > 0, "one thread waited for the other");
}

#[test]
fn fsync_waits_for_the_queue_then_costs_its_time() {
    let mut p = two_ms_profile(2);
    p.fsync_us = 3000.0;
    let fs = EmulatedFs::new(SimFs::new(), p).unwrap();
    let f = fs.open(Path::new("/f"), &rw()).unwrap();
    let t0 = Instant::now();
    f.write_at(&[1; 4096], 0).unwrap();
    f.sync().unwrap();
    let took = t0.elapsed();
    // 2 ms write, then a 3 ms flush.
    assert!(within(took, Duration::from_millis(5), STALL), "{took:?}");
    assert_eq!(fs.stats().syncs, 1);
}

#[test]
fn invalid_profile_is_an_error_not_a_panic() {
    let bad = DriveProfile::new(-1.0, 1e6, 1);
    let e = EmulatedFs::new(SimFs::new(), bad).unwrap_err();
    assert!(e.to_string().contains("setup time S"), "{e}");
}

#[test]
fn queued_io_on_a_real_ring_keeps_tags_and_data() {
    let dir = tempfile::tempdir().unwrap();
    let opts = OpenOptions {
        write: true,
        create: true,
        ..Default::default()
    };
    let fs = EmulatedFs::new(crate::RealFs, DriveProfile::new(1000.0, 1e9, 2)).unwrap();
    let f = fs.open(&dir.path().join("f"), &opts).unwrap();
    let a = f.alignment().max(4096);
    let mut q = f.queue(4).unwrap();
    let mut out = Vec::new();
    // Six writes through a depth-4 queue, refilled as completions come back.
    let mut next = 0u64;
    while out.len() < 6 {
        while next < 6 && q.in_flight() < q.depth() {
            let buf = AlignedBuf::from_slice(&vec![next as u8 + 1; a], a);
            q.submit(IoOp {
                kind: OpKind::Write,
                offset: next * a as u64,
                buf,
                tag: 100 + next,
            })
            .unwrap();
            next += 1;
        }
        q.wait(1, &mut out).unwrap();
    }
    let mut tags: Vec<u64> = out.iter().map(|c| c.op.tag).collect();
    tags.sort_unstable();
    assert_eq!(tags, (100..106).collect::<Vec<_>>());
    assert!(out.iter().all(|c| c.result.is_ok()));
    drop(q);
    for i in 0..6u64 {
        let mut r = AlignedBuf::new(a, a);
        f.read_at(&mut r, i * a as u64).unwrap();
        assert!(r.iter().all(|&x| x == i as u8 + 1), "block {i}");
    }
    assert_eq!(fs.stats().ops, 12);
}
