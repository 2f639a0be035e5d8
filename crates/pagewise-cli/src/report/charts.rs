//! The report's own charts (the fit charts live in cmd/model/chart.rs).

use crate::plot::{Axis, LineChart, Series};
use pagewise_model::advise::Advice;
use pagewise_model::fit::ParallelismFit;
use pagewise_model::measurement::workload_name;
use pagewise_model::units::fmt_bytes;

/// IOPS against I/Os in flight, with the PDAM shape min(c x per-slot, peak).
/// Only curves with three or more depths are drawn when there are any: two
/// points say nothing about the shape, and the table lists every curve.
pub fn parallelism(all: &[ParallelismFit]) -> LineChart {
    let swept: Vec<&ParallelismFit> = all
        .iter()
        .filter(|p| p.parallelism.points.len() >= 3)
        .collect();
    let ps: Vec<&ParallelismFit> = if swept.is_empty() {
        all.iter().collect()
    } else {
        swept
    };
    let mut c = LineChart::new(
        "Throughput vs I/Os in flight",
        Axis::log("I/Os in flight (qd x threads)", ""),
        Axis::log("IOPS", "ops/s"),
    )
    .subtitle("markers: measured; dashed: PDAM model, linear up to P slots then flat");
    for (i, p) in ps.iter().enumerate() {
        let q = &p.parallelism;
        let name = format!(
            "{} {}",
            workload_name(p.op, p.pattern),
            fmt_bytes(p.block_size as f64)
        );
        let pts: Vec<(f64, f64)> = q.points.iter().map(|&(c, v)| (c as f64, v)).collect();
        c.add(Series::measured(&name, pts).color(i));
        let (c0, i0) = q.points[0];
        let per_slot = i0 / c0 as f64;
        let hi = q.points.last().map_or(1, |p| p.0) as f64;
        let mut model = vec![(c0 as f64, i0)];
        if q.pdam_p > c0 as f64 && q.pdam_p < hi {
            model.push((q.pdam_p, q.peak_iops));
        }
        model.push((hi, (hi * per_slot).min(q.peak_iops)));
        c.add(Series::fitted(&format!("PDAM, P = {:.1}", q.pdam_p), model).color(i));
    }
    c
}

/// Operations per second against page size: the advisor's table as a picture.
pub fn advice(a: &Advice) -> LineChart {
    let pick = |f: &dyn Fn(&pagewise_model::advise::Row) -> f64| -> Vec<(f64, f64)> {
        a.rows.iter().map(|r| (r.page_size as f64, f(r))).collect()
    };
    let mut c = LineChart::new(
        "Operations per second by page size",
        Axis::bytes("B+tree page size"),
        Axis::log("operations/s", "ops/s"),
    )
    .subtitle(&format!(
        "{} rows, cache {}; best for the mix: {}",
        pagewise_model::units::fmt_count(a.dataset.rows as f64),
        fmt_bytes(a.dataset.cache_bytes as f64),
        fmt_bytes(a.best as f64)
    ));
    c.add(Series::measured(&format!("mix ({})", a.mix.describe()), pick(&|r| r.mix_ops)).color(0));
    c.add(Series::measured("point queries", pick(&|r| r.point_qps)).color(1));
    c.add(
        Series::measured(
            &format!("range queries ({} records)", a.dataset.range_records),
            pick(&|r| r.range_qps),
        )
        .color(2),
    );
    c.add(Series::measured("inserts", pick(&|r| r.insert_ops)).color(3));
    c.add(
        Series::fitted(
            "point queries, log_f N hops, no cache",
            pick(&|r| r.envelope_qps),
        )
        .color(1),
    );
    c
}
