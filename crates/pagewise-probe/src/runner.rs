//! Measuring one point: `threads` threads, each keeping `qd` I/Os in flight
//! through its own [`IoQueue`], a warm-up, then repetitions until the IOPS
//! confidence interval is tight enough.

use crate::dist::SlotGen;
use crate::results::{Latency, PointResult};
use crate::spec::{Limit, PointSpec, SweepSpec};
use crate::stats::{mean, Repetitions};
use crate::{interrupted, ProbeError};
use hdrhistogram::Histogram;
use pagewise_io::{AlignedBuf, Backend, Completion, IoOp, OpKind};
use rand::{rngs::SmallRng, Rng, RngCore, SeedableRng};
use std::time::{Duration, Instant};

/// Where one thread's offsets come from.
#[derive(Debug, Clone)]
pub enum Offsets {
    /// Random aligned slots: offset = slot * align.
    Random { gen: SlotGen, align: u64 },
    /// Sequential through [start, end), wrapping around.
    Seq {
        start: u64,
        end: u64,
        next: u64,
        bs: u64,
    },
}

impl Offsets {
    /// The offsets of thread `t` of `p` on a target of `size` bytes.
    pub fn for_thread(p: &PointSpec, size: u64, t: usize) -> Self {
        if p.mode.is_sequential() {
            let (lo, hi) = seq_region(size, p.bs, p.threads, t);
            Offsets::Seq {
                start: lo,
                end: hi,
                next: lo,
                bs: p.bs,
            }
        } else {
            let slots = (size - p.bs) / p.align + 1;
            Offsets::Random {
                gen: SlotGen::new(p.dist, slots),
                align: p.align,
            }
        }
    }

    pub fn next<R: Rng>(&mut self, rng: &mut R) -> u64 {
        match self {
            Offsets::Random { gen, align } => gen.slot(rng) * *align,
            Offsets::Seq {
                start,
                end,
                next,
                bs,
            } => {
                if *next + *bs > *end {
                    *next = *start;
                }
                let o = *next;
                *next += *bs;
                o
            }
        }
    }
}

/// Thread `t`'s disjoint slice of the target for sequential modes, in whole
/// blocks; the whole target when it is too small to split.
pub fn seq_region(size: u64, bs: u64, threads: usize, t: usize) -> (u64, u64) {
    let blocks = size / bs;
    let n = threads as u64;
    if blocks < n {
        return (0, blocks * bs);
    }
    let (lo, hi) = (blocks * t as u64 / n, blocks * (t as u64 + 1) / n);
    (lo * bs, hi * bs)
}

/// What one thread measured.
struct ThreadOutcome {
    ops: u64,
    bytes: u64,
    reads: u64,
    writes: u64,
    fsyncs: u64,
    secs: f64,
    cpu_ns: u64,
    hist: Histogram<u64>,
}

enum Stop {
    At(Instant),
    Ops(u64),
}

/// CPU time (user + system) of the calling thread, nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer; RUSAGE_THREAD is Linux's per-thread usage.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn new_hist() -> Histogram<u64> {
    // 1 ns .. 1 hour at 3 significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("static histogram bounds")
}

struct ThreadPlan<'a> {
    b: &'a dyn Backend,
    p: &'a PointSpec,
    size: u64,
    t: usize,
    qd: usize,
    fsync_every: u64,
    seed: u64,
    warm_end: Instant,
}

