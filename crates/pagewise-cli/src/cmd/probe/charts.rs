//! `--plot DIR`: IOPS, throughput and latency against block size, and the
//! block size x alignment heat map of the alignment post.

use crate::plot::{self, format_bytes, Axis, HeatMap, LineChart, Series};
use pagewise_probe::{PointResult, ProbeResults};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The axes other than block size and alignment that tell series apart.
fn group_key(p: &PointResult) -> Key {
    let q = &p.params;
    (
        q.mode.to_string(),
        q.dist.to_string(),
        q.threads,
        p.effective_qd,
    )
}

/// Names series by the axes that vary, e.g. "randread qd32".
fn namer(points: &[PointResult]) -> impl Fn(&Key) -> String {
    let varies = |f: &dyn Fn(&PointResult) -> String| {
        let first = points.first().map(f);
        points.iter().any(|p| Some(f(p)) != first)
    };
    let (m, d, t, q) = (
        varies(&|p| p.params.mode.to_string()),
        varies(&|p| p.params.dist.to_string()),
        varies(&|p| p.params.threads.to_string()),
        varies(&|p| p.effective_qd.to_string()),
    );
    move |k: &Key| {
        let mut parts = Vec::new();
        if m || !(d || t || q) {
            parts.push(k.0.clone());
        }
        if d {
            parts.push(k.1.clone());
        }
        if t {
            parts.push(format!("{} threads", k.2));
        }
        if q {
            parts.push(format!("QD{}", k.3));
        }
        parts.join(" ")
    }
}

/// Series identity: mode, distribution, threads, effective queue depth.
type Key = (String, String, usize, usize);

type Group<'a> = BTreeMap<u64, &'a PointResult>;

/// Per series, one point per block size: the default alignment (= bs) when
/// measured, else the best alignment for that block size.
fn by_block_size(r: &ProbeResults) -> BTreeMap<Key, Group<'_>> {
    let mut out: BTreeMap<_, Group> = BTreeMap::new();
    for p in &r.points {
        let g = out.entry(group_key(p)).or_default();
        let bs = p.params.bs;
        let better = match g.get(&bs) {
            None => true,
            Some(old) if old.params.align == bs => false,
            Some(old) => p.params.align == bs || p.iops > old.iops,
        };
        if better {
            g.insert(bs, p);
        }
    }
    out
}

fn subtitle(r: &ProbeResults) -> String {
    let t = &r.topology;
    format!(
        "{}{}, {}, {}, host {}, {}",
        t.device.as_deref().unwrap_or("unknown device"),
        t.model
            .as_deref()
            .map(|m| format!(" ({m})"))
            .unwrap_or_default(),
        r.target.engine,
        if r.target.direct {
            "O_DIRECT"
        } else {
            "buffered"
        },
        r.host.hostname,
        r.timestamp
    )
}

/// Writes every chart; returns the files written.
pub fn write_all(r: &ProbeResults, dir: &Path, png: bool) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let groups = by_block_size(r);
    let name = namer(&r.points);
    let sub = subtitle(r);
    let mut charts: Vec<(String, String, f64, f64)> = Vec::new();

    let mut iops = LineChart::new(
        "IOPS vs block size",
        Axis::bytes("block size"),
        Axis::log("IOPS", "I/Os per second"),
    )
    .subtitle(&sub);
    let mut mbs = LineChart::new(
        "Throughput vs block size",
        Axis::bytes("block size"),
        Axis::log("throughput", "MB/s"),
    )
    .subtitle(&sub);
    let mut lat = LineChart::new(
        "Latency vs block size (p50 markers, p99 lines)",
        Axis::bytes("block size"),
        Axis::log("latency", "µs"),
    )
    .subtitle(&sub);
    for (i, (key, g)) in groups.iter().enumerate() {
        let n = name(key);
        let pts = |f: &dyn Fn(&PointResult) -> f64| {
            g.iter()
                .map(|(&bs, p)| (bs as f64, f(p)))
                .collect::<Vec<_>>()
        };
        // Bars span the slowest to the fastest repetition: the spread a reader can
        // trust at a glance (a 95% CI from 2-3 repetitions is mostly its t factor).
        let errs = g
            .values()
            .map(|p| (p.repetitions.min, p.repetitions.max))
            .collect();
        iops.add(
            Series::measured(&n, pts(&|p| p.iops))
                .color(i)
                .with_errors(errs),
        );
        mbs.add(Series::measured(&n, pts(&|p| p.mb_per_s)).color(i));
        lat.add(Series::measured(&format!("{n} p50"), pts(&|p| p.latency_us.p50)).color(i));
        lat.add(Series::line(&format!("{n} p99"), pts(&|p| p.latency_us.p99)).color(i));
    }
    charts.push(("iops.svg".into(), iops.to_svg(), iops.width, iops.height));
    charts.push(("throughput.svg".into(), mbs.to_svg(), mbs.width, mbs.height));
    charts.push(("latency.svg".into(), lat.to_svg(), lat.width, lat.height));

    for (i, (key, heat)) in heat_maps(r, &name, &sub).into_iter().enumerate() {
        let file = format!(
            "heatmap-{}-{}.svg",
            i + 1,
            key.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
        );
        charts.push((file, heat.to_svg(), heat.width, heat.height));
    }

    let mut written = Vec::new();
    for (file, svg, w, h) in charts {
        let path = dir.join(file);
        plot::save(&path, &svg)?;
        if png {
            if let Some(p) = plot::try_png(&path, w as u32, h as u32) {
                written.push(p);
            }
        }
        written.push(path);
    }
    Ok(written)
}

/// One heat map (rows: block size, columns: alignment, cells: IOPS) per series
/// that was measured at more than one alignment.
fn heat_maps(r: &ProbeResults, name: &dyn Fn(&Key) -> String, sub: &str) -> Vec<(String, HeatMap)> {
    let mut grids: BTreeMap<_, BTreeMap<(u64, u64), f64>> = BTreeMap::new();
    for p in &r.points {
        grids
            .entry(group_key(p))
            .or_default()
            .insert((p.params.bs, p.params.align), p.iops);
    }
    let mut out = Vec::new();
    for (key, cells) in grids {
        let mut sizes: Vec<u64> = cells.keys().map(|k| k.0).collect();
        let mut aligns: Vec<u64> = cells.keys().map(|k| k.1).collect();
        sizes.sort_unstable();
        sizes.dedup();
        aligns.sort_unstable();
        aligns.dedup();
        // Only a real alignment sweep makes a grid; the default (align = bs) is a diagonal.
        if aligns.len() < 2 || r.spec.alignments.len() < 2 {
            continue;
        }
        let values = sizes
            .iter()
            .map(|&b| {
                aligns
                    .iter()
                    .map(|&a| cells.get(&(b, a)).copied())
                    .collect()
            })
            .collect();
        let n = name(&key);
        let heat = HeatMap::new(
            &format!("IOPS by block size and alignment: {n}"),
            "offset alignment (stride)",
            "block size",
            "IOPS (I/Os per second)",
        )
        .subtitle(sub)
        .grid(
            aligns.iter().map(|&a| format_bytes(a as f64)).collect(),
            sizes.iter().map(|&b| format_bytes(b as f64)).collect(),
            values,
        );
        out.push((n, heat));
    }
    out
}
