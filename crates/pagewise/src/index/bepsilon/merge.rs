//! A basement's entries merged with its ancestors' buffered changes, in key
//! order: what a range scan returns from one basement. Every input is
//! already sorted (a basement's entries, each buffer's messages), so the
//! merge compares the heads of a few streams per key and neither sorts nor
//! looks anything up; a value that no change touches stays borrowed.

use super::buffer::{self, Buffer, Changes};
use super::packed::Packed;
use super::pending::{Change, Pending};
use crate::error::Result;
use crate::index::head::key_head;
use std::borrow::Cow;
use std::ops::Range;

/// A key's messages resolved against its stored value before them.
pub type Resolver<'r> = dyn FnMut(&[u8], Option<Vec<u8>>, &Pending) -> Result<Option<Vec<u8>>> + 'r;

pub struct Merge<'a> {
    base: &'a Packed,
    /// The basement's entries not merged yet (indices of `base`).
    entries: Range<usize>,
    /// Buffers' changes, the oldest (deepest) buffer first.
    streams: Vec<Stream<'a>>,
}

/// One buffer's changes with the next one taken out (`head`), and where
/// the changes stood before it was.
struct Stream<'a> {
    changes: Changes<'a>,
    before: buffer::Place,
    head: Option<(&'a [u8], Change<'a>)>,
}

impl<'a> Stream<'a> {
    fn new(mut changes: Changes<'a>) -> Self {
        let before = changes.place();
        let head = changes.next();
        Stream {
            changes,
            before,
            head,
        }
    }

    fn advance(&mut self) -> Option<(&'a [u8], Change<'a>)> {
        self.before = self.changes.place();
        std::mem::replace(&mut self.head, self.changes.next())
    }
}

/// Where a merge stands between two calls of [`Merge::next`]: what
/// [`Merge::resume`] goes on from, given the same basement and buffers.
#[derive(Clone, Debug)]
pub struct Place {
    entries: Range<usize>,
    streams: Vec<buffer::Place>,
}

impl<'a> Merge<'a> {
    /// The entries of `base` at `entries` merged with `streams` (oldest
    /// first); `skip`: a key none of them may return (an excluded lower
    /// bound the basement's entries already exclude).
    pub fn new(
        base: &'a Packed,
        entries: Range<usize>,
        streams: impl Iterator<Item = Changes<'a>>,
        skip: Option<&[u8]>,
    ) -> Self {
        assert!(entries.end <= base.len());
        let mut streams: Vec<Stream> = streams.map(Stream::new).collect();
        if let Some(l) = skip {
            for s in streams.iter_mut() {
                if s.head.as_ref().is_some_and(|h| h.0 == l) {
                    s.advance();
                }
            }
        }
        Self {
            base,
            entries,
            streams,
        }
    }

    /// The merge at `at` (taken by [`Self::place`] from a merge of the
    /// same `base` and `bufs`, oldest first, none changed since): the
    /// next call of [`Self::next`] returns what the other's would have.
    pub fn resume(
        base: &'a Packed,
        bufs: impl ExactSizeIterator<Item = &'a Buffer>,
        at: &Place,
    ) -> Self {
        assert_eq!(bufs.len(), at.streams.len());
        assert!(at.entries.end <= base.len());
        let streams = bufs
            .zip(&at.streams)
            .map(|(b, p)| Stream::new(b.changes_at(p)))
            .collect();
        Self {
            base,
            entries: at.entries.clone(),
            streams,
        }
    }

    pub fn place(&self) -> Place {
        Place {
            entries: self.entries.clone(),
            streams: self.streams.iter().map(|s| s.before.clone()).collect(),
        }
    }

    /// Takes the basement's next entries that no buffered change reaches
    /// (every key below every stream's head), at most `most`: their
    /// indices in the basement. The merge goes on after them, and
    /// [`Self::place`] names where. Contract: each entry is what
    /// [`Self::next`] would return for it, keys ascending.
    pub fn base_run(&mut self, most: usize) -> Range<usize> {
        let start = self.entries.start;
        let end = self.entries.end.min(start.saturating_add(most));
        if start >= end {
            return start..start;
        }
        let first_change = self
            .streams
            .iter()
            .filter_map(|s| s.head.as_ref().map(|h| h.0))
            .min();
        let end = match first_change {
            Some(k) => self.base.count_in(start..end, k, false),
            None => end,
        };
        self.entries.start = end;
        start..end
    }

