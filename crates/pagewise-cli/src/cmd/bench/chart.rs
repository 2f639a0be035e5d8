//! Small inline-SVG charts for the bench report: lines (linear or log x) and
//! grouped bars. Self-contained so the HTML page needs nothing else.

use std::fmt::Write;

pub const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

const W: f64 = 760.0;
const H: f64 = 360.0;
const L: f64 = 70.0;
const R: f64 = 150.0;
const T: f64 = 36.0;
const B: f64 = 46.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Round tick values covering [lo, hi] (about `n` of them).
fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let span = (hi - lo).max(1e-12);
    let raw = span / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| span / s <= n as f64)
        .unwrap_or(10.0 * mag);
    let mut v = Vec::new();
    let mut x = (lo / step).ceil() * step;
    while x <= hi + step * 1e-9 {
        v.push(x);
        x += step;
    }
    v
}

pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{}G", trim(v / 1e9))
    } else if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e3 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn fmt_ns(v: f64) -> String {
    if v >= 1e6 {
        format!("{}ms", trim(v / 1e6))
    } else if v >= 1e3 {
        format!("{}µs", trim(v / 1e3))
    } else {
        format!("{}ns", trim(v))
    }
}

/// One named series of points.
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A line chart; `log_x` plots x on a log10 axis (latencies).
pub struct LineChart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub log_x: bool,
    pub x_is_ns: bool,
    pub lines: Vec<Line>,
}

impl LineChart<'_> {
    pub fn svg(&self) -> String {
        let pts = self.lines.iter().flat_map(|l| l.points.iter());
        let xf = |x: f64| if self.log_x { x.max(1.0).log10() } else { x };
        let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0f64);
        for &(x, y) in pts {
            x0 = x0.min(xf(x));
            x1 = x1.max(xf(x));
            y1 = y1.max(y);
        }
        if x0 > x1 {
            (x0, x1) = (0.0, 1.0);
        }
        if self.log_x {
            (x0, x1) = (x0.floor(), x1.ceil().max(x0.floor() + 1.0));
        } else {
            x0 = x0.min(0.0);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        let y1 = if y1 <= 0.0 { 1.0 } else { y1 * 1.05 };
        let px = |x: f64| L + (xf(x) - x0) / (x1 - x0) * (W - L - R);
        let py = |y: f64| H - B - y / y1 * (H - T - B);
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#
        );
        let _ = write!(
            s,
            r#"<text x="{}" y="20" font-size="15" font-weight="bold">{}</text>"#,
            L,
            esc(self.title)
        );
        for t in ticks(0.0, y1, 6) {
            let y = py(t);
            let _ = write!(
                s,
                r##"<line x1="{L}" x2="{}" y1="{y}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
                W - R,
                L - 6.0,
                y + 4.0,
                fmt_num(t)
            );
        }
        let xt: Vec<f64> = if self.log_x {
            (x0 as i32..=x1 as i32).map(|e| 10f64.powi(e)).collect()
        } else {
            ticks(x0, x1, 8)
        };
        for t in xt {
            let x = px(t);
            let label = if self.x_is_ns { fmt_ns(t) } else { fmt_num(t) };
            let _ = write!(
                s,
                r##"<line x1="{x}" x2="{x}" y1="{T}" y2="{}" stroke="#eee"/><text x="{x}" y="{}" text-anchor="middle">{label}</text>"##,
                H - B,
                H - B + 16.0
            );
        }
        let _ = write!(
            s,
            r##"<line x1="{L}" x2="{}" y1="{}" y2="{}" stroke="#333"/><line x1="{L}" x2="{L}" y1="{T}" y2="{}" stroke="#333"/>"##,
            W - R,
            H - B,
            H - B,
            H - B
        );
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            (L + W - R) / 2.0,
            H - 8.0,
            esc(self.x_label)
        );
        let _ = write!(
            s,
            r#"<text transform="translate(16,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
            (T + H - B) / 2.0,
            esc(self.y_label)
        );
        for (i, l) in self.lines.iter().enumerate() {
            let c = PALETTE[i % PALETTE.len()];
            let d: Vec<String> = l
                .points
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            let _ = write!(
                s,
                r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
                d.join(" ")
            );
            if let [(x, y)] = l.points[..] {
                let _ = write!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{c}"/>"#,
                    px(x),
                    py(y)
                );
            }
            let ly = T + 8.0 + 18.0 * i as f64;
            let _ = write!(
                s,
                r#"<rect x="{}" y="{}" width="14" height="4" fill="{c}"/><text x="{}" y="{}">{}</text>"#,
                W - R + 10.0,
                ly - 4.0,
                W - R + 30.0,
                ly + 2.0,
                esc(&l.name)
            );
        }
        s.push_str("</svg>");
        s
    }
}

