//! A measured pass: Dbs of both tree kinds, open side by side, each warmed
//! once, then the point phase and the mix in [`ROUNDS`] interleaved rounds
//! (every Db sees the machine's drift alike), each mix ended by a
//! checkpoint, then the cached gets. The same Dbs can be measured again in
//! a later pass (a range extension measures the edge beside its neighbour).

use super::bepsilon::NodeLoad;
use super::run::{Measured, Session};
use super::{Budget, Step};
use anyhow::Context;
use pagewise_model::advise::scale::Scaled;
use pagewise_model::units::fmt_bytes;

/// Rounds each measured phase is split into, interleaved across the Dbs.
pub const ROUNDS: u32 = 4;

/// What one open Db is.
pub(super) enum What {
    /// A B+tree page size; `tag` is "verify" or "calibrate".
    Page {
        tag: &'static str,
        page: u64,
        scaled: Scaled,
        load_secs: f64,
    },
    /// A B-epsilon node size.
    Node(NodeLoad),
}

/// A loaded, reopened Db and what its passes measured.
pub(super) struct Built {
    pub what: What,
    pub budget: Budget,
    pub session: Session,
    pub warm: bool,
    /// Its main pass's measurement (an extension's is put on that scale).
    pub measured: Option<Measured>,
}

impl Built {
    pub fn new(what: What, budget: Budget, session: Session) -> Self {
        Built {
            what,
            budget,
            session,
            warm: false,
            measured: None,
        }
    }

    /// Page or node bytes.
    pub fn size(&self) -> u64 {
        match &self.what {
            What::Page { page, .. } => *page,
            What::Node(n) => n.shape.node_bytes,
        }
    }

    /// "verify at 4 KiB pages", "B-epsilon at 256 KiB nodes".
    pub fn label(&self) -> String {
        match &self.what {
            What::Page { tag, page, .. } => format!("{tag} at {} pages", fmt_bytes(*page as f64)),
            What::Node(n) => format!(
                "B-epsilon at {} nodes",
                fmt_bytes(n.shape.node_bytes as f64)
            ),
        }
    }

    /// The main pass's median mix rate (0 before it).
    pub fn mix_ops(&self) -> f64 {
        self.measured.as_ref().map_or(0.0, |m| m.mix_ops)
    }
}

/// Measures `dbs` in one pass with `fraction` of each Db's phase times:
/// warms those not warm yet, then the point phase and the mix in
/// [`ROUNDS`] interleaved rounds, the mix-ending checkpoints and the cached
/// gets. Returns each Db's measurement, in order.
pub(super) fn measure(
    dbs: &mut [&mut Built],
    fraction: f64,
    step: Step,
) -> anyhow::Result<Vec<Measured>> {
    assert!(!dbs.is_empty() && fraction > 0.0 && fraction <= 1.0);
    for b in dbs.iter_mut() {
        if !b.warm {
            b.session.warm(b.budget.warm_secs)?;
            b.warm = true;
        }
        b.session.reset();
    }
    step(format!(
        "measuring {} Dbs in {ROUNDS} interleaved rounds...",
        dbs.len()
    ))?;
    let slice = |b: &Built| b.budget.phase_secs * fraction / ROUNDS as f64;
    // Bounded: ROUNDS x dbs.len() slices per phase.
    for _ in 0..ROUNDS {
        for b in dbs.iter_mut() {
            let secs = slice(b);
            b.session.point_slice(secs)?;
        }
    }
    for _ in 0..ROUNDS {
        for b in dbs.iter_mut() {
            let secs = slice(b);
            b.session.mix_slice(secs)?;
        }
    }
    for b in dbs.iter_mut() {
        b.session.end_mix()?;
    }
    let mut out = Vec::with_capacity(dbs.len());
    for b in dbs.iter_mut() {
        let secs = b.budget.phase_secs * fraction / 3.0;
        let m = (b.session.finish(secs)).with_context(|| format!("{} failed", b.label()))?;
        out.push(m);
    }
    assert_eq!(out.len(), dbs.len());
    Ok(out)
}