fn run_thread(plan: &ThreadPlan, stop: &Stop) -> Result<ThreadOutcome, ProbeError> {
    let ThreadPlan { b, p, qd, .. } = *plan;
    let mut rng = SmallRng::seed_from_u64(plan.seed);
    let mut offsets = Offsets::for_thread(p, plan.size, plan.t);
    // Page-aligned like fio's buffers: a buffer straddling an extra page costs the
    // kernel one more page to pin and the device one more DMA segment.
    let align = b.alignment().max(4096);
    let mut bufs: Vec<Option<AlignedBuf>> = (0..qd)
        .map(|_| {
            let mut buf = AlignedBuf::new(p.bs as usize, align);
            if p.mode.writes() {
                rng.fill_bytes(&mut buf);
            }
            Some(buf)
        })
        .collect();
    let mut free: Vec<usize> = (0..qd).rev().collect();
    let mut started = vec![Instant::now(); qd];
    let mut q = b.queue(qd)?;
    let mut done: Vec<Completion> = Vec::with_capacity(qd);
    let mut o = ThreadOutcome {
        ops: 0,
        bytes: 0,
        reads: 0,
        writes: 0,
        fsyncs: 0,
        secs: 0.0,
        cpu_ns: 0,
        hist: new_hist(),
    };
    let read_pct = p.mode.read_pct() as u32;
    let (mut measuring, mut stopping) = (Instant::now() >= plan.warm_end, false);
    let (mut m_start, mut cpu0) = (Instant::now(), thread_cpu_ns());
    let (mut unsynced, mut m_submitted) = (0u64, 0u64);
    loop {
        // In op-count mode never submit more measured I/Os than asked for, so
        // the I/Os that reach the device are exactly the I/Os reported.
        let cap = match *stop {
            Stop::Ops(n) if measuring => n.saturating_sub(m_submitted),
            _ => u64::MAX,
        };
        let mut budget = cap;
        while !stopping && budget > 0 {
            let Some(slot) = free.pop() else { break };
            budget -= 1;
            m_submitted += u64::from(measuring);
            let kind = if read_pct == 100 || (read_pct > 0 && rng.gen_range(0..100) < read_pct) {
                OpKind::Read
            } else {
                OpKind::Write
            };
            let buf = bufs[slot].take().expect("free slot holds its buffer");
            let offset = offsets.next(&mut rng);
            started[slot] = Instant::now();
            q.submit(IoOp {
                kind,
                offset,
                buf,
                tag: slot as u64,
            })?;
            if qd > 1 {
                // Hand each I/O to the device at once, as fio does: batching the
                // refills makes a virtio queue complete in lockstep bursts and
                // loses ~16% of the QD32 throughput (docs/benchmarks.md, "Probe vs fio").
                q.wait(0, &mut done)?;
            }
        }
        // Completions already drained by the eager submits still need counting.
        if q.in_flight() == 0 && done.is_empty() {
            break;
        }
        if done.is_empty() {
            q.wait(1, &mut done)?;
        }
        let now = Instant::now();
        for c in done.drain(..) {
            c.result?;
            let slot = c.op.tag as usize;
            if measuring && !stopping {
                let ns = now.duration_since(started[slot]).as_nanos() as u64;
                o.hist.saturating_record(ns.max(1));
                o.ops += 1;
                o.bytes += c.op.buf.len() as u64;
                match c.op.kind {
                    OpKind::Read => o.reads += 1,
                    OpKind::Write => o.writes += 1,
                }
            }
            if c.op.kind == OpKind::Write && plan.fsync_every > 0 {
                unsynced += 1;
                if unsynced >= plan.fsync_every {
                    b.sync()?;
                    unsynced = 0;
                    o.fsyncs += u64::from(measuring && !stopping);
                }
            }
            bufs[slot] = Some(c.op.buf);
            free.push(slot);
        }
        if !measuring && now >= plan.warm_end {
            (measuring, m_start, cpu0) = (true, now, thread_cpu_ns());
        }
        if measuring && !stopping {
            let end = match *stop {
                Stop::At(t) => now >= t,
                Stop::Ops(n) => o.ops >= n,
            };
            if end || interrupted() {
                stopping = true;
                o.secs = now.duration_since(m_start).as_secs_f64();
                o.cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
            }
        }
    }
    if !stopping {
        o.secs = m_start.elapsed().as_secs_f64();
        o.cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
    }
    Ok(o)
}

