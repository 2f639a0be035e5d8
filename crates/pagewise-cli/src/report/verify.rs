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
        "<p>Each size below was built as a pagewise Db in the tune directory, warmed, and run single-threaded, every Db of both tree kinds in the same interleaved rounds ({} mode, {:.0} s in total; the files are removed). Scaling rule: {}.</p>",
        esc(&format!("{:?}", v.level).to_lowercase()),
        v.elapsed_secs,
        esc(&v.rule)
    ));
    if v.device_only_best != v.recommended {
        s.push_str(&format!(
            "<p>The device-only model ranked {} first; with the calibrated engine costs the recommendation is {}, the size verified around.</p>",
            fmt_bytes(v.device_only_best as f64),
            fmt_bytes(v.recommended as f64)
        ));
    }
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
            "gets/s device-only",
            "gets/s calibrated",
            "gets/s meas.",
            "error device-only / calibrated / leave-one-out / in-sample",
            "mix calibrated",
            "mix meas. (median; lowest-highest round)",
            "µs CPU per get",
            "writes/insert",
        ],
        &rows,
        hl,
    ));
    let e = &v.max_point_error;
    s.push_str(&format!(
        "<p>Largest point-get error over the verified sizes: device-only advisor {:.1}%; <b>calibrated {:.1}%</b> and leave-one-out {:.1}% (both out of sample); fit on these same runs {:.1}% (in sample).</p>",
        e.device_only * 100.0,
        e.calibrated * 100.0,
        e.leave_one_out * 100.0,
        e.in_sample * 100.0
    ));
    s.push_str(&costs_line(
        "Engine costs calibrated on separate Dbs (a quarter of the rows, same cache rule) before the verified sizes, and used for the recommendation and for <i>calibrated</i> (kept in engine-costs.json for later runs)",
        &v.calibration.correction,
    ));
    s.push_str(&costs_line(
        "The same terms fitted on the verified sizes (in sample, shown for comparison)",
        &v.correction,
    ));
    if !v.notes.is_empty() {
        s.push_str("<ul>");
        for n in &v.notes {
            s.push_str(&format!("<li>{}</li>", esc(n)));
        }
        s.push_str("</ul>");
    }
    if let Some(b) = &v.bepsilon {
        s.push_str(&bepsilon_section(b));
    }
    s.push_str(&extensions(&v.extensions));
    s
}

/// The B-epsilon node size measured the same way.
fn bepsilon_section(b: &crate::cmd::tune::verify::bepsilon::BEpsilonVerification) -> String {
    let mut s = String::from("<h3>B-epsilon node size on the engine</h3>");
    s.push_str(&format!(
        "<div class=\"card\"><p><b>{}</b>.</p></div><p>{:.0} s. Scaling rule: {}.</p>",
        esc(&b.verdict),
        b.elapsed_secs,
        esc(b.rule)
    ));
    let k = &b.costs;
    s.push_str(&format!(
        "<p>Engine costs fitted on all sizes: {:.1} µs CPU per insert, the insert's device time {:.2}x the flush I/O the advisor counts; per get {:.1} µs with the path cached, and each miss {:+.1} µs {:+.2} µs per KiB beside the drive's read time (docs/design.md, \"The advisor's B-epsilon model, corrected\"). Each row's corrected prediction uses the constants fitted on the other sizes.</p>",
        k.cpu_insert_s * 1e6,
        k.insert_io_factor,
        k.cpu_get_s * 1e6,
        k.miss_extra_s * 1e6,
        k.miss_extra_per_kib_s * 1e6
    ));
    let rows: Vec<Vec<String>> = b.sizes.iter().map(bepsilon_row).collect();
    let hl = b
        .sizes
        .iter()
        .position(|c| c.shape.node_bytes == b.recommended_node_bytes);
    s.push_str(&table(
        &[
            "node",
            "basement",
            "fanout",
            "rows",
            "cache",
            "height",
            "inserts/s I/O-only",
            "inserts/s corrected",
            "inserts/s meas.",
            "error corrected",
            "gets/s I/O-only",
            "gets/s corrected",
            "gets/s meas.",
            "error corrected",
            "reads/get corrected",
            "reads/get meas.",
            "CPU µs per insert / get",
            "mix corrected (gets + inserts)",
            "mix meas. (median; lowest-highest round)",
        ],
        &rows,
        hl,
    ));
    s
}

