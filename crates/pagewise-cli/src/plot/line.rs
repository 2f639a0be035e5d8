//! Line and scatter charts: several series, legend, labelled axes.

use super::axis::{Axis, Layout};
use super::svg::{Anchor, Svg, PALETTE};

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Measured points: markers joined by a thin line.
    LineMarkers,
    /// Measured points with no line (scatter).
    Markers,
    /// A solid line without markers.
    Line,
    /// A model or fitted curve: a dashed line without markers.
    Fitted,
}

/// One named series of (x, y) points.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub style: Style,
    /// Palette index; `None` takes the series' position. Give a fitted curve
    /// the same index as the measurements it fits so they share a colour.
    pub color: Option<usize>,
    /// Optional (low, high) y interval per point, drawn as error bars.
    pub errors: Option<Vec<(f64, f64)>>,
}

impl Series {
    fn new(name: &str, points: Vec<(f64, f64)>, style: Style) -> Self {
        Self {
            name: name.into(),
            points,
            style,
            color: None,
            errors: None,
        }
    }

    /// Measured values: markers joined by a line.
    pub fn measured(name: &str, points: Vec<(f64, f64)>) -> Self {
        Self::new(name, points, Style::LineMarkers)
    }

    /// Scatter: markers only.
    pub fn markers(name: &str, points: Vec<(f64, f64)>) -> Self {
        Self::new(name, points, Style::Markers)
    }

    /// A plain line.
    pub fn line(name: &str, points: Vec<(f64, f64)>) -> Self {
        Self::new(name, points, Style::Line)
    }

    /// A fitted or model curve (dashed line).
    pub fn fitted(name: &str, points: Vec<(f64, f64)>) -> Self {
        Self::new(name, points, Style::Fitted)
    }

    pub fn color(mut self, palette_index: usize) -> Self {
        self.color = Some(palette_index);
        self
    }

    /// Error bars: one (low, high) per point, same order as `points`.
    pub fn with_errors(mut self, errors: Vec<(f64, f64)>) -> Self {
        self.errors = Some(errors);
        self
    }
}

/// A chart of series against two axes.
#[derive(Debug, Clone)]
pub struct LineChart {
    pub title: String,
    /// A smaller second line under the title (machine, parameters).
    pub subtitle: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    pub width: f64,
    pub height: f64,
}

const LEFT: f64 = 78.0;
const TOP: f64 = 64.0;
const BOTTOM: f64 = 58.0;
const RIGHT: f64 = 16.0;

impl LineChart {
    pub fn new(title: &str, x: Axis, y: Axis) -> Self {
        Self {
            title: title.into(),
            subtitle: String::new(),
            x,
            y,
            series: Vec::new(),
            width: 960.0,
            height: 600.0,
        }
    }

    pub fn subtitle(mut self, s: &str) -> Self {
        self.subtitle = s.into();
        self
    }

    pub fn add(&mut self, s: Series) -> &mut Self {
        self.series.push(s);
        self
    }

    fn legend_width(&self) -> f64 {
        let longest = self
            .series
            .iter()
            .map(|s| s.name.chars().count())
            .max()
            .unwrap_or(0);
        (longest as f64 * 7.0 + 44.0).clamp(110.0, 300.0)
    }

