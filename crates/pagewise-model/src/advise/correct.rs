//! Model correction from an engine run: what the device curve cannot know.
//!
//! The advisor costs an operation by its device I/Os alone. Running the
//! engine (`pagewise tune`'s verification) measures three more terms, and the
//! corrected per-operation times are
//!
//! ```text
//! point  = h_dev x m x (1/R(B) + x(B))                       + h x c(B)
//! range  = (h_dev + a_miss) x m x (1/R(B) + x(B))            + (h + e) x c(B)
//! insert = h_dev x m x (1/R(B) + x(B)) + w x f / W_iops(B)   + h x c(B)
//! mix    = sum of weight x time;  rate = 1 / time
//! ```
//!
//! - `R(B)`, `W_iops(B)`: random read and write IOPS of the drive at page
//!   size B (QD1 curves; 1/R(B) = T(B) = S + B/W).
//! - `h`: tree height (levels visited); `h_dev`: levels not cached, without
//!   the advisor's floor of one I/O; `e`: extra leaves a range of R records
//!   visits, (R - 1) / leaf capacity; `a_miss`: the device round trips the
//!   iterator's read-ahead spends on those that miss the cache (batches of
//!   the missed leaf and 2, 4, ... 32 siblings, ceil(n / P) round trips per
//!   batch of n pages on a drive of P parallel slots; `advise::read_ahead`).
//! - `c(B) = c0 + c1 x log2(B / 4 KiB)`: CPU seconds per cached level
//!   visited (binary search, copy, latch), fitted from fully cached gets.
//! - `x(B) = x0 + x1 x (B / 4 KiB - 1)`: seconds a cache miss costs on top
//!   of the drive's read time (checksum and decode of the page, cache
//!   insert and eviction, and any drift of the drive since the probe),
//!   fitted from the uncached gets' residual per read.
//! - `m`: measured device reads per point query / `h_dev` predicted: how far
//!   the engine's cache (CLOCK/LRU under uniform keys) is from the optimal
//!   level-by-level caching the advisor assumes.
//! - `w`: page writes per insert, measured at checkpoints (the advisor
//!   assumes 1: every insert writes its leaf back).
//! - `f`: seconds per page written at a checkpoint x W_iops(B): what a
//!   checkpoint's batched, queued page write costs relative to one QD1 random
//!   write (the advisor assumes 1).

use super::dataset::{Dataset, Mix};
use super::Row;
use serde::{Deserialize, Serialize};

/// The fitted correction terms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Correction {
    /// CPU seconds per cached level at 4 KiB pages (`c0`).
    pub cpu_level_s: f64,
    /// Change of the CPU per level per doubling of the page size (`c1`).
    pub cpu_level_per_doubling_s: f64,
    /// Measured / predicted device reads per point query (`m`).
    pub miss_factor: f64,
    /// Extra seconds per cache miss at 4 KiB (`x0`) and per further 4 KiB
    /// of page (`x1`).
    pub miss_extra_s: f64,
    pub miss_extra_per_4k_s: f64,
    /// Page writes per insert (`w`).
    pub writes_per_insert: f64,
    /// Cost of a checkpoint page write relative to a QD1 random write (`f`).
    pub write_cost_factor: f64,
}

impl Correction {
    /// No correction: the advisor's own costs (except its floor of one I/O).
    pub const NONE: Correction = Correction {
        cpu_level_s: 0.0,
        cpu_level_per_doubling_s: 0.0,
        miss_factor: 1.0,
        miss_extra_s: 0.0,
        miss_extra_per_4k_s: 0.0,
        writes_per_insert: 1.0,
        write_cost_factor: 1.0,
    };

    /// `c(B)`, never negative.
    pub fn cpu_per_level_s(&self, page: u64) -> f64 {
        let doublings = (page as f64 / 4096.0).log2();
        (self.cpu_level_s + self.cpu_level_per_doubling_s * doublings).max(0.0)
    }

