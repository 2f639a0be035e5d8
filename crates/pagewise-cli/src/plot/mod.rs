//! Hand-written SVG charts for every subcommand (no plotting crates).
//!
//! Two chart kinds cover the project's figures:
//! - [`LineChart`]: several [`Series`] against an x and a y [`Axis`]. Measured
//!   series are drawn as markers (joined by a thin line), fitted or model curves as
//!   dashed lines ([`Series::fitted`]); error bars are optional.
//! - [`HeatMap`]: a grid of values with a viridis colour scale and its legend,
//!   e.g. IOPS by block size x alignment.
//!
//! Axes are linear (from zero by default), log10 with 1-2-5 ticks, or log2 byte
//! sizes labelled 512 B, 4 KiB, 1 MiB ([`Axis::bytes`]).
//!
//! ```ignore
//! use crate::plot::{Axis, LineChart, Series};
//! let mut chart = LineChart::new("Random read", Axis::bytes("block size"), Axis::log("IOPS", "ops/s"))
//!     .subtitle("vda, O_DIRECT, QD1");
//! chart.add(Series::measured("measured", pts).color(0));
//! chart.add(Series::fitted("T = S + B/W", fit).color(0));
//! plot::save(&dir.join("iops.svg"), &chart.to_svg())?;
//! ```

mod axis;
mod bars;
mod heatmap;
mod line;
mod svg;

pub use axis::{format_bytes, Axis};
pub use bars::BarChart;
pub use heatmap::HeatMap;
pub use line::{LineChart, Series};

use std::path::Path;

/// Writes an SVG document, creating the parent directory if needed.
pub fn save(path: &Path, svg: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, svg)
}

/// Renders an SVG to PNG next to it with headless Chromium if one is installed.
/// Returns the PNG path, or `None` when no browser is available (PNG is optional).
pub fn try_png(svg_path: &Path, width: u32, height: u32) -> Option<std::path::PathBuf> {
    let png = svg_path.with_extension("png");
    let svg_abs = std::fs::canonicalize(svg_path).ok()?;
    for browser in ["chromium", "chromium-browser", "google-chrome"] {
        let status = std::process::Command::new(browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
            ])
            .arg(format!("--screenshot={}", png.display()))
            .arg(format!("--window-size={width},{height}"))
            .arg(format!("file://{}", svg_abs.display()))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        if matches!(status, Ok(s) if s.success()) && png.exists() {
            return Some(png);
        }
    }
    None
}

#[cfg(test)]
mod samples {
    use super::*;

    /// Renders a line chart and a heat map of every feature they offer
    /// (log and byte axes, measured and fitted series, a colour scale) and
    /// checks each is one SVG document carrying its title.
    #[test]
    fn renders_samples() {
        let bs: Vec<f64> = (9..=20).map(|k| 2f64.powi(k)).collect();
        let model = |s_us: f64, w_mbs: f64| -> Vec<(f64, f64)> {
            bs.iter().map(|&b| (b, 1e6 / (s_us + b / w_mbs))).collect()
        };
        let noisy = |pts: Vec<(f64, f64)>, k: f64| -> Vec<(f64, f64)> {
            pts.into_iter()
                .enumerate()
                .map(|(i, (x, y))| (x, y * (1.0 + k * ((i * 7 % 5) as f64 - 2.0) / 100.0)))
                .collect()
        };
        let mut chart = LineChart::new(
            "Random I/O: IOPS vs block size",
            Axis::bytes("block size"),
            Axis::log("IOPS", "ops/s"),
        )
        .subtitle("vda (virtio, ext4), O_DIRECT, io_uring, 1 thread");
        chart
            .add(Series::measured("randread QD1", noisy(model(90.0, 900.0), 2.0)).color(0))
            .add(Series::fitted("fit T = 90 µs + B / 900 MB/s", model(90.0, 900.0)).color(0))
            .add(Series::measured("randread QD32", noisy(model(12.0, 1500.0), 3.0)).color(1))
            .add(Series::measured("randwrite QD1", noisy(model(150.0, 600.0), 4.0)).color(2));
        assert_svg(&chart.to_svg(), "Random I/O: IOPS vs block size");
        let aligns: Vec<u64> = (1..=8).map(|k| k * 512).collect();
        let sizes: Vec<u64> = (1..=8).map(|k| k * 512).collect();
        let values = sizes
            .iter()
            .map(|&b| {
                aligns
                    .iter()
                    .map(|&a| {
                        Some(10000.0 - b as f64 * 0.8 + if a % 4096 == 0 { 1500.0 } else { 0.0 })
                    })
                    .collect()
            })
            .collect();
        let heat = HeatMap::new(
            "Random read IOPS by block size and alignment",
            "offset alignment",
            "block size",
            "IOPS (ops/s)",
        )
        .subtitle("vda, O_DIRECT, QD1")
        .grid(
            aligns.iter().map(|&a| format_bytes(a as f64)).collect(),
            sizes.iter().map(|&b| format_bytes(b as f64)).collect(),
            values,
        );
        assert_svg(
            &heat.to_svg(),
            "Random read IOPS by block size and alignment",
        );
    }

    fn assert_svg(svg: &str, title: &str) {
        assert!(svg.trim_start().starts_with("<svg"), "{svg:.80}");
        assert!(svg.trim_end().ends_with("</svg>"), "unterminated SVG");
        assert_eq!(svg.matches("<svg").count(), 1, "one document");
        assert!(svg.contains(title), "title {title:?} missing");
        assert!(!svg.contains("NaN"), "a coordinate is NaN");
    }
}
