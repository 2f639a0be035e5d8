//! The verdict line: did the engine confirm the recommended page size?

use super::SizeCheck;
use pagewise_model::advise::correct::{correct, Correction};
use pagewise_model::advise::Mix;
use pagewise_model::units::fmt_bytes;

/// The recommended size counts as confirmed when its measured mix rate is
/// at least this fraction of the best measured one (run-to-run noise).
pub const CONFIRM_FRACTION: f64 = 0.97;

/// The verdict for recommended size `rec` (see [`verdict_line`]), with the
/// reason for a miss taken from the fitted correction's terms.
pub fn verdict(rec: u64, checks: &[SizeCheck], mix: Mix, c: &Correction) -> String {
    let measured: Vec<(u64, f64)> = checks
        .iter()
        .map(|k| (k.page_size, k.measured.mix_ops))
        .collect();
    let best = measured
        .iter()
        .copied()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(rec, |b| b.0);
    let why = (best != rec).then(|| miss_reason(rec, best, checks, mix, c));
    verdict_line(rec, &measured, why)
}

/// Which correction term, applied alone, ranks `best` ahead of `rec`.
fn miss_reason(rec: u64, best: u64, checks: &[SizeCheck], mix: Mix, c: &Correction) -> String {
    let find = |p: u64| checks.iter().find(|k| k.page_size == p);
    let (Some(r), Some(b)) = (find(rec), find(best)) else {
        return "the recommended size was not measured".into();
    };
    let n = Correction::NONE;
    if b.calibrated.mix_ops > r.calibrated.mix_ops {
        return format!(
            "the scaled dataset is not the described one: the calibrated model itself ranks {} first on the scaled tree ({} levels, described {}), so the verification cannot separate the two sizes here (--verify full loads more records)",
            fmt_bytes(best as f64),
            b.scaled.scaled_height,
            b.scaled.described_height
        );
    }
    let terms = [
        (
            "CPU per cached level visited, which the device curve does not see",
            Correction {
                cpu_level_s: c.cpu_level_s,
                cpu_level_per_doubling_s: c.cpu_level_per_doubling_s,
                ..n
            },
        ),
        (
            "a cache miss costs the engine more than the drive's read (checksum, decode, cache upkeep) and misses differ from the model's caching",
            Correction {
                miss_factor: c.miss_factor,
                ..n
            },
        ),
        (
            "inserts' page writes at checkpoints (count and batched cost) differ from the model's one QD1 random write per insert",
            Correction {
                writes_per_insert: c.writes_per_insert,
                ..n
            },
        ),
        (
            "the combined correction (CPU per level, cache misses, checkpoint writes)",
            *c,
        ),
    ];
    for (why, t) in terms {
        let mr = correct(&r.engine_row, &r.scaled.dataset, mix, &t).mix_ops;
        let mb = correct(&b.engine_row, &b.scaled.dataset, mix, &t).mix_ops;
        if mb > mr {
            return format!(
                "{why}: with it the model also ranks {} first",
                fmt_bytes(best as f64)
            );
        }
    }
    let worst = checks
        .iter()
        .map(|k| k.point_error_corrected.abs())
        .fold(0.0, f64::max);
    if worst <= 0.10 {
        return format!(
            "of what the model leaves out of ranges and inserts: after the correction point gets are within {:.0}% at every size, so the gap is the page-size-dependent work of the other operations (copying and re-encoding a page per insert, decoding pages in range scans, checkpoint writes growing with the page)",
            worst * 100.0
        );
    }
    "no fitted term explains it: the gap is likely noise on a busy machine (repeat with --verify full on an idle one)".into()
}

/// "confirmed: 8 KiB measured fastest, 7.0% ahead of 16 KiB",
/// "confirmed within noise: ...", or "measured best is 16 KiB, 9.0% ahead of
/// the recommended 8 KiB: the model missed because WHY". `measured` holds
/// (page size, mix ops/s) per verified size.
pub fn verdict_line(rec: u64, measured: &[(u64, f64)], why: Option<String>) -> String {
    assert!(!measured.is_empty());
    let mut v = measured.to_vec();
    v.sort_by(|a, b| b.1.total_cmp(&a.1));
    let (best, best_ops) = v[0];
    let kib = |p: u64| fmt_bytes(p as f64);
    let Some(&(_, rec_ops)) = v.iter().find(|m| m.0 == rec) else {
        return format!("not verified: {} was not measured", kib(rec));
    };
    if best == rec {
        return match v.get(1) {
            Some(&(p, o)) => format!(
                "confirmed: {} measured fastest, {:.1}% ahead of {}",
                kib(rec),
                (rec_ops / o - 1.0) * 100.0,
                kib(p)
            ),
            None => format!("confirmed: {} was the only size measured", kib(rec)),
        };
    }
    let ahead = (best_ops / rec_ops - 1.0) * 100.0;
    if rec_ops >= CONFIRM_FRACTION * best_ops {
        return format!(
            "confirmed within noise: {} measured {ahead:.1}% ahead of the recommended {}, under the {:.0}% margin",
            kib(best),
            kib(rec),
            (1.0 / CONFIRM_FRACTION - 1.0) * 100.0
        );
    }
    format!(
        "measured best is {}, {ahead:.1}% ahead of the recommended {}: the model missed because {}",
        kib(best),
        kib(rec),
        why.unwrap_or_else(|| "of an unexplained gap".into())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confirmed_when_the_recommended_size_wins() {
        let m = [(4096, 100.0), (8192, 107.0), (16384, 90.0)];
        assert_eq!(
            verdict_line(8192, &m, None),
            "confirmed: 8 KiB measured fastest, 7.0% ahead of 4 KiB"
        );
    }

    #[test]
    fn within_three_percent_is_confirmed_within_noise() {
        let m = [(4096, 102.0), (8192, 100.0)];
        let s = verdict_line(8192, &m, None);
        assert!(
            s.starts_with("confirmed within noise: 4 KiB measured 2.0% ahead"),
            "{s}"
        );
    }

    #[test]
    fn a_miss_names_the_best_and_the_reason() {
        let m = [(8192, 100.0), (16384, 109.0)];
        let s = verdict_line(8192, &m, Some("X".into()));
        assert_eq!(
            s,
            "measured best is 16 KiB, 9.0% ahead of the recommended 8 KiB: the model missed because X"
        );
    }
}