/// One repetition: all threads at once. Returns the merged outcome.
fn run_group(
    b: &dyn Backend,
    size: u64,
    spec: &SweepSpec,
    p: &PointSpec,
    qd: usize,
    warmup: Duration,
    seed: u64,
) -> Result<ThreadOutcome, ProbeError> {
    let t0 = Instant::now();
    let warm_end = t0 + warmup;
    let per_thread_ops =
        |t: usize, n: u64| n / p.threads as u64 + u64::from((t as u64) < n % p.threads as u64);
    let results: Vec<Result<ThreadOutcome, ProbeError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..p.threads)
            .map(|t| {
                let plan = ThreadPlan {
                    b,
                    p,
                    size,
                    t,
                    qd,
                    fsync_every: spec.fsync_every,
                    seed: seed ^ (t as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                    warm_end,
                };
                let stop = match spec.limit {
                    Limit::Seconds(secs) => Stop::At(warm_end + Duration::from_secs_f64(secs)),
                    Limit::Ops(n) => Stop::Ops(per_thread_ops(t, n).max(1)),
                };
                s.spawn(move || run_thread(&plan, &stop))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("probe thread panicked"))
            .collect()
    });
    let mut total = ThreadOutcome {
        ops: 0,
        bytes: 0,
        reads: 0,
        writes: 0,
        fsyncs: 0,
        secs: 0.0,
        cpu_ns: 0,
        hist: new_hist(),
    };
    for r in results {
        let o = r?;
        total.ops += o.ops;
        total.bytes += o.bytes;
        total.reads += o.reads;
        total.writes += o.writes;
        total.fsyncs += o.fsyncs;
        total.cpu_ns += o.cpu_ns;
        total.secs = total.secs.max(o.secs);
        total.hist.add(&o.hist).expect("same histogram bounds");
    }
    if interrupted() {
        return Err(ProbeError::Interrupted);
    }
    Ok(total)
}

/// Measures one point. `on_rep(rep, iops, rel_ci)` is called after each repetition.
pub fn run_point(
    b: &dyn Backend,
    size: u64,
    spec: &SweepSpec,
    p: &PointSpec,
    seed: u64,
    on_rep: &mut dyn FnMut(u32, f64, Option<f64>),
) -> Result<PointResult, ProbeError> {
    // A synchronous queue completes each I/O inside submit, so only one is ever
    // really in flight; timing a batch of them would inflate the latencies.
    let qd = if b.engine() == "sync" { 1 } else { p.qd };
    let mut iops = Vec::new();
    let mut total: Option<ThreadOutcome> = None;
    for rep in 0..spec.max_reps {
        let warmup = if rep == 0 {
            Duration::from_secs_f64(spec.warmup_secs)
        } else {
            Duration::ZERO
        };
        let rep_seed = seed.wrapping_add(u64::from(rep).wrapping_mul(0x2545_f491_4f6c_dd1d));
        let o = run_group(b, size, spec, p, qd, warmup, rep_seed)?;
        iops.push(if o.secs > 0.0 {
            o.ops as f64 / o.secs
        } else {
            0.0
        });
        let reps = Repetitions::from_iops(&iops, spec.tolerance);
        on_rep(rep + 1, *iops.last().unwrap(), reps.ci95_rel);
        total = Some(match total.take() {
            None => o,
            Some(mut t) => {
                t.ops += o.ops;
                t.bytes += o.bytes;
                t.reads += o.reads;
                t.writes += o.writes;
                t.fsyncs += o.fsyncs;
                t.cpu_ns += o.cpu_ns;
                t.secs += o.secs;
                t.hist.add(&o.hist).expect("same histogram bounds");
                t
            }
        });
        if rep + 1 >= spec.min_reps && reps.converged {
            break;
        }
    }
    let t = total.expect("max_reps >= 1");
    let iops_mean = mean(&iops);
    let bytes_per_op = if t.ops > 0 {
        t.bytes as f64 / t.ops as f64
    } else {
        p.bs as f64
    };
    Ok(PointResult {
        params: *p,
        engine: b.engine().into(),
        direct: b.is_direct(),
        effective_qd: qd,
        fsync_every: spec.fsync_every,
        iops: iops_mean,
        mb_per_s: iops_mean * bytes_per_op / 1e6,
        latency_us: latency(&t.hist),
        repetitions: Repetitions::from_iops(&iops, spec.tolerance),
        cpu_us_per_io: if t.ops > 0 {
            t.cpu_ns as f64 / 1e3 / t.ops as f64
        } else {
            0.0
        },
        ops: t.ops,
        bytes: t.bytes,
        reads: t.reads,
        writes: t.writes,
        fsyncs: t.fsyncs,
        measured_secs: t.secs,
    })
}

fn latency(h: &Histogram<u64>) -> Latency {
    if h.is_empty() {
        return Latency::default();
    }
    let us = |ns: u64| ns as f64 / 1e3;
    Latency {
        mean: h.mean() / 1e3,
        stddev: h.stdev() / 1e3,
        min: us(h.min()),
        p50: us(h.value_at_quantile(0.50)),
        p90: us(h.value_at_quantile(0.90)),
        p99: us(h.value_at_quantile(0.99)),
        p999: us(h.value_at_quantile(0.999)),
        max: us(h.max()),
    }
}
