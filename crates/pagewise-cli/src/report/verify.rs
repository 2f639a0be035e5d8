//! The verification section: the advice measured on the engine, per size,
//! predicted (before and after the model correction) against measured.

use super::html::{esc, inline_svg, table};
use crate::cmd::tune::verify::Verification;
use crate::plot::{Axis, LineChart, Series};
use pagewise_model::units::{fmt_bytes, fmt_count};

pub fn verify_section(v: &Verification) -> String {
    let mut s = String::from("<h2>Verification: the advice measured on the engine</h2>");
    s.push_str(&format!(
        "<div class=\"card\"><p><b>{}</b>.</p></div>",
        esc(&v.verdict)
    ));
    s.push_str(&format!(
        "<p>Each size below was built as a pagewise Db in the tune directory, warmed, and run single-threaded ({} mode, {:.0} s in total; the files are removed). Scaling rule: {}.</p>",
        esc(&format!("{:?}", v.level).to_lowercase()),
        v.elapsed_secs,
        esc(&v.rule)
    ));
    s.push_str(&inline_svg(&chart(v).to_svg(), 9));
    let rows: Vec<Vec<String>> = v.sizes.iter().map(row).collect();
    let hl = v.sizes.iter().position(|c| c.page_size == v.recommended);
    s.push_str(&table(
        &[
            "page",
            "rows",
            "cache",
            "Db / cache",
            "height",
            "reads/get pred.",
            "reads/get meas.",
            "gets/s pred.",
            "gets/s corr.",
            "gets/s meas.",
            "error",
            "mix pred.",
            "mix corr.",
            "mix meas.",
            "µs/level cached",
            "writes/insert",
        ],
        &rows,
        hl,
    ));
    let c = &v.correction;
    s.push_str(&format!(
        "<p>Model correction fitted from these runs (docs/design.md, \"Verification and model correction\"): CPU per cached level {:.2} µs at 4 KiB {:+.2} µs per doubling of the page, device reads {:.2}x the model's, each costing {:.1} µs {:+.1} µs per further 4 KiB on top of the drive's read time, {:.2} page writes per insert at checkpoints, each costing {:.2}x a QD1 random write (the model assumes 1 and 1). <i>pred.</i> is the advisor on the scaled dataset, <i>corr.</i> the same with the correction, <i>meas.</i> the engine. The correction is fitted on these same runs, so <i>corr.</i> for point gets is in-sample: it shows the terms are consistent; <i>pred.</i> is the independent check.</p>",
        c.cpu_level_s * 1e6,
        c.cpu_level_per_doubling_s * 1e6,
        c.miss_factor,
        c.miss_extra_s * 1e6,
        c.miss_extra_per_4k_s * 1e6,
        c.writes_per_insert,
        c.write_cost_factor
    ));
    if !v.notes.is_empty() {
        s.push_str("<ul>");
        for n in &v.notes {
            s.push_str(&format!("<li>{}</li>", esc(n)));
        }
        s.push_str("</ul>");
    }
    s
}

fn row(c: &crate::cmd::tune::verify::SizeCheck) -> Vec<String> {
    let (p, m, k) = (&c.predicted, &c.measured, &c.corrected);
    vec![
        fmt_bytes(c.page_size as f64),
        fmt_count(c.scaled.dataset.rows as f64),
        fmt_bytes(c.scaled.dataset.cache_bytes as f64),
        format!("{:.1}", c.scaled.scaled_db_to_cache),
        format!("{} ({} described)", m.height, c.scaled.described_height),
        format!(
            "{:.2} (floor 1: {:.2})",
            (p.height as f64 - p.cached_levels).max(0.0),
            p.uncached_hops
        ),
        format!("{:.2}", m.point_reads_per_get),
        fmt_count(p.point_qps),
        fmt_count(k.point_qps),
        format!("<b>{}</b>", fmt_count(m.point_qps)),
        format!(
            "{:+.0}% / {:+.0}%",
            c.point_error * 100.0,
            c.point_error_corrected * 100.0
        ),
        fmt_count(p.mix_ops),
        fmt_count(k.mix_ops),
        format!("<b>{}</b>", fmt_count(m.mix_ops)),
        format!("{:.2}", m.cpu_per_level_us),
        m.page_writes_per_insert
            .map_or("-".into(), |w| format!("{w:.2}")),
    ]
}

fn chart(v: &Verification) -> LineChart {
    let pts = |f: &dyn Fn(&crate::cmd::tune::verify::SizeCheck) -> f64| -> Vec<(f64, f64)> {
        v.sizes.iter().map(|c| (c.page_size as f64, f(c))).collect()
    };
    let mut ch = LineChart::new(
        "Predicted and measured operations per second",
        Axis::bytes("B+tree page size"),
        Axis::log("operations/s", "ops/s"),
    )
    .subtitle(&format!(
        "recommended {}, measured best {}",
        fmt_bytes(v.recommended as f64),
        fmt_bytes(v.best_measured as f64)
    ));
    ch.add(Series::markers("point gets, measured", pts(&|c| c.measured.point_qps)).color(1));
    ch.add(Series::fitted("point gets, predicted", pts(&|c| c.predicted.point_qps)).color(1));
    ch.add(Series::line("point gets, corrected", pts(&|c| c.corrected.point_qps)).color(1));
    ch.add(Series::markers("mix, measured", pts(&|c| c.measured.mix_ops)).color(0));
    ch.add(Series::fitted("mix, predicted", pts(&|c| c.predicted.mix_ops)).color(0));
    ch.add(Series::line("mix, corrected", pts(&|c| c.corrected.mix_ops)).color(0));
    ch
}
