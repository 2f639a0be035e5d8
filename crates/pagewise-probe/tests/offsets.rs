//! Every offset the probe generates is aligned and inside the target.

use pagewise_probe::runner::{seq_region, Offsets};
use pagewise_probe::{Dist, Mode, PointSpec};
use proptest::prelude::*;
use rand::{rngs::SmallRng, SeedableRng};

fn dist() -> impl Strategy<Value = Dist> {
    prop_oneof![
        Just(Dist::Uniform),
        (0.1f64..3.0).prop_map(|theta| Dist::Zipf { theta }),
        (0.01f64..0.99).prop_map(|h| Dist::Pareto { h }),
        (0.0f64..100.0, 0.5f64..99.5)
            .prop_map(|(pct_ops, pct_space)| Dist::HotCold { pct_ops, pct_space }),
    ]
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![
        Just(Mode::RandRead),
        Just(Mode::RandWrite),
        Just(Mode::SeqRead),
        Just(Mode::SeqWrite),
        (0u8..=100).prop_map(|read_pct| Mode::Mixed { read_pct })
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn offsets_aligned_and_in_range(
        blocks in 1u64..100_000,
        bs_log in 9u32..=22,
        align_units in 1u64..=256,
        threads in 1usize..=8,
        t_pick in 0usize..8,
        dist in dist(),
        mode in mode(),
        seed in any::<u64>(),
    ) {
        let bs = 1u64 << bs_log;
        let size = blocks * 512 + bs; // always at least one block
        let align = align_units * 512;
        let p = PointSpec { mode, bs, align, dist, threads, qd: 1 };
        let t = t_pick % threads;
        let mut gen = Offsets::for_thread(&p, size, t);
        let mut rng = SmallRng::seed_from_u64(seed);
        let (lo, hi) = seq_region(size, bs, threads, t);
        for _ in 0..200 {
            let off = gen.next(&mut rng);
            prop_assert!(off + bs <= size, "offset {} + bs {} beyond size {}", off, bs, size);
            if mode.is_sequential() {
                prop_assert_eq!(off % bs, 0);
                prop_assert!(off >= lo && off + bs <= hi, "seq offset {} outside [{}, {})", off, lo, hi);
            } else {
                prop_assert_eq!(off % align, 0, "offset {} not aligned to {}", off, align);
            }
        }
    }

    #[test]
    fn seq_regions_are_disjoint_and_cover(blocks in 1u64..10_000, threads in 1usize..=16) {
        let bs = 4096;
        let size = blocks * bs;
        let regions: Vec<_> = (0..threads).map(|t| seq_region(size, bs, threads, t)).collect();
        if blocks >= threads as u64 {
            prop_assert_eq!(regions[0].0, 0);
            prop_assert_eq!(regions[threads - 1].1, size);
            for w in regions.windows(2) {
                prop_assert_eq!(w[0].1, w[1].0);
                prop_assert!(w[0].1 > w[0].0);
            }
        } else {
            prop_assert!(regions.iter().all(|&r| r == (0, size)));
        }
    }
}
