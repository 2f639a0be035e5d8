//! tune's one answer: the configuration the verification measured best
//! ([`pick_headline`], ties to the model's preference), the tree kind
//! ([`choose_kind`]) and the sentences that explain both; then the tuned
//! file the engine reads (`DIR/tuned.json`, [`pagewise::Tuned`]).

use crate::verify::{self, bepsilon::NodeCheck, Measured, Verification};
use pagewise::{Tuned, TunedBEpsilon, TunedKind, TunedSource, TUNED_SCHEMA};
use pagewise_model::advise::choice::{
    choose_kind, model_kind, pick_headline, Candidate, Headline, Kind, KindChoice, KindMeasure,
    KindTimes, Spread,
};
use pagewise_model::advise::{Advice, BEpsilonShape};
use pagewise_model::units::{fmt_bytes, fmt_count};
use serde::Serialize;

/// Relative noise of one verification's mix rates: two sizes closer than
/// this are a tie ([`verify::CONFIRM_FRACTION`]).
pub const NOISE: f64 = 1.0 - verify::CONFIRM_FRACTION;

/// What tune answers.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    pub tree_kind: Kind,
    pub page_size: u64,
    /// The B-epsilon shape (the chosen kind's, or the best measured one).
    pub bepsilon: Option<BEpsilonShape>,
    /// Whether the answer was measured (false with `--verify off`).
    pub measured: bool,
    pub page_pick: Option<Headline<u64>>,
    pub node_pick: Option<Headline<u64>>,
    pub kind: Option<KindChoice>,
    /// The headline and its explanations, one sentence each.
    pub lines: Vec<String>,
}

/// The answer from the advice alone (`--verify off`): the model's sizes, a
/// B+tree (the tree kind needs both kinds measured).
pub fn unmeasured(advice: &Advice) -> Answer {
    let shape = advice.bepsilon.as_ref().map(|b| BEpsilonShape {
        node_bytes: b.node_size,
        basement_bytes: b.basement_size,
        fanout: b.fanout,
    });
    Answer {
        tree_kind: Kind::BTree,
        page_size: advice.best,
        bepsilon: shape,
        measured: false,
        page_pick: None,
        node_pick: None,
        kind: None,
        lines: vec![format!(
            "Recommended: a B+tree of {} pages (the model's answer, not verified: run with --verify quick to measure it and to choose between a B+tree and a B-epsilon tree)",
            fmt_bytes(advice.best as f64)
        )],
    }
}

/// The measured answer from verification `v` of `advice`.
pub fn measured(advice: &Advice, v: &Verification) -> Answer {
    let top = v
        .sizes
        .iter()
        .map(|c| c.calibrated.mix_ops)
        .fold(0.0, f64::max);
    let page_cands: Vec<Candidate<u64>> = (v.sizes.iter())
        .map(|c| Candidate {
            id: c.page_size,
            measured: c.measured.mix_ops,
            predicted: model_rank(c.page_size == v.recommended, c.calibrated.mix_ops, top),
        })
        .collect();
    let page = pick_headline(&page_cands, NOISE).expect("verification measured a size");
    let mut lines = Vec::new();
    let why =
        |h: &Headline<u64>| verify::miss_reason(h.model_first.id, h.best.id, &v.sizes, advice.mix);
    let kept = "the engine costs fitted here are kept in DIR/engine-costs.json and re-rank the next run on this drive before it verifies";
    explain_pick(&mut lines, "pages", &page, why(&page), kept);
    let checks = v.bepsilon.as_ref().map(|b| &b.sizes[..]).unwrap_or(&[]);
    let rec_node = v.bepsilon.as_ref().map_or(0, |b| {
        verify::bepsilon::clamp_node(b.recommended_node_bytes)
    });
    let top = checks
        .iter()
        .map(|c| c.corrected_mix_ops)
        .fold(0.0, f64::max);
    let node_cands: Vec<Candidate<u64>> = (checks.iter())
        .map(|c| Candidate {
            id: c.shape.node_bytes,
            measured: c.mix_ops,
            predicted: model_rank(c.shape.node_bytes == rec_node, c.corrected_mix_ops, top),
        })
        .collect();
    let node = pick_headline(&node_cands, NOISE);
    let node_check = node.and_then(|h| checks.iter().find(|c| c.shape.node_bytes == h.chosen.id));
    if let Some(h) = &node {
        let why = node_why(h, checks);
        explain_pick(
            &mut lines,
            "nodes",
            h,
            why,
            "the B-epsilon costs fitted here are kept in DIR/engine-costs.json and move the next run's node size on this drive before it verifies",
        );
    }
    let page_check = v
        .sizes
        .iter()
        .find(|c| c.page_size == page.chosen.id)
        .expect("chosen is measured");
    let prefers = predicted_kind(advice);
    let kind = node_check.and_then(|n| {
        choose_kind(
            advice.mix,
            &kind_measure(&page_check.measured),
            &kind_measure(&n.measured),
            NOISE,
            prefers,
        )
    });
    let tree_kind = kind.as_ref().map_or(Kind::BTree, |k| k.kind);
    let shape = node_check.map(|n| n.shape);
    lines.insert(
        0,
        headline_line(tree_kind, page.chosen.id, shape, kind.as_ref()),
    );
    if let Some(k) = &kind {
        lines.push(kind_line(k, advice));
    }
    Answer {
        tree_kind,
        page_size: page.chosen.id,
        bepsilon: shape,
        measured: true,
        page_pick: Some(page),
        node_pick: node,
        kind,
        lines,
    }
}

