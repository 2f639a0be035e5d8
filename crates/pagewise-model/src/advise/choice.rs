//! The headline: which verified configuration `pagewise tune` names, and
//! which tree kind serves the mix. Pure functions of measured and predicted
//! rates, so the rules are tested by hand.
//!
//! **Headline rule** ([`pick_headline`]): the configuration the engine
//! measured fastest for the mix, unless another one measured within the
//! noise of it (at least `1 - noise` of its rate) and the model predicts
//! more for that one: then the model's preference, named as a tie with both
//! figures. The model *contradicts* the measurement when the configuration
//! it ranks first measured below `1 - noise` of the best.
//!
//! **Tree kind** ([`choose_kind`]): both kinds' candidates run the same
//! mix in the same interleaved rounds, and each has one mix rate per round
//! ([`Spread`]: median, min and max over the rounds). The kind with the
//! higher median wins, unless the medians are within the tie tolerance
//! ([`tie_tolerance`]: the larger of the noise and each candidate's
//! relative spread over the rounds): then the kind the model prefers,
//! named as a tie with both figures. The deciding operation is the one
//! whose weighted measured time difference (the mix's weights times each
//! kind's microseconds per point get, range and insert) is largest in the
//! winner's favour.

use super::Mix;
use serde::Serialize;

/// One measured configuration: `measured` and `predicted` mix operations
/// per second (predicted by the model the advice comes from).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Candidate<T> {
    pub id: T,
    pub measured: f64,
    pub predicted: f64,
}

/// What [`pick_headline`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Headline<T> {
    /// The configuration to name.
    pub chosen: Candidate<T>,
    /// The fastest measured one (the same as `chosen` unless a tie).
    pub best: Candidate<T>,
    /// The model's own first (highest prediction).
    pub model_first: Candidate<T>,
    /// `Some(other)` when another candidate measured within the noise of
    /// `chosen`: the tie to name with both figures.
    pub tie_with: Option<Candidate<T>>,
    /// The model's first measured below `1 - noise` of the best.
    pub contradicted: bool,
}

/// The headline among `cands` (see the module's rule); `noise` is the
/// relative measurement noise, e.g. 0.03. `None` for no candidates.
pub fn pick_headline<T: Copy + PartialEq>(
    cands: &[Candidate<T>],
    noise: f64,
) -> Option<Headline<T>> {
    assert!((0.0..1.0).contains(&noise));
    assert!(cands.iter().all(|c| c.measured > 0.0 && c.predicted >= 0.0));
    let best = *cands
        .iter()
        .max_by(|a, b| a.measured.total_cmp(&b.measured))?;
    let model_first = *cands
        .iter()
        .max_by(|a, b| a.predicted.total_cmp(&b.predicted))?;
    let floor = best.measured * (1.0 - noise);
    let within = |c: &&Candidate<T>| c.measured >= floor;
    let chosen = *(cands.iter().filter(within))
        .max_by(|a, b| a.predicted.total_cmp(&b.predicted))
        .expect("the best is within its own noise");
    // The other side of the tie: the best when the model moved the choice,
    // else the closest runner-up within the noise.
    let tie_with = if chosen.id != best.id {
        Some(best)
    } else {
        (cands.iter().filter(within))
            .filter(|c| c.id != chosen.id)
            .max_by(|a, b| a.measured.total_cmp(&b.measured))
            .copied()
    };
    let out = Headline {
        chosen,
        best,
        model_first,
        tie_with,
        contradicted: model_first.measured < floor,
    };
    assert!(out.chosen.measured >= floor);
    Some(out)
}

/// Measured microseconds per operation of one tree kind; `None` for an
/// operation not measured (only allowed when the mix has none of it).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KindTimes {
    pub point_us: f64,
    pub range_us: Option<f64>,
    pub insert_us: Option<f64>,
}

/// A tree kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    BTree,
    BEpsilon,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::BTree => "B+tree",
            Kind::BEpsilon => "B-epsilon tree",
        }
    }
}

