//! The verification as a text table for the terminal.

use super::extend::{Extension, Unit};
use super::Verification;
use crate::table::Table;
use pagewise_model::advise::choice::Spread;
use pagewise_model::units::{fmt_bytes, fmt_count};

/// "1,234-1,300": a mix rate's range over the rounds.
fn range_text(s: &Spread) -> String {
    format!("{}-{}", fmt_count(s.min), fmt_count(s.max))
}

/// The size, marked when a range extension measured it.
fn size_text(size: u64, unit: Unit, ext: &[Extension]) -> String {
    let extended = ext.iter().any(|e| e.unit == unit && e.next == size);
    let b = fmt_bytes(size as f64);
    if extended {
        format!("{b} (ext)")
    } else {
        b
    }
}

pub fn render_text(v: &Verification) -> String {
    let mut t = Table::new(&[
        "page",
        "rows",
        "cache",
        "reads/get pred",
        "meas",
        "gets/s device-only",
        "calibrated",
        "meas",
        "error calibrated",
        "mix/s calibrated",
        "meas",
        "rounds",
    ]);
    for c in &v.sizes {
        let (p, k, m) = (&c.predicted, &c.calibrated, &c.measured);
        t.row(vec![
            size_text(c.page_size, Unit::Pages, &v.extensions),
            fmt_count(c.scaled.dataset.rows as f64),
            fmt_bytes(c.scaled.dataset.cache_bytes as f64),
            format!("{:.2}", (p.height as f64 - p.cached_levels).max(0.0)),
            format!("{:.2}", m.point_reads_per_get),
            fmt_count(p.point_qps),
            fmt_count(k.point_qps),
            fmt_count(m.point_qps),
            format!("{:+.1}%", c.point_error_calibrated * 100.0),
            fmt_count(k.mix_ops),
            fmt_count(m.mix_ops),
            range_text(&m.mix_spread),
        ]);
    }
    let e = &v.max_point_error;
    let mut s = format!(
        "\nVerification on the engine ({:.0} s; the calibration Dbs at {} and the B-epsilon node sizes measured in the same interleaved rounds; device-only = the advisor on the scaled dataset, calibrated = with the engine costs fitted on the calibration Dbs, out of sample; mix/s meas = the median of the rounds' rates, rounds = their lowest and highest):\n",
        v.elapsed_secs,
        (v.calibration.sizes.iter())
            .map(|c| fmt_bytes(c.page_size as f64))
            .collect::<Vec<_>>()
            .join(" and ")
    );
    s.push_str(&t.render());
    s.push_str(&format!(
        "Largest point-get error: device-only {:.1}%, calibrated {:.1}% and leave-one-out {:.1}% (out of sample), in-sample fit {:.1}%.\n",
        e.device_only * 100.0,
        e.calibrated * 100.0,
        e.leave_one_out * 100.0,
        e.in_sample * 100.0
    ));
    s.push_str(&format!("Verdict: {}.\n", v.verdict));
    if let Some(b) = &v.bepsilon {
        s.push_str(&render_bepsilon(b, &v.extensions));
    }
    s.push_str(&render_extensions(&v.extensions));
    for n in &v.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    s
}

/// One line per range extension: why, and both sizes in its extra pass.
fn render_extensions(ext: &[Extension]) -> String {
    let mut s = String::new();
    for e in ext {
        let b = |x: u64| fmt_bytes(x as f64);
        let m = |x: &Spread| format!("{} ({})", fmt_count(x.median), range_text(x));
        s.push_str(&format!(
            "Range extension ({}): {}, so {} {} were built and measured beside {} in an extra interleaved pass: {} against {} mix ops/s, {} (its row is on the main pass's scale, x{:.3}).\n",
            e.unit.name(),
            e.reason,
            b(e.next),
            e.unit.name(),
            b(e.edge),
            m(&e.next_mix),
            m(&e.edge_mix),
            if e.next_won {
                format!("{} measured faster", b(e.next))
            } else {
                format!("{} stays the best", b(e.edge))
            },
            e.scale
        ));
    }
    s
}

fn render_bepsilon(b: &super::bepsilon::BEpsilonVerification, ext: &[Extension]) -> String {
    let mut t = Table::new(&[
        "node",
        "basement",
        "fanout",
        "rows",
        "cache",
        "inserts/s pred",
        "corr",
        "meas",
        "gets/s pred",
        "corr",
        "meas",
        "reads/get corr",
        "meas",
        "CPU µs insert",
        "get",
        "mix/s corr",
        "meas",
        "rounds",
    ]);
    for c in &b.sizes {
        let k = c.corrected.as_ref();
        let opt = |f: &dyn Fn(&pagewise_model::advise::BEpsilonEnginePrediction) -> String| {
            k.map_or_else(|| "-".into(), f)
        };
        t.row(vec![
            size_text(c.shape.node_bytes, Unit::Nodes, ext),
            fmt_bytes(c.shape.basement_bytes as f64),
            c.shape.fanout.to_string(),
            fmt_count(c.rows as f64),
            fmt_bytes(c.cache_bytes as f64),
            fmt_count(c.predicted.inserts_per_s),
            opt(&|p| fmt_count(p.inserts_per_s)),
            fmt_count(c.inserts_per_s),
            fmt_count(c.predicted.point_qps),
            opt(&|p| fmt_count(p.point_qps)),
            fmt_count(c.point_qps),
            opt(&|p| format!("{:.2}", p.reads.reads)),
            format!("{:.2}", c.reads_per_get),
            format!("{:.1}", c.cpu_insert_s * 1e6),
            format!("{:.1}", c.cpu_get_s * 1e6),
            fmt_count(c.corrected_mix_ops),
            fmt_count(c.mix_ops),
            range_text(&c.measured.mix_spread),
        ]);
    }
    let k = &b.costs;
    format!(
        "\nB-epsilon node size on the engine (loads {:.0} s by random inserts, then the B+tree's phases in its rounds; inserts/s = the load's; pred = I/O only, corr = derived reads per get and the engine's costs fitted on the other sizes):\n{}Engine costs (all sizes): {:.1} µs CPU per insert, insert I/O {:.2}x the counted; per get {:.1} µs cached, a miss {:+.1} µs {:+.2} µs per KiB beside the drive's read.\nVerdict: {}.\n",
        b.elapsed_secs,
        t.render(),
        k.cpu_insert_s * 1e6,
        k.insert_io_factor,
        k.cpu_get_s * 1e6,
        k.miss_extra_s * 1e6,
        k.miss_extra_per_kib_s * 1e6,
        b.verdict
    )
}