    /// `x(B)`, never below minus the read time (a miss costs >= 0).
    pub fn miss_extra(&self, page: u64) -> f64 {
        self.miss_extra_s + self.miss_extra_per_4k_s * (page as f64 / 4096.0 - 1.0)
    }

    /// The engine's own costs only: CPU per level `c(B)`, the extra per miss
    /// `x(B)` and the checkpoint write factor `f`, with `m = w = 1`. `m` and
    /// `w` describe the Db they were measured on (its cache, and a sorted
    /// load whose full leaves split on their first insert), not the described
    /// dataset, so advice for the described dataset leaves them out.
    pub fn engine_only(&self) -> Correction {
        Correction {
            miss_factor: 1.0,
            writes_per_insert: 1.0,
            ..*self
        }
    }
}

/// The page size with the highest corrected mix rate among `rows` (all for
/// dataset `d`), and that rate: the advice once the engine's costs `c` are
/// in the model. `None` without rows.
pub fn engine_best(rows: &[Row], d: &Dataset, mix: Mix, c: &Correction) -> Option<(u64, f64)> {
    let best = rows
        .iter()
        .map(|r| (r.page_size, correct(r, d, mix, c).mix_ops))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    assert!(best.is_none_or(|b| b.1 > 0.0));
    best
}

/// Leave-one-out fits: entry `i` is the correction fitted on every sample
/// but `i`, so checking sample `i` against it is out of sample. With one
/// sample there is nothing to fit from: [`Correction::NONE`].
pub fn leave_one_out(samples: &[Sample]) -> Vec<Correction> {
    leave_one_out_with(samples, fit_correction)
}

/// Entry `i`: `fit` on every sample but `i`.
pub(super) fn leave_one_out_with<S: Copy, C>(samples: &[S], fit: impl Fn(&[S]) -> C) -> Vec<C> {
    let out: Vec<C> = (0..samples.len())
        .map(|i| {
            let rest: Vec<S> = (samples.iter().enumerate())
                .filter(|(j, _)| *j != i)
                .map(|(_, s)| *s)
                .collect();
            fit(&rest)
        })
        .collect();
    assert_eq!(out.len(), samples.len());
    out
}

/// Corrected rates for one page size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Corrected {
    pub page_size: u64,
    /// Device reads per point query after the correction (`h_dev x m`).
    pub point_ios: f64,
    pub point_qps: f64,
    pub range_qps: f64,
    pub insert_ops: f64,
    pub mix_ops: f64,
}

/// Applies `c` to an advisor row for dataset `d` (see the module comment).
pub fn correct(row: &Row, d: &Dataset, mix: Mix, c: &Correction) -> Corrected {
    assert!(row.read_iops > 0.0 && row.write_iops > 0.0 && row.leaf_capacity > 0);
    let h = row.height as f64;
    let h_dev = (h - row.cached_levels).max(0.0);
    let cpu = c.cpu_per_level_s(row.page_size);
    let extra = (d.range_records.saturating_sub(1)) as f64 / row.leaf_capacity as f64;
    // The advisor's range_rounds = max(h_dev, 1) + read-ahead rounds x leaf
    // miss (rows from before rounds existed: range_ios).
    let rounds = if row.range_rounds > 0.0 {
        row.range_rounds
    } else {
        row.range_ios
    };
    let extra_miss = (rounds - row.uncached_hops).max(0.0);
    let point_ios = h_dev * c.miss_factor;
    let read_s = (1.0 / row.read_iops + c.miss_extra(row.page_size)).max(0.0);
    let point_s = point_ios * read_s + h * cpu;
    let range_s = (h_dev + extra_miss) * c.miss_factor * read_s + (h + extra) * cpu;
    let write_s = c.writes_per_insert * c.write_cost_factor / row.write_iops;
    let insert_s = point_ios * read_s + write_s + h * cpu;
    let mix_s = mix.point * point_s + mix.range * range_s + mix.insert * insert_s;
    let out = Corrected {
        page_size: row.page_size,
        point_ios,
        point_qps: 1.0 / point_s,
        range_qps: 1.0 / range_s,
        insert_ops: 1.0 / insert_s,
        mix_ops: 1.0 / mix_s,
    };
    assert!(out.mix_ops > 0.0);
    out
}