/// A candidate's mix operations per second over the measured rounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// The spread of per-round `rates` (the median of an even count is the
    /// mean of the middle two). `None` without rates.
    pub fn of(rates: &[f64]) -> Option<Spread> {
        assert!(rates.iter().all(|r| r.is_finite() && *r >= 0.0));
        let mut v = rates.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = match n {
            0 => return None,
            _ if n % 2 == 1 => v[n / 2],
            _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        };
        let out = Spread {
            median,
            min: v[0],
            max: v[n - 1],
        };
        assert!(out.min <= out.median && out.median <= out.max);
        Some(out)
    }

    /// One rate (no spread).
    pub fn single(rate: f64) -> Spread {
        Spread {
            median: rate,
            min: rate,
            max: rate,
        }
    }

    /// (max - min) / median: how far the rounds scattered.
    pub fn relative(&self) -> f64 {
        if self.median > 0.0 {
            (self.max - self.min) / self.median
        } else {
            0.0
        }
    }

    /// Every figure times `k` (a rate moved onto another pass's scale).
    pub fn scaled(&self, k: f64) -> Spread {
        assert!(k > 0.0 && k.is_finite());
        Spread {
            median: self.median * k,
            min: self.min * k,
            max: self.max * k,
        }
    }
}

/// The relative gap under which two candidates' medians tie: the larger of
/// `noise` and each one's relative spread over the rounds.
pub fn tie_tolerance(a: &Spread, b: &Spread, noise: f64) -> f64 {
    assert!((0.0..1.0).contains(&noise));
    noise.max(a.relative()).max(b.relative())
}

/// Whether `a` and `b` tie: the lower median within [`tie_tolerance`] of
/// the higher one (`lower > higher x (1 - tolerance)`).
pub fn ties(a: &Spread, b: &Spread, noise: f64) -> bool {
    let tol = tie_tolerance(a, b, noise);
    let (lo, hi) = (a.median.min(b.median), a.median.max(b.median));
    lo > hi * (1.0 - tol)
}

/// One kind's measured candidate: its times per operation in the mix and
/// its per-round mix rates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KindMeasure {
    pub times: KindTimes,
    pub mix: Spread,
}

/// What [`choose_kind`] decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KindChoice {
    pub kind: Kind,
    /// Median mix operations per second of each kind over the rounds.
    pub btree_mix_ops: f64,
    pub bepsilon_mix_ops: f64,
    /// Both kinds' rates over the rounds.
    pub btree_spread: Spread,
    pub bepsilon_spread: Spread,
    /// The relative gap under which the medians tie ([`tie_tolerance`]).
    pub tolerance: f64,
    /// Within the tolerance: the model's preference by rule.
    pub tie: bool,
    /// The operation that decided it ("point gets", "range scans",
    /// "inserts") and its weighted µs per mix operation in the winner's favour.
    pub deciding_op: &'static str,
    pub deciding_us: f64,
}

/// Microseconds per mix operation of `t` under `mix` (weights
/// renormalised); `None` when the mix needs an operation `t` lacks.
pub fn mix_us(mix: Mix, t: &KindTimes) -> Option<f64> {
    let sum = mix.point + mix.range + mix.insert;
    assert!(sum > 0.0, "an empty mix");
    let part = |w: f64, us: Option<f64>| {
        if w > 0.0 {
            us.map(|u| w * u)
        } else {
            Some(0.0)
        }
    };
    let us = part(mix.point, Some(t.point_us))?
        + part(mix.range, t.range_us)?
        + part(mix.insert, t.insert_us)?;
    Some(us / sum)
}

