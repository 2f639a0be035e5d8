//! The B-epsilon prediction with the engine's costs (session 8).
//!
//! [`predict_betree`] counts device I/O only: one basement read per uncached
//! level for a get, a child read and write per flush for an insert. The
//! session-7 node-size sweep (docs/benchmarks.md, "Node-size sweep at 5M
//! against the advisor") measured inserts at 0.22-0.36x that prediction
//! (11-13.5 µs of CPU per insert) and 1.10-1.73 reads per get (shells and
//! buffers miss too) at 78-186 µs of CPU per get. The corrected times are
//!
//! ```text
//! insert_s = flushes x (1/R(N) + 1/W(N))                  (predict_betree's I/O)
//!          + c_ins                                        (CPU per insert)
//! get_s    = sum_k miss_k x 1/R(read_k)                   (device reads)
//!          + c_get + c_read x m + c_kib x kib              (CPU per get)
//! m        = sum_k miss_k;  kib = sum_k miss_k x read_k / 1 KiB
//! ```
//!
//! with `c_ins`, `c_get` (a get whose path is cached), `c_read` (per read:
//! the system call, page checks, cache insert and eviction) and `c_kib` (per
//! KiB read: checksums, decompression, scanning probed buffers) the engine's
//! CPU constants ([`BeTreeCosts`], measured by `pagewise tune`; the B+tree's
//! `c(B)` and `x(B)` in `correct.rs` are the same split), and `miss_k`,
//! `read_k` the misses per get and bytes per read of each part a get
//! touches:
//!
//! - the **shell** (header, directory, pivots; internal nodes add child
//!   references and buffer filters) of the node on the path at every level:
//!   `n_l` shells of `64 + c x 24 + (c - 1) x (2 + key)` bytes (internal:
//!   `+ c x 16 + 10 bits per buffered message`), `c` children or basements
//!   per node; every get touches one; a miss reads whole 4 KiB pages;
//! - the **buffer** partition for the child on the path, at internal levels
//!   only when its filter admits the key: an internal node flushes when its
//!   buffers reach N bytes, moving at least a child's share N / F, so it
//!   holds `buf = N x (1 - 1 / 2F)` on average; a get reads it with
//!   probability `p_l = min(1, n_l x buf / msg / rows + 0.008)` (the share of
//!   records whose newest message sits at level l, plus the filters' false
//!   positives); buffers of a node range evenly from empty to twice the
//!   mean, so a get, landing in one in proportion to its messages, reads
//!   `4/3` of the mean `buf / c` (size-biased);
//! - one **basement** of B bytes in the leaf, `b = ceil(N x fill / B)` per
//!   leaf; every get touches one.
//!
//! Which of them the cache holds: the engine's CLOCK cache is taken as LRU
//! under independent uniform references (Che, Tung and Wang 2002): an object
//! referenced at rate `lambda` per get stays cached while it is referenced
//! within `k x T` gets, so its hit ratio is `1 - exp(-lambda x k x T)`, with
//! `k = 3` for shells (they survive `SHELL_KEEP_PASSES` = 2 extra CLOCK
//! passes, crates/pagewise/src/index/bepsilon/node.rs) and 1 for partitions,
//! and `T` solving `sum_k count_k x bytes_k x (1 - exp(-lambda_k x k_k x T))
//! = cache bytes`. Then `miss_k = a_k x exp(-lambda_k x k_k x T)`, `a_k` the
//! accesses per get (1 or `p_l`) and `lambda_k = a_k / count_k`.

use super::betree::{predict_betree, BeTreePrediction, BeTreeShape, MESSAGE_OVERHEAD_BYTES};
use super::btree::levels;
use super::correct::leave_one_out_with;
use super::{Dataset, Device};
use serde::{Deserialize, Serialize};

