//! The `pagewise tune` HTML report: one self-contained page (inline CSS and
//! SVG, no scripts, no network) a person can read top to bottom: the answer
//! first, then the evidence.

mod charts;
mod html;

use crate::cmd::model::chart::{iops_chart, residual_chart};
use crate::cmd::model::fmt_w;
use html::{esc, facts, inline_svg, table, CSS};
use pagewise_model::advise::Advice;
use pagewise_model::fit::{ModelReport, Source};
use pagewise_model::units::{fmt_bytes, fmt_count};
use pagewise_model::wear::WearEstimate;
use pagewise_probe::ProbeResults;

/// One line of the wear table.
pub struct WearRow {
    pub label: String,
    pub estimate: WearEstimate,
}

pub struct ReportData<'a> {
    pub results: &'a ProbeResults,
    pub model: &'a ModelReport,
    pub advice: &'a Advice,
    pub wear: &'a [WearRow],
    /// Where the user write rate of the wear table comes from.
    pub wear_basis: String,
    pub notes: &'a [String],
    pub sweep_secs: f64,
    /// Commands that reproduce each section from the saved results.
    pub commands: Vec<String>,
}

pub fn render(d: &ReportData) -> String {
    let mut s = String::new();
    s.push_str("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">");
    s.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    s.push_str(&format!(
        "<title>pagewise tune: {}</title>",
        esc(&device_name(d))
    ));
    s.push_str(&format!("<style>{CSS}</style></head><body><main>"));
    s.push_str(&header(d));
    s.push_str(&summary(d));
    s.push_str(&advice_section(d));
    s.push_str(&model_section(d));
    s.push_str(&wear_section(d));
    s.push_str(&device_section(d));
    s.push_str(&method_section(d));
    s.push_str("</main></body></html>\n");
    s
}

fn device_name(d: &ReportData) -> String {
    let t = &d.results.topology;
    match (&t.device, &t.model) {
        (Some(dev), Some(m)) => format!("{dev} ({m})"),
        (Some(dev), None) => dev.clone(),
        _ => d.results.target.path.display().to_string(),
    }
}

fn header(d: &ReportData) -> String {
    let r = d.results;
    format!(
        "<h1>Page-size report for {}</h1><p class=\"sub\">{} &middot; host {} ({} CPUs, kernel {}) &middot; pagewise {} &middot; {} points probed in {:.0} s on {}</p>",
        esc(&device_name(d)),
        esc(&r.timestamp),
        esc(&r.host.hostname),
        r.host.cpus,
        esc(&r.host.kernel),
        esc(&r.tool_version),
        r.points.len(),
        d.sweep_secs,
        esc(&r.target.path.display().to_string()),
    )
}

fn summary(d: &ReportData) -> String {
    let a = d.advice;
    let best = a.rows.iter().find(|r| r.page_size == a.best);
    let mut s = String::from("<div class=\"card hero\">");
    s.push_str(&format!(
        "<div class=\"sub\">Recommended B+tree page size</div><div class=\"big\">{}</div><p>{}.</p>",
        fmt_bytes(a.best as f64),
        esc(&a.reason)
    ));
    s.push_str("<div class=\"kpis\">");
    if let Some(r) = best {
        kpi(
            &mut s,
            &fmt_count(r.mix_ops),
            &format!("ops/s for the mix ({})", a.mix.describe()),
        );
        kpi(
            &mut s,
            &format!("{:.2}", r.uncached_hops),
            "I/Os per point query",
        );
    }
    if let Some(f) = d.model.find(
        pagewise_model::OpKind::Read,
        pagewise_model::Pattern::Random,
        None,
    ) {
        kpi(
            &mut s,
            &format!(
                "S {:.0} µs, W {}",
                f.affine.setup_s * 1e6,
                fmt_w(f.affine.bandwidth())
            ),
            &format!("random read cost model ({})", f.key.label()),
        );
        kpi(
            &mut s,
            &crate::cmd::model::fmt_hbp(f.affine.half_bandwidth_point()),
            "half-bandwidth point S × W",
        );
    }
    if let Some(b) = &a.betree {
        kpi(
            &mut s,
            &fmt_bytes(b.node_size as f64),
            "B-epsilon node size",
        );
    }
    if let Some(w) = d.wear.first() {
        kpi(
            &mut s,
            &life(&w.estimate),
            "drive life at the B+tree's write amplification",
        );
    }
    s.push_str("</div></div>");
    s
}

fn life(e: &WearEstimate) -> String {
    if e.years >= 1.0 {
        format!("{:.1} years", e.years)
    } else {
        format!("{:.0} days", e.days)
    }
}

fn kpi(s: &mut String, v: &str, l: &str) {
    s.push_str(&format!(
        "<div class=\"kpi\"><div class=\"v\">{}</div><div class=\"l\">{}</div></div>",
        esc(v),
        esc(l)
    ));
}

fn advice_section(d: &ReportData) -> String {
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
        rows.push(vec![
            fmt_bytes(r.page_size as f64),
            iops,
            r.fanout.to_string(),
            r.leaf_capacity.to_string(),
            format!("{:.2}", r.continuous_hops),
            r.height.to_string(),
            format!("{:.2}", r.cached_levels),
            format!("{:.2}", r.uncached_hops),
            fmt_count(r.point_qps),
            format!("{:.2}", r.range_ios),
            format!("{:.3}", r.range_ms),
            fmt_count(r.insert_ops),
            format!("<b>{}</b>", fmt_count(r.mix_ops)),
        ]);
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
    if let Some(b) = &a.betree {
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
    } else if let Some(why) = &a.betree_note {
        s.push_str(&format!(
            "<h2>Alternative: a B-epsilon tree</h2><p class=\"warn\">{}.</p>",
            esc(why)
        ));
    }
    s
}

fn model_section(d: &ReportData) -> String {
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

fn wear_section(d: &ReportData) -> String {
    let Some(first) = d.wear.first() else {
        return String::new();
    };
    let i = &first.estimate.input;
    let mut s = String::from("<h2>Wear: how long the drive lasts</h2>");
    s.push_str(&format!(
        "<p>Lifetime = capacity × P/E cycles / (user write rate × engine write amplification × FTL write amplification), for {} of capacity, {:.0} P/E cycles and {} of user data ({}). FTL write amplification {:.2}: {}.</p>",
        fmt_bytes(i.capacity_bytes),
        i.pe_cycles,
        pagewise_model::units::fmt_rate(i.host_write_rate),
        esc(&d.wear_basis),
        first.estimate.ftl_wa,
        esc(&first.estimate.ftl_wa_source)
    ));
    let rows: Vec<Vec<String>> = d
        .wear
        .iter()
        .map(|w| {
            let e = &w.estimate;
            vec![
                esc(&w.label),
                pagewise_model::units::fmt_rate(e.input.host_write_rate),
                format!("{:.1}", e.input.engine_wa),
                format!("{:.2}", e.ftl_wa),
                pagewise_model::units::fmt_rate(e.flash_write_rate),
                if e.days < 10.0 {
                    format!("{:.1}", e.days)
                } else {
                    fmt_count(e.days)
                },
                format!("{:.2}", e.years),
            ]
        })
        .collect();
    s.push_str(&table(
        &[
            "layout",
            "user writes",
            "engine WA",
            "FTL WA",
            "flash writes",
            "days",
            "years",
        ],
        &rows,
        Some(0),
    ));
    s.push_str("<p class=\"note\">The B+tree row assumes each insert rewrites its whole leaf page (no write-back coalescing): a pessimistic bound that grows with the page size. The virtio disk does not report its flash type; P/E cycles and over-provisioning are assumptions, change them with --pe-cycles and --over-provisioning.</p>");
    s
}

fn device_section(d: &ReportData) -> String {
    let t = &d.results.topology;
    let opt = |v: Option<u64>| v.map_or("unknown".to_string(), |x| format!("{x} B"));
    let mut rows = vec![
        (
            "device".to_string(),
            t.device.clone().unwrap_or("unknown".into()),
        ),
        ("model".into(), t.model.clone().unwrap_or("unknown".into())),
        (
            "disk size".into(),
            t.disk_size
                .map_or("unknown".into(), |v| fmt_bytes(v as f64)),
        ),
        ("logical block size".into(), opt(t.logical_block_size)),
        ("physical block size".into(), opt(t.physical_block_size)),
        ("minimum I/O size".into(), opt(t.minimum_io_size)),
        ("optimal I/O size".into(), opt(t.optimal_io_size)),
        (
            "rotational".into(),
            t.rotational.map_or("unknown".into(), |r| r.to_string()),
        ),
        (
            "scheduler".into(),
            t.scheduler.clone().unwrap_or("unknown".into()),
        ),
        (
            "request queue (nr_requests)".into(),
            t.nr_requests.map_or("unknown".into(), |v| v.to_string()),
        ),
    ];
    let tg = &d.results.target;
    rows.push((
        "test file".into(),
        format!(
            "{} ({}, removed afterwards)",
            tg.file.display(),
            fmt_bytes(tg.size as f64)
        ),
    ));
    rows.push((
        "I/O".into(),
        format!(
            "{}, {}",
            tg.engine,
            if tg.direct {
                "O_DIRECT"
            } else {
                "buffered (O_DIRECT refused)"
            }
        ),
    ));
    let mut s = String::from("<h2>Device topology</h2>");
    s.push_str(&facts(&rows));
    s
}

fn method_section(d: &ReportData) -> String {
    let mut s = String::from("<h2>Method and reproduction</h2>");
    let spec = &d.results.spec;
    s.push_str(&format!(
        "<p>Probe: uniform random and sequential offsets aligned to the block size, {:.1} s warm-up and {} measured per repetition, {}–{} repetitions until the 95% confidence interval of IOPS is within {:.0}%. The raw results are saved next to this report; every number here can be recomputed from them:</p>",
        spec.warmup_secs,
        match spec.limit {
            pagewise_probe::Limit::Seconds(x) => format!("{x:.1} s"),
            pagewise_probe::Limit::Ops(n) => format!("{n} I/Os"),
        },
        spec.min_reps,
        spec.max_reps,
        spec.tolerance * 100.0
    ));
    s.push_str("<pre>");
    for c in &d.commands {
        s.push_str(&esc(c));
        s.push('\n');
    }
    s.push_str("</pre>");
    if !d.notes.is_empty() {
        s.push_str("<p class=\"note\">Notes:</p><ul class=\"note\">");
        for n in d.notes {
            s.push_str(&format!("<li>{}</li>", esc(n)));
        }
        s.push_str("</ul>");
    }
    s
}
