//! A basement's entries merged with its ancestors' buffered changes, in key
//! order: what a range scan returns from one basement. Every input is
//! already sorted (a basement's entries, each buffer's messages), so the
//! merge compares the heads of a few streams per key and neither sorts nor
//! looks anything up; a value that no change touches stays borrowed.

use super::buffer::Changes;
use super::pending::{Change, Pending};
use crate::error::Result;
use std::borrow::Cow;
use std::iter::Peekable;

/// A key's messages resolved against its stored value before them.
pub type Resolver<'r> = dyn FnMut(&[u8], Option<Vec<u8>>, &Pending) -> Result<Option<Vec<u8>>> + 'r;

pub struct Merge<'a, I: Iterator<Item = (&'a [u8], &'a [u8])>> {
    entries: Peekable<I>,
    /// Buffers' changes, the oldest (deepest) buffer first.
    streams: Vec<Peekable<Changes<'a>>>,
}

impl<'a, I: Iterator<Item = (&'a [u8], &'a [u8])>> Merge<'a, I> {
    /// `streams` oldest first; `skip`: a key none of them may return (an
    /// excluded lower bound the basement's entries already exclude).
    pub fn new(entries: I, streams: Vec<Changes<'a>>, skip: Option<&[u8]>) -> Self {
        let mut streams: Vec<_> = streams.into_iter().map(Iterator::peekable).collect();
        if let Some(l) = skip {
            for s in streams.iter_mut() {
                s.next_if(|e| e.0 == l);
            }
        }
        Self {
            entries: entries.peekable(),
            streams,
        }
    }

    /// The next key and its stored value after every change above it (None:
    /// removed); None at the end. Contract: keys strictly ascend; the value
    /// is the basement's, then each buffer's change applied oldest first.
    #[allow(clippy::type_complexity)]
    pub fn next(
        &mut self,
        resolve: &mut Resolver<'_>,
    ) -> Option<Result<(&'a [u8], Option<Cow<'a, [u8]>>)>> {
        let mut min = self.entries.peek().map(|e| e.0);
        for s in self.streams.iter_mut() {
            if let Some(k) = s.peek().map(|e| e.0) {
                min = Some(min.map_or(k, |m| m.min(k)));
            }
        }
        let k = min?;
        // The stream `k` came from holds it at the same address: no compare.
        let at_k = |h: &[u8]| std::ptr::eq(h, k) || h == k;
        let mut val = match self.entries.peek() {
            Some(e) if at_k(e.0) => self.entries.next().map(|e| Cow::Borrowed(e.1)),
            _ => None,
        };
        for s in self.streams.iter_mut() {
            if !s.peek().is_some_and(|e| at_k(e.0)) {
                continue;
            }
            let Some((_, change)) = s.next() else {
                unreachable!("peeked")
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
