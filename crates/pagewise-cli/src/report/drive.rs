//! The drive section: measured curves, the fitted model, residuals, parallelism.

use super::charts;
use super::html::{esc, inline_svg, table};
use super::ReportData;
use crate::cmd::model::chart::{iops_chart, residual_chart};
use crate::cmd::model::fmt_w;
use pagewise_model::units::{fmt_bytes, fmt_count};

pub fn model_section(d: &ReportData) -> String {
    let m = d.model;
    let mut s = String::from("<h2>The drive: measured curves and the fitted model</h2>");
    s.push_str("<p>Each I/O is modelled as a setup time S plus a transfer at bandwidth W: T(B) = S + B/W, fitted by least squares on the service time per I/O in flight (qd × threads / IOPS), weighted so every block size counts equally. Below S × W, setup dominates and larger pages are nearly free; above it, transfer dominates.</p>");
    s.push_str(&inline_svg(
        &iops_chart(m, "Measured IOPS and fitted T(B) = S + B/W").to_svg(),
        2,
    ));
    let rows: Vec<Vec<String>> = m
        .fits
        .iter()
        .map(|g| {
            let f = &g.affine;
            vec![
                esc(&g.key.label()),
                f.points.len().to_string(),
                format!("{:.1} µs", f.setup_s * 1e6),
                fmt_w(f.bandwidth()),
                crate::cmd::model::fmt_hbp(f.half_bandwidth_point()),
                format!("{:.4}", f.r2),
                format!("{:.1}%", f.max_rel_residual * 100.0),
                match (&g.poor, &g.piecewise, g.knee_found) {
                    (None, _, _) => "good".into(),
                    (Some(_), Some(p), true) => format!(
                        "<span class=\"warn\">poor: knee at {}</span>",
                        fmt_bytes(p.knee as f64)
                    ),
                    (Some(why), _, _) => format!("<span class=\"warn\">poor ({})</span>", esc(why)),
                },
            ]
        })
        .collect();
    s.push_str(&table(
        &[
            "workload",
            "points",
            "S (setup)",
            "W (bandwidth)",
            "S × W",
            "R²",
            "max residual",
            "fit",
        ],
        &rows,
        None,
    ));
    for g in m.fits.iter().filter(|g| g.knee_found) {
        if let Some(p) = &g.piecewise {
            s.push_str(&format!(
                "<p class=\"note\">{}: two-segment fit with knee at {}: S {:.1} µs, W {} below, {} above, max residual {:.1}%. Predictions for this curve use the two-segment model.</p>",
                esc(&g.key.label()),
                fmt_bytes(p.knee as f64),
                p.setup_s * 1e6,
                fmt_w(1.0 / p.sec_per_byte_below.max(1e-30)),
                fmt_w(1.0 / p.sec_per_byte_above.max(1e-30)),
                p.max_rel_residual * 100.0
            ));
        }
    }
    s.push_str(&inline_svg(&residual_chart(m).to_svg(), 3));
    if !m.parallelism.is_empty() {
        s.push_str("<h2>Parallelism</h2><p>How throughput grows with I/Os in flight. PDAM's P is where linear scaling from the lowest depth meets the measured peak: the number of I/Os the drive serves at once.</p>");
        s.push_str(&inline_svg(
            &charts::parallelism(&m.parallelism).to_svg(),
            4,
        ));
        let rows: Vec<Vec<String>> = m
            .parallelism
            .iter()
            .map(|p| {
                let q = &p.parallelism;
                vec![
                    pagewise_model::measurement::workload_name(p.op, p.pattern).into(),
                    fmt_bytes(p.block_size as f64),
                    q.points
                        .iter()
                        .map(|x| x.0.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    fmt_count(q.peak_iops),
                    q.peak_at.to_string(),
                    format!("{:.1}", q.pdam_p),
                    q.qd95.to_string(),
                ]
            })
            .collect();
        s.push_str(&table(
            &[
                "workload",
                "block",
                "I/Os in flight",
                "peak IOPS",
                "peak at",
                "PDAM P",
                "95% of peak at",
            ],
            &rows,
            None,
        ));
    }
    s
}
