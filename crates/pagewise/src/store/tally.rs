//! A counter that readers on many cores add to without sharing a cache line:
//! one padded stripe per thread slot, summed when read. Every get counts its
//! cache hits; with one atomic counter, two reader threads would write the
//! same line on every get.

use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Stripes per counter: more than the cores a reader pool usually has, few
/// enough that summing them is cheap (`Db::stats`).
const STRIPES: usize = 16;

/// The next thread's stripe (threads take stripes round robin).
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static STRIPE: usize = NEXT_STRIPE.fetch_add(1, Relaxed) % STRIPES;
}

pub struct Tally([CachePadded<AtomicU64>; STRIPES]);

impl Default for Tally {
    fn default() -> Self {
        Tally(std::array::from_fn(|_| CachePadded::new(AtomicU64::new(0))))
    }
}

impl Tally {
    /// Adds `n` to this thread's stripe.
    #[inline]
    pub fn add(&self, n: u64) {
        if n != 0 {
            let i = STRIPE.with(|s| *s);
            self.0[i].fetch_add(n, Relaxed);
        }
    }

    /// The sum of every stripe (adds racing with it may or may not count).
    pub fn load(&self) -> u64 {
        self.0.iter().map(|s| s.load(Relaxed)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adds from several threads all count, whatever stripes they land on.
    #[test]
    fn adds_from_many_threads_sum() {
        let t = Tally::default();
        std::thread::scope(|s| {
            for k in 1..=20u64 {
                let t = &t;
                s.spawn(move || (0..1000).for_each(|_| t.add(k)));
            }
        });
        assert_eq!(t.load(), 1000 * (1..=20u64).sum::<u64>());
        t.add(0);
        assert_eq!(t.load(), 210_000);
    }
}
