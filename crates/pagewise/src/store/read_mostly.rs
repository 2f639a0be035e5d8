//! A reader-writer lock for what every read takes and few writes change
//! (the state lock, the cache's shards): sharded by reader thread, so
//! readers on different cores write different cache lines (a plain
//! reader-writer lock makes every reader write its one lock word). A writer
//! locks every shard. A panic while it is held does not poison it: the Db's
//! own poison flag says whether its state can be trusted.

use crossbeam_utils::sync::{ShardedLock, ShardedLockReadGuard, ShardedLockWriteGuard};
use std::sync::PoisonError;

pub struct ReadMostly<T>(ShardedLock<T>);

impl<T> ReadMostly<T> {
    pub fn new(value: T) -> Self {
        ReadMostly(ShardedLock::new(value))
    }

    #[inline]
    pub fn read(&self) -> ShardedLockReadGuard<'_, T> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    #[inline]
    pub fn write(&self) -> ShardedLockWriteGuard<'_, T> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: Default> Default for ReadMostly<T> {
    fn default() -> Self {
        ReadMostly::new(T::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Readers on many threads see a writer's whole change or none of it,
    /// and a panic under the write lock leaves the lock usable.
    #[test]
    fn readers_see_whole_writes_and_a_panic_does_not_poison() {
        let l = ReadMostly::new((0u64, 0u64));
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..20_000 {
                        let g = l.read();
                        assert_eq!(g.0, g.1, "a half-done write was seen");
                    }
                });
            }
            for i in 1..=2_000u64 {
                let mut g = l.write();
                g.0 = i;
                std::hint::spin_loop();
                g.1 = i;
            }
        });
        assert_eq!(*l.read(), (2_000, 2_000));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _g = l.write();
            panic!("a writer fails");
        }));
        assert!(r.is_err());
        l.write().0 = 7;
        assert_eq!(l.read().0, 7);
    }
}