/// The tree kind for `mix` from both kinds' measured candidates (module
/// rule); `model` is the kind the model prefers, the answer within the
/// tolerance. `None` when either kind lacks a time the mix needs.
pub fn choose_kind(
    mix: Mix,
    b: &KindMeasure,
    e: &KindMeasure,
    noise: f64,
    model: Kind,
) -> Option<KindChoice> {
    assert!((0.0..1.0).contains(&noise));
    let (btree, beps) = (&b.times, &e.times);
    let (b_us, e_us) = (mix_us(mix, btree)?, mix_us(mix, beps)?);
    assert!(b_us > 0.0 && e_us > 0.0);
    assert!(b.mix.median > 0.0 && e.mix.median > 0.0);
    let (b_ops, e_ops) = (b.mix.median, e.mix.median);
    let tie = ties(&b.mix, &e.mix, noise);
    let kind = if tie {
        model
    } else if b_ops >= e_ops {
        Kind::BTree
    } else {
        Kind::BEpsilon
    };
    let sum = mix.point + mix.range + mix.insert;
    let diff = |w: f64, b: Option<f64>, e: Option<f64>| match (b, e) {
        (Some(b), Some(e)) if w > 0.0 => w / sum * (b - e),
        _ => 0.0,
    };
    // Positive: the B-epsilon tree is faster at this operation.
    let ops = [
        (
            "point gets",
            diff(mix.point, Some(btree.point_us), Some(beps.point_us)),
        ),
        (
            "range scans",
            diff(mix.range, btree.range_us, beps.range_us),
        ),
        ("inserts", diff(mix.insert, btree.insert_us, beps.insert_us)),
    ];
    let sign = if kind == Kind::BEpsilon { 1.0 } else { -1.0 };
    let (op, us) = ops
        .iter()
        .map(|&(k, d)| (k, d * sign))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("three operations");
    Some(KindChoice {
        kind,
        btree_mix_ops: b_ops,
        bepsilon_mix_ops: e_ops,
        btree_spread: b.mix,
        bepsilon_spread: e.mix,
        tolerance: tie_tolerance(&b.mix, &e.mix, noise),
        tie,
        deciding_op: op,
        deciding_us: us,
    })
}