    /// The next key and its stored value after every change above it (None:
    /// removed); None at the end. Contract: keys strictly ascend; the value
    /// is the basement's, then each buffer's change applied oldest first.
    #[allow(clippy::type_complexity)]
    pub fn next(
        &mut self,
        resolve: &mut Resolver<'_>,
    ) -> Option<Result<(&'a [u8], Option<Cow<'a, [u8]>>)>> {
        let base = self.base;
        let entry = (!self.entries.is_empty()).then(|| base.at(self.entries.start));
        // Keys compare by their heads first (`key_head`: a memcmp only
        // where two streams' keys share their first 8 bytes).
        let mut min = entry.map(|e| (key_head(e.0), e.0));
        for s in self.streams.iter() {
            if let Some(k) = s.head.as_ref().map(|e| e.0) {
                let h = key_head(k);
                min = match min {
                    Some((mh, mk)) if mh < h || (mh == h && mk <= k) => Some((mh, mk)),
                    _ => Some((h, k)),
                };
            }
        }
        let (kh, k) = min?;
        // The stream `k` came from holds it at the same address: no compare.
        let at_k = |h: &[u8]| std::ptr::eq(h, k) || (key_head(h) == kh && h == k);
        let mut val = match entry {
            Some(e) if at_k(e.0) => {
                self.entries.start += 1;
                Some(Cow::Borrowed(e.1))
            }
            _ => None,
        };
        for s in self.streams.iter_mut() {
            if !s.head.as_ref().is_some_and(|e| at_k(e.0)) {
                continue;
            }
            let Some((_, change)) = s.advance() else {
                unreachable!("a head")
            };
            val = match change {
                Change::Put(x) => Some(Cow::Borrowed(x)),
                Change::Delete => None,
                Change::Merge(p) => match resolve(k, val.map(Cow::into_owned), &p) {
                    Ok(v) => v.map(Cow::Owned),
                    Err(e) => return Some(Err(e)),
                },
            };
        }
        Some(Ok((k, val)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::bepsilon::buffer::{Buffer, Kind, Message};
    use crate::index::bepsilon::packed::Packed;
    use std::collections::BTreeMap;
    use std::ops::Bound;

    /// Keys that share their 8-byte heads (prefixes, keys shorter than a
    /// head, zero bytes) merged from a basement and two buffers against a
    /// map that applies the basement, then the older buffer, then the newer;
    /// buffers with a message for most keys and for every 9th.
    #[test]
    fn keys_sharing_heads_merge_in_key_order() {
        for every in [1, 9] {
            merge_against_model(every);
        }
    }

    /// How a test takes the merge's entries.
    #[derive(Debug, Clone, Copy)]
    enum Take {
        /// `next` alone.
        Straight,
        /// `next`, resumed from its place after every key (a cursor's steps).
        Resumed,
        /// `base_run` of at most this many entries before every `next`.
        Runs(usize),
    }

    fn merge_against_model(every: usize) {
        let mut keys: Vec<Vec<u8>> = vec![b"".to_vec(), b"a".to_vec(), b"a\0".to_vec()];
        for i in 0..40u8 {
            keys.push([b"prefix00".as_slice(), &[i % 7, i]].concat());
            keys.push(vec![b'p', i % 3]);
        }
        keys.sort();
        keys.dedup();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut base = Packed::with_capacity(4096, keys.len());
        for (i, k) in keys.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
            base.push(k, &[i as u8]);
            model.insert(k.clone(), vec![i as u8]);
        }
        let mut bufs = [Buffer::new(), Buffer::new()];
        let mut seq = 0;
        for (b, buf) in bufs.iter_mut().enumerate() {
            let touched = |i: usize| i % (3 + b) != 1 && i.is_multiple_of(every);
            for (i, k) in keys.iter().enumerate().filter(|(i, _)| touched(*i)) {
                seq += 1;
                let (kind, val) = match (i + b) % 4 {
                    0 => (Kind::Delete, vec![]),
                    _ => (Kind::Put, vec![100 + b as u8, i as u8]),
                };
                buf.add(Message {
                    kind,
                    seq,
                    key: k,
                    val: &val,
                });
                match kind {
                    Kind::Delete => model.remove(k),
                    _ => model.insert(k.clone(), val),
                };
            }
        }
        let want: Vec<_> = model.into_iter().collect();
        let all = base.indices(Bound::Unbounded, Bound::Unbounded);
        let mut no_merge = |_: &[u8], _: Option<Vec<u8>>, _: &Pending| -> Result<Option<Vec<u8>>> {
            unreachable!("no upserts")
        };
        for take in [
            Take::Straight,
            Take::Resumed,
            Take::Runs(1),
            Take::Runs(5),
            Take::Runs(usize::MAX),
        ] {
            let streams = bufs.iter().map(Buffer::changes);
            let mut merge = Merge::new(&base, all.clone(), streams, None);
            let mut got = Vec::new();
            for _ in 0..10 * keys.len() {
                match take {
                    Take::Straight => {}
                    Take::Resumed => merge = Merge::resume(&base, bufs.iter(), &merge.place()),
                    Take::Runs(most) => {
                        let run = merge.base_run(most);
                        assert!(run.len() <= most);
                        got.extend(
                            run.map(|i| base.at(i))
                                .map(|(k, v)| (k.to_vec(), v.to_vec())),
                        );
                    }
                }
                let Some(next) = merge.next(&mut no_merge) else {
                    break;
                };
                let (k, v) = next.unwrap();
                if let Some(v) = v {
                    got.push((k.to_vec(), v.into_owned()));
                }
            }
            assert_eq!(got, want, "{take:?}, a message every {every} keys");
        }
    }
}
