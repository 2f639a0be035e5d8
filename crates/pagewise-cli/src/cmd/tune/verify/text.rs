//! The verification as a text table for the terminal.

use super::Verification;
use crate::cmd::model::table::Table;
use pagewise_model::units::{fmt_bytes, fmt_count};

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
    ]);
    for c in &v.sizes {
        let (p, k, m) = (&c.predicted, &c.calibrated, &c.measured);
        t.row(vec![
            fmt_bytes(c.page_size as f64),
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
        ]);
    }
    let e = &v.max_point_error;
    let mut s = format!(
        "\nVerification on the engine ({:.0} s, calibration Dbs at {} measured in the same rounds; device-only = the advisor on the scaled dataset, calibrated = with the engine costs fitted on the calibration Dbs, out of sample):\n",
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
    if let Some(b) = &v.betree {
        s.push_str(&render_betree(b));
    }
    for n in &v.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    s
}

fn render_betree(b: &super::betree::BeTreeVerification) -> String {
    let mut t = Table::new(&[
        "node",
        "basement",
        "fanout",
        "rows",
        "cache",
        "inserts/s pred",
        "meas",
        "gets/s pred",
        "meas",
        "reads/get",
        "mix/s pred",
        "meas",
    ]);
    for c in &b.sizes {
        t.row(vec![
            fmt_bytes(c.shape.node_bytes as f64),
            fmt_bytes(c.shape.basement_bytes as f64),
            c.shape.fanout.to_string(),
            fmt_count(c.rows as f64),
            fmt_bytes(c.cache_bytes as f64),
            fmt_count(c.predicted.inserts_per_s),
            fmt_count(c.inserts_per_s),
            fmt_count(c.predicted.point_qps),
            fmt_count(c.point_qps),
            format!("{:.2}", c.reads_per_get),
            fmt_count(c.predicted_mix_ops),
            fmt_count(c.mix_ops),
        ]);
    }
    format!(
        "\nB-epsilon node size on the engine ({:.0} s; random inserts, then point gets; predictions I/O only):\n{}Verdict: {}.\n",
        b.elapsed_secs,
        t.render(),
        b.verdict
    )
}
