//! Minimal HTML building: escaping and tables.

pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            _ => o.push(c),
        }
    }
    o
}

/// A table: header cells, rows of (already escaped) cell HTML, and an
/// optional row index to highlight.
pub fn table(headers: &[&str], rows: &[Vec<String>], highlight: Option<usize>) -> String {
    let mut s = String::from("<table><thead><tr>");
    for h in headers {
        s.push_str(&format!("<th>{}</th>", esc(h)));
    }
    s.push_str("</tr></thead><tbody>");
    for (i, r) in rows.iter().enumerate() {
        if Some(i) == highlight {
            s.push_str("<tr class=\"best\">");
        } else {
            s.push_str("<tr>");
        }
        for c in r {
            s.push_str(&format!("<td>{c}</td>"));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

/// Two-column key/value table.
pub fn facts(rows: &[(String, String)]) -> String {
    let mut s = String::from("<table class=\"facts\"><tbody>");
    for (k, v) in rows {
        s.push_str(&format!("<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v)));
    }
    s.push_str("</tbody></table>");
    s
}

/// An SVG made safe to inline next to others: the plot module names its clip
/// path `plot-area`, and ids must be unique in one HTML document.
pub fn inline_svg(svg: &str, n: usize) -> String {
    let body = svg.find("<svg").map_or(svg, |i| &svg[i..]);
    let body = body.replace("id=\"plot-area\"", &format!("id=\"plot-area-{n}\""));
    let body = body.replace("url(#plot-area)", &format!("url(#plot-area-{n})"));
    format!("<figure>{body}</figure>")
}

pub const CSS: &str = r#"
*{box-sizing:border-box}
body{font-family:-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:#1d2329;background:#f4f6f8;margin:0;line-height:1.5}
main{max-width:1080px;margin:0 auto;padding:28px 28px 60px}
h1{font-size:28px;margin:0 0 4px}
h2{font-size:20px;margin:36px 0 10px;padding-bottom:4px;border-bottom:2px solid #dde3e8}
p{margin:8px 0}
.sub{color:#5b6670;font-size:14px}
.card{background:#fff;border-radius:10px;box-shadow:0 1px 3px rgba(0,0,0,.08);padding:18px 22px;margin:14px 0}
.hero{border-left:6px solid #0072b2}
.hero .big{font-size:30px;font-weight:700;color:#0072b2}
.kpis{display:flex;flex-wrap:wrap;gap:14px;margin-top:12px}
.kpi{flex:1 1 200px;background:#f4f8fb;border-radius:8px;padding:10px 14px}
.kpi .v{font-size:20px;font-weight:650}
.kpi .l{font-size:12px;color:#5b6670;text-transform:uppercase;letter-spacing:.04em}
table{border-collapse:collapse;width:100%;font-size:13.5px;background:#fff}
th,td{padding:6px 9px;text-align:right;border-bottom:1px solid #e8ecef;white-space:nowrap}
th:first-child,td:first-child{text-align:left}
thead th{background:#eef2f5;font-weight:600;position:sticky;top:0}
tbody tr:nth-child(even){background:#fafbfc}
tr.best td{background:#e3f1fa;font-weight:650}
table.facts{width:auto}
table.facts th{text-align:left;font-weight:600;color:#5b6670;background:none}
table.facts td{text-align:left}
figure{margin:10px 0;background:#fff;border-radius:10px;box-shadow:0 1px 3px rgba(0,0,0,.08);padding:8px}
figure svg{width:100%;height:auto;display:block}
.model{color:#8a6d00}
.note{font-size:13px;color:#5b6670}
code{background:#eef2f5;padding:1px 5px;border-radius:4px;font-size:12.5px}
pre{background:#1d2329;color:#e8ecef;padding:12px 14px;border-radius:8px;white-space:pre-wrap;word-break:break-all;font-size:12.5px}
.warn{color:#a03c00}
.emulated{background:#fff4e5;border-left:6px solid #d55e00;border-radius:8px;padding:10px 14px;margin:0 0 14px}
.pm{color:#8a949c;font-size:11.5px;font-weight:400}
"#;
