//! Wear, device topology, and how to reproduce the report.

use super::html::{esc, facts, table};
use super::ReportData;
use pagewise_model::units::{fmt_bytes, fmt_count};

pub fn wear_section(d: &ReportData) -> String {
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

pub fn device_section(d: &ReportData) -> String {
    let t = &d.results.topology;
    let opt = |v: Option<u64>| v.map_or("unknown".to_string(), |x| format!("{x} B"));
    let mut rows = vec![
        (
            "device".to_string(),
            t.device.clone().unwrap_or("unknown".into()),
        ),
        ("model".into(), t.model.clone().unwrap_or("unknown".into())),
        (
            "device size".into(),
            t.size.map_or("unknown".into(), |v| fmt_bytes(v as f64)),
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

pub fn method_section(d: &ReportData) -> String {
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
