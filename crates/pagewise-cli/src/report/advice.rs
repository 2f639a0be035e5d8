//! The advice section: the page-size chart and table, and the B-epsilon alternative.

use super::charts;
use super::html::{esc, facts, inline_svg, table};
use super::ReportData;
use crate::cmd::advise::row_cells;
use pagewise_model::fit::Source;
use pagewise_model::units::{fmt_bytes, fmt_count};

pub fn advice_section(d: &ReportData) -> String {
    let a = d.advice;
    let ds = &a.dataset;
    let mut s = String::from("<h2>Advice: which page size serves this dataset best</h2>");
    s.push_str(&format!(
        "<p>Dataset: <b>{}</b> rows of {} B keys and {} B values ({} per leaf entry, {} B per internal entry), nodes {:.0}% full on average, <b>{}</b> of cache holding the top of the tree, range queries of {} records; workload mix <b>{}</b>. Random reads from the <code>{}</code> curve, page writes from <code>{}</code>.</p>",
        fmt_count(ds.rows as f64),
        ds.key_bytes,
        ds.value_bytes,
        fmt_bytes(ds.leaf_entry() as f64),
        ds.internal_entry(),
        ds.fill * 100.0,
        fmt_bytes(ds.cache_bytes as f64),
        ds.range_records,
        esc(&a.mix.describe()),
        esc(&a.read_curve),
        esc(a.write_curve.as_deref().unwrap_or("none (read curve used)"))
    ));
    s.push_str(&inline_svg(&charts::advice(a).to_svg(), 1));
    let mut rows = Vec::new();
    let mut hl = None;
    let mut modelled = false;
    for (i, r) in a.rows.iter().enumerate() {
        if r.page_size == a.best {
            hl = Some(i);
        }
        let iops = if r.read_source == Source::Model {
            modelled = true;
            format!("<span class=\"model\">{}*</span>", fmt_count(r.read_iops))
        } else {
            match r.read_ci95_rel {
                Some(c) => format!(
                    "{} <span class=\"pm\">±{:.0}%</span>",
                    fmt_count(r.read_iops),
                    c * 100.0
                ),
                None => fmt_count(r.read_iops),
            }
        };
        let mut cells = vec![fmt_bytes(r.page_size as f64), iops];
        cells.extend(row_cells(r));
        cells.push(format!("<b>{}</b>", fmt_count(r.mix_ops)));
        rows.push(cells);
    }
    s.push_str(&table(
        &[
            "page",
            "read IOPS",
            "fanout",
            "leaf records",
            "log_f N",
            "height",
            "levels cached",
            "I/Os per get",
            "gets/s",
            "range pages",
            "range ms",
            "inserts/s",
            "mix ops/s",
        ],
        &rows,
        hl,
    ));
    let mut foot = String::from("± is the 95% confidence interval of the measured IOPS over the probe's repetitions. Height is the real tree's level count (partly full root); log<sub>f</sub>N is the back-of-envelope hop count. Levels are cached top first (optimal caching); every query still reads at least one page.");
    if modelled {
        foot.push_str(" <span class=\"model\">*</span> IOPS predicted by the fitted model: no measurement at this size.");
    }
    for (p, why) in &a.excluded {
        foot.push_str(&format!(
            " Excluded {}: {}.",
            fmt_bytes(*p as f64),
            esc(why)
        ));
    }
    s.push_str(&format!("<p class=\"note\">{foot}</p>"));
    if let Some(b) = &a.bepsilon {
        s.push_str("<h2>Alternative: a B-epsilon tree</h2><div class=\"card\">");
        s.push_str(&format!("<p>{}.</p>", esc(&b.summary)));
        s.push_str(&facts(&[
            (
                "half-bandwidth point S × W".into(),
                fmt_bytes(b.half_bandwidth_point.round()),
            ),
            (
                "recommended node size".into(),
                fmt_bytes(b.node_size as f64),
            ),
            (
                "basement (partial read) size".into(),
                fmt_bytes(b.basement_size as f64),
            ),
            (format!("fanout B^{}", b.epsilon), b.fanout.to_string()),
            ("height".into(), b.height.to_string()),
            (
                "amortized node I/Os per insert".into(),
                format!("{:.4}", b.insert_ios),
            ),
            ("I/Os per point query".into(), format!("{:.2}", b.point_ios)),
            (
                "inserts/s (B+tree)".into(),
                format!(
                    "{} ({})",
                    fmt_count(b.inserts_per_s),
                    fmt_count(b.btree_inserts_per_s)
                ),
            ),
            (
                "point queries/s (B+tree)".into(),
                format!(
                    "{} ({})",
                    fmt_count(b.point_qps),
                    fmt_count(b.btree_point_qps)
                ),
            ),
        ]));
        s.push_str("</div>");
    } else if let Some(why) = &a.bepsilon_note {
        s.push_str(&format!(
            "<h2>Alternative: a B-epsilon tree</h2><p class=\"warn\">{}.</p>",
            esc(why)
        ));
    }
    s
}