/// Extra CLOCK passes a B-epsilon node image (its shell) survives beyond a
/// partition's one (the engine's `SHELL_KEEP_PASSES`).
pub const SHELL_KEEP_PASSES: f64 = 2.0;
/// False-positive rate of a buffer key filter (10 bits per key, 6 probes:
/// docs/design.md, "Buffer key filters").
pub const FILTER_FALSE_POSITIVE: f64 = 0.008;
/// Bytes of a node header and of one directory entry (docs/design.md,
/// "B-epsilon nodes").
const HEADER_BYTES: f64 = 64.0;
const DIRECTORY_ENTRY_BYTES: f64 = 24.0;
const CHILD_REF_BYTES: f64 = 16.0;
const FILTER_BITS_PER_KEY: f64 = 10.0;
const PAGE_BYTES: f64 = 4096.0;

/// The engine's CPU per operation on a B-epsilon tree.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BeTreeCosts {
    /// CPU seconds per insert (`c_ins`): buffer inserts, flushes, encoding
    /// and compressing nodes at checkpoints.
    pub cpu_insert_s: f64,
    /// CPU seconds of a get whose path is cached (`c_get`).
    pub cpu_get_s: f64,
    /// CPU seconds per device read of a get (`c_read`): the system call,
    /// page checks, cache insert and eviction.
    pub cpu_read_s: f64,
    /// CPU seconds per KiB a get reads (`c_kib`): checksums, decompression,
    /// scanning probed buffers, indexing basements.
    pub cpu_read_per_kib_s: f64,
}

impl BeTreeCosts {
    /// No CPU: the device-only prediction (with the derived reads per get).
    pub const NONE: BeTreeCosts = BeTreeCosts {
        cpu_insert_s: 0.0,
        cpu_get_s: 0.0,
        cpu_read_s: 0.0,
        cpu_read_per_kib_s: 0.0,
    };

    /// CPU seconds of a get that makes `reads` device reads of `kib` KiB in
    /// all, never negative.
    pub fn cpu_get_at_s(&self, reads: f64, kib: f64) -> f64 {
        assert!(reads >= 0.0 && kib >= 0.0 && kib.is_finite());
        (self.cpu_get_s + self.cpu_read_s * reads + self.cpu_read_per_kib_s * kib).max(0.0)
    }
}

/// One kind of object a get touches: a level's shells, buffers or basements.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Part {
    pub kind: PartKind,
    /// Height above the leaves (0 = leaf).
    pub height: u32,
    /// Objects of this kind in the tree.
    pub count: f64,
    /// Bytes one of them holds in the cache.
    pub cached_bytes: f64,
    /// Bytes a miss reads.
    pub read_bytes: f64,
    /// Accesses per get (1, or the probability the filter admits the key).
    pub accesses: f64,
    /// Cache lifetime in units of `T`: 3 for shells, 1 for partitions.
    pub lifetime: f64,
    /// Misses per get, once the cache is solved.
    pub misses: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartKind {
    Shell,
    Buffer,
    Basement,
}

/// What a get reads from the device, by part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetReads {
    pub parts: Vec<Part>,
    pub shell_reads: f64,
    pub buffer_reads: f64,
    pub basement_reads: f64,
    /// All device reads per get.
    pub reads: f64,
    /// KiB read per get.
    pub kib: f64,
}

