//! What the engine is doing, told as it happens: the moments that write or
//! reshape the file (checkpoints, leaf write-backs, B-epsilon buffer
//! flushes), for monitoring and for tests that must aim a crash at one of
//! them (`pagewise stress`). Modeled on RocksDB's `EventListener`.
//!
//! A leaf of the crate: it imports nothing of the engine, so every layer may
//! report through it.

/// One moment of the engine's work. Every `...Begin` is followed by its
/// `...End` on the same thread unless an error or a crash ends the work
/// first (a failed checkpoint reports no end; the `Db` is then poisoned).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A checkpoint starts writing (docs/design.md, "Checkpoints").
    /// `consolidations`: B+tree nodes with delta flushes that this
    /// checkpoint writes whole again instead of as a delta block on their
    /// base (their bases are freed once it is durable).
    CheckpointBegin {
        generation: u64,
        dirty_bytes: u64,
        consolidations: u64,
    },
    /// The checkpoint's superblock is durable.
    CheckpointEnd {
        generation: u64,
        elapsed_us: u64,
    },
    /// The dirty set reached its budget: B-epsilon leaves are being written
    /// to fresh extents before the next checkpoint ("Leaf write-back").
    WriteBackBegin {
        dirty_bytes: u64,
    },
    /// The write-back is written; `leaves` left the dirty set.
    WriteBackEnd {
        leaves: u64,
        elapsed_us: u64,
    },
    /// A B-epsilon node's buffer for one child moves down into that child
    /// (in memory; nested flushes report their own begin and end). `height`:
    /// the height of the node whose buffer moves. `paired`: it moves at the
    /// same time as another buffer of the same node (docs/design.md,
    /// "B-epsilon nodes", paired flushes): both begins, then both ends, come
    /// from the calling thread, and the flushes nested under the second
    /// child from a second thread.
    FlushBegin {
        height: u32,
        paired: bool,
    },
    FlushEnd {
        height: u32,
        elapsed_us: u64,
    },
}

/// Receives [`Event`]s (`Options::event_listener`).
///
/// Contract: called synchronously on the thread doing the work, while the
/// engine holds its commit lock (checkpoints, write-backs) or the trees'
/// write lock (flushes). It must return quickly, must not panic, and must
/// not call into the `Db` (that would deadlock). Events of one `Db` arrive
/// in the order they happen; during a paired flush two threads report at
/// once (`Event::FlushBegin`), so calls may overlap.
pub trait EventListener: Send + Sync + 'static {
    fn on_event(&self, event: &Event);
}

impl std::fmt::Debug for dyn EventListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EventListener")
    }
}

/// Microseconds since `t0`, saturated: the `elapsed_us` of an end event.
pub(crate) fn elapsed_us(t0: std::time::Instant) -> u64 {
    u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// Sends `event` to `listener`, if there is one.
pub(crate) fn tell(listener: Option<&dyn EventListener>, event: Event) {
    if let Some(l) = listener {
        l.on_event(&event);
    }
}
