//! Wear estimates against the Tokutek post and hand computations.

use pagewise_model::units::{parse_percent, parse_rate, parse_size};
use pagewise_model::wear::{estimate, greedy_gc_wa, FtlWa, WearInput};

fn tokutek(ftl: FtlWa) -> WearInput {
    WearInput {
        capacity_bytes: parse_size("256GB").unwrap(),
        pe_cycles: 1000.0,
        host_write_rate: parse_rate("10MB/s").unwrap(),
        engine_wa: 1.0,
        ftl,
    }
}

#[test]
fn tokutek_example() {
    // 256e9 B x 1000 / 10e6 B/s = 2.56e7 s = 296.3 days ("about 300 days").
    let e = estimate(&tokutek(FtlWa::Given(1.0))).unwrap();
    assert!((e.days - 2.56e7 / 86400.0).abs() < 1e-9);
    assert!((e.days - 296.3).abs() < 0.1);
    // With the post's FTL write amplification of about 4: 74.1 days ("75 days").
    let e4 = estimate(&tokutek(FtlWa::Given(4.0))).unwrap();
    assert!((e4.days - 74.07).abs() < 0.01, "{}", e4.days);
    // One full overwrite takes 256e9 / 10e6 = 25,600 s = 7.1 hours ("about 7 hours").
    assert!((1.0 / e.host_dwpd * 24.0 - 7.11).abs() < 0.01);
}

#[test]
fn engine_and_ftl_multiply() {
    // 1 TB, 3000 cycles, 50 MB/s, engine WA 2.5, FTL WA 3:
    // 1e12 x 3000 / (50e6 x 7.5) = 8e6 s = 92.59 days = 0.2535 years.
    let e = estimate(&WearInput {
        capacity_bytes: 1e12,
        pe_cycles: 3000.0,
        host_write_rate: 50e6,
        engine_wa: 2.5,
        ftl: FtlWa::Given(3.0),
    })
    .unwrap();
    assert!((e.seconds - 8e6).abs() < 1e-3);
    assert!((e.years - 8e6 / (365.25 * 86400.0)).abs() < 1e-12);
    assert!((e.host_bytes_written - 4e14).abs() < 1.0);
}

#[test]
fn greedy_gc_model_matches_the_paper() {
    // Xiang & Kurkoski (2012): rho = 0.3 gives 2.36 (simulation 2.35).
    let a = greedy_gc_wa(parse_percent("30%").unwrap());
    assert!((a - 2.36).abs() < 0.005, "{a}");
    // Hand check at rho = 0.3: alpha = 1.3, x = -1.3 e^-1.3 = -0.354290;
    // W0(x) = -0.750139 (w e^w = x); A = 1.3 / (1.3 - 0.750139) = 2.36423.
    assert!((a - 2.36423).abs() < 0.0001, "{a}");
    // More spare area, less amplification; A -> 1 as rho grows, large as rho -> 0.
    let rhos = [0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 4.0];
    let wa: Vec<f64> = rhos.iter().map(|&r| greedy_gc_wa(r)).collect();
    assert!(wa.windows(2).all(|w| w[0] > w[1]), "{wa:?}");
    assert!(wa[0] > 10.0 && wa[6] < 1.1);
    // Always at least Agarwal & Marrow's (1 + rho) / (2 rho), which it refines.
    for (&r, &a) in rhos.iter().zip(&wa) {
        assert!(a >= (1.0 + r) / (2.0 * r) * 0.99, "rho {r}: {a}");
    }
}

#[test]
fn over_provisioning_feeds_the_estimate() {
    let e = estimate(&tokutek(FtlWa::OverProvisioning(0.3))).unwrap();
    assert!((e.ftl_wa - 2.36423).abs() < 0.0001);
    assert!((e.days - 296.296 / 2.36423).abs() < 0.1);
    assert!(e.ftl_wa_source.contains("Xiang"));
}

#[test]
fn bad_inputs() {
    let mut i = tokutek(FtlWa::Given(1.0));
    i.host_write_rate = 0.0;
    assert!(estimate(&i).is_err());
    let mut i = tokutek(FtlWa::Given(0.5));
    assert!(estimate(&i).is_err());
    i.ftl = FtlWa::OverProvisioning(-0.1);
    assert!(estimate(&i).is_err());
    i.ftl = FtlWa::Given(1.0);
    i.capacity_bytes = -1.0;
    assert!(estimate(&i).is_err());
}