/// The parts a get touches in `shape` holding dataset `d`, misses unset.
pub fn parts(d: &Dataset, shape: BeTreeShape) -> Vec<Part> {
    assert!(shape.fanout >= 2 && shape.basement_bytes >= 512 && d.rows >= 1);
    let node = shape.node_bytes as f64;
    let leaf_cap = ((node * d.fill / d.leaf_entry() as f64).floor() as u64).max(1);
    let lv = levels(d.rows, leaf_cap, shape.fanout);
    let pivot_bytes = (2 + d.key_bytes) as f64;
    let message_bytes = (d.key_bytes + d.value_bytes + MESSAGE_OVERHEAD_BYTES) as f64;
    let shell = |c: f64| HEADER_BYTES + c * DIRECTORY_ENTRY_BYTES + (c - 1.0) * pivot_bytes;
    let pages = |b: f64| (b / PAGE_BYTES).ceil().max(1.0) * PAGE_BYTES;
    let mut out = Vec::with_capacity(2 * lv.len());
    for (i, &n) in lv.iter().enumerate() {
        let n = n as f64;
        let height = (lv.len() - 1 - i) as u32;
        let obj = |kind, count, cached_bytes, read_bytes, accesses, lifetime| Part {
            kind,
            height,
            count,
            cached_bytes,
            read_bytes,
            accesses,
            lifetime,
            misses: 0.0,
        };
        let shell_life = 1.0 + SHELL_KEEP_PASSES;
        if height == 0 {
            let b = (node * d.fill / shape.basement_bytes as f64)
                .ceil()
                .max(1.0);
            let s = shell(b);
            out.push(obj(PartKind::Shell, n, s, pages(s), 1.0, shell_life));
            let basement = shape.basement_bytes as f64;
            out.push(obj(PartKind::Basement, n * b, basement, basement, 1.0, 1.0));
            continue;
        }
        let c = (lv[i + 1] as f64 / n).max(1.0);
        let buf = node * (1.0 - 1.0 / (2.0 * shape.fanout as f64));
        let messages = buf / message_bytes;
        let s = shell(c) + c * CHILD_REF_BYTES + messages * FILTER_BITS_PER_KEY / 8.0;
        out.push(obj(PartKind::Shell, n, s, pages(s), 1.0, shell_life));
        let p = (n * messages / d.rows as f64 + FILTER_FALSE_POSITIVE).min(1.0);
        let share = buf / c;
        out.push(obj(
            PartKind::Buffer,
            n * c,
            share,
            share * 4.0 / 3.0,
            p,
            1.0,
        ));
    }
    assert!(out.len() == 2 * lv.len() && out.iter().all(|p| p.count >= 1.0));
    out
}

/// Bytes the cache holds after `t` gets of characteristic time.
fn held_bytes(parts: &[Part], t: f64) -> f64 {
    parts
        .iter()
        .map(|p| p.count * p.cached_bytes * -(-(p.accesses / p.count) * p.lifetime * t).exp_m1())
        .sum()
}

/// The characteristic time `T` (in gets) at which `parts` fill `cache_bytes`,
/// `None` when everything fits.
pub fn characteristic_gets(parts: &[Part], cache_bytes: f64) -> Option<f64> {
    assert!(cache_bytes >= 0.0 && !parts.is_empty());
    let total: f64 = parts.iter().map(|p| p.count * p.cached_bytes).sum();
    if total <= cache_bytes {
        return None;
    }
    let (mut lo, mut hi) = (0.0, 1.0);
    // Bounded: held_bytes rises to total > cache, so 2^200 gets suffice.
    for _ in 0..200 {
        if held_bytes(parts, hi) >= cache_bytes {
            break;
        }
        hi *= 2.0;
    }
    // Bounded bisection: 100 halvings are below f64 resolution.
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if held_bytes(parts, mid) < cache_bytes {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let t = 0.5 * (lo + hi);
    assert!(t.is_finite() && t >= 0.0);
    Some(t)
}

/// Reads per get in `shape` holding `d`, with `d.cache_bytes` of cache (see
/// the module comment).
pub fn get_reads(d: &Dataset, shape: BeTreeShape) -> GetReads {
    let mut ps = parts(d, shape);
    let t = characteristic_gets(&ps, d.cache_bytes as f64);
    for p in &mut ps {
        p.misses = match t {
            None => 0.0,
            Some(t) => p.accesses * (-(p.accesses / p.count) * p.lifetime * t).exp(),
        };
    }
    let sum = |k: PartKind| ps.iter().filter(|p| p.kind == k).map(|p| p.misses).sum();
    let out = GetReads {
        shell_reads: sum(PartKind::Shell),
        buffer_reads: sum(PartKind::Buffer),
        basement_reads: sum(PartKind::Basement),
        reads: ps.iter().map(|p| p.misses).sum(),
        kib: ps.iter().map(|p| p.misses * p.read_bytes).sum::<f64>() / 1024.0,
        parts: ps,
    };
    assert!(out.reads >= 0.0 && out.reads <= out.parts.len() as f64);
    out
}

/// The B-epsilon prediction with the engine's costs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BeTreeEnginePrediction {
    /// The advisor's device-only prediction (inserts' I/O from here).
    pub io: BeTreePrediction,
    pub reads: GetReads,
    pub costs: BeTreeCosts,
    /// Device seconds per get: sum of misses x 1 / R(read bytes).
    pub get_device_s: f64,
    pub get_cpu_s: f64,
    pub insert_device_s: f64,
    pub inserts_per_s: f64,
    pub point_qps: f64,
}

