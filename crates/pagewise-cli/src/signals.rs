//! Ctrl-C (SIGINT) and SIGTERM stop long commands cleanly: the probe stops
//! at its next I/O completion and removes its test file; a benchmark stops
//! claiming work and unmounts, detaches and deletes its loop device and image.
//! A second signal kills as usual (SA_RESETHAND).

/// Set by the first SIGINT/SIGTERM: the stop flag `pagewise tune` passes
/// to [`pagewise_tune::tune`].
pub(crate) static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    // Each is one atomic store, which is async-signal-safe.
    STOP.store(true, std::sync::atomic::Ordering::Relaxed);
    pagewise_probe::interrupt();
    pagewise_bench::interrupt();
}

pub(crate) fn install_stop() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to atomics.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_stop as *const () as usize;
            sa.sa_flags = libc::SA_RESETHAND;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}
