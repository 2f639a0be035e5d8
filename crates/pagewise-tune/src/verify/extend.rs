//! Range extension at an edge: when the measured best page (or node) size
//! is the smallest or largest one verified and the engine allows another
//! step that way, the next size (half or double) is built and measured
//! beside the edge size in an extra interleaved pass, so the two are
//! compared like for like. A winner extends again, at most [`MAX_STEPS`]
//! times per tree kind. The extended size's mix rates are put on the main
//! pass's scale through the edge, measured in both passes: its per-round
//! rates times (the edge's main-pass median / its extra-pass median), its
//! mix's times per operation divided by that factor.

use super::bepsilon::{self, MAX_NODE_BYTES, MIN_NODE_BYTES};
use super::pass::{self, Built, What};
use super::{build, Budget, Ctx, Step};
use pagewise_model::advise::choice::Spread;
use pagewise_model::units::fmt_bytes;
use serde::Serialize;
use std::time::Instant;

/// Most extra sizes per tree kind.
pub const MAX_STEPS: usize = 2;
/// An extra pass measures each phase for this fraction of the main pass's
/// time (two Dbs only, the edge already warm).
const PHASE_FRACTION: f64 = 0.5;
/// The engine's page sizes.
const MIN_PAGE_BYTES: u64 = 512;
const MAX_PAGE_BYTES: u64 = 65536;

/// Which sizes an extension is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    Pages,
    Nodes,
}

impl Unit {
    pub fn name(self) -> &'static str {
        match self {
            Unit::Pages => "pages",
            Unit::Nodes => "nodes",
        }
    }

    /// The smallest and largest size the engine takes (and tune builds).
    pub fn limits(self) -> (u64, u64) {
        match self {
            Unit::Pages => (MIN_PAGE_BYTES, MAX_PAGE_BYTES),
            Unit::Nodes => (MIN_NODE_BYTES, MAX_NODE_BYTES),
        }
    }
}

/// One extra step past an edge, and what its pass measured.
#[derive(Debug, Clone, Serialize)]
pub struct Extension {
    pub unit: Unit,
    /// The measured best, at the edge, and the size built next to it.
    pub edge: u64,
    pub next: u64,
    /// Why it extended, in one sentence.
    pub reason: String,
    /// Both sizes' mix rates in the extra pass (its own scale).
    pub edge_mix: Spread,
    pub next_mix: Spread,
    /// The factor that put `next`'s rates on the main pass's scale.
    pub scale: f64,
    /// `next` measured a higher median than the edge in the extra pass.
    pub next_won: bool,
}

/// The size to build past the edge, and why: half the smallest of `sizes`
/// when `best` is the smallest and above `lo`, double the largest when it
/// is the largest and below `hi`; `None` when `best` is inside the range or
/// at the limit. Requires: `sizes` ascending, powers of two, holding `best`.
pub fn next_size(sizes: &[u64], best: u64, lo: u64, hi: u64) -> Option<(u64, String)> {
    assert!(sizes.windows(2).all(|w| w[0] < w[1]) && sizes.contains(&best));
    assert!(lo <= hi);
    let (first, last) = (sizes[0], sizes[sizes.len() - 1]);
    let b = |x: u64| fmt_bytes(x as f64);
    if best == first && best > lo {
        let why = format!(
            "the measured best, {}, was the smallest size measured and the engine takes sizes down to {}",
            b(best),
            b(lo)
        );
        return Some(((best / 2).max(lo), why));
    }
    if best == last && best < hi {
        let why = format!(
            "the measured best, {}, was the largest size measured and the engine takes sizes up to {}",
            b(best),
            b(hi)
        );
        return Some(((best.saturating_mul(2)).min(hi), why));
    }
    None
}

/// Extends the page sizes, then the node sizes, while the edge wins and
/// steps remain; an extension starts only before `budget.extend_until_secs`
/// of the verification (`start`). New Dbs are appended to `dbs`.
pub(super) fn run(
    dbs: &mut Vec<Built>,
    ctx: &Ctx,
    budget: &Budget,
    start: Instant,
    step: Step,
    notes: &mut Vec<String>,
) -> anyhow::Result<Vec<Extension>> {
    let mut out = Vec::new();
    for unit in [Unit::Pages, Unit::Nodes] {
        for _ in 0..MAX_STEPS {
            let Some((edge, next, reason)) = plan(dbs, unit) else {
                break;
            };
            if start.elapsed().as_secs_f64() > budget.extend_until_secs {
                notes.push(format!(
                    "{reason}, but the verification's time budget ({:.0} s) was spent: {} {} not measured",
                    budget.extend_until_secs,
                    fmt_bytes(next as f64),
                    unit.name()
                ));
                break;
            }
            let e = extend_once(dbs, edge, next, reason, unit, ctx, budget, step, notes)?;
            let won = e.next_won;
            out.push(e);
            if !won {
                break;
            }
        }
    }
    Ok(out)
}

