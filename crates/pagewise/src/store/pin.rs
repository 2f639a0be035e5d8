//! Snapshot pins (docs/design.md, "Snapshots"): every snapshot holds the
//! [`Pin`] of the epoch it was taken in. When a checkpoint ends an epoch,
//! its pin retires to [`Pins`]; the frees of an epoch become reusable only
//! once no live pin is as old as that epoch (LMDB's reader-table rule), and
//! a snapshot older than `Options::snapshot_max_age` stops counting: its
//! reads fail from then on (`Error::SnapshotTooOld`).

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Nanoseconds since the first call in this process (a monotonic clock).
pub fn now_ns() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    let base = *BASE.get_or_init(Instant::now);
    base.elapsed().as_nanos() as u64
}

/// The hold of the snapshots taken in one epoch.
#[derive(Debug)]
pub struct Pin {
    /// The epoch (1 + checkpoints completed in this process before it began).
    pub epoch: u64,
    /// When the epoch's first and latest snapshots were taken (`now_ns`;
    /// 0: none yet).
    first_taken_ns: AtomicU64,
    latest_taken_ns: AtomicU64,
}

impl Pin {
    pub fn new(epoch: u64) -> Pin {
        Pin {
            epoch,
            first_taken_ns: AtomicU64::new(0),
            latest_taken_ns: AtomicU64::new(0),
        }
    }

    /// Records a snapshot taken at `now` (a `now_ns` reading).
    pub fn taken(&self, now: u64) {
        assert!(now > 0);
        if self.first_taken_ns.load(Ordering::Relaxed) == 0 {
            let _ =
                self.first_taken_ns
                    .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
        }
        self.latest_taken_ns.fetch_max(now, Ordering::Relaxed);
    }

    /// Every snapshot of this pin is older than `max` at `now`. A snapshot
    /// judges itself by its own age, which is at least the pin's latest,
    /// so a snapshot never reads after its pin stopped holding pages.
    fn expired(&self, now: u64, max: Option<Duration>) -> bool {
        let latest = self.latest_taken_ns.load(Ordering::Relaxed);
        max.is_some_and(|m| latest > 0 && now.saturating_sub(latest) > m.as_nanos() as u64)
    }
}

/// What `Db::stats` reports of the live snapshots.
#[derive(Debug, Default, Clone, Copy)]
pub struct PinStats {
    pub live: u64,
    /// Age of the oldest epoch that has a live snapshot, from that epoch's
    /// first snapshot (an upper bound on the oldest snapshot's age).
    pub oldest_age: Duration,
}

/// Retired pins that snapshots still hold.
#[derive(Default)]
pub struct Pins {
    retired: Mutex<Vec<Arc<Pin>>>,
}

impl Pins {
    /// Retires `pin` (its epoch ended) and returns the epochs of the pins
    /// still live and not expired under `max_age`, oldest first. Drops the
    /// retired pins no snapshot holds.
    pub fn retire(&self, pin: Arc<Pin>, max_age: Option<Duration>) -> Vec<u64> {
        let now = now_ns();
        let mut r = self.retired.lock();
        r.push(pin);
        // Only `retired` holds a pin nobody else does; no new holder can
        // appear for a retired pin (snapshots clone the current one).
        r.retain(|p| Arc::strong_count(p) > 1);
        let live: Vec<u64> = r
            .iter()
            .filter(|p| !p.expired(now, max_age))
            .map(|p| p.epoch)
            .collect();
        assert!(r.windows(2).all(|w| w[0].epoch < w[1].epoch));
        live
    }

    /// Live snapshots and the oldest one's age, with `current` the pin of
    /// the epoch under way (held once by the state itself) and `shared`
    /// the holders of the state's shared frozen view, if there is one (it
    /// holds `current` once for all of them).
    pub fn stats(&self, current: &Arc<Pin>, shared: Option<usize>) -> PinStats {
        let now = now_ns();
        let r = self.retired.lock();
        let live_in = |p: &Arc<Pin>, own: usize| (Arc::strong_count(p) - own) as u64;
        let in_current = match shared {
            Some(holders) => live_in(current, 2) + holders as u64,
            None => live_in(current, 1),
        };
        let live = r.iter().map(|p| live_in(p, 1)).sum::<u64>() + in_current;
        let first = r
            .iter()
            .chain(std::iter::once(current))
            .filter(|p| live_in(p, 1) > 0)
            .map(|p| p.first_taken_ns.load(Ordering::Relaxed))
            .find(|&t| t > 0);
        PinStats {
            live,
            oldest_age: first.map_or(Duration::ZERO, |t| {
                Duration::from_nanos(now.saturating_sub(t))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_pins_hold_and_an_expired_one_does_not() {
        let pins = Pins::default();
        let p1 = Arc::new(Pin::new(1));
        let snap = p1.clone();
        snap.taken(now_ns().max(1));
        assert_eq!(pins.retire(p1, None), vec![1]);
        let p2 = Arc::new(Pin::new(2));
        assert_eq!(pins.retire(p2, None), vec![1], "epoch 2 has no snapshot");
        assert_eq!(pins.stats(&Arc::new(Pin::new(3)), None).live, 1);
        std::thread::sleep(Duration::from_millis(2));
        let p3 = Arc::new(Pin::new(3));
        let expired = pins.retire(p3, Some(Duration::from_millis(1)));
        assert!(expired.is_empty(), "expired");
        drop(snap);
        assert!(pins.retire(Arc::new(Pin::new(4)), None).is_empty());
        assert_eq!(pins.stats(&Arc::new(Pin::new(5)), None).live, 0);
    }
}
