//! An ordered parallel map for checkpoint placement: items are encoded by
//! up to `threads` threads (the caller's among them) and handed to the
//! caller's `consume` strictly in index order, so allocation and the write
//! order stay what a single thread would do (the crash simulation's
//! Nth-I/O faults replay by seed). At most `window` results wait unconsumed,
//! which bounds the memory held by encoded nodes.

use crate::error::Result;
use std::sync::{Condvar, Mutex, MutexGuard};

struct State<R> {
    /// Next item index to claim; claims go in index order.
    next: usize,
    /// Items consumed so far (all of `0..consumed`).
    consumed: usize,
    done: Vec<Option<R>>,
    /// Set on a consume error or a worker's panic: nothing more is claimed.
    abort: bool,
}

struct Shared<R> {
    st: Mutex<State<R>>,
    cv: Condvar,
    window: usize,
}

impl<R> Shared<R> {
    fn lock(&self) -> MutexGuard<'_, State<R>> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Claims the next item if it lies inside the window.
    fn claim(&self, st: &mut State<R>) -> Option<usize> {
        let n = st.done.len();
        if st.abort || st.next >= n || st.next >= st.consumed + self.window {
            return None;
        }
        st.next += 1;
        Some(st.next - 1)
    }
}

impl<R> Shared<R> {
    /// One step of either side: maps the next item inside the window (the
    /// lock released meanwhile) and stores its result, or waits for a change.
    /// Returns the lock, taken again.
    fn step<'a, T, F: Fn(&T) -> R>(
        &'a self,
        mut st: MutexGuard<'a, State<R>>,
        items: &[T],
        f: &F,
    ) -> MutexGuard<'a, State<R>> {
        let Some(j) = self.claim(&mut st) else {
            return self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        };
        drop(st);
        let r = f(&items[j]);
        let mut st = self.lock();
        debug_assert!(st.done[j].is_none(), "item {j} mapped twice");
        st.done[j] = Some(r);
        self.cv.notify_all();
        st
    }
}

/// Sets `abort` if a thread unwinds, so neither the consumer (waiting for
/// the item a worker held) nor a worker (waiting for the window to move)
/// waits forever; the scope then re-raises the panic.
struct AbortOnPanic<'a, R>(&'a Shared<R>);

impl<R> Drop for AbortOnPanic<'_, R> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.lock().abort = true;
            self.0.cv.notify_all();
        }
    }
}

/// Maps every item with `f` on up to `threads` threads and calls `consume`
/// with each result in index order. Requires: `threads >= 1`, `window >= 1`.
/// Effect: `consume` saw items `0..k` in order, where `k = items.len()`
/// unless a `consume` returned an error (then that error, and nothing after
/// it was consumed). A panic in `f` is re-raised here.
pub fn map_ordered<T, R, F, C>(
    items: &[T],
    threads: usize,
    window: usize,
    f: F,
    mut consume: C,
) -> Result<()>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> R + Sync,
    C: FnMut(usize, R) -> Result<()>,
{
    assert!(threads >= 1 && window >= 1);
    let n = items.len();
    if threads == 1 || n <= 1 {
        for (i, it) in items.iter().enumerate() {
            consume(i, f(it))?;
        }
        return Ok(());
    }
    let sh = Shared {
        st: Mutex::new(State {
            next: 0,
            consumed: 0,
            done: (0..n).map(|_| None).collect(),
            abort: false,
        }),
        cv: Condvar::new(),
        window: window.max(threads),
    };
    let result = std::thread::scope(|s| {
        for _ in 1..threads.min(n) {
            s.spawn(|| work(&sh, items, &f));
        }
        // The caller's thread can panic in `f` too: the workers must not
        // wait for a window that will never move.
        let _guard = AbortOnPanic(&sh);
        let r = consume_in_order(&sh, items, &f, &mut consume);
        sh.lock().abort |= r.is_err();
        sh.cv.notify_all();
        r
    });
    debug_assert!(result.is_err() || sh.lock().consumed == n);
    result
}

/// A worker: claims items in order and encodes them until none is left.
fn work<T, R, F: Fn(&T) -> R>(sh: &Shared<R>, items: &[T], f: &F) {
    let _guard = AbortOnPanic(sh);
    let mut st = sh.lock();
    // Each pass claims an item or waits for the window to move; a bounded
    // loop: at most one claim per item and a wake per result or consumed item.
    for _ in 0..4 * items.len() + 8 {
        if st.abort || st.next >= items.len() {
            return;
        }
        st = sh.step(st, items, f);
    }
    // Spurious wakeups can use up the passes: the consumer claims the rest.
}

/// The caller's side: takes item `i`'s result when ready (encoding
/// unclaimed items itself while it waits) and consumes it.
fn consume_in_order<T, R, F, C>(sh: &Shared<R>, items: &[T], f: &F, consume: &mut C) -> Result<()>
where
    F: Fn(&T) -> R,
    C: FnMut(usize, R) -> Result<()>,
{
    for i in 0..items.len() {
        let r = {
            let mut st = sh.lock();
            loop {
                if let Some(r) = st.done[i].take() {
                    break r;
                }
                if st.abort {
                    // A worker panicked holding an item: the scope re-raises it.
                    return Ok(());
                }
                st = sh.step(st, items, f);
            }
        };
        consume(i, r)?;
        sh.lock().consumed = i + 1;
        sh.cv.notify_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn consumes_every_result_in_order_on_any_thread_count() {
        let items: Vec<u64> = (0..200).collect();
        for threads in 1..=4 {
            for window in [1, 3, 64] {
                let mut seen = Vec::new();
                map_ordered(
                    &items,
                    threads,
                    window,
                    |x| x * x,
                    |i, r| {
                        seen.push((i, r));
                        Ok(())
                    },
                )
                .unwrap();
                let want: Vec<(usize, u64)> = (0..200).map(|i| (i, (i * i) as u64)).collect();
                assert_eq!(seen, want, "threads {threads} window {window}");
            }
        }
    }

    #[test]
    fn an_error_stops_consumption_at_its_item() {
        let items: Vec<u32> = (0..50).collect();
        let mut seen = 0;
        let r = map_ordered(
            &items,
            3,
            4,
            |x| *x,
            |i, _| {
                if i == 17 {
                    return Err(Error::Options("stop".into()));
                }
                seen += 1;
                Ok(())
            },
        );
        assert!(r.is_err());
        assert_eq!(seen, 17);
    }

    #[test]
    #[should_panic(expected = "boom")]
    fn a_panicking_map_is_raised_not_hung() {
        let items: Vec<u32> = (0..20).collect();
        let _ = map_ordered(
            &items,
            2,
            2,
            |x| {
                assert!(*x != 9, "boom");
                *x
            },
            |_, _| Ok(()),
        );
    }
}
