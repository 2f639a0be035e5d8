//! Charts of fits: measured IOPS with the fitted curves, and relative residuals.

use crate::plot::{Axis, LineChart, Series};
use pagewise_model::fit::{GroupFit, ModelReport};
use pagewise_model::units::fmt_bytes;

/// IOPS vs block size on log-log axes: markers for measurements, a dashed
/// curve of the same colour for each fit (the hinge where a knee was found).
pub fn iops_chart(r: &ModelReport, title: &str) -> LineChart {
    let mut c = LineChart::new(title, Axis::bytes("block size"), Axis::log("IOPS", "ops/s"))
        .subtitle("markers: measured (bars: 95% CI over repetitions); dashed: fitted model, IOPS = qd x threads / (S + B/W)");
    for (i, g) in r.fits.iter().enumerate() {
        let pts: Vec<(f64, f64)> = g.measured.iter().map(|&(b, v)| (b as f64, v)).collect();
        let mut s = Series::measured(&g.key.label(), pts).color(i);
        if g.ci95_rel.iter().any(Option::is_some) {
            let bars = g
                .measured
                .iter()
                .zip(&g.ci95_rel)
                .map(|(&(_, v), c)| {
                    let c = c.unwrap_or(0.0).min(0.95);
                    (v * (1.0 - c), v * (1.0 + c))
                })
                .collect();
            s = s.with_errors(bars);
        }
        c.add(s);
        c.add(Series::fitted(&fit_label(g), curve(g, |b| g.predicted_iops(b))).color(i));
    }
    c
}

/// Relative residuals (measured - model) / measured per block size, in percent.
pub fn residual_chart(r: &ModelReport) -> LineChart {
    let mut c = LineChart::new(
        "Residuals of the affine fit",
        Axis::bytes("block size"),
        Axis::linear("(measured - model) / measured", "%").not_from_zero(),
    )
    .subtitle("service time per I/O; within +-10% is a good fit");
    for (i, g) in r.fits.iter().enumerate() {
        let pts: Vec<(f64, f64)> = g
            .affine
            .points
            .iter()
            .map(|p| (p.block_size as f64, p.rel_residual * 100.0))
            .collect();
        c.add(Series::markers(&g.key.label(), pts).color(i));
    }
    c
}

fn fit_label(g: &GroupFit) -> String {
    let f = &g.affine;
    let w = f.bandwidth();
    let mut s = format!(
        "fit: S {:.0} µs, W {}",
        f.setup_s * 1e6,
        if w.is_finite() {
            format!("{:.0} MB/s", w / 1e6)
        } else {
            "unbounded".into()
        }
    );
    if let (Some(p), true) = (&g.piecewise, g.knee_found) {
        s.push_str(&format!(", knee {}", fmt_bytes(p.knee as f64)));
    }
    s
}

/// 48 log-spaced block sizes across the measured range of one fit.
fn curve(g: &GroupFit, f: impl Fn(u64) -> f64) -> Vec<(f64, f64)> {
    let lo = g.measured.first().map_or(512, |m| m.0) as f64;
    let hi = g.measured.last().map_or(1 << 20, |m| m.0) as f64;
    (0..48)
        .map(|i| {
            let b = (lo.ln() + (hi.ln() - lo.ln()) * i as f64 / 47.0)
                .exp()
                .round() as u64;
            (b as f64, f(b.max(1)))
        })
        .collect()
}
