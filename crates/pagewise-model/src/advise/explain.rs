//! Why the advisor picked a size: the sentence under the table, and whether
//! the runner-up is too close to call.

use super::{Dataset, Mix, Row};
use crate::fit::Source;
use crate::units::{fmt_bytes, fmt_count};

pub fn explain(best: &Row, rows: &[Row], d: &Dataset, mix: Mix) -> String {
    let mut s = format!(
        "{} pages: fanout {}, height {}, {:.2} levels cached in {} of cache, so a point query costs {:.2} I/Os at {} IOPS ({}) = {} point queries/s",
        fmt_bytes(best.page_size as f64),
        best.fanout,
        best.height,
        best.cached_levels,
        fmt_bytes(d.cache_bytes as f64),
        best.uncached_hops,
        fmt_count(best.read_iops),
        match best.read_source {
            Source::Measured => "measured",
            Source::Model => "model",
        },
        fmt_count(best.point_qps)
    );
    if mix.point < 1.0 {
        s.push_str(&format!(
            "; for the mix ({}) {} ops/s",
            mix.describe(),
            fmt_count(best.mix_ops)
        ));
    }
    let smaller = rows.iter().rev().find(|r| r.page_size < best.page_size);
    let larger = rows.iter().find(|r| r.page_size > best.page_size);
    let cmp: Vec<String> = [smaller, larger]
        .into_iter()
        .flatten()
        .map(|r| compare(best, r, mix))
        .collect();
    if !cmp.is_empty() {
        s.push_str(". ");
        s.push_str(&cmp.join("; "));
    }
    s
}

/// Why neighbour `r` loses to `best`: its throughput and the terms that differ.
fn compare(best: &Row, r: &Row, mix: Mix) -> String {
    let mut why = Vec::new();
    let hop_diff = r.uncached_hops - best.uncached_hops;
    if hop_diff.abs() >= 0.005 {
        why.push(format!("{hop_diff:+.2} I/Os per point query"));
    }
    let iops_diff = r.read_iops / best.read_iops - 1.0;
    if iops_diff.abs() >= 0.005 {
        why.push(format!(
            "I/Os {:.0}% {}",
            iops_diff.abs() * 100.0,
            if iops_diff > 0.0 { "faster" } else { "slower" }
        ));
    }
    if mix.range > 0.0 && (r.range_ms / best.range_ms - 1.0).abs() >= 0.005 {
        why.push(format!(
            "range queries {:.3} ms instead of {:.3} ms",
            r.range_ms, best.range_ms
        ));
    }
    if mix.insert > 0.0 && (r.insert_ops / best.insert_ops - 1.0).abs() >= 0.005 {
        why.push(format!(
            "{} inserts/s instead of {}",
            fmt_count(r.insert_ops),
            fmt_count(best.insert_ops)
        ));
    }
    format!(
        "{} pages give {:.1}% fewer operations/s ({})",
        fmt_bytes(r.page_size as f64),
        (1.0 - r.mix_ops / best.mix_ops) * 100.0,
        if why.is_empty() {
            "about the same on every term".to_string()
        } else {
            why.join(", ")
        }
    )
}

/// Below this gap the runner-up is called a tie even without a reported CI.
const MIN_DECISIVE_GAP: f64 = 0.03;

/// A sentence when the runner-up's mix throughput is within the measurement
/// uncertainty of the best's: the larger of the two read-IOPS 95% CIs (the
/// probe's repetitions), or 3% when none was reported.
pub fn close_call(best: &Row, rows: &[Row]) -> Option<String> {
    let second = rows
        .iter()
        .filter(|r| r.page_size != best.page_size)
        .max_by(|a, b| a.mix_ops.total_cmp(&b.mix_ops))?;
    let gap = 1.0 - second.mix_ops / best.mix_ops;
    let ci = best
        .read_ci95_rel
        .into_iter()
        .chain(second.read_ci95_rel)
        .fold(None, |m: Option<f64>, c| Some(m.map_or(c, |m| m.max(c))));
    let margin = ci.unwrap_or(0.0).max(MIN_DECISIVE_GAP);
    (gap < margin).then(|| {
        let why = match ci {
            Some(c) => format!("IOPS known to ±{:.0}%, 95% CI", c * 100.0),
            None => format!("gaps under {:.0}% are run-to-run noise", MIN_DECISIVE_GAP * 100.0),
        };
        format!(
            "Close call: {} pages are {:.1}% behind, within the measurement uncertainty ({why}): treat the two as a tie on this data, and probe longer or on an idle machine to separate them",
            fmt_bytes(second.page_size as f64),
            gap * 100.0
        )
    })
}
