//! Key heads: the first 8 bytes of a key as one integer, so a search over
//! a node's keys compares integers in one dense array and reads a key's
//! bytes only where heads tie (both tree kinds: B+tree nodes, B-epsilon
//! pivots, buffers and basements).

/// The first 8 bytes of `key` as a big-endian integer, zero-padded. If
/// `key_head(a) < key_head(b)` then `a < b`: at the first byte where the
/// padded heads differ, either both keys have real bytes (which order them)
/// or the shorter key ends there and is a prefix of the other. Equal heads
/// say nothing.
#[inline]
pub fn key_head(key: &[u8]) -> u64 {
    if let Some(b) = key.first_chunk::<8>() {
        return u64::from_be_bytes(*b); // no copy of a variable length
    }
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::key_head;

    /// Heads order keys as the keys order themselves, by hand values.
    #[test]
    fn heads_by_hand() {
        assert_eq!(key_head(b""), 0);
        assert_eq!(key_head(b"\x01"), 1 << 56);
        assert_eq!(key_head(b"abcdefgh"), 0x6162_6364_6566_6768);
        assert_eq!(key_head(b"abcdefghZZ"), 0x6162_6364_6566_6768);
        assert_eq!(key_head(b"ab"), 0x6162_0000_0000_0000);
        let keys: [&[u8]; 7] = [b"", b"\0", b"a", b"a\0", b"ab", b"abcdefgh", b"abcdefgi"];
        for w in keys.windows(2) {
            assert!(key_head(w[0]) <= key_head(w[1]), "{w:?}");
        }
    }
}
