//! Heat maps: a grid of values (e.g. IOPS by block size x alignment) with a colour scale.

use super::axis::{format_decimal, Axis};
use super::line::{header, Frame};
use super::svg::{dark_background, viridis, Anchor, Svg};

/// A grid of cells; `values[row][col]`, row 0 drawn at the bottom.
#[derive(Debug, Clone)]
pub struct HeatMap {
    pub title: String,
    pub subtitle: String,
    /// Axis titles (with units) for columns and rows.
    pub x_title: String,
    pub y_title: String,
    pub col_labels: Vec<String>,
    pub row_labels: Vec<String>,
    /// `None` cells (not measured) are drawn grey.
    pub values: Vec<Vec<Option<f64>>>,
    /// Title of the colour scale, e.g. "IOPS (ops/s)".
    pub value_title: String,
    /// Print each cell's value inside it when the cells are large enough.
    pub annotate: bool,
    pub width: f64,
    pub height: f64,
}

const LEFT: f64 = 96.0;
const TOP: f64 = 64.0;
const BOTTOM: f64 = 62.0;
const SCALE_W: f64 = 120.0;

impl HeatMap {
    pub fn new(title: &str, x_title: &str, y_title: &str, value_title: &str) -> Self {
        Self {
            title: title.into(),
            subtitle: String::new(),
            x_title: x_title.into(),
            y_title: y_title.into(),
            col_labels: Vec::new(),
            row_labels: Vec::new(),
            values: Vec::new(),
            value_title: value_title.into(),
            annotate: true,
            width: 960.0,
            height: 640.0,
        }
    }

    pub fn subtitle(mut self, s: &str) -> Self {
        self.subtitle = s.into();
        self
    }

    /// Sets the grid; `values.len()` must equal `rows.len()` and each row `cols.len()`.
    pub fn grid(
        mut self,
        cols: Vec<String>,
        rows: Vec<String>,
        values: Vec<Vec<Option<f64>>>,
    ) -> Self {
        self.col_labels = cols;
        self.row_labels = rows;
        self.values = values;
        self
    }

    fn range(&self) -> (f64, f64) {
        let vals = self
            .values
            .iter()
            .flatten()
            .flatten()
            .copied()
            .filter(|v| v.is_finite());
        let (lo, hi) = vals.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
        if lo.is_finite() {
            (lo, hi)
        } else {
            (0.0, 1.0)
        }
    }