    /// Renders the chart as a standalone SVG document.
    pub fn to_svg(&self) -> String {
        let xs = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0));
        let ys = self.series.iter().flat_map(|s| {
            let pts = s.points.iter().map(|p| p.1);
            let errs = s.errors.iter().flatten().flat_map(|e| [e.0, e.1]);
            pts.chain(errs).collect::<Vec<_>>()
        });
        let (lx, ly) = (self.x.layout(xs), self.y.layout(ys));
        let legend_w = self.legend_width();
        let plot = Frame {
            x0: LEFT,
            y0: TOP,
            w: self.width - LEFT - RIGHT - legend_w,
            h: self.height - TOP - BOTTOM,
        };
        let mut svg = Svg::new(self.width, self.height);
        header(&mut svg, &self.title, &self.subtitle);
        self.axes(&mut svg, &plot, &lx, &ly);
        svg.raw(&format!(
            r#"<clipPath id="plot-area"><rect x="{}" y="{}" width="{}" height="{}"/></clipPath>"#,
            plot.x0 - 6.0,
            plot.y0 - 6.0,
            plot.w + 12.0,
            plot.h + 12.0
        ));
        svg.raw(r#"<g clip-path="url(#plot-area)">"#);
        for (i, s) in self.series.iter().enumerate() {
            self.draw_series(&mut svg, &plot, &lx, &ly, i, s);
        }
        svg.raw("</g>");
        self.legend(&mut svg, plot.x0 + plot.w + 16.0, plot.y0);
        svg.finish()
    }

    fn axes(&self, svg: &mut Svg, p: &Frame, lx: &Layout, ly: &Layout) {
        let grid = r##"stroke="#e3e3e3" stroke-width="1""##;
        let label = r##"fill="#333" font-size="12""##;
        for (v, s) in &ly.ticks {
            let y = p.y(ly.frac(*v));
            svg.line(p.x0, y, p.x0 + p.w, y, grid);
            svg.text(p.x0 - 8.0, y + 4.0, Anchor::End, label, s);
        }
        for (v, s) in &lx.ticks {
            let x = p.x(lx.frac(*v));
            svg.line(x, p.y0, x, p.y0 + p.h, grid);
            svg.text(x, p.y0 + p.h + 18.0, Anchor::Middle, label, s);
        }
        svg.rect(p.x0, p.y0, p.w, p.h, r##"fill="none" stroke="#888""##);
        let title = r##"fill="#111" font-size="14""##;
        svg.text(
            p.x0 + p.w / 2.0,
            p.y0 + p.h + 44.0,
            Anchor::Middle,
            title,
            &self.x.title(),
        );
        svg.vtext(20.0, p.y0 + p.h / 2.0, title, &self.y.title());
    }

    fn draw_series(
        &self,
        svg: &mut Svg,
        p: &Frame,
        lx: &Layout,
        ly: &Layout,
        i: usize,
        s: &Series,
    ) {
        let ci = s.color.unwrap_or(i);
        let color = PALETTE[ci % PALETTE.len()];
        let mut pts: Vec<(f64, f64, usize)> = s
            .points
            .iter()
            .enumerate()
            .filter(|(_, (x, y))| self.x.accepts(*x) && self.y.accepts(*y))
            .map(|(k, &(x, y))| (p.x(lx.frac(x)), p.y(ly.frac(y)), k))
            .collect();
        if s.style != Style::Markers {
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let xy: Vec<(f64, f64)> = pts.iter().map(|&(x, y, _)| (x, y)).collect();
        match s.style {
            Style::LineMarkers => {
                svg.polyline(&xy, &format!(r#"stroke="{color}" stroke-width="1.6""#))
            }
            Style::Line => svg.polyline(&xy, &format!(r#"stroke="{color}" stroke-width="2""#)),
            Style::Fitted => svg.polyline(
                &xy,
                &format!(r#"stroke="{color}" stroke-width="2" stroke-dasharray="7 4""#),
            ),
            Style::Markers => {}
        }
        if let Some(errs) = &s.errors {
            for &(x, _, k) in &pts {
                let Some(&(lo, hi)) = errs.get(k) else {
                    continue;
                };
                if !(self.y.accepts(lo) && self.y.accepts(hi)) {
                    continue;
                }
                let (y1, y2) = (p.y(ly.frac(lo)), p.y(ly.frac(hi)));
                let st = format!(r#"stroke="{color}" stroke-width="1.2""#);
                svg.line(x, y1, x, y2, &st);
                svg.line(x - 4.0, y1, x + 4.0, y1, &st);
                svg.line(x - 4.0, y2, x + 4.0, y2, &st);
            }
        }
        if matches!(s.style, Style::LineMarkers | Style::Markers) {
            for &(x, y) in &xy {
                svg.marker(ci, x, y, 4.5, color);
            }
        }
    }

    fn legend(&self, svg: &mut Svg, x: f64, y: f64) {
        if self.series.is_empty() {
            return;
        }
        let row = 22.0;
        let h = row * self.series.len() as f64 + 12.0;
        svg.rect(
            x,
            y,
            self.legend_width() - 4.0,
            h,
            r##"fill="white" stroke="#ccc" rx="4""##,
        );
        for (i, s) in self.series.iter().enumerate() {
            let ci = s.color.unwrap_or(i);
            let color = PALETTE[ci % PALETTE.len()];
            let cy = y + 17.0 + row * i as f64;
            let dash = if s.style == Style::Fitted {
                r#" stroke-dasharray="7 4""#
            } else {
                ""
            };
            if s.style != Style::Markers {
                svg.line(
                    x + 8.0,
                    cy,
                    x + 32.0,
                    cy,
                    &format!(r#"stroke="{color}" stroke-width="2"{dash}"#),
                );
            }
            if matches!(s.style, Style::LineMarkers | Style::Markers) {
                svg.marker(ci, x + 20.0, cy, 4.5, color);
            }
            svg.text(
                x + 40.0,
                cy + 4.0,
                Anchor::Start,
                r##"fill="#222""##,
                &s.name,
            );
        }
    }
}

/// The plotting rectangle; y grows downwards in SVG, so `y(0)` is the bottom.
pub(super) struct Frame {
    pub x0: f64,
    pub y0: f64,
    pub w: f64,
    pub h: f64,
}

impl Frame {
    pub fn x(&self, f: f64) -> f64 {
        self.x0 + f * self.w
    }
    pub fn y(&self, f: f64) -> f64 {
        self.y0 + (1.0 - f) * self.h
    }
}

pub(super) fn header(svg: &mut Svg, title: &str, subtitle: &str) {
    svg.text(
        LEFT,
        26.0,
        Anchor::Start,
        r##"font-size="18" font-weight="bold" fill="#111""##,
        title,
    );
    if !subtitle.is_empty() {
        svg.text(
            LEFT,
            46.0,
            Anchor::Start,
            r##"font-size="12" fill="#555""##,
            subtitle,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart() -> LineChart {
        let mut c = LineChart::new(
            "IOPS vs block size",
            Axis::bytes("block size"),
            Axis::log("IOPS", "ops/s"),
        )
        .subtitle("vda, direct, QD1");
        c.add(Series::measured(
            "randread",
            vec![(512.0, 9000.0), (4096.0, 8000.0), (65536.0, 3000.0)],
        ))
        .add(Series::fitted("model", vec![(512.0, 9100.0), (65536.0, 2900.0)]).color(0));
        c
    }

    #[test]
    fn svg_has_title_legend_axes_and_points() {
        let svg = chart().to_svg();
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        for needle in [
            "IOPS vs block size",
            "randread",
            "model",
            "4 KiB",
            "IOPS (ops/s)",
            "stroke-dasharray",
        ] {
            assert!(svg.contains(needle), "missing {needle}");
        }
        // Three measured markers (circles) plus one in the legend.
        assert_eq!(svg.matches("<circle").count(), 4);
    }

    #[test]
    fn points_land_where_the_axes_say() {
        // x = 4 KiB is 3 of 7 powers of two from 512 B to 64 KiB: 3/7 of the width.
        let c = chart();
        let lx = c.x.layout([512.0, 65536.0]);
        assert!((lx.frac(4096.0) - 3.0 / 7.0).abs() < 1e-12);
    }

    #[test]
    fn hostile_names_are_escaped_and_bad_points_dropped() {
        let mut c = LineChart::new("<t>", Axis::linear("x", ""), Axis::log("y", ""));
        c.add(Series::markers(
            "a&b",
            vec![(1.0, 0.0), (2.0, -3.0), (3.0, f64::NAN), (4.0, 5.0)],
        ));
        let svg = c.to_svg();
        assert!(svg.contains("&lt;t&gt;") && svg.contains("a&amp;b"));
        // Only (4, 5) is drawable on a log y axis, plus the legend marker.
        assert_eq!(svg.matches("<circle").count(), 2);
    }
}