/// What one verified page size measured, for [`fit_correction`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub page_size: u64,
    /// Seconds per fully cached get / levels visited.
    pub cpu_per_level_s: f64,
    /// The model's device hops (no floor) and the measured reads per get.
    pub predicted_point_ios: f64,
    pub measured_point_ios: f64,
    /// Measured seconds per uncached get, levels visited, and the drive's
    /// read time T(B) = 1 / R(B) from the probe.
    pub measured_get_s: f64,
    pub height: u32,
    pub read_s: f64,
    /// Page writes per insert, `None` when no insert ran.
    pub writes_per_insert: Option<f64>,
    /// Seconds per page written at a checkpoint x the drive's QD1 random
    /// write IOPS at this size, `None` when no checkpoint wrote pages.
    pub write_cost_factor: Option<f64>,
}

/// Fits the correction: `c(B)` by least squares on log2(B / 4 KiB) (a
/// constant with one size), `m` as total measured over total predicted reads
/// (1 when the model predicts under 0.05 reads per query in total), `w` as
/// the mean over the sizes that inserted (1 when none did), `f` likewise.
pub fn fit_correction(samples: &[Sample]) -> Correction {
    if samples.is_empty() {
        return Correction::NONE;
    }
    let (c0, c1) = line_fit(
        samples
            .iter()
            .map(|s| ((s.page_size as f64 / 4096.0).log2(), s.cpu_per_level_s)),
    );
    let cpu = |p: u64| (c0 + c1 * (p as f64 / 4096.0).log2()).max(0.0);
    // Residual per read of the uncached gets, where there were reads. The
    // work a miss adds (checksum, copy, decode, cache upkeep) cannot shrink
    // as the page grows: a falling line is noise, and extrapolating it would
    // make large pages free, so it is replaced by its mean.
    let (x0, x1) = line_fit_rising(samples.iter().filter(|s| s.measured_point_ios >= 0.05).map(
        |s| {
            let rest = s.measured_get_s - s.height as f64 * cpu(s.page_size);
            (
                s.page_size as f64 / 4096.0 - 1.0,
                rest / s.measured_point_ios - s.read_s,
            )
        },
    ));
    let predicted: f64 = samples.iter().map(|s| s.predicted_point_ios).sum();
    let measured: f64 = samples.iter().map(|s| s.measured_point_ios).sum();
    let mean_or_1 = |v: Vec<f64>| {
        if v.is_empty() {
            1.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let c = Correction {
        cpu_level_s: c0,
        cpu_level_per_doubling_s: c1,
        miss_extra_s: x0,
        miss_extra_per_4k_s: x1,
        miss_factor: if predicted >= 0.05 {
            measured / predicted
        } else {
            1.0
        },
        writes_per_insert: mean_or_1(samples.iter().filter_map(|s| s.writes_per_insert).collect()),
        write_cost_factor: mean_or_1(samples.iter().filter_map(|s| s.write_cost_factor).collect()),
    };
    assert!(c.miss_factor.is_finite() && c.writes_per_insert.is_finite());
    c
}

/// [`line_fit`], but a falling line becomes the mean (slope 0).
pub(super) fn line_fit_rising(pts: impl Iterator<Item = (f64, f64)>) -> (f64, f64) {
    let pts: Vec<(f64, f64)> = pts.collect();
    let (a, b) = line_fit(pts.iter().copied());
    if b >= 0.0 {
        return (a, b);
    }
    let (mean, flat) = line_fit(pts.iter().map(|p| (0.0, p.1)));
    assert!(flat == 0.0);
    (mean, 0.0)
}

/// Least-squares line y = a + b x; a constant (the mean) when the x do not
/// vary, (0, 0) without points.
fn line_fit(pts: impl Iterator<Item = (f64, f64)>) -> (f64, f64) {
    let pts: Vec<(f64, f64)> = pts.filter(|p| p.0.is_finite() && p.1.is_finite()).collect();
    if pts.is_empty() {
        return (0.0, 0.0);
    }
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let b = if sxx > 1e-12 { sxy / sxx } else { 0.0 };
    (my - b * mx, b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advise::Row;
    use crate::fit::Source;

    fn row() -> Row {
        // 8 KiB, height 3, 2.5 levels cached: 0.5 device hops (the advisor
        // floors it to 1), leaf capacity 50, range of 101 records: 2 extra
        // leaves, half of them missing -> range_ios = 1 + 1 = 2.
        Row {
            page_size: 8192,
            read_iops: 10_000.0,
            read_source: Source::Measured,
            read_ci95_rel: None,
            write_iops: 5_000.0,
            write_source: Source::Measured,
            fanout: 200,
            leaf_capacity: 50,
            continuous_hops: 3.0,
            height: 3,
            cached_levels: 2.5,
            uncached_hops: 1.0,
            point_qps: 10_000.0,
            envelope_qps: 3333.0,
            range_ios: 2.0,
            range_rounds: 2.0,
            range_ms: 0.2,
            range_qps: 5000.0,
            insert_ops: 1.0 / (1e-4 + 2e-4),
            mix_ops: 0.0,
        }
    }

    fn dataset() -> Dataset {
        Dataset {
            range_records: 101,
            ..Dataset::default()
        }
    }

    #[test]
    fn correction_by_hand() {
        let c = Correction {
            cpu_level_s: 2e-6,
            cpu_level_per_doubling_s: 1e-6,
            miss_factor: 1.2,
            miss_extra_s: 0.0,
            miss_extra_per_4k_s: 0.0,
            writes_per_insert: 0.5,
            write_cost_factor: 0.5,
        };
        // c(8 KiB) = 2 + 1 = 3 µs. point: 0.5 x 1.2 = 0.6 I/Os x 100 µs
        // = 60 µs + 3 x 3 = 9 µs -> 69 µs.
        let mix = Mix {
            point: 0.5,
            range: 0.25,
            insert: 0.25,
        };
        let k = correct(&row(), &dataset(), mix, &c);
        assert!((k.point_ios - 0.6).abs() < 1e-12);
        assert!((1.0 / k.point_qps - 69e-6).abs() < 1e-12);
        // range: (0.5 + 1) x 1.2 = 1.8 I/Os = 180 µs + (3 + 2) x 3 = 15 µs.
        assert!((1.0 / k.range_qps - 195e-6).abs() < 1e-12);
        // insert: 60 µs + 0.5 x 0.5 / 5000 = 50 µs + 9 µs = 119 µs.
        assert!((1.0 / k.insert_ops - 119e-6).abs() < 1e-12);
        // mix: 0.5 x 69 + 0.25 x 195 + 0.25 x 119 = 113 µs.
        assert!((1.0 / k.mix_ops - 113e-6).abs() < 1e-12);
    }

    #[test]
    fn miss_extra_adds_per_read() {
        // x(8 KiB) = 20 + 10 = 30 µs on top of 100 µs: 0.5 x 130 = 65 µs.
        let c = Correction {
            miss_extra_s: 20e-6,
            miss_extra_per_4k_s: 10e-6,
            ..Correction::NONE
        };
        let k = correct(&row(), &dataset(), Mix::default(), &c);
        assert!((1.0 / k.point_qps - 65e-6).abs() < 1e-12);
    }

    #[test]
    fn no_correction_drops_only_the_floor() {
        let k = correct(&row(), &dataset(), Mix::default(), &Correction::NONE);
        // 0.5 I/Os at 10k IOPS: 20k/s where the advisor says 10k/s.
        assert!((k.point_qps - 20_000.0).abs() < 1e-6);
    }

    #[test]
    fn a_cached_tree_costs_cpu_only() {
        let r = Row {
            cached_levels: 3.0,
            ..row()
        };
        let c = Correction {
            cpu_level_s: 1e-6,
            ..Correction::NONE
        };
        // c(8 KiB) = 1 µs (no slope); 3 levels = 3 µs.
        let k = correct(&r, &dataset(), Mix::default(), &c);
        assert_eq!(k.point_ios, 0.0);
        assert!((k.point_qps - 1e6 / 3.0).abs() < 1e-6);
    }

    #[test]
    fn fit_by_hand() {
        // cpu per level 2, 3, 4 µs at 4, 8, 16 KiB: c0 = 2 µs, c1 = 1 µs.
        let s = |p: u64, cpu: f64, pred: f64, meas: f64, w: Option<f64>| Sample {
            page_size: p,
            cpu_per_level_s: cpu,
            predicted_point_ios: pred,
            measured_point_ios: meas,
            writes_per_insert: w,
            write_cost_factor: w.map(|w| w / 4.0),
            // Gets of h = 3 levels: 3 x c(B) + meas x (T + x(B)) with T =
            // 100 µs and x(B) = 10 µs + 5 µs per further 4 KiB.
            measured_get_s: 3.0 * cpu + meas * (100e-6 + 10e-6 + 5e-6 * (p as f64 / 4096.0 - 1.0)),
            height: 3,
            read_s: 100e-6,
        };
        let c = fit_correction(&[
            s(4096, 2e-6, 1.0, 1.1, Some(0.8)),
            s(8192, 3e-6, 1.0, 1.2, None),
            s(16384, 4e-6, 1.0, 1.3, Some(1.2)),
        ]);
        assert!((c.cpu_level_s - 2e-6).abs() < 1e-15);
        assert!((c.cpu_level_per_doubling_s - 1e-6).abs() < 1e-15);
        // 3.6 measured / 3.0 predicted.
        assert!((c.miss_factor - 1.2).abs() < 1e-12);
        assert!((c.writes_per_insert - 1.0).abs() < 1e-12);
        // (0.2 + 0.3) / 2.
        assert!((c.write_cost_factor - 0.25).abs() < 1e-12);
        assert!((c.miss_extra_s - 10e-6).abs() < 1e-12, "{}", c.miss_extra_s);
        assert!((c.miss_extra_per_4k_s - 5e-6).abs() < 1e-12);
        // x(16 KiB) = 10 + 3 x 5 = 25 µs.
        assert!((c.miss_extra(16384) - 25e-6).abs() < 1e-12);
        // One size: a constant; nothing predicted: m = 1.
        let one = fit_correction(&[s(8192, 5e-6, 0.0, 0.01, None)]);
        assert!((one.cpu_per_level_s(65536) - 5e-6).abs() < 1e-15);
        assert_eq!(one.miss_factor, 1.0);
        assert_eq!(fit_correction(&[]), Correction::NONE);
    }

    #[test]
    fn cpu_per_level_moves_the_engine_best() {
        // Two sizes, each 1 device hop per get, point gets only. 4 KiB:
        // 10,000 IOPS, height 4; 16 KiB: 9,500 IOPS, height 3. No CPU:
        // 100 µs vs 105.26 µs, 4 KiB wins. With c = 3 µs per level at
        // every size: 4 KiB 100 + 12 = 112 µs, 16 KiB 105.26 + 9 = 114.26
        // µs, 4 KiB still wins; with a miss extra of 0 + 0 and c = 8 µs:
        // 132 vs 129.26 µs, 16 KiB wins at 1 / 129.26 µs.
        let r4 = Row {
            page_size: 4096,
            read_iops: 10_000.0,
            height: 4,
            cached_levels: 3.0,
            ..row()
        };
        let r16 = Row {
            page_size: 16384,
            read_iops: 9_500.0,
            height: 3,
            cached_levels: 2.0,
            ..row()
        };
        let rows = [r4, r16];
        let d = dataset();
        let point = Mix::default();
        assert_eq!(
            engine_best(&rows, &d, point, &Correction::NONE).unwrap().0,
            4096
        );
        let c3 = Correction {
            cpu_level_s: 3e-6,
            ..Correction::NONE
        };
        let (p, ops) = engine_best(&rows, &d, point, &c3).unwrap();
        assert_eq!(p, 4096);
        assert!((1.0 / ops - 112e-6).abs() < 1e-12);
        let c8 = Correction {
            cpu_level_s: 8e-6,
            ..Correction::NONE
        };
        let (p, ops) = engine_best(&rows, &d, point, &c8).unwrap();
        assert_eq!(p, 16384);
        assert!((1.0 / ops - (1.0 / 9_500.0 + 24e-6)).abs() < 1e-12);
        assert_eq!(engine_best(&[], &d, point, &c8), None);
    }

    #[test]
    fn engine_only_keeps_the_engine_terms() {
        let c = Correction {
            cpu_level_s: 1e-6,
            cpu_level_per_doubling_s: 2e-7,
            miss_factor: 1.3,
            miss_extra_s: 4e-5,
            miss_extra_per_4k_s: 1e-6,
            writes_per_insert: 2.5,
            write_cost_factor: 0.5,
        };
        let e = c.engine_only();
        assert_eq!((e.miss_factor, e.writes_per_insert), (1.0, 1.0));
        assert_eq!(e.cpu_level_s, 1e-6);
        assert_eq!(e.miss_extra(8192), 4e-5 + 1e-6);
        assert_eq!(e.write_cost_factor, 0.5);
    }

    #[test]
    fn leave_one_out_predicts_the_left_out_size() {
        // CPU per level 2, 3, 4 µs at 4, 8, 16 KiB lies on c0 = 2 µs, c1 =
        // 1 µs per doubling: any two sizes give the same line. The third
        // size breaks it (7 µs at 16 KiB): leaving it out gives the line of
        // 4 and 8 KiB, c(16 KiB) = 2 + 2 x 1 = 4 µs, not 7.
        let s = |p: u64, cpu: f64| Sample {
            page_size: p,
            cpu_per_level_s: cpu,
            predicted_point_ios: 1.0,
            measured_point_ios: 1.0,
            measured_get_s: 3.0 * cpu + 100e-6,
            height: 3,
            read_s: 100e-6,
            writes_per_insert: None,
            write_cost_factor: None,
        };
        let line = [s(4096, 2e-6), s(8192, 3e-6), s(16384, 4e-6)];
        for (i, c) in leave_one_out(&line).iter().enumerate() {
            let p = line[i].page_size;
            assert!((c.cpu_per_level_s(p) - line[i].cpu_per_level_s).abs() < 1e-15);
            // Every get is 3 levels + one read at exactly T: no miss extra.
            assert!(c.miss_extra(p).abs() < 1e-12, "{}", c.miss_extra(p));
        }
        let bent = [s(4096, 2e-6), s(8192, 3e-6), s(16384, 7e-6)];
        // A miss residual falling with the page (40 µs at 4 KiB, 20 µs at
        // 8 KiB) is fitted as its mean, 30 µs, at every size.
        let falling = [
            Sample {
                measured_get_s: 3.0 * 2e-6 + 140e-6,
                ..s(4096, 2e-6)
            },
            Sample {
                measured_get_s: 3.0 * 3e-6 + 120e-6,
                ..s(8192, 3e-6)
            },
        ];
        let f = fit_correction(&falling);
        assert!((f.miss_extra_s - 30e-6).abs() < 1e-12, "{}", f.miss_extra_s);
        assert_eq!(f.miss_extra_per_4k_s, 0.0);
        let loo = leave_one_out(&bent);
        assert!((loo[2].cpu_per_level_s(16384) - 4e-6).abs() < 1e-15);
        assert_eq!(leave_one_out(&bent[..1]), vec![Correction::NONE]);
    }
}
