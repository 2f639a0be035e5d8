//! Stopping a run cleanly: a signal handler calls [`interrupt`]; workers stop
//! claiming work, the phase ends without a result, and the run unwinds so its
//! loop device is unmounted and detached, its image deleted and the memory
//! cgroup removed (all done by `Drop`), instead of being left behind.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

/// Asks the running benchmark to stop. Async-signal-safe (one atomic store).
pub fn interrupt() {
    STOP.store(true, Ordering::Relaxed);
}

/// Whether [`interrupt`] was called.
pub fn interrupted() -> bool {
    STOP.load(Ordering::Relaxed)
}
