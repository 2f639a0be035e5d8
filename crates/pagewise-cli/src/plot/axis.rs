//! Axes: how data values map to the unit interval, and where the ticks go.

/// How values are spaced along an axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Logarithmic; non-positive values are dropped from the chart.
    Log,
}

/// How tick positions are chosen and labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickStyle {
    /// 1, 2, 5 x 10^k, labelled 500, 2k, 1.5M.
    Decimal,
    /// Powers of two labelled 512 B, 4 KiB, 1 MiB (block sizes, alignments).
    Bytes,
}

/// One axis of a chart: a label with its unit, a scale and a tick style.
#[derive(Debug, Clone)]
pub struct Axis {
    pub label: String,
    /// Shown in parentheses after the label; empty for none.
    pub unit: String,
    pub scale: Scale,
    pub ticks: TickStyle,
    /// Forces the domain instead of fitting it to the data.
    pub range: Option<(f64, f64)>,
    /// Linear axes only: start at zero so bar heights are not exaggerated
    /// (the alignment post's non-zero origin confused its readers).
    pub from_zero: bool,
}

impl Axis {
    /// A linear axis starting at zero.
    pub fn linear(label: &str, unit: &str) -> Self {
        Self {
            label: label.into(),
            unit: unit.into(),
            scale: Scale::Linear,
            ticks: TickStyle::Decimal,
            range: None,
            from_zero: true,
        }
    }

    /// A log10 axis with 1-2-5 ticks.
    pub fn log(label: &str, unit: &str) -> Self {
        Self {
            scale: Scale::Log,
            from_zero: false,
            ..Self::linear(label, unit)
        }
    }

    /// A log2 axis of byte sizes with ticks at powers of two (512 B, 4 KiB, ...).
    pub fn bytes(label: &str) -> Self {
        Self {
            ticks: TickStyle::Bytes,
            ..Self::log(label, "")
        }
    }

    pub fn with_range(mut self, lo: f64, hi: f64) -> Self {
        self.range = Some((lo, hi));
        self
    }

    /// Lets a linear axis start at the data minimum instead of zero.
    pub fn not_from_zero(mut self) -> Self {
        self.from_zero = false;
        self
    }

    /// "label (unit)" or just "label".
    pub fn title(&self) -> String {
        if self.unit.is_empty() {
            self.label.clone()
        } else {
            format!("{} ({})", self.label, self.unit)
        }
    }

    /// True if `v` can be drawn on this axis.
    pub fn accepts(&self, v: f64) -> bool {
        v.is_finite() && (self.scale == Scale::Linear || v > 0.0)
    }

    /// Fits the axis to data values and places the ticks.
    pub fn layout(&self, values: impl IntoIterator<Item = f64>) -> Layout {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.into_iter().filter(|v| self.accepts(*v)) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if let Some((a, b)) = self.range {
            (lo, hi) = (a, b);
        }
        if !lo.is_finite() {
            (lo, hi) = if self.scale == Scale::Log {
                (1.0, 10.0)
            } else {
                (0.0, 1.0)
            };
        }
        if self.scale == Scale::Linear && self.from_zero && self.range.is_none() {
            lo = lo.min(0.0);
            hi = hi.max(0.0);
        }
        match (self.scale, self.ticks) {
            (Scale::Linear, TickStyle::Bytes) => linear_bytes(lo, hi),
            (Scale::Linear, TickStyle::Decimal) => linear_layout(lo, hi, self.range.is_some()),
            (Scale::Log, TickStyle::Decimal) => log10_layout(lo, hi),
            (Scale::Log, TickStyle::Bytes) => log2_layout(lo, hi),
        }
    }
}

/// A fitted axis: its domain, scale and labelled ticks.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    pub lo: f64,
    pub hi: f64,
    pub log: bool,
    pub ticks: Vec<(f64, String)>,
}

impl Layout {
    /// Position of `v` in [0, 1] along the axis (outside for out-of-range values).
    pub fn frac(&self, v: f64) -> f64 {
        let (a, b, x) = if self.log {
            (self.lo.ln(), self.hi.ln(), v.ln())
        } else {
            (self.lo, self.hi, v)
        };
        if b == a {
            0.5
        } else {
            (x - a) / (b - a)
        }
    }
}

/// The "nice" number (1, 2 or 5 x 10^k) closest above `raw`.
pub fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn linear_layout(lo: f64, hi: f64, exact: bool) -> Layout {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        (lo - pad, hi + pad)
    };
    let step = nice_step((hi - lo) / 5.0);
    let (a, b) = if exact {
        (lo, hi)
    } else {
        ((lo / step).floor() * step, (hi / step).ceil() * step)
    };
    let mut ticks = Vec::new();
    let mut t = (a / step).ceil() * step;
    while t <= b + step * 1e-9 {
        // Snap -0.0 and float noise so labels read "0", not "-0" or "0.30000004".
        let v = if t.abs() < step * 1e-9 { 0.0 } else { t };
        ticks.push((v, format_decimal(v, step)));
        t += step;
    }
    Layout {
        lo: a,
        hi: b,
        log: false,
        ticks,
    }
}

fn linear_bytes(lo: f64, hi: f64) -> Layout {
    let mut l = linear_layout(lo, hi, false);
    for (v, s) in &mut l.ticks {
        *s = format_bytes(*v);
    }
    l
}

