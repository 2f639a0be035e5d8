//! How precisely an emulated drive hits its completion times: the overshoot
//! of `sleep_until` (and of plain `thread::sleep`, for comparison) for
//! service times from 10 us to 10 ms.
//!
//! `cargo run --release -p pagewise-io --example emul_accuracy`

use pagewise_io::emulate::sleep_until;
use std::time::{Duration, Instant};

fn percentile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn measure(target_us: u64, n: usize, precise: bool) -> (f64, f64, f64, f64) {
    let mut over = Vec::with_capacity(n);
    for _ in 0..n {
        let d = Instant::now() + Duration::from_micros(target_us);
        if precise {
            sleep_until(d);
        } else {
            std::thread::sleep(d - Instant::now());
        }
        over.push(Instant::now().duration_since(d).as_secs_f64() * 1e6);
    }
    let mean = over.iter().sum::<f64>() / n as f64;
    let p50 = percentile(&mut over, 0.50);
    let p99 = percentile(&mut over, 0.99);
    let max = percentile(&mut over, 1.0);
    (mean, p50, p99, max)
}

fn main() {
    println!("| service time | sleep_until overshoot mean / p50 / p99 / max (us) | thread::sleep (default 50 us timer slack) overshoot mean / p50 / p99 / max (us) |");
    println!("| --- | --- | --- |");
    for us in [10u64, 50, 100, 500, 2000, 10000] {
        let n = (200_000 / us.max(100)).clamp(50, 2000) as usize;
        // Plain sleep first, in a fresh thread whose timer slack is untouched.
        let p = std::thread::spawn(move || measure(us, n, false))
            .join()
            .unwrap();
        let e = measure(us, n, true);
        println!(
            "| {us} us (n={n}) | {:.1} / {:.1} / {:.1} / {:.0} | {:.1} / {:.1} / {:.1} / {:.0} |",
            e.0, e.1, e.2, e.3, p.0, p.1, p.2, p.3
        );
    }
}
