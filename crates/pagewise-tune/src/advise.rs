//! The advisor's inputs from a fitted model: which measured curves describe
//! the drive, and the advice for a dataset and mix on it.

use anyhow::{bail, Context};
use pagewise_model::advise::{advise, candidates, Advice, Dataset, Device, Mix};
use pagewise_model::fit::ModelReport;
use pagewise_model::{OpKind, Pattern};

/// Picks the curves and runs the advisor; `notes` gets any fallbacks taken.
pub fn advise_report(
    report: &ModelReport,
    d: &Dataset,
    mix: Mix,
    qd: Option<u32>,
    pages: &[u64],
    notes: &mut Vec<String>,
) -> anyhow::Result<Advice> {
    let dev = device(report, mix, qd, notes)?;
    let pages = if pages.is_empty() {
        candidates(dev.read)
    } else {
        pages.to_vec()
    };
    Ok(advise(dev, d, mix, &pages)?)
}

/// The drive as the advisor sees it: the random-read curve at `qd` (or the
/// lowest measured), the random-write curve, the read parallelism.
pub fn device<'a>(
    report: &'a ModelReport,
    mix: Mix,
    qd: Option<u32>,
    notes: &mut Vec<String>,
) -> anyhow::Result<Device<'a>> {
    let read = match report.find(OpKind::Read, Pattern::Random, qd) {
        Some(r) => r,
        None => {
            if let Some(q) = qd {
                bail!(
                    "no random-read curve measured at {q} I/Os in flight; measured: {}",
                    levels(report)
                );
            }
            let r = report
                .find(OpKind::Read, Pattern::Sequential, None)
                .context("no random-read measurements at two or more block sizes: the advisor needs randread IOPS per block size (op column randread)")?;
            notes.push(
                "no random-read curve: using sequential reads, which flatter large pages".into(),
            );
            r
        }
    };
    let write = report
        .find(OpKind::Write, Pattern::Random, Some(read.key.concurrency()))
        .or_else(|| report.find(OpKind::Write, Pattern::Random, None));
    if write.is_none() && mix.insert > 0.0 {
        notes.push(
            "no random-write curve: inserts' page writes are costed at random-read speed".into(),
        );
    }
    Ok(Device {
        read,
        write,
        read_parallelism: read_parallelism(report),
    })
}

/// PDAM's P for random reads (the median over the block sizes probed at two
/// or more concurrencies, at least 1; 1 when none were): how many of a
/// range's read-ahead pages the drive serves at once.
pub fn read_parallelism(report: &ModelReport) -> f64 {
    let mut p: Vec<f64> = report
        .parallelism
        .iter()
        .filter(|f| f.op == OpKind::Read && f.pattern == Pattern::Random)
        .map(|f| f.parallelism.pdam_p)
        .filter(|p| p.is_finite())
        .collect();
    if p.is_empty() {
        return 1.0;
    }
    p.sort_by(f64::total_cmp);
    p[p.len() / 2].max(1.0)
}

fn levels(r: &ModelReport) -> String {
    let v: Vec<String> = r
        .fits
        .iter()
        .filter(|f| f.key.op == OpKind::Read && f.key.pattern == Pattern::Random)
        .map(|f| f.key.concurrency().to_string())
        .collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}