/// The model's preference as a number for [`pick_headline`]: the advisor's
/// recommendation first (twice the best calibrated prediction `top`), the
/// other sizes by their calibrated prediction `pred`.
fn model_rank(recommended: bool, pred: f64, top: f64) -> f64 {
    if recommended {
        2.0 * top.max(pred) + 1.0
    } else {
        pred.max(0.0)
    }
}

/// The kind the advisor's model prefers for the mix (its predicted point
/// and insert rates of both kinds; the B+tree without B-epsilon advice).
fn predicted_kind(advice: &Advice) -> Kind {
    let Some(b) = &advice.bepsilon else {
        return Kind::BTree;
    };
    let times = |point_qps: f64, inserts_per_s: f64| KindTimes {
        point_us: 1e6 / point_qps.max(1e-9),
        range_us: None,
        insert_us: Some(1e6 / inserts_per_s.max(1e-9)),
    };
    model_kind(
        advice.mix,
        &times(b.btree_point_qps, b.btree_inserts_per_s),
        &times(b.point_qps, b.inserts_per_s),
    )
}

/// One verified candidate of either kind as the kind choice sees it: its
/// µs per operation inside the mix and its per-round mix rates (both kinds
/// measured the same way, in the same rounds).
fn kind_measure(m: &Measured) -> KindMeasure {
    KindMeasure {
        times: KindTimes {
            point_us: m.mix_point_us.unwrap_or(1e6 / m.point_qps),
            range_us: m.mix_range_us,
            insert_us: m.mix_insert_us,
        },
        mix: m.mix_spread,
    }
}

/// "1,234 mix ops/s (rounds 1,100..1,300)".
fn spread_text(s: &Spread) -> String {
    format!(
        "{} mix ops/s (rounds {}..{})",
        fmt_count(s.median),
        fmt_count(s.min),
        fmt_count(s.max)
    )
}

fn shape_text(s: BEpsilonShape) -> String {
    format!(
        "{} nodes, {} basements, fanout {}",
        fmt_bytes(s.node_bytes as f64),
        fmt_bytes(s.basement_bytes as f64),
        s.fanout
    )
}

fn headline_line(
    kind: Kind,
    page: u64,
    shape: Option<BEpsilonShape>,
    k: Option<&KindChoice>,
) -> String {
    let ops = |x: f64| fmt_count(x);
    match (kind, shape, k) {
        (Kind::BEpsilon, Some(s), Some(k)) => format!(
            "Recommended: a B-epsilon tree of {} ({} mix ops/s measured, the B+tree's best {})",
            shape_text(s),
            ops(k.bepsilon_mix_ops),
            ops(k.btree_mix_ops)
        ),
        (_, _, Some(k)) => format!(
            "Recommended: a B+tree of {} pages ({} mix ops/s measured, the B-epsilon tree's best {})",
            fmt_bytes(page as f64),
            ops(k.btree_mix_ops),
            ops(k.bepsilon_mix_ops)
        ),
        _ => format!("Recommended: a B+tree of {} pages (measured fastest for the mix)", fmt_bytes(page as f64)),
    }
}