/// The candidates of `unit` among `dbs` (verified page sizes, or node
/// sizes): the edge's index, the next size and why, when extending applies.
fn plan(dbs: &[Built], unit: Unit) -> Option<(usize, u64, String)> {
    let of_unit = |b: &Built| match (&b.what, unit) {
        (What::Page { tag, .. }, Unit::Pages) => *tag == "verify",
        (What::Node(_), Unit::Nodes) => true,
        _ => false,
    };
    let cands: Vec<usize> = (0..dbs.len()).filter(|&i| of_unit(&dbs[i])).collect();
    let best = *cands
        .iter()
        .max_by(|&&a, &&b| dbs[a].mix_ops().total_cmp(&dbs[b].mix_ops()))?;
    let mut sizes: Vec<u64> = cands.iter().map(|&i| dbs[i].size()).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let (lo, mut hi) = unit.limits();
    if unit == Unit::Nodes {
        // Within every node Db's dirty budget (its cache follows its rows).
        for &i in &cands {
            if let What::Node(l) = &dbs[i].what {
                hi = hi.min(bepsilon::largest_node_for(l.cache_bytes));
            }
        }
    }
    let (next, why) = next_size(&sizes, dbs[best].size(), lo, hi.max(lo))?;
    Some((best, next, why))
}

/// Builds `next`, measures it beside the edge `dbs[edge]` in an extra pass
/// and appends it to `dbs` with its rates on the main pass's scale.
#[allow(clippy::too_many_arguments)]
fn extend_once(
    dbs: &mut Vec<Built>,
    edge: usize,
    next: u64,
    reason: String,
    unit: Unit,
    ctx: &Ctx,
    budget: &Budget,
    step: Step,
    notes: &mut Vec<String>,
) -> anyhow::Result<Extension> {
    let new = match &dbs[edge].what {
        What::Page { .. } => build(next, "verify", ctx, budget, &mut *step, notes)?,
        What::Node(l) => {
            let b = (ctx.advice.bepsilon.as_ref()).expect("node sizes come from B-epsilon advice");
            let shape = bepsilon::shape(b, next);
            step(format!(
                "B-epsilon extension: {} nodes, {} random inserts...",
                fmt_bytes(next as f64),
                l.planned_rows
            ))?;
            let (rows, cache) = (l.planned_rows, l.cache_bytes);
            let (load, session) = bepsilon::build(budget, ctx, shape, rows, cache)?;
            Built::new(What::Node(load), *budget, session)
        }
    };
    dbs.push(new);
    let n = dbs.len() - 1;
    let (head, tail) = dbs.split_at_mut(n);
    let (e, x) = (&mut head[edge], &mut tail[0]);
    let ms = pass::measure(&mut [&mut *e, &mut *x], PHASE_FRACTION, step)?;
    let [m_edge, m_next]: [_; 2] = ms.try_into().expect("two measured");
    let scale = e.mix_ops() / m_edge.mix_ops;
    let out = Extension {
        unit,
        edge: e.size(),
        next,
        reason,
        edge_mix: m_edge.mix_spread,
        next_mix: m_next.mix_spread,
        scale,
        next_won: m_next.mix_ops > m_edge.mix_ops,
    };
    x.measured = Some(m_next.rescaled(scale));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extends_only_past_an_edge_inside_the_limits() {
        let k = 1024;
        let sizes = [4 * k, 8 * k, 16 * k];
        // The smallest is best: half of it.
        assert_eq!(next_size(&sizes, 4 * k, 512, 64 * k).unwrap().0, 2 * k);
        // The largest is best: double it.
        assert_eq!(next_size(&sizes, 16 * k, 512, 64 * k).unwrap().0, 32 * k);
        // Inside the range: no extension.
        assert!(next_size(&sizes, 8 * k, 512, 64 * k).is_none());
        // At the limits: none either way.
        assert!(next_size(&[32 * k, 64 * k], 64 * k, 512, 64 * k).is_none());
        assert!(next_size(&[512, 1024], 512, 512, 64 * k).is_none());
        // The limit's other side still extends: 512 B best of 512..1 KiB is
        // at the limit, but 1 KiB best goes up.
        assert_eq!(next_size(&[512, 1024], 1024, 512, 64 * k).unwrap().0, 2048);
        // Node sizes: 16 KiB is MIN_NODE_BYTES, 16 MiB MAX_NODE_BYTES.
        let (lo, hi) = Unit::Nodes.limits();
        assert!(next_size(&[16 * k, 32 * k], 16 * k, lo, hi).is_none());
        assert_eq!(
            next_size(&[32 * k, 64 * k], 32 * k, lo, hi).unwrap().0,
            16 * k
        );
        let big = [8 << 20, 16 << 20];
        assert!(next_size(&big, 16 << 20, lo, hi).is_none());
        assert_eq!(next_size(&big, 8 << 20, lo, hi).unwrap().0, 4 << 20);
        // The reason names the side and the limit.
        let (_, why) = next_size(&sizes, 16 * k, 512, 64 * k).unwrap();
        assert!(why.contains("largest") && why.contains("64 KiB"), "{why}");
    }
}