/// Predicts inserts and gets for `shape` with the engine's CPU `costs` (the
/// module comment's formulas). `BeTreeCosts::NONE` gives the device time
/// alone, with the derived reads per get.
pub fn predict_betree_engine(
    dev: Device,
    d: &Dataset,
    shape: BeTreeShape,
    costs: BeTreeCosts,
) -> BeTreeEnginePrediction {
    assert!(costs.cpu_insert_s >= 0.0 && costs.cpu_insert_s.is_finite());
    let io = predict_betree(dev, d, shape);
    let reads = get_reads(d, shape);
    let get_device_s: f64 = reads
        .parts
        .iter()
        .filter(|p| p.misses > 0.0)
        .map(|p| p.misses / dev.read.iops(p.read_bytes.round() as u64).0)
        .sum();
    let get_cpu_s = costs.cpu_get_at_s(reads.reads, reads.kib);
    let insert_device_s = 1.0 / io.inserts_per_s;
    let out = BeTreeEnginePrediction {
        inserts_per_s: 1.0 / (insert_device_s + costs.cpu_insert_s),
        point_qps: 1.0 / (get_device_s + get_cpu_s).max(1e-9),
        io,
        reads,
        costs,
        get_device_s,
        get_cpu_s,
        insert_device_s,
    };
    assert!(out.inserts_per_s > 0.0 && out.point_qps > 0.0);
    out
}

/// What one measured node size gives the fit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BeTreeSample {
    pub node_bytes: u64,
    /// Process CPU seconds (user + system) per insert of the load.
    pub cpu_insert_s: f64,
    /// Process CPU seconds per timed get, and its device reads and KiB.
    pub cpu_get_s: f64,
    pub reads_per_get: f64,
    pub kib_per_get: f64,
    /// CPU seconds per get of keys whose path is cached, when measured.
    pub cpu_cached_get_s: Option<f64>,
}

/// Fits [`BeTreeCosts`]: `c_ins` the mean CPU per insert; `c_get` the mean
/// cached get (0 when none was measured); `c_read` and `c_kib` by least
/// squares through the origin of `cpu_get - c_get` on the measured reads and
/// KiB per get, neither negative (a negative one is dropped and the other
/// refitted alone). No samples: [`BeTreeCosts::NONE`].
pub fn fit_betree_costs(samples: &[BeTreeSample]) -> BeTreeCosts {
    if samples.is_empty() {
        return BeTreeCosts::NONE;
    }
    let mean = |v: Vec<f64>| {
        let n = v.len().max(1) as f64;
        v.iter().sum::<f64>() / n
    };
    let c_get = mean(samples.iter().filter_map(|s| s.cpu_cached_get_s).collect()).max(0.0);
    let pts: Vec<(f64, f64, f64)> = (samples.iter())
        .map(|s| (s.reads_per_get, s.kib_per_get, s.cpu_get_s - c_get))
        .collect();
    let (c_read, c_kib) = fit_two_through_origin(&pts);
    let out = BeTreeCosts {
        cpu_insert_s: mean(samples.iter().map(|s| s.cpu_insert_s).collect()).max(0.0),
        cpu_get_s: c_get,
        cpu_read_s: c_read,
        cpu_read_per_kib_s: c_kib,
    };
    assert!(out.cpu_read_s >= 0.0 && out.cpu_read_per_kib_s >= 0.0);
    out
}

