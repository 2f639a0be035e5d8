//! A tiny SVG writer: just enough elements for charts, with text escaped.

use std::fmt::Write;

/// Accumulates SVG elements; `finish` wraps them in the root element.
pub struct Svg {
    w: f64,
    h: f64,
    body: String,
}

/// Escapes text for XML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            _ => out.push(c),
        }
    }
    out
}

/// Horizontal anchoring of text.
#[derive(Clone, Copy)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    fn as_str(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

impl Svg {
    pub fn new(w: f64, h: f64) -> Self {
        Self {
            w,
            h,
            body: String::new(),
        }
    }

    pub fn raw(&mut self, s: &str) {
        self.body.push_str(s);
        self.body.push('\n');
    }

    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, style: &str) {
        let _ = writeln!(
            self.body,
            r#"<rect x="{x:.2}" y="{y:.2}" width="{w:.2}" height="{h:.2}" {style}/>"#
        );
    }

    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, style: &str) {
        let _ = writeln!(
            self.body,
            r#"<line x1="{x1:.2}" y1="{y1:.2}" x2="{x2:.2}" y2="{y2:.2}" {style}/>"#
        );
    }

    pub fn polyline(&mut self, pts: &[(f64, f64)], style: &str) {
        let mut p = String::new();
        for (x, y) in pts {
            let _ = write!(p, "{x:.2},{y:.2} ");
        }
        let _ = writeln!(
            self.body,
            r#"<polyline fill="none" points="{}" {style}/>"#,
            p.trim_end()
        );
    }

    pub fn text(&mut self, x: f64, y: f64, anchor: Anchor, style: &str, text: &str) {
        let _ = writeln!(
            self.body,
            r#"<text x="{x:.2}" y="{y:.2}" text-anchor="{}" {style}>{}</text>"#,
            anchor.as_str(),
            esc(text)
        );
    }

    /// Text rotated -90 degrees about its anchor (vertical axis titles).
    pub fn vtext(&mut self, x: f64, y: f64, style: &str, text: &str) {
        let _ = writeln!(
            self.body,
            r#"<text x="{x:.2}" y="{y:.2}" text-anchor="middle" transform="rotate(-90 {x:.2} {y:.2})" {style}>{}</text>"#,
            esc(text)
        );
    }

    /// A marker of one of several shapes so series differ without colour too.
    pub fn marker(&mut self, shape: usize, x: f64, y: f64, r: f64, color: &str) {
        let style = format!(r#"fill="{color}" stroke="white" stroke-width="1""#);
        match shape % 4 {
            0 => {
                let _ = writeln!(
                    self.body,
                    r#"<circle cx="{x:.2}" cy="{y:.2}" r="{r:.2}" {style}/>"#
                );
            }
            1 => self.rect(x - r, y - r, 2.0 * r, 2.0 * r, &style),
            2 => {
                let h = r * 1.2;
                let _ = writeln!(
                    self.body,
                    r#"<polygon points="{:.2},{:.2} {:.2},{:.2} {:.2},{:.2}" {style}/>"#,
                    x,
                    y - h,
                    x - h,
                    y + h * 0.8,
                    x + h,
                    y + h * 0.8
                );
            }
            _ => {
                let h = r * 1.3;
                let _ = writeln!(
                    self.body,
                    r#"<polygon points="{:.2},{:.2} {:.2},{:.2} {:.2},{:.2} {:.2},{:.2}" {style}/>"#,
                    x,
                    y - h,
                    x + h,
                    y,
                    x,
                    y + h,
                    x - h,
                    y
                );
            }
        }
    }

    pub fn finish(self) -> String {
        format!(
            concat!(
                r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" "#,
                r#"font-family="Helvetica, Arial, sans-serif" font-size="13">"#,
                "\n",
                r#"<rect x="0" y="0" width="{w}" height="{h}" fill="white"/>"#,
                "\n{body}</svg>\n"
            ),
            w = self.w,
            h = self.h,
            body = self.body
        )
    }
}

/// Colour-blind-friendly categorical palette (Okabe-Ito, plus a few extras).
pub const PALETTE: [&str; 10] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
    "#7F7F7F", "#8C564B",
];

/// Sequential colour scale (viridis stops), `t` in [0, 1].
pub fn viridis(t: f64) -> String {
    const STOPS: [(u8, u8, u8); 9] = [
        (68, 1, 84),
        (71, 44, 122),
        (59, 81, 139),
        (44, 113, 142),
        (33, 144, 141),
        (39, 173, 129),
        (92, 200, 99),
        (170, 220, 50),
        (253, 231, 37),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let pos = t * (STOPS.len() - 1) as f64;
    let i = (pos.floor() as usize).min(STOPS.len() - 2);
    let f = pos - i as f64;
    let mix = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * f).round() as u8;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}

/// True when text on a background of viridis(t) should be white.
pub fn dark_background(t: f64) -> bool {
    t < 0.6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(esc(r#"a<b & "c""#), "a&lt;b &amp; &quot;c&quot;");
    }

    #[test]
    fn viridis_endpoints() {
        assert_eq!(viridis(0.0), "#440154");
        assert_eq!(viridis(1.0), "#fde725");
        assert_eq!(viridis(f64::NAN), "#440154");
    }
}