/// The tie and contradiction sentences of one pick (`unit`: "pages" or "nodes").
fn explain_pick(lines: &mut Vec<String>, unit: &str, h: &Headline<u64>, why: String, kept: &str) {
    let b = |p: u64| fmt_bytes(p as f64);
    if let Some(t) = h.tie_with {
        lines.push(format!(
            "{} and {} {unit} tie within the measurement's {:.0}% noise ({} against {} mix ops/s); the model prefers {}, so that is the answer",
            b(h.chosen.id),
            b(t.id),
            NOISE * 100.0,
            fmt_count(h.chosen.measured),
            fmt_count(t.measured),
            b(h.chosen.id)
        ));
    }
    if h.contradicted {
        lines.push(format!(
            "The model recommended {} {unit}, but the engine measured it {:.1}% behind {}: {why}; {kept}",
            b(h.model_first.id),
            (1.0 - h.model_first.measured / h.best.measured) * 100.0,
            b(h.best.id)
        ));
    }
}

/// Why the measured best node size beat the recommended one, in rates.
fn node_why(h: &Headline<u64>, checks: &[NodeCheck]) -> String {
    let find = |n: u64| checks.iter().find(|c| c.shape.node_bytes == n);
    let (Some(b), Some(r)) = (find(h.best.id), find(h.model_first.id)) else {
        return "the recommended size was not measured".into();
    };
    let range = |c: &NodeCheck| c.range_us.map_or("-".into(), |u| format!("{u:.0} µs"));
    format!(
        "{} nodes measured {} inserts/s, {} gets/s and ranges of {} against {}, {} and {}, a trade the advisor's B-epsilon model (I/O only, no ranges) does not weigh",
        fmt_bytes(b.shape.node_bytes as f64),
        fmt_count(b.inserts_per_s),
        fmt_count(b.point_qps),
        range(b),
        fmt_count(r.inserts_per_s),
        fmt_count(r.point_qps),
        range(r)
    )
}

fn kind_line(k: &KindChoice, advice: &Advice) -> String {
    let (win, lose) = match k.kind {
        Kind::BTree => (k.btree_spread, k.bepsilon_spread),
        Kind::BEpsilon => (k.bepsilon_spread, k.btree_spread),
    };
    if k.tie {
        return format!(
            "Tree kind: the B+tree at {} and the B-epsilon tree at {} tie within {:.0}% (the larger of the {:.0}% noise and the rounds' spread) for {}; the model prefers the {}, so that is the answer; {}",
            spread_text(&k.btree_spread),
            spread_text(&k.bepsilon_spread),
            k.tolerance * 100.0,
            NOISE * 100.0,
            advice.mix.describe(),
            k.kind.name(),
            favoured(k)
        );
    }
    format!(
        "Tree kind: the {} serves {} at {} against {} (medians of the same interleaved rounds, apart by more than the {:.0}% tie tolerance); {} decided it ({:.0} µs per mix operation in its favour)",
        k.kind.name(),
        advice.mix.describe(),
        spread_text(&win),
        spread_text(&lose),
        k.tolerance * 100.0,
        k.deciding_op,
        k.deciding_us
    )
}

/// Which operation favoured the chosen kind most, or that none did.
fn favoured(k: &KindChoice) -> String {
    if k.deciding_us > 0.0 {
        format!(
            "{} favoured it most ({:.0} µs per mix operation)",
            k.deciding_op, k.deciding_us
        )
    } else {
        "no operation measured faster on it".into()
    }
}

/// The tuned file for `answer`.
pub fn tuned(answer: &Answer, advice: &Advice, drive: &str, dir: &std::path::Path) -> Tuned {
    let beps = (answer.tree_kind == Kind::BEpsilon)
        .then_some(answer.bepsilon)
        .flatten()
        .map(|s| TunedBEpsilon {
            node_bytes: s.node_bytes as u32,
            leaf_bytes: None,
            basement_bytes: s.basement_bytes as u32,
            fanout: s.fanout as u16,
        });
    let created_unix_secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Tuned {
        schema: TUNED_SCHEMA,
        tree_kind: if beps.is_some() {
            TunedKind::Bepsilon
        } else {
            TunedKind::Btree
        },
        page_size: answer.page_size.clamp(512, 65536) as usize,
        bepsilon: beps,
        cache_bytes: usize::try_from(advice.dataset.cache_bytes).ok(),
        source: TunedSource {
            drive: drive.into(),
            dir: std::fs::canonicalize(dir)
                .unwrap_or(dir.into())
                .display()
                .to_string(),
            mix: advice.mix.describe(),
            created_unix_secs,
            reason: answer.lines.first().cloned().unwrap_or_default(),
        },
    }
}
