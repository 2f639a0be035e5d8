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

/// How many entries sort below `key`, or at or below it when `at`, of
/// entries whose keys ascend and whose heads are `heads` (`heads[i]` is
/// `key_head(key_at(i))`): one binary search on the heads, then one over
/// the keys whose head ties with `key`'s (the only keys read).
#[inline]
pub fn count_below<'k>(
    heads: &[u64],
    key: &[u8],
    at: bool,
    key_at: impl Fn(usize) -> &'k [u8],
) -> usize {
    let h = key_head(key);
    let lo = heads.partition_point(|&x| x < h);
    break_tie(heads, lo, h, key, at, key_at)
}

/// [`count_below`] from `lo` on: `lo` is the first entry, at or after a
/// start the caller knows to be below `key`, whose head is not below
/// `key`'s head `h` (found by the caller's own search of the heads).
#[inline]
pub fn break_tie<'k>(
    heads: &[u64],
    lo: usize,
    h: u64,
    key: &[u8],
    at: bool,
    key_at: impl Fn(usize) -> &'k [u8],
) -> usize {
    debug_assert_eq!(h, key_head(key));
    debug_assert!(heads.get(lo).is_none_or(|&x| x >= h));
    if heads.get(lo) != Some(&h) {
        return lo; // entry `lo` (if any) has a greater head: it is greater
    }
    // Mostly one entry ties (distinct keys rarely share 8 bytes): the
    // search of the run's end is skipped then.
    let tied = match heads.get(lo + 1) == Some(&h) {
        true => heads[lo..].partition_point(|&x| x == h),
        false => 1,
    };
    let (mut l, mut r) = (lo, lo + tied);
    while l < r {
        let mid = l + (r - l) / 2;
        let k = key_at(mid);
        if k < key || (at && k == key) {
            l = mid + 1;
        } else {
            r = mid;
        }
    }
    debug_assert!(l >= lo && l <= lo + tied);
    l
}

#[cfg(test)]
mod tests {
    use super::{count_below, key_head};

    /// Against `partition_point` over the keys: keys sharing heads, keys
    /// shorter than a head, prefixes and the empty key.
    #[test]
    fn count_below_is_a_partition_point() {
        let mut keys: Vec<Vec<u8>> = vec![vec![], vec![0], b"headhead".to_vec()];
        for i in 0..30u8 {
            keys.push(vec![i * 7]);
            keys.push(vec![i * 7, 0]);
            keys.push([b"headhead".as_slice(), &[i, i]].concat());
        }
        keys.sort();
        keys.dedup();
        let heads: Vec<u64> = keys.iter().map(|k| key_head(k)).collect();
        let mut probes = keys.clone();
        probes.extend((0..=255u8).map(|a| vec![a, 1]));
        probes.extend((0..35u8).map(|i| [b"headhead".as_slice(), &[i]].concat()));
        for p in &probes {
            let lt = keys.partition_point(|k| k < p);
            let le = keys.partition_point(|k| k <= p);
            assert_eq!(count_below(&heads, p, false, |i| &keys[i]), lt, "{p:?}");
            assert_eq!(count_below(&heads, p, true, |i| &keys[i]), le, "{p:?}");
        }
        assert_eq!(count_below(&[], b"x", true, |_| &b""[..]), 0);
    }

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