    pub fn to_svg(&self) -> String {
        let (nr, nc) = (self.row_labels.len().max(1), self.col_labels.len().max(1));
        let p = Frame {
            x0: LEFT,
            y0: TOP,
            w: self.width - LEFT - SCALE_W - 24.0,
            h: self.height - TOP - BOTTOM,
        };
        let (cw, ch) = (p.w / nc as f64, p.h / nr as f64);
        let (lo, hi) = self.range();
        let t = |v: f64| if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
        let mut svg = Svg::new(self.width, self.height);
        header(&mut svg, &self.title, &self.subtitle);
        let annotate = self.annotate && cw >= 38.0 && ch >= 16.0;
        for (r, row) in self.values.iter().enumerate().take(nr) {
            for (c, cell) in row.iter().enumerate().take(nc) {
                let (x, y) = (p.x0 + c as f64 * cw, p.y0 + p.h - (r + 1) as f64 * ch);
                let fill = match cell {
                    Some(v) if v.is_finite() => viridis(t(*v)),
                    _ => "#dddddd".to_string(),
                };
                svg.rect(
                    x,
                    y,
                    cw,
                    ch,
                    &format!(r#"fill="{fill}" stroke="white" stroke-width="1""#),
                );
                if let (true, Some(v)) = (annotate, cell) {
                    let color = if dark_background(t(*v)) {
                        "white"
                    } else {
                        "#111"
                    };
                    let size = (ch * 0.45).clamp(9.0, 13.0);
                    svg.text(
                        x + cw / 2.0,
                        y + ch / 2.0 + size * 0.35,
                        Anchor::Middle,
                        &format!(r#"fill="{color}" font-size="{size:.0}""#),
                        &format_decimal(*v, cell_step(*v)),
                    );
                }
            }
        }
        let lab = r##"fill="#333" font-size="12""##;
        let every_c = nc.div_ceil(16).max(1);
        for (c, l) in self
            .col_labels
            .iter()
            .enumerate()
            .filter(|(c, _)| c.is_multiple_of(every_c))
        {
            svg.text(
                p.x0 + (c as f64 + 0.5) * cw,
                p.y0 + p.h + 18.0,
                Anchor::Middle,
                lab,
                l,
            );
        }
        let every_r = nr.div_ceil(20).max(1);
        for (r, l) in self
            .row_labels
            .iter()
            .enumerate()
            .filter(|(r, _)| r.is_multiple_of(every_r))
        {
            let y = p.y0 + p.h - (r as f64 + 0.5) * ch + 4.0;
            svg.text(p.x0 - 8.0, y, Anchor::End, lab, l);
        }
        let title = r##"fill="#111" font-size="14""##;
        svg.text(
            p.x0 + p.w / 2.0,
            p.y0 + p.h + 46.0,
            Anchor::Middle,
            title,
            &self.x_title,
        );
        svg.vtext(20.0, p.y0 + p.h / 2.0, title, &self.y_title);
        self.colour_scale(&mut svg, p.x0 + p.w + 24.0, &p, lo, hi);
        svg.finish()
    }

    fn colour_scale(&self, svg: &mut Svg, x: f64, p: &Frame, lo: f64, hi: f64) {
        let (bw, steps) = (18.0, 64);
        let sh = p.h / steps as f64;
        for i in 0..steps {
            let y = p.y0 + p.h - (i + 1) as f64 * sh;
            let c = viridis((i as f64 + 0.5) / steps as f64);
            svg.rect(x, y, bw, sh + 0.5, &format!(r#"fill="{c}""#));
        }
        svg.rect(x, p.y0, bw, p.h, r##"fill="none" stroke="#888""##);
        let layout = Axis::linear("", "")
            .not_from_zero()
            .with_range(lo, hi)
            .layout([]);
        let lab = r##"fill="#333" font-size="12""##;
        for (v, s) in &layout.ticks {
            let f = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
            let y = p.y0 + p.h - f * p.h;
            svg.line(x + bw, y, x + bw + 5.0, y, r##"stroke="#555""##);
            svg.text(x + bw + 8.0, y + 4.0, Anchor::Start, lab, s);
        }
        svg.vtext(
            x + bw + 84.0,
            p.y0 + p.h / 2.0,
            r##"fill="#111" font-size="14""##,
            &self.value_title,
        );
    }
}

/// Label precision for a cell: three significant digits.
fn cell_step(v: f64) -> f64 {
    let a = v.abs();
    if a == 0.0 {
        1.0
    } else {
        10f64.powf(a.log10().floor() - 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_legend_and_labels() {
        let h = HeatMap::new(
            "IOPS by block size and alignment",
            "alignment",
            "block size",
            "IOPS (ops/s)",
        )
        .grid(
            vec!["512 B".into(), "4 KiB".into()],
            vec!["512 B".into(), "1 KiB".into(), "4 KiB".into()],
            vec![
                vec![Some(1000.0), Some(2000.0)],
                vec![Some(1500.0), None],
                vec![Some(800.0), Some(1200.0)],
            ],
        );
        let svg = h.to_svg();
        // 6 cells + 64 colour-scale steps + scale frame.
        assert_eq!(svg.matches("<rect").count(), 1 + 6 + 64 + 1);
        assert!(svg.contains("#dddddd"), "missing cell drawn grey");
        assert!(svg.contains("#fde725"), "maximum is the top colour");
        assert!(svg.contains("#440154"), "minimum is the bottom colour");
        for needle in ["alignment", "block size", "IOPS (ops/s)", "1500", "4 KiB"] {
            assert!(svg.contains(needle), "missing {needle}");
        }
    }

    #[test]
    fn empty_grid_renders() {
        let svg = HeatMap::new("t", "x", "y", "v").to_svg();
        assert!(svg.ends_with("</svg>\n"));
    }
}