/// Least squares `y = a x1 + b x2` over `(x1, x2, y)` with `a, b >= 0`: the
/// two-term fit, else the better-defined one-term fit.
fn fit_two_through_origin(pts: &[(f64, f64, f64)]) -> (f64, f64) {
    let pts: Vec<_> = (pts.iter().copied())
        .filter(|p| p.0.is_finite() && p.1.is_finite() && p.2.is_finite())
        .collect();
    let sum = |f: &dyn Fn(&(f64, f64, f64)) -> f64| pts.iter().map(f).sum::<f64>();
    let (saa, sbb, sab) = (
        sum(&|p| p.0 * p.0),
        sum(&|p| p.1 * p.1),
        sum(&|p| p.0 * p.1),
    );
    let (say, sby) = (sum(&|p| p.0 * p.2), sum(&|p| p.1 * p.2));
    let det = saa * sbb - sab * sab;
    let one = |sxy: f64, sxx: f64| {
        if sxx > 1e-12 {
            (sxy / sxx).max(0.0)
        } else {
            0.0
        }
    };
    let out = if det > 1e-12 * saa.max(1.0) * sbb.max(1.0) {
        let (a, b) = ((say * sbb - sby * sab) / det, (saa * sby - sab * say) / det);
        match (a >= 0.0, b >= 0.0) {
            (true, true) => (a, b),
            (true, false) => (one(say, saa), 0.0),
            _ => (0.0, one(sby, sbb)),
        }
    } else {
        (one(say, saa), 0.0)
    };
    assert!(out.0 >= 0.0 && out.1 >= 0.0);
    out
}

