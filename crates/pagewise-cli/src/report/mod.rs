//! The `pagewise tune` HTML report: one self-contained page (inline CSS and
//! SVG, no scripts, no network) a person can read top to bottom: the answer
//! first, then the evidence.

mod advice;
mod charts;
mod drive;
mod html;
mod sections;
mod verify;

use crate::cmd::model::fmt_w;
use advice::advice_section;
use drive::model_section;
use html::{esc, CSS};
use pagewise_model::advise::Advice;
use pagewise_model::fit::ModelReport;
use pagewise_model::units::{fmt_bytes, fmt_count};
use pagewise_model::wear::WearEstimate;
use pagewise_probe::ProbeResults;
use sections::{device_section, method_section, wear_section};

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
    /// The advice measured on the engine (`tune --verify`).
    pub verification: Option<&'a crate::cmd::tune::verify::Verification>,
    /// tune's one answer (the headline; `None` outside tune).
    pub answer: Option<&'a crate::cmd::tune::answer::Answer>,
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
    if let Some(p) = &d.results.emulated {
        s.push_str(&format!(
            "<p class=\"emulated\"><strong>{}</strong>: every measured I/O took S + B/W on one of P channels, or longer where the real device under it was slower.</p>",
            esc(&p.banner())
        ));
    }
    s.push_str(&header(d));
    s.push_str(&summary(d));
    s.push_str(&advice_section(d));
    if let Some(v) = d.verification {
        s.push_str(&verify::verify_section(v));
    }
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
    match d.answer {
        Some(ans) => s.push_str(&answer_html(ans, &a.reason)),
        None => s.push_str(&format!(
            "<div class=\"sub\">Recommended B+tree page size</div><div class=\"big\">{}</div><p>{}.</p>",
            fmt_bytes(a.best as f64),
            esc(&a.reason)
        )),
    }
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
    if let Some(b) = &a.bepsilon {
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

/// The hero of a tune report: the answer, its explanations, the model's
/// reasoning after them.
fn answer_html(ans: &crate::cmd::tune::answer::Answer, reason: &str) -> String {
    let big = match (ans.tree_kind, ans.bepsilon) {
        (pagewise_model::advise::choice::Kind::BEpsilon, Some(b)) => {
            format!("B-epsilon tree, {} nodes", fmt_bytes(b.node_bytes as f64))
        }
        _ => format!("B+tree, {} pages", fmt_bytes(ans.page_size as f64)),
    };
    let mut s = format!(
        "<div class=\"sub\">Recommended configuration (written to tuned.json)</div><div class=\"big\">{}</div>",
        esc(&big)
    );
    for l in &ans.lines {
        s.push_str(&format!("<p>{}.</p>", esc(l)));
    }
    s.push_str(&format!(
        "<p class=\"sub\">The model's reasoning: {}.</p>",
        esc(reason)
    ));
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