/// One node size's row: measured against the I/O-only and the corrected
/// predictions.
fn bepsilon_row(c: &crate::cmd::tune::verify::bepsilon::NodeCheck) -> Vec<String> {
    let k = |f: &dyn Fn(&pagewise_model::advise::BEpsilonEnginePrediction) -> String| {
        c.corrected.as_ref().map_or_else(|| "-".into(), f)
    };
    vec![
        fmt_bytes(c.shape.node_bytes as f64),
        fmt_bytes(c.shape.basement_bytes as f64),
        c.shape.fanout.to_string(),
        fmt_count(c.rows as f64),
        fmt_bytes(c.cache_bytes as f64),
        c.height.to_string(),
        fmt_count(c.predicted.inserts_per_s),
        k(&|p| fmt_count(p.inserts_per_s)),
        fmt_count(c.inserts_per_s),
        format!("{:+.1}%", c.corrected_insert_error * 100.0),
        fmt_count(c.predicted.point_qps),
        k(&|p| fmt_count(p.point_qps)),
        fmt_count(c.point_qps),
        format!("{:+.1}%", c.corrected_point_error * 100.0),
        k(&|p| format!("{:.2}", p.reads.reads)),
        format!("{:.2}", c.reads_per_get),
        format!("{:.1} / {:.1}", c.cpu_insert_s * 1e6, c.cpu_get_s * 1e6),
        fmt_count(c.corrected_mix_ops),
        format!(
            "{}; {}",
            fmt_count(c.mix_ops),
            spread(&c.measured.mix_spread)
        ),
    ]
}

/// "1,100-1,300": the lowest and highest round's mix rate.
fn spread(s: &pagewise_model::advise::choice::Spread) -> String {
    format!("{}-{}", fmt_count(s.min), fmt_count(s.max))
}

/// One paragraph per range extension: why, and both sizes' rates in its
/// extra pass.
fn extensions(ext: &[crate::cmd::tune::verify::extend::Extension]) -> String {
    let mut s = String::new();
    for e in ext {
        let b = |x: u64| fmt_bytes(x as f64);
        let m = |x: &pagewise_model::advise::choice::Spread| {
            format!("{} ({})", fmt_count(x.median), spread(x))
        };
        s.push_str(&format!(
            "<p>Range extension ({}): {}, so {} was built and measured beside {} in an extra interleaved pass: {} against {} mix ops/s. Its row is on the main pass's scale (x{:.3}).</p>",
            e.unit.name(),
            esc(&e.reason),
            b(e.next),
            b(e.edge),
            m(&e.next_mix),
            m(&e.edge_mix),
            e.scale
        ));
    }
    s
}

/// One paragraph naming the correction's terms (docs/design.md,
/// "Verification and model correction").
fn costs_line(what: &str, c: &pagewise_model::advise::correct::Correction) -> String {
    format!(
        "<p>{what}: CPU per cached level {:.2} µs at 4 KiB {:+.2} µs per doubling of the page, device reads {:.2}x the model's, each costing {:.1} µs {:+.1} µs per further 4 KiB on top of the drive's read time, {:.2} page writes per insert at checkpoints, each costing {:.2}x a QD1 random write (the device-only model assumes 0, 1, 0, 1 and 1).</p>",
        c.cpu_level_s * 1e6,
        c.cpu_level_per_doubling_s * 1e6,
        c.miss_factor,
        c.miss_extra_s * 1e6,
        c.miss_extra_per_4k_s * 1e6,
        c.writes_per_insert,
        c.write_cost_factor
    )
}

fn row(c: &crate::cmd::tune::verify::SizeCheck) -> Vec<String> {
    let (p, m, k) = (&c.predicted, &c.measured, &c.calibrated);
    let pct = |e: f64| format!("{:+.0}%", e * 100.0);
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
            "{} / <b>{}</b> / {} / {}",
            pct(c.point_error),
            pct(c.point_error_calibrated),
            pct(c.point_error_loo),
            pct(c.point_error_corrected)
        ),
        fmt_count(k.mix_ops),
        format!("<b>{}</b>; {}", fmt_count(m.mix_ops), spread(&m.mix_spread)),
        format!("{:.1}", m.point_cpu_us),
        m.page_writes_per_insert
            .map_or("-".into(), |w| format!("{w:.2}")),
    ]
}

fn chart(v: &Verification) -> LineChart {
    let pts = |f: &dyn Fn(&crate::cmd::tune::verify::SizeCheck) -> f64| -> Vec<(f64, f64)> {
        let mut p: Vec<(f64, f64)> = v.sizes.iter().map(|c| (c.page_size as f64, f(c))).collect();
        p.sort_by(|a, b| a.0.total_cmp(&b.0));
        p
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
    ch.add(Series::line("point gets, calibrated", pts(&|c| c.calibrated.point_qps)).color(1));
    ch.add(Series::markers("mix, measured", pts(&|c| c.measured.mix_ops)).color(0));
    ch.add(Series::fitted("mix, predicted", pts(&|c| c.predicted.mix_ops)).color(0));
    ch.add(Series::line("mix, calibrated", pts(&|c| c.calibrated.mix_ops)).color(0));
    ch
}