fn log10_layout(lo: f64, hi: f64) -> Layout {
    let a = lo.log10().floor() as i32;
    let mut b = hi.log10().ceil() as i32;
    if b == a {
        b += 1;
    }
    let decades = b - a;
    // Few decades: label 1, 2, 5 in each; many: only the powers of ten.
    let mantissas: &[f64] = if decades <= 3 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let every = (decades as usize).div_ceil(8).max(1);
    let mut ticks = Vec::new();
    for k in a..=b {
        if !((k - a) as usize).is_multiple_of(every) {
            continue;
        }
        for &m in mantissas {
            let v = m * 10f64.powi(k);
            if v <= 10f64.powi(b) * 1.000001 {
                ticks.push((v, format_decimal(v, v)));
            }
        }
    }
    Layout {
        lo: 10f64.powi(a),
        hi: 10f64.powi(b),
        log: true,
        ticks,
    }
}

fn log2_layout(lo: f64, hi: f64) -> Layout {
    let a = lo.log2().floor() as i32;
    let mut b = hi.log2().ceil() as i32;
    if b == a {
        b += 1;
    }
    // At most ~12 labels: 512 B..1 MiB has 12 powers, so a default sweep shows all.
    let every = ((b - a + 1) as usize).div_ceil(12).max(1);
    let ticks = (a..=b)
        .filter(|k| ((k - a) as usize).is_multiple_of(every))
        .map(|k| {
            let v = 2f64.powi(k);
            (v, format_bytes(v))
        })
        .collect();
    Layout {
        lo: 2f64.powi(a),
        hi: 2f64.powi(b),
        log: true,
        ticks,
    }
}

/// A number labelled with precision enough for `step` and a k/M/G suffix when large.
pub fn format_decimal(v: f64, step: f64) -> String {
    let a = v.abs();
    let (div, suffix) = if a >= 1e9 {
        (1e9, "G")
    } else if a >= 1e6 {
        (1e6, "M")
    } else if a >= 1e4 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    let scaled_step = (step / div).abs();
    let decimals = if scaled_step >= 1.0 || scaled_step == 0.0 {
        0
    } else {
        (-scaled_step.log10().floor()) as usize
    };
    let s = format!("{:.*}", decimals.min(6), v / div);
    format!("{s}{suffix}")
}

/// A byte count as "512 B", "4 KiB", "1.5 MiB".
pub fn format_bytes(v: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = v;
    let mut i = 0;
    while x.abs() >= 1024.0 && i < UNITS.len() - 1 {
        x /= 1024.0;
        i += 1;
    }
    if (x - x.round()).abs() < 1e-9 {
        format!("{} {}", x.round(), UNITS[i])
    } else {
        format!("{x:.1} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(l: &Layout) -> Vec<&str> {
        l.ticks.iter().map(|(_, s)| s.as_str()).collect()
    }

    #[test]
    fn nice_steps_are_1_2_5() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(1.3), 2.0);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(7.0), 10.0);
        assert_eq!(nice_step(1800.0), 2000.0);
        assert!((nice_step(0.013) - 0.02).abs() < 1e-12);
    }

    #[test]
    fn linear_ticks_cover_data_from_zero() {
        let l = Axis::linear("IOPS", "ops/s").layout([1200.0, 9800.0]);
        assert_eq!(l.lo, 0.0);
        assert_eq!(l.hi, 10000.0);
        assert_eq!(labels(&l), ["0", "2000", "4000", "6000", "8000", "10k"]);
        assert_eq!(l.frac(5000.0), 0.5);
    }

    #[test]
    fn log10_ticks_1_2_5() {
        let l = Axis::log("latency", "µs").layout([30.0, 700.0]);
        assert_eq!((l.lo, l.hi), (10.0, 1000.0));
        assert_eq!(labels(&l), ["10", "20", "50", "100", "200", "500", "1000"]);
        assert!((l.frac(100.0) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn log10_many_decades_only_powers() {
        let l = Axis::log("x", "").layout([1.0, 1e6]);
        assert_eq!(labels(&l), ["1", "10", "100", "1000", "10k", "100k", "1M"]);
    }

    #[test]
    fn byte_axis_ticks_are_powers_of_two() {
        let l = Axis::bytes("block size").layout([512.0, 1048576.0]);
        assert_eq!(l.ticks.len(), 12);
        assert_eq!(l.ticks[0].1, "512 B");
        assert_eq!(l.ticks[3].1, "4 KiB");
        assert_eq!(l.ticks[11].1, "1 MiB");
        // Wide ranges thin out the labels instead of overlapping them.
        let wide = Axis::bytes("size").layout([1.0, 2f64.powi(40)]);
        assert!(wide.ticks.len() <= 12, "{:?}", labels(&wide));
    }

    #[test]
    fn degenerate_domains_do_not_divide_by_zero() {
        let l = Axis::linear("x", "").layout([5.0, 5.0]);
        assert!(l.hi > l.lo);
        let l = Axis::log("x", "").layout([100.0]);
        assert!(l.hi > l.lo);
        let l = Axis::log("x", "").layout([-1.0, f64::NAN]);
        assert_eq!((l.lo, l.hi), (1.0, 10.0));
    }

    #[test]
    fn formatting() {
        assert_eq!(format_bytes(4096.0), "4 KiB");
        assert_eq!(format_bytes(1536.0), "1.5 KiB");
        assert_eq!(format_decimal(0.25, 0.05), "0.25");
        assert_eq!(format_decimal(1_500_000.0, 500_000.0), "1.5M");
        assert_eq!(format_decimal(20_000.0, 5000.0), "20k");
    }
}
