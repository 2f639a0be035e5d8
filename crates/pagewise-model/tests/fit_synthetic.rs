//! The fit recovers the parameters data were generated from.

use pagewise_model::fit::{fit_all, AffineFit, Parallelism, PiecewiseFit};
use pagewise_model::{Measurement, OpKind, Pattern};

const SIZES: [u64; 12] = [
    512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576,
];

fn synthetic(s: f64, w: f64, qd: u32, noise: impl Fn(usize) -> f64) -> Vec<Measurement> {
    SIZES
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            let t = (s + b as f64 / w) * noise(i);
            Measurement {
                qd,
                ..Measurement::simple(OpKind::Read, Pattern::Random, b, qd as f64 / t)
            }
        })
        .collect()
}

fn within(got: f64, want: f64, tol: f64) -> bool {
    ((got - want) / want).abs() <= tol
}

#[test]
fn exact_data_fits_back_within_one_percent() {
    // Kuszmaul's measured X25-E: S = 500 us, W = 120 MB/s; and a modern NVMe-like drive.
    for (s, w) in [(500e-6, 120e6), (60e-6, 2.0e9), (12e-6, 800e6)] {
        for qd in [1, 32] {
            let r = fit_all(&synthetic(s, w, qd, |_| 1.0)).unwrap();
            assert_eq!(r.fits.len(), 1);
            let f = &r.fits[0].affine;
            assert!(within(f.setup_s, s, 0.01), "S {} want {s}", f.setup_s);
            assert!(
                within(f.bandwidth(), w, 0.01),
                "W {} want {w}",
                f.bandwidth()
            );
            assert!(within(f.half_bandwidth_point(), s * w, 0.01));
            assert!(f.r2 > 0.999999 && f.max_rel_residual < 1e-9);
            assert!(r.fits[0].poor.is_none());
        }
    }
}

#[test]
fn noisy_data_fits_back_within_a_few_percent() {
    // Deterministic +-2% alternating noise: the fit must average it out.
    let seed_noise = |i: usize| if i.is_multiple_of(2) { 1.02 } else { 0.98 };
    let (s, w) = (80e-6, 500e6);
    let r = fit_all(&synthetic(s, w, 1, seed_noise)).unwrap();
    let f = &r.fits[0].affine;
    assert!(within(f.setup_s, s, 0.05), "S {}", f.setup_s);
    assert!(within(f.bandwidth(), w, 0.05), "W {}", f.bandwidth());
    assert!(f.max_rel_residual < 0.05);
}

#[test]
fn half_bandwidth_point_matches_kuszmaul() {
    // T = 500 us + B / 120 MB/s: S x W = 60 KB, the slide's "read unthreaded 60KB".
    let pts: Vec<(u64, f64)> = SIZES
        .iter()
        .map(|&b| (b, 500e-6 + b as f64 / 120e6))
        .collect();
    let f = AffineFit::fit(&pts).unwrap();
    assert!(within(f.half_bandwidth_point(), 60_000.0, 0.01));
}

#[test]
fn knee_is_found_and_named() {
    // Flat 100 us up to 64 KiB at 4 GB/s, then 200 MB/s: one line cannot follow it.
    let k = 65536u64;
    let t = |b: u64| 100e-6 + b.min(k) as f64 / 4e9 + b.saturating_sub(k) as f64 / 200e6;
    let ms: Vec<Measurement> = SIZES
        .iter()
        .map(|&b| Measurement::simple(OpKind::Read, Pattern::Random, b, 1.0 / t(b)))
        .collect();
    let r = fit_all(&ms).unwrap();
    let g = &r.fits[0];
    assert!(
        g.poor.is_some(),
        "affine fit should be poor: {:?}",
        g.affine
    );
    assert!(g.knee_found);
    let p = g.piecewise.as_ref().unwrap();
    assert_eq!(p.knee, k);
    assert!(within(p.setup_s, 100e-6, 0.01));
    assert!(within(1.0 / p.sec_per_byte_above, 200e6, 0.01));
    assert!(p.max_rel_residual < 1e-6);
    // The hinge is what predictions use once a knee is found.
    assert!(within(g.predicted_time(3 * k), t(3 * k), 1e-6));
}

#[test]
fn piecewise_needs_four_sizes() {
    let pts = [(512, 1e-4), (4096, 2e-4), (65536, 9e-4)];
    assert!(PiecewiseFit::fit(&pts).is_none());
}

#[test]
fn parallelism_of_a_pdam_drive() {
    // P = 8 slots of 10,000 IOPS each: linear to QD8, flat after.
    let pts: Vec<(u32, f64)> = [1u32, 2, 4, 8, 16, 32]
        .iter()
        .map(|&q| (q, 10_000.0 * q.min(8) as f64))
        .collect();
    let p = Parallelism::from_points(&pts).unwrap();
    assert!((p.pdam_p - 8.0).abs() < 1e-9);
    assert_eq!(p.qd95, 8);
    assert_eq!(p.peak_iops, 80_000.0);
    // 95% of peak reached early when the curve bends smoothly.
    let smooth: Vec<(u32, f64)> = [
        (1, 10_000.0),
        (2, 19_000.0),
        (4, 30_000.0),
        (8, 31_000.0),
        (16, 32_000.0),
    ]
    .to_vec();
    let p = Parallelism::from_points(&smooth).unwrap();
    assert_eq!(p.qd95, 8); // 31,000 >= 0.95 x 32,000 = 30,400
    assert!((p.pdam_p - 3.2).abs() < 1e-9);
}

#[test]
fn qd_sweep_and_size_sweep_in_one_input() {
    let mut ms = synthetic(100e-6, 1e9, 1, |_| 1.0);
    for q in [2u32, 4, 8] {
        ms.push(Measurement {
            qd: q,
            ..Measurement::simple(OpKind::Read, Pattern::Random, 4096, 9000.0 * q as f64)
        });
    }
    let r = fit_all(&ms).unwrap();
    assert_eq!(
        r.fits.len(),
        1,
        "qd2/4/8 have one size each and are skipped"
    );
    assert_eq!(r.skipped.len(), 3);
    assert_eq!(r.parallelism.len(), 1);
    assert_eq!(r.parallelism[0].block_size, 4096);
}

#[test]
fn too_little_data_is_an_error() {
    let one = vec![Measurement::simple(
        OpKind::Read,
        Pattern::Random,
        4096,
        1000.0,
    )];
    let e = fit_all(&one).unwrap_err().to_string();
    assert!(e.contains("one point only"), "{e}");
    let two_same = vec![one[0].clone(), one[0].clone()];
    assert!(fit_all(&two_same).is_err());
    assert!(fit_all(&[]).is_err());
}