/// The kind the model prefers for `mix` from both kinds' *predicted* times:
/// the B-epsilon tree when it predicts less time per mix operation, else
/// the B+tree (also when a time the mix needs is not predicted, such as
/// ranges, which the B-epsilon model does not cover).
pub fn model_kind(mix: Mix, btree: &KindTimes, beps: &KindTimes) -> Kind {
    match (mix_us(mix, btree), mix_us(mix, beps)) {
        (Some(b), Some(e)) if e < b => Kind::BEpsilon,
        _ => Kind::BTree,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: u64, measured: f64, predicted: f64) -> Candidate<u64> {
        Candidate {
            id,
            measured,
            predicted,
        }
    }

    #[test]
    fn the_measured_best_wins_beyond_noise_and_contradicts_the_model() {
        // The model ranks 8 KiB first (120); 4 KiB measured 110 against
        // 100: 100 < 0.97 x 110 = 106.7, so 4 KiB, and a contradiction.
        let h = pick_headline(&[c(4096, 110.0, 100.0), c(8192, 100.0, 120.0)], 0.03).unwrap();
        assert_eq!(
            (h.chosen.id, h.best.id, h.model_first.id),
            (4096, 4096, 8192)
        );
        assert!(h.contradicted);
        assert_eq!(h.tie_with, None);
    }

    #[test]
    fn within_noise_the_model_preference_is_named_as_a_tie() {
        // 4 KiB measured 102, 8 KiB 100 >= 0.97 x 102 = 98.94: a tie; the
        // model prefers 8 KiB, so 8 KiB with the best (4 KiB) beside it.
        let h = pick_headline(&[c(4096, 102.0, 100.0), c(8192, 100.0, 120.0)], 0.03).unwrap();
        assert_eq!(h.chosen.id, 8192);
        assert_eq!(h.tie_with.map(|t| (t.id, t.measured)), Some((4096, 102.0)));
        assert!(!h.contradicted);
    }

    #[test]
    fn a_tie_the_model_agrees_with_names_the_runner_up() {
        // 16 KiB measured 98 < 0.97 x 102 = 98.94: outside the tie.
        let cands = [
            c(4096, 102.0, 130.0),
            c(8192, 100.0, 120.0),
            c(16384, 98.0, 90.0),
        ];
        let h = pick_headline(&cands, 0.03).unwrap();
        assert_eq!((h.chosen.id, h.tie_with.map(|t| t.id)), (4096, Some(8192)));
        let clear = pick_headline(&[c(4096, 110.0, 1.0), c(8192, 100.0, 0.5)], 0.03).unwrap();
        assert_eq!((clear.chosen.id, clear.tie_with), (4096, None));
        assert!(pick_headline::<u64>(&[], 0.03).is_none());
    }

    fn mix(point: f64, range: f64, insert: f64) -> Mix {
        Mix {
            point,
            range,
            insert,
        }
    }

    /// A candidate measured at exactly its times' mix rate in every round.
    fn km(m: Mix, times: KindTimes) -> KindMeasure {
        let rate = mix_us(m, &times).map_or(1.0, |us| 1e6 / us);
        KindMeasure {
            times,
            mix: Spread::single(rate),
        }
    }

    /// Both kinds measured at exactly their times' mix rates.
    fn both(m: Mix, b: KindTimes, e: KindTimes, model: Kind) -> Option<KindChoice> {
        choose_kind(m, &km(m, b), &km(m, e), 0.03, model)
    }

    const BTREE: KindTimes = KindTimes {
        point_us: 100.0,
        range_us: Some(200.0),
        insert_us: Some(400.0),
    };
    const BEPS: KindTimes = KindTimes {
        point_us: 150.0,
        range_us: Some(600.0),
        insert_us: Some(20.0),
    };

    #[test]
    fn insert_heavy_mixes_take_the_b_epsilon_tree() {
        // 10/0/90: B+tree 0.1x100 + 0.9x400 = 370 µs; B-epsilon
        // 0.1x150 + 0.9x20 = 33 µs. Inserts decide: 0.9 x 380 = 342 µs.
        let k = both(mix(0.1, 0.0, 0.9), BTREE, BEPS, Kind::BTree).unwrap();
        assert_eq!(k.kind, Kind::BEpsilon);
        assert!((k.btree_mix_ops - 1e6 / 370.0).abs() < 1e-6);
        assert!((k.bepsilon_mix_ops - 1e6 / 33.0).abs() < 1e-6);
        assert_eq!(k.deciding_op, "inserts");
        assert!((k.deciding_us - 342.0).abs() < 1e-9 && !k.tie);
    }

    #[test]
    fn scan_heavy_mixes_take_the_b_plus_tree() {
        // 20/70/10 (weights sum 1): B+tree 20 + 140 + 40 = 200 µs;
        // B-epsilon 30 + 420 + 2 = 452 µs. Ranges decide: 0.7 x 400 = 280.
        let k = both(mix(0.2, 0.7, 0.1), BTREE, BEPS, Kind::BTree).unwrap();
        assert_eq!((k.kind, k.deciding_op), (Kind::BTree, "range scans"));
        assert!((k.deciding_us - 280.0).abs() < 1e-9);
    }

    #[test]
    fn a_tie_takes_the_model_preference_and_missing_times_refuse() {
        // 50/0/50: B+tree 250 µs; B-epsilon 0.5x110 + 0.5x385 = 247.5 µs,
        // 1% faster: within 3%.
        let e = KindTimes {
            point_us: 110.0,
            range_us: None,
            insert_us: Some(385.0),
        };
        let m = mix(0.5, 0.0, 0.5);
        let k = both(m, BTREE, e, Kind::BTree).unwrap();
        assert!(k.tie && k.kind == Kind::BTree);
        // The same tie with the model preferring B-epsilon: B-epsilon, and
        // both figures kept (4000 and 4040.4 mix ops/s).
        let k = both(m, BTREE, e, Kind::BEpsilon).unwrap();
        assert!(k.tie && k.kind == Kind::BEpsilon);
        assert!((k.btree_mix_ops - 4000.0).abs() < 1e-6);
        assert!((k.bepsilon_mix_ops - 1e6 / 247.5).abs() < 1e-6);
        // Beyond the noise the measurement wins over the model: 10/0/90.
        let k = both(mix(0.1, 0.0, 0.9), BTREE, BEPS, Kind::BTree).unwrap();
        assert!(!k.tie && k.kind == Kind::BEpsilon);
        assert!(both(mix(0.5, 0.1, 0.4), BTREE, e, Kind::BTree).is_none());
    }

    #[test]
    fn the_model_prefers_the_kind_it_predicts_faster() {
        // 10/0/90 predicted: B+tree 370 µs, B-epsilon 33 µs: B-epsilon.
        let no_range = |t: KindTimes| KindTimes {
            range_us: None,
            ..t
        };
        let (b, e) = (no_range(BTREE), no_range(BEPS));
        assert_eq!(model_kind(mix(0.1, 0.0, 0.9), &b, &e), Kind::BEpsilon);
        // 90/0/10: B+tree 0.9x100 + 0.1x400 = 130 µs; B-epsilon
        // 0.9x150 + 0.1x20 = 137 µs: the B+tree.
        assert_eq!(model_kind(mix(0.9, 0.0, 0.1), &b, &e), Kind::BTree);
        // Ranges without a predicted range time: the B+tree.
        assert_eq!(model_kind(mix(0.1, 0.1, 0.8), &b, &e), Kind::BTree);
    }

    #[test]
    fn spreads_by_hand() {
        // Rounds 90, 110, 100, 120: sorted 90 100 110 120, median 105,
        // relative spread 30 / 105.
        let s = Spread::of(&[90.0, 110.0, 100.0, 120.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (105.0, 90.0, 120.0));
        assert!((s.relative() - 30.0 / 105.0).abs() < 1e-12);
        let odd = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((odd.median, odd.min, odd.max), (2.0, 1.0, 3.0));
        assert!(Spread::of(&[]).is_none());
        assert_eq!(Spread::single(7.0).relative(), 0.0);
        assert_eq!(s.scaled(2.0).median, 210.0);
    }

    #[test]
    fn the_tie_tolerance_is_the_larger_of_noise_and_spread() {
        // Tight rounds (spreads 1%): the 3% noise rules. 100 against 96:
        // 96 > 100 x 0.97 = 97 fails, no tie; 100 against 98: a tie.
        let tight = |m: f64| Spread {
            median: m,
            min: m - 0.5,
            max: m + 0.5,
        };
        assert!((tie_tolerance(&tight(100.0), &tight(96.0), 0.03) - 0.03).abs() < 1e-12);
        assert!(!ties(&tight(100.0), &tight(96.0), 0.03));
        assert!(ties(&tight(100.0), &tight(98.0), 0.03));
        // Wide rounds: 90..110 around 100 is a 20% spread, so 100 against
        // 85 ties (85 > 80) and against 79 does not (79 < 80).
        let wide = Spread {
            median: 100.0,
            min: 90.0,
            max: 110.0,
        };
        assert!((tie_tolerance(&wide, &tight(85.0), 0.03) - 0.2).abs() < 1e-12);
        assert!(ties(&wide, &tight(85.0), 0.03));
        assert!(!ties(&wide, &tight(79.0), 0.03));
        // The other side's spread counts too: 50 +- 5 is 20% of 50.
        let b = Spread {
            median: 50.0,
            min: 45.0,
            max: 55.0,
        };
        // 50 > 60 x 0.8 = 48: a tie; 50 > 70 x 0.8 = 56 fails.
        assert!(ties(&tight(60.0), &b, 0.03));
        assert!(!ties(&tight(70.0), &b, 0.03));
    }

    #[test]
    fn a_kind_gap_inside_the_rounds_spread_is_a_tie() {
        // 50/0/50 with the times of the B+tree (250 µs, 4000/s) and a
        // B-epsilon tree at 0.5x110 + 0.5x330 = 220 µs (4545/s): 12% apart,
        // beyond the 3% noise. With tight rounds the B-epsilon tree wins;
        // when the B+tree's rounds spread 3600..4400 (20%) it is a tie, and
        // the model's preference (the B+tree) is the answer.
        let m = mix(0.5, 0.0, 0.5);
        let e = KindTimes {
            point_us: 110.0,
            range_us: None,
            insert_us: Some(330.0),
        };
        let k = both(m, BTREE, e, Kind::BTree).unwrap();
        assert!(!k.tie && k.kind == Kind::BEpsilon);
        assert!((k.tolerance - 0.03).abs() < 1e-12);
        let wide = KindMeasure {
            times: BTREE,
            mix: Spread {
                median: 4000.0,
                min: 3600.0,
                max: 4400.0,
            },
        };
        let k = choose_kind(m, &wide, &km(m, e), 0.03, Kind::BTree).unwrap();
        assert!(k.tie && k.kind == Kind::BTree);
        assert!((k.tolerance - 0.2).abs() < 1e-12);
        assert_eq!((k.btree_mix_ops, k.btree_spread.min), (4000.0, 3600.0));
        assert!((k.bepsilon_mix_ops - 1e6 / 220.0).abs() < 1e-6);
    }
}
