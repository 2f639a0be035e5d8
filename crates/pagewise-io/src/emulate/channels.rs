//! The time model of an emulated drive: P channels, each servicing one I/O
//! at a time, first come first served; and a precise wait for the moment an
//! emulated I/O completes.
//!
//! Reservation model: an I/O arriving at time a takes the channel that frees
//! first (at f), starts at max(a, f) and completes S + B/W later; the channel
//! is busy until then. A flush (fsync) waits for every channel to drain, then
//! holds them all for the fsync time. Synchronous and queued I/O of every
//! file of one drive share one model, so P bounds the whole drive.

use super::{DriveProfile, ProfileError};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Below this much time left, [`sleep_until`] spins instead of sleeping: the
/// wake-up latency of a sleeping thread once its timer slack is 1 ns. Short,
/// because a spinning thread preempted on a busy machine loses a whole
/// scheduler slice (milliseconds), while a waking sleeper is run promptly.
pub const SPIN_US: u64 = 20;

thread_local! {
    static PRECISE_TIMERS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Sets the calling thread's timer slack to 1 ns (Linux's default is 50 us,
/// by which every sleep may overshoot), once per thread. Only this thread's
/// sleeps and timeouts become more punctual; nothing else changes.
fn precise_timers() {
    PRECISE_TIMERS.with(|set| {
        if !set.get() {
            // SAFETY: PR_SET_TIMERSLACK takes one integer argument and only
            // affects the calling thread; failure leaves the default slack.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
            set.set(true);
        }
    });
}

/// Channel reservations in nanoseconds since an origin (pure, testable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelModel {
    /// When each channel is next free.
    free_at_ns: Vec<u64>,
}

impl ChannelModel {
    pub fn new(channels: u32) -> Self {
        assert!(channels >= 1, "a drive has at least one channel");
        Self {
            free_at_ns: vec![0; channels as usize],
        }
    }

    /// Reserves the first free channel for an I/O arriving at `arrival_ns`
    /// that needs `service_ns`. Returns (start, completion) in ns.
    pub fn reserve(&mut self, arrival_ns: u64, service_ns: u64) -> (u64, u64) {
        let (i, free) = self
            .free_at_ns
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(i, f)| (f, i))
            .expect("at least one channel");
        let start = arrival_ns.max(free);
        let done = start + service_ns;
        self.free_at_ns[i] = done;
        debug_assert!(done >= arrival_ns);
        (start, done)
    }

    /// A flush arriving at `arrival_ns`: starts once every channel is free,
    /// holds all of them for `service_ns`. Returns (start, completion).
    pub fn flush(&mut self, arrival_ns: u64, service_ns: u64) -> (u64, u64) {
        let busy_until = self.free_at_ns.iter().copied().max().unwrap_or(0);
        let start = arrival_ns.max(busy_until);
        let done = start + service_ns;
        self.free_at_ns.fill(done);
        (start, done)
    }
}

/// What an emulated drive did, summed over its files.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EmulationStats {
    /// Reads and writes serviced (synchronous and queued).
    pub ops: u64,
    pub syncs: u64,
    /// I/Os and syncs whose real part finished after their emulated
    /// completion time: the device under the emulation was the slower one
    /// for them (or the thread waited for a CPU).
    pub overruns: u64,
    /// Time I/Os waited for a free channel, summed, ns.
    pub queued_ns: u64,
}

/// The shared clock of one emulated drive.
#[derive(Debug)]
pub struct DriveClock {
    profile: DriveProfile,
    origin: Instant,
    model: Mutex<ChannelModel>,
    ops: AtomicU64,
    syncs: AtomicU64,
    overruns: AtomicU64,
    queued_ns: AtomicU64,
}

impl DriveClock {
    /// A drive idle since now. Fails on a profile that is not a drive.
    pub fn new(profile: DriveProfile) -> Result<Self, ProfileError> {
        profile.validate()?;
        Ok(Self {
            model: Mutex::new(ChannelModel::new(profile.channels)),
            profile,
            origin: Instant::now(),
            ops: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            overruns: AtomicU64::new(0),
            queued_ns: AtomicU64::new(0),
        })
    }

    pub fn profile(&self) -> &DriveProfile {
        &self.profile
    }

    fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.origin).as_nanos() as u64
    }

    /// Reserves a channel for an I/O of `bytes` arriving now; returns the
    /// instant it completes.
    pub fn reserve_io(&self, bytes: u64) -> Instant {
        let service = self.profile.service_time(bytes).as_nanos() as u64;
        let now = self.ns(Instant::now());
        let (start, done) = self.model.lock().reserve(now, service);
        self.ops.fetch_add(1, Relaxed);
        self.queued_ns.fetch_add(start - now, Relaxed);
        self.origin + Duration::from_nanos(done)
    }

    /// Reserves the whole drive for a flush arriving now.
    pub fn reserve_flush(&self) -> Instant {
        let service = (self.profile.fsync_us * 1e3) as u64;
        let now = self.ns(Instant::now());
        let (_, done) = self.model.lock().flush(now, service);
        self.syncs.fetch_add(1, Relaxed);
        self.origin + Duration::from_nanos(done)
    }

    /// Waits until `done`, counting an overrun when the real I/O took longer.
    pub fn finish(&self, done: Instant) {
        if Instant::now() > done {
            self.overruns.fetch_add(1, Relaxed);
        }
        sleep_until(done);
    }

    /// Records whether the real part of a queued I/O ended after `done`.
    pub(crate) fn note_real_end(&self, done: Instant) {
        if Instant::now() > done {
            self.overruns.fetch_add(1, Relaxed);
        }
    }

    pub fn stats(&self) -> EmulationStats {
        EmulationStats {
            ops: self.ops.load(Relaxed),
            syncs: self.syncs.load(Relaxed),
            overruns: self.overruns.load(Relaxed),
            queued_ns: self.queued_ns.load(Relaxed),
        }
    }
}

/// Returns at `deadline` or just after: sleeps (with a 1 ns timer slack) for
/// all but the last [`SPIN_US`], then spins. Measured overshoot: see
/// docs/benchmarks.md ("Emulated drive profiles"); `examples/emul_accuracy.rs`
/// repeats the measurement.
pub fn sleep_until(deadline: Instant) {
    precise_timers();
    let spin = Duration::from_micros(SPIN_US);
    // Bounded: each pass either sleeps most of the remaining time or spins
    // until the deadline, and the deadline does not move.
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > spin {
            std::thread::sleep(left - spin);
        } else {
            while Instant::now() < deadline {
                std::hint::spin_loop();
            }
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_channel_serialises_in_arrival_order() {
        let mut m = ChannelModel::new(1);
        // Three I/Os of 100 ns arriving together: 0-100, 100-200, 200-300.
        assert_eq!(m.reserve(0, 100), (0, 100));
        assert_eq!(m.reserve(0, 100), (100, 200));
        assert_eq!(m.reserve(10, 100), (200, 300));
        // One arriving after the drive went idle starts at once.
        assert_eq!(m.reserve(1000, 50), (1000, 1050));
    }

    #[test]
    fn p_channels_overlap_p_ios_then_queue() {
        let mut m = ChannelModel::new(3);
        let done: Vec<(u64, u64)> = (0..7).map(|_| m.reserve(0, 1000)).collect();
        // Three at once, the next three after them, the seventh third.
        assert_eq!(
            done,
            vec![
                (0, 1000),
                (0, 1000),
                (0, 1000),
                (1000, 2000),
                (1000, 2000),
                (1000, 2000),
                (2000, 3000)
            ]
        );
        // Throughput: 7 I/Os of 1 us on 3 channels finish at 3 us, where one
        // channel would need 7 us.
    }

    #[test]
    fn earliest_free_channel_is_taken() {
        let mut m = ChannelModel::new(2);
        assert_eq!(m.reserve(0, 500), (0, 500));
        assert_eq!(m.reserve(0, 100), (0, 100));
        // Channel 2 frees at 100, channel 1 at 500.
        assert_eq!(m.reserve(50, 100), (100, 200));
        assert_eq!(m.reserve(50, 100), (200, 300));
        assert_eq!(m.reserve(50, 100), (300, 400));
        assert_eq!(m.reserve(50, 100), (400, 500));
        assert_eq!(m.reserve(50, 100), (500, 600));
    }

    #[test]
    fn flush_drains_every_channel_first() {
        let mut m = ChannelModel::new(2);
        m.reserve(0, 300);
        m.reserve(0, 700);
        assert_eq!(m.flush(100, 50), (700, 750));
        // Both channels are busy until the flush is done.
        assert_eq!(m.reserve(0, 10), (750, 760));
        assert_eq!(m.reserve(0, 10), (750, 760));
    }

    #[test]
    fn clock_waits_s_plus_b_over_w() {
        // 2 ms + 100 kB / 100 MB/s = 3 ms per I/O, one channel: two I/Os
        // issued back to back take 6 ms.
        let clock = DriveClock::new(DriveProfile::new(2000.0, 100e6, 1)).unwrap();
        let t0 = Instant::now();
        let a = clock.reserve_io(100_000);
        let b = clock.reserve_io(100_000);
        let gap = b - a;
        assert!(
            gap >= Duration::from_millis(3) && gap < Duration::from_millis(4),
            "{gap:?}"
        );
        clock.finish(b);
        let took = t0.elapsed();
        assert!(took >= Duration::from_millis(6), "{took:?}");
        let s = clock.stats();
        assert_eq!((s.ops, s.overruns), (2, 0));
        // The second waited one service time for the channel.
        assert!(s.queued_ns.abs_diff(3_000_000) < 1_000_000, "{s:?}");
    }

    #[test]
    fn sleep_until_never_returns_early() {
        for us in [0u64, 5, 30, 120, 700] {
            let d = Instant::now() + Duration::from_micros(us);
            sleep_until(d);
            assert!(Instant::now() >= d, "{us} us");
        }
    }
}