/// Entry `i`: the costs fitted on every sample but `i` (out of sample for
/// `i`); with one sample, [`BeTreeCosts::NONE`].
pub fn leave_one_out_betree(samples: &[BeTreeSample]) -> Vec<BeTreeCosts> {
    leave_one_out_with(samples, fit_betree_costs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::fit_all;
    use crate::{Measurement, OpKind, Pattern};

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    /// 10,000 rows of 16 B keys and 100 B values, fill 1; 64 KiB nodes,
    /// 16 KiB basements, fanout 16.
    fn small() -> (Dataset, BeTreeShape) {
        let d = Dataset {
            rows: 10_000,
            key_bytes: 16,
            value_bytes: 100,
            fill: 1.0,
            cache_bytes: 0,
            ..Dataset::default()
        };
        let shape = BeTreeShape {
            node_bytes: 65536,
            basement_bytes: 16384,
            fanout: 16,
        };
        (d, shape)
    }

    #[test]
    fn parts_by_hand() {
        // Leaves hold floor(65,536 / 116) = 564 records: 18 leaves, 2, 1.
        // Leaf: b = 4 basements, shell 64 + 4 x 24 + 3 x 18 = 214 B (one
        // 4 KiB page read). Internal: buf = 65,536 x (1 - 1/32) = 63,488 B,
        // 484.64 messages of 131 B, filters 605.8 B. Height 1: 2 nodes of
        // 9 children: shell 64 + 216 + 144 + 144 + 605.8 = 1,173.8 B; p =
        // 2 x 484.64 / 10,000 + 0.008 = 0.104930; share 7,054.2 B, read
        // 4/3 of it. Root: 2 children: shell 767.8 B, p = 0.056464.
        let (d, shape) = small();
        let ps = parts(&d, shape);
        assert_eq!(ps.len(), 6);
        let m = 63488.0 / 131.0;
        let (root_shell, root_buf) = (ps[0], ps[1]);
        assert!(close(
            root_shell.cached_bytes,
            64.0 + 48.0 + 18.0 + 32.0 + m * 1.25
        ));
        assert!(close(root_buf.accesses, m / 10_000.0 + 0.008));
        assert!(close(root_buf.cached_bytes, 31744.0) && root_buf.count == 2.0);
        let (s1, b1) = (ps[2], ps[3]);
        assert_eq!((s1.height, s1.count, s1.lifetime), (1, 2.0, 3.0));
        assert!(close(
            s1.cached_bytes,
            64.0 + 216.0 + 144.0 + 144.0 + m * 1.25
        ));
        assert!(close(b1.accesses, 2.0 * m / 10_000.0 + 0.008));
        assert!(close(b1.read_bytes, 63488.0 / 9.0 * 4.0 / 3.0) && b1.count == 18.0);
        let (leaf, base) = (ps[4], ps[5]);
        assert_eq!(
            (leaf.kind, leaf.count, leaf.read_bytes),
            (PartKind::Shell, 18.0, 4096.0)
        );
        assert!(close(leaf.cached_bytes, 214.0));
        assert_eq!(
            (base.kind, base.count, base.read_bytes),
            (PartKind::Basement, 72.0, 16384.0)
        );
    }

    #[test]
    fn no_cache_reads_everything_a_get_touches() {
        // Three shells, the two buffers with their probabilities, a basement.
        let (d, shape) = small();
        let m = 63488.0 / 131.0;
        let (p0, p1) = (m / 10_000.0 + 0.008, 2.0 * m / 10_000.0 + 0.008);
        let r = get_reads(&d, shape);
        assert!(close(r.reads, 3.0 + p0 + p1 + 1.0), "{}", r.reads);
        assert!(close(r.shell_reads, 3.0) && close(r.basement_reads, 1.0));
        let kib =
            (3.0 * 4096.0 + p0 * 31744.0 * 4.0 / 3.0 + p1 * 63488.0 / 9.0 * 4.0 / 3.0 + 16384.0)
                / 1024.0;
        assert!(close(r.kib, kib), "{} {kib}", r.kib);
        // A cache larger than the tree: nothing read.
        let all = Dataset {
            cache_bytes: 1 << 30,
            ..d
        };
        assert_eq!(get_reads(&all, shape).reads, 0.0);
    }

    fn part(count: f64, lifetime: f64) -> Part {
        Part {
            kind: PartKind::Basement,
            height: 0,
            count,
            cached_bytes: 1000.0,
            read_bytes: 1000.0,
            accesses: 1.0,
            lifetime,
            misses: 0.0,
        }
    }

    #[test]
    fn characteristic_time_by_hand() {
        // 100 objects of 1,000 B, one touched per get: half fit when
        // 1e5 x (1 - exp(-T / 100)) = 5e4, T = 100 ln 2; a miss ratio of 1/2.
        let t = characteristic_gets(&[part(100.0, 1.0)], 50_000.0).unwrap();
        assert!((t - 100.0 * std::f64::consts::LN_2).abs() < 1e-6, "{t}");
        // Shells live 3 T: with x = exp(-T / 100) = 1/2, shells miss x^3 =
        // 1/8 and partitions 1/2, holding 2e5 - 1e5 x (1/8 + 1/2) = 137,500 B.
        let t = characteristic_gets(&[part(100.0, 3.0), part(100.0, 1.0)], 137_500.0).unwrap();
        assert!((t - 100.0 * std::f64::consts::LN_2).abs() < 1e-6, "{t}");
        assert_eq!(characteristic_gets(&[part(100.0, 1.0)], 1e5), None);
    }

    #[test]
    fn engine_costs_add_to_the_device_time() {
        // A cached tree: a get is CPU only, 4 µs (no reads) -> 250,000/s;
        // an insert is predict_betree's device time + 10 µs.
        let ms: Vec<Measurement> = [
            (OpKind::Read, 4096, 10_000.0),
            (OpKind::Read, 65536, 2_000.0),
            (OpKind::Write, 4096, 5_000.0),
            (OpKind::Write, 65536, 1_000.0),
        ]
        .iter()
        .map(|&(op, b, i)| Measurement::simple(op, Pattern::Random, b, i))
        .collect();
        let r = fit_all(&ms).unwrap();
        let dev = Device {
            read: r.find(OpKind::Read, Pattern::Random, None).unwrap(),
            write: r.find(OpKind::Write, Pattern::Random, None),
            read_parallelism: 1.0,
        };
        let (d, shape) = small();
        let cached = Dataset {
            cache_bytes: 1 << 30,
            ..d.clone()
        };
        let c = BeTreeCosts {
            cpu_insert_s: 10e-6,
            cpu_get_s: 4e-6,
            cpu_read_s: 20e-6,
            cpu_read_per_kib_s: 2e-6,
        };
        let p = predict_betree_engine(dev, &cached, shape, c);
        assert!(close(p.point_qps, 250_000.0), "{}", p.point_qps);
        assert!(close(
            1.0 / p.inserts_per_s,
            1.0 / p.io.inserts_per_s + 10e-6
        ));
        // No cache: the device reads of every part, plus 4 µs + 20 µs per
        // read + 2 µs per KiB.
        let q = predict_betree_engine(dev, &d, shape, c);
        let dev_s: f64 = (q.reads.parts.iter())
            .map(|p| p.misses / dev.read.iops(p.read_bytes.round() as u64).0)
            .sum();
        assert!(close(q.get_device_s, dev_s));
        let want = dev_s + 4e-6 + 20e-6 * q.reads.reads + 2e-6 * q.reads.kib;
        assert!(
            close(1.0 / q.point_qps, want),
            "{} {want}",
            1.0 / q.point_qps
        );
    }

    #[test]
    fn fit_by_hand() {
        // Cached gets 4 µs. Gets of 1, 2, 1 reads and 10, 10, 30 KiB cost
        // 4 + 20 r + 2 k: 44, 64, 84 µs, so c_read = 20 µs, c_kib = 2 µs.
        // Inserts 10, 12, 14 µs: 12 µs.
        let s = |reads: f64, kib: f64, ins_us: f64| BeTreeSample {
            node_bytes: 65536,
            cpu_insert_s: ins_us * 1e-6,
            cpu_get_s: (4.0 + 20.0 * reads + 2.0 * kib) * 1e-6,
            reads_per_get: reads,
            kib_per_get: kib,
            cpu_cached_get_s: Some(4e-6),
        };
        let three = [s(1.0, 10.0, 10.0), s(2.0, 10.0, 12.0), s(1.0, 30.0, 14.0)];
        let c = fit_betree_costs(&three);
        assert!((c.cpu_get_s - 4e-6).abs() < 1e-15);
        assert!((c.cpu_read_s - 20e-6).abs() < 1e-12, "{}", c.cpu_read_s);
        assert!((c.cpu_read_per_kib_s - 2e-6).abs() < 1e-12);
        assert!((c.cpu_insert_s - 12e-6).abs() < 1e-15);
        assert!((c.cpu_get_at_s(1.5, 20.0) - 74e-6).abs() < 1e-12);
        // Leaving one out of exact data keeps the constants; the insert mean
        // moves: without the 14 µs sample, 11 µs.
        let loo = leave_one_out_betree(&three);
        assert!((loo[2].cpu_get_at_s(1.0, 30.0) - 84e-6).abs() < 1e-12);
        assert!((loo[2].cpu_insert_s - 11e-6).abs() < 1e-15);
        // CPU falling with the KiB (60 then 40 µs over 4 µs, at 1 read of
        // 10 then 30 KiB) is noise: the per-read term alone, sum r y / sum
        // r^2 = (60 + 40) / 2 = 50 µs per read.
        let f = fit_betree_costs(&[
            BeTreeSample {
                cpu_get_s: 64e-6,
                ..s(1.0, 10.0, 10.0)
            },
            BeTreeSample {
                cpu_get_s: 44e-6,
                ..s(1.0, 30.0, 10.0)
            },
        ]);
        assert!((f.cpu_read_s - 50e-6).abs() < 1e-12 && f.cpu_read_per_kib_s == 0.0);
        // No cached gets measured: c_get = 0, all of the CPU (44 µs over 2
        // reads) per read.
        let one = fit_betree_costs(&[BeTreeSample {
            cpu_cached_get_s: None,
            ..s(2.0, 0.0, 1.0)
        }]);
        assert_eq!(one.cpu_get_s, 0.0);
        assert!((one.cpu_read_s - 22e-6).abs() < 1e-12, "{}", one.cpu_read_s);
        assert_eq!(fit_betree_costs(&[]), BeTreeCosts::NONE);
        assert_eq!(leave_one_out_betree(&three[..1]), vec![BeTreeCosts::NONE]);
    }
}