/// Grouped bars: one group per category, one bar per series in each.
pub struct BarChart<'a> {
    pub title: &'a str,
    pub y_label: &'a str,
    pub groups: Vec<String>,
    /// (series name, value per group; None = no bar).
    pub series: Vec<(String, Vec<Option<f64>>)>,
}

impl BarChart<'_> {
    pub fn svg(&self) -> String {
        let y1 = self
            .series
            .iter()
            .flat_map(|(_, v)| v.iter().flatten())
            .fold(0f64, |a, &b| a.max(b));
        let y1 = if y1 <= 0.0 { 1.0 } else { y1 * 1.1 };
        let py = |y: f64| H - B - y / y1 * (H - T - B);
        let gw = (W - L - R) / self.groups.len().max(1) as f64;
        let bw = (gw * 0.8) / self.series.len().max(1) as f64;
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#
        );
        let _ = write!(
            s,
            r#"<text x="{L}" y="20" font-size="15" font-weight="bold">{}</text>"#,
            esc(self.title)
        );
        for t in ticks(0.0, y1, 6) {
            let y = py(t);
            let _ = write!(
                s,
                r##"<line x1="{L}" x2="{}" y1="{y}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
                W - R,
                L - 6.0,
                y + 4.0,
                fmt_num(t)
            );
        }
        for (g, name) in self.groups.iter().enumerate() {
            let gx = L + g as f64 * gw + gw * 0.1;
            let _ = write!(
                s,
                r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
                gx + gw * 0.4,
                H - B + 16.0,
                esc(name)
            );
            for (i, (_, vals)) in self.series.iter().enumerate() {
                if let Some(v) = vals.get(g).copied().flatten() {
                    let x = gx + i as f64 * bw;
                    let _ = write!(
                        s,
                        r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}</title></rect>"#,
                        py(v),
                        bw * 0.92,
                        (H - B - py(v)).max(0.0),
                        PALETTE[i % PALETTE.len()],
                        trim(v)
                    );
                    let _ = write!(
                        s,
                        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text>"#,
                        x + bw * 0.46,
                        py(v) - 3.0,
                        trim(v)
                    );
                }
            }
        }
        let _ = write!(
            s,
            r##"<line x1="{L}" x2="{}" y1="{}" y2="{}" stroke="#333"/>"##,
            W - R,
            H - B,
            H - B
        );
        let _ = write!(
            s,
            r#"<text transform="translate(16,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
            (T + H - B) / 2.0,
            esc(self.y_label)
        );
        for (i, (name, _)) in self.series.iter().enumerate() {
            let ly = T + 8.0 + 18.0 * i as f64;
            let _ = write!(
                s,
                r#"<rect x="{}" y="{}" width="12" height="12" fill="{}"/><text x="{}" y="{}">{}</text>"#,
                W - R + 10.0,
                ly - 8.0,
                PALETTE[i % PALETTE.len()],
                W - R + 28.0,
                ly + 2.0,
                esc(name)
            );
        }
        s.push_str("</svg>");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = ticks(0.0, 1234.0, 6);
        assert_eq!(t, vec![0.0, 500.0, 1000.0]);
        assert!(*t.last().unwrap() <= 1234.0);
    }

    #[test]
    fn charts_are_svg_with_every_series() {
        let c = LineChart {
            title: "t <1>",
            x_label: "x",
            y_label: "y",
            log_x: true,
            x_is_ns: true,
            lines: vec![Line {
                name: "a&b".into(),
                points: vec![(100.0, 0.5), (1e6, 1.0)],
            }],
        }
        .svg();
        assert!(c.starts_with("<svg") && c.ends_with("</svg>"));
        assert!(c.contains("a&amp;b") && c.contains("t &lt;1&gt;") && c.contains("polyline"));
        let b = BarChart {
            title: "wa",
            y_label: "x",
            groups: vec!["fill".into()],
            series: vec![("p".into(), vec![Some(3.0)]), ("q".into(), vec![None])],
        }
        .svg();
        assert_eq!(
            b.matches("<rect").count(),
            1 + 2,
            "one bar and two legend swatches"
        );
    }
}
