//! Loading measurement files: probe results JSON, fio JSON or CSV, detected
//! from the content. Probe JSON is read here (the model crate does no I/O and
//! does not know the probe's schema); the other formats are parsed by pagewise-model.

use anyhow::{bail, Context};
use pagewise_model::measurement::parse_workload;
use pagewise_model::{Measurement, Pattern};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Measurements from every file, and notes about points left out.
pub struct Loaded {
    pub measurements: Vec<Measurement>,
    pub notes: Vec<String>,
    /// The first probe results file's `topology` object, if any.
    pub topology: Option<Value>,
}

pub fn load(paths: &[PathBuf]) -> anyhow::Result<Loaded> {
    if paths.is_empty() {
        bail!("no input files: give a probe results JSON, a fio JSON output or a CSV with header block_size,iops");
    }
    let mut out = Loaded {
        measurements: Vec::new(),
        notes: Vec::new(),
        topology: None,
    };
    for p in paths {
        let text = std::fs::read_to_string(p)
            .with_context(|| format!("cannot read {}: check the path", p.display()))?;
        let ms = parse_text(&text, p, &mut out)?;
        out.measurements.extend(ms);
    }
    Ok(out)
}

fn parse_text(text: &str, p: &Path, out: &mut Loaded) -> anyhow::Result<Vec<Measurement>> {
    let name = p.display();
    if text.trim().is_empty() {
        bail!("{name} is empty: give a probe results JSON, a fio JSON output or a CSV with header block_size,iops");
    }
    let t = text.trim_start();
    if t.starts_with('{') && t.contains("\"schema\"") && t.contains("pagewise-probe/") {
        let v: Value = serde_json::from_str(t)
            .with_context(|| format!("{name}: invalid probe results JSON"))?;
        if out.topology.is_none() {
            out.topology = v.get("topology").cloned();
        }
        return from_probe(&v, &mut out.notes).with_context(|| format!("{name}"));
    }
    pagewise_model::parse::parse_any(text).with_context(|| format!("{name}"))
}

/// Converts the `points` of a probe results file (schema pagewise-probe/1).
/// Only uniform offsets aligned to the block size feed the model: skewed
/// distributions and odd alignments measure something else, and mixing them
/// into one curve would blur the fit.
pub fn from_probe(v: &Value, notes: &mut Vec<String>) -> anyhow::Result<Vec<Measurement>> {
    let points = v
        .get("points")
        .and_then(Value::as_array)
        .context("probe results have no \"points\" array")?;
    let mut out = Vec::new();
    let mut skipped = 0usize;
    for (i, pt) in points.iter().enumerate() {
        let params = pt
            .get("params")
            .context(format!("point {i} has no params"))?;
        let s = |k: &str| params.get(k).and_then(Value::as_str).unwrap_or("");
        let u = |v: Option<&Value>| v.and_then(Value::as_u64);
        let mode = s("mode");
        let (op, pattern) = parse_workload(mode).with_context(|| format!("point {i}"))?;
        let bs = u(params.get("bs")).context(format!("point {i} has no bs"))?;
        let align = u(params.get("align")).unwrap_or(bs);
        let dist = s("dist");
        if (dist != "uniform" && !dist.is_empty()) || (pattern == Pattern::Random && align != bs) {
            skipped += 1;
            continue;
        }
        let qd = u(pt.get("effective_qd"))
            .or(u(params.get("qd")))
            .unwrap_or(1);
        let threads = u(params.get("threads")).unwrap_or(1);
        let iops = pt.get("iops").and_then(Value::as_f64).unwrap_or(0.0);
        let latency_us = pt
            .get("latency_us")
            .and_then(|l| l.get("mean"))
            .and_then(Value::as_f64)
            .filter(|l| *l > 0.0);
        let ci95_rel = pt
            .get("repetitions")
            .and_then(|r| r.get("ci95_rel"))
            .and_then(Value::as_f64)
            .filter(|c| c.is_finite() && *c >= 0.0);
        let m = Measurement {
            op,
            pattern,
            block_size: bs,
            qd: qd as u32,
            threads: threads as u32,
            iops,
            latency_us,
            ci95_rel,
        };
        m.validate()
            .with_context(|| format!("point {i} ({mode} {bs} B)"))?;
        out.push(m);
    }
    if skipped > 0 {
        notes.push(format!(
            "{skipped} probe points with a non-uniform distribution or an alignment other than the block size were left out of the fit"
        ));
    }
    if out.is_empty() {
        bail!("no usable points (uniform distribution, alignment = block size)");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pagewise_model::OpKind;

    fn point(mode: &str, bs: u64, align: u64, dist: &str, qd: u64, eff: u64, iops: f64) -> Value {
        serde_json::json!({
            "params": {"mode": mode, "bs": bs, "align": align, "dist": dist, "threads": 1, "qd": qd},
            "effective_qd": eff,
            "iops": iops,
            "latency_us": {"mean": 80.0},
            "repetitions": {"ci95_rel": 0.04}
        })
    }

    #[test]
    fn probe_points_convert_and_filter() {
        let v = serde_json::json!({"schema": "pagewise-probe/1", "points": [
            point("randread", 4096, 4096, "uniform", 1, 1, 10000.0),
            point("randread", 4096, 512, "uniform", 1, 1, 9000.0),
            point("randread", 4096, 4096, "zipf:0.99", 1, 1, 12000.0),
            point("mixed:70", 16384, 16384, "uniform", 32, 1, 5000.0),
            point("seqwrite", 65536, 65536, "uniform", 1, 1, 3000.0),
        ]});
        let mut notes = Vec::new();
        let ms = from_probe(&v, &mut notes).unwrap();
        assert_eq!(ms.len(), 3, "misaligned and zipf points are left out");
        assert_eq!(notes.len(), 1);
        assert_eq!(
            (ms[0].op, ms[0].iops, ms[0].ci95_rel),
            (OpKind::Read, 10000.0, Some(0.04))
        );
        // The sync engine ran "qd 32" one I/O at a time: effective_qd wins.
        assert_eq!((ms[1].op, ms[1].qd), (OpKind::Mixed, 1));
        assert_eq!(
            (ms[2].op, ms[2].pattern),
            (OpKind::Write, Pattern::Sequential)
        );
    }

    #[test]
    fn probe_without_usable_points_is_an_error() {
        let v = serde_json::json!({"schema": "pagewise-probe/1", "points": [
            point("randread", 4096, 512, "uniform", 1, 1, 9000.0),
        ]});
        assert!(from_probe(&v, &mut Vec::new()).is_err());
        let bad = serde_json::json!({"schema": "pagewise-probe/1", "points": [
            point("randread", 4096, 4096, "uniform", 1, 1, 0.0),
        ]});
        assert!(from_probe(&bad, &mut Vec::new()).is_err());
    }
}
