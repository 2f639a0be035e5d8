//! Grouped bar charts (e.g. write amplification per workload, one bar per
//! engine), self-contained inline SVG in the same palette as the line charts.

use super::svg::PALETTE;
use std::fmt::Write;

const W: f64 = 760.0;
const H: f64 = 360.0;
const L: f64 = 70.0;
const R: f64 = 170.0;
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

fn fmt_num(v: f64) -> String {
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
        assert_eq!(ticks(0.0, 1234.0, 6), vec![0.0, 500.0, 1000.0]);
    }

    #[test]
    fn one_bar_per_present_value_and_escaped_labels() {
        let b = BarChart {
            title: "wa <x>",
            y_label: "x",
            groups: vec!["fill".into(), "a&b".into()],
            series: vec![
                ("p".into(), vec![Some(3.0), Some(1.5)]),
                ("q".into(), vec![None, Some(2.0)]),
            ],
        }
        .svg();
        assert!(b.starts_with("<svg") && b.ends_with("</svg>"));
        assert_eq!(
            b.matches("<rect").count(),
            3 + 2,
            "three bars and two legend swatches"
        );
        assert!(b.contains("wa &lt;x&gt;") && b.contains("a&amp;b"));
    }
}
