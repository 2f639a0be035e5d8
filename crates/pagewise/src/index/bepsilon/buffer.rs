//! A packed message buffer: the messages of one child buffer as their
//! stored bytes in one append-only arena of a few chunks, never regrown in
//! place (docs/design.md, message entry:
//! `type u8 | seq u64 | klen u16 | vlen u32 | key | value`), found through
//! two sorted runs of u32 offsets: `main`, merged in batches (with the first
//! 8 bytes of each key beside it, as basements keep them), and `tail`, the
//! last few messages, sorted on insert. Per key the live messages are the
//! newest put or delete, then the upserts after it, oldest first (the
//! collapse of `Pending::absorb`): a put or delete marks the older messages
//! of its key dead in place, and the dead are dropped when the tail merges
//! and their bytes reclaimed when they outweigh half the live. So a message
//! costs its serialized bytes plus 12 or 4 in heap and no allocation of
//! its own; a buffer decoded from disk is its raw bytes as they were read, and
//! one in arena order encodes as a copy per chunk (docs/design.md, "B-epsilon
//! nodes", memory charge).

use super::heap::{self, alloc_bytes};
use super::layout::message;
use super::pending::{Base, Change, Pending, MSG_FIXED_BYTES};
use crate::index::head::{self, key_head};
use crate::store::page::{get_u16, get_u32, get_u64};
use std::ops::Range;

/// A message's type byte as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Put = 1,
    Delete = 2,
    Upsert = 3,
}

impl Kind {
    pub fn from_code(c: u8) -> Option<Kind> {
        match c {
            1 => Some(Kind::Put),
            2 => Some(Kind::Delete),
            3 => Some(Kind::Upsert),
            _ => None,
        }
    }

    /// A put or delete: it replaces what its key held.
    pub fn is_base(self) -> bool {
        self != Kind::Upsert
    }
}

/// One message, borrowed from a buffer (or from the caller, to add).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    pub kind: Kind,
    pub seq: u64,
    pub key: &'a [u8],
    /// The value of a put, the operand of an upsert; empty for a delete.
    pub val: &'a [u8],
}

impl Message<'_> {
    /// Serialized bytes.
    pub fn bytes(&self) -> usize {
        MSG_FIXED_BYTES + self.key.len() + self.val.len()
    }
}

impl Pending {
    /// Folds one later message of its key into self (`Pending::absorb`).
    pub fn push(&mut self, m: &Message) {
        match m.kind {
            Kind::Put => *self = Pending::base(Base::Put(m.seq, m.val.to_vec())),
            Kind::Delete => *self = Pending::base(Base::Delete(m.seq)),
            Kind::Upsert => self.ops.push((m.seq, m.val.to_vec())),
        }
    }

    /// The messages of one key, `m` the first.
    fn of(m: &Message) -> Pending {
        let mut p = Pending::default();
        p.push(m);
        p
    }

    fn base(b: Base) -> Pending {
        Pending {
            base: Some(b),
            ops: Vec::new(),
        }
    }
}

/// The first position of `heads` (sorted) not below `h`: probes 1, 2, 4,
/// ... places ahead, then a binary search of the last step, so a run of
/// sorted lookups each close to the last costs a few comparisons.
fn gallop(heads: &[u64], h: u64) -> usize {
    let mut hi = 1;
    while hi < heads.len() && heads[hi - 1] < h {
        hi *= 2;
    }
    let lo = hi / 2;
    let hi = hi.min(heads.len());
    let at = lo + heads[lo..hi].partition_point(|&x| x < h);
    debug_assert_eq!(at, heads.partition_point(|&x| x < h));
    at
}

/// Marks an index entry whose message a later put or delete replaced.
const DEAD: u32 = 1 << 31;
/// Messages the tail holds before it merges into `main`: an insert moves
/// at most this many offsets, a merge costs `main` once per this many.
pub const TAIL_MAX: usize = 128;
/// The least capacity a growing arena takes.
const ARENA_MIN_BYTES: usize = 512;
/// Chunks an arena grows by before they are copied into one: an add
/// copies no byte already held until then, and a lookup past the first
/// chunk searches at most this many starts.
const MAX_CHUNKS: usize = 8;

#[derive(Debug, Clone, Default)]
pub struct Buffer {
    /// The messages' bytes: `arena`, then each of `chunks`, make one
    /// virtual arena; chunk `k` starts at offset `starts[k]`, where the one
    /// before it ended (a chunk is allocated once, for the adds that do not
    /// fit the last, and its spare capacity is left once the next exists).
    arena: Vec<u8>,
    chunks: Vec<Vec<u8>>,
    starts: Vec<u32>,
    /// Offsets sorted by key, equal keys in arrival order.
    main: Vec<u32>,
    /// `key_head` each key of `main`: searches compare these (a dense array)
    /// and read a key in the arena only where heads tie (packed.rs).
    heads: Vec<u64>,
    /// Offsets of messages newer than all of `main`'s, sorted likewise.
    tail: Vec<u32>,
    /// Serialized bytes, count and upserts of the live messages.
    live_bytes: usize,
    count: usize,
    ops: usize,
    dead_bytes: usize,
    max_seq: u64,
    /// Whether some message was appended before a smaller key (else the
    /// arena is in key order, and with nothing dead, is the encoding).
    scattered: bool,
    /// Offset of the last message appended.
    last: u32,
    /// The stored values of puts that a later put or delete replaced here
    /// and that may name a value extent (`value::may_name_extent`), for the
    /// writer to free ([`Buffer::take_dropped`]); empty at rest.
    dropped: Vec<Vec<u8>>,
}

impl Buffer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Live messages.
    pub fn count(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Serialized bytes of the live messages.
    pub fn bytes(&self) -> usize {
        self.live_bytes
    }

    /// Whether an upsert is buffered (flushing it needs a merge operator).
    pub fn has_ops(&self) -> bool {
        self.ops > 0
    }

    /// The highest sequence number buffered (0: none).
    pub fn max_seq(&self) -> u64 {
        self.max_seq
    }

    /// Heap bytes: the arena's chunks and the two runs at their capacities.
    pub fn heap_bytes(&self) -> usize {
        alloc_bytes(self.arena.capacity())
            + self
                .chunks
                .iter()
                .map(|c| alloc_bytes(c.capacity()))
                .sum::<usize>()
            + alloc_bytes(24 * self.chunks.capacity())
            + alloc_bytes(4 * self.starts.capacity())
            + alloc_bytes(4 * self.main.capacity())
            + alloc_bytes(8 * self.heads.capacity())
            + alloc_bytes(4 * self.tail.capacity())
    }

    /// The message at index entry `off` (dead or not). Requires: an entry
    /// of this buffer (its bytes were checked when added or decoded).
    fn at(&self, off: u32) -> Message<'_> {
        let a = self.bytes_from((off & !DEAD) as usize);
        let (k, v) = (
            get_u16(a, message::KEY_LEN.at) as usize,
            get_u32(a, message::VALUE_LEN.at) as usize,
        );
        let key = MSG_FIXED_BYTES;
        Message {
            kind: Kind::from_code(a[message::TYPE.at]).expect("a checked message type"),
            seq: get_u64(a, message::SEQ.at),
            key: &a[key..key + k],
            val: &a[key + k..key + k + v],
        }
    }

    fn key_at(&self, off: u32) -> &[u8] {
        let a = self.bytes_from((off & !DEAD) as usize);
        let k = get_u16(a, message::KEY_LEN.at) as usize;
        &a[MSG_FIXED_BYTES..MSG_FIXED_BYTES + k]
    }

    /// The arena's bytes from offset `o` to the end of its chunk.
    #[inline]
    fn bytes_from(&self, o: usize) -> &[u8] {
        match self.starts.first() {
            Some(&first) if o >= first as usize => {
                let k = self.starts.partition_point(|&s| s as usize <= o) - 1;
                &self.chunks[k][o - self.starts[k] as usize..]
            }
            _ => &self.arena[o..],
        }
    }

    /// Bytes in the arena, all chunks.
    fn arena_len(&self) -> usize {
        match (self.starts.last(), self.chunks.last()) {
            (Some(&s), Some(c)) => s as usize + c.len(),
            _ => self.arena.len(),
        }
    }

    /// The key of the message that starts at arena offset `off` and the
    /// key of the message before it, or None when no message starts there.
    /// Requires: a buffer as decoded (its arena the stored bytes in order).
    pub fn keys_at_offset(&self, off: u32) -> Option<(Option<&[u8]>, &[u8])> {
        assert!(self.tail.is_empty() && !self.scattered && self.dead_bytes == 0);
        let i = self.main.binary_search(&off).ok()?;
        let prev = i.checked_sub(1).map(|p| self.key_at(self.main[p]));
        Some((prev, self.key_at(off)))
    }

    /// The stored bytes of the message at entry `off`.
    fn raw_at(&self, off: u32) -> &[u8] {
        let a = self.bytes_from((off & !DEAD) as usize);
        let (k, v) = (
            get_u16(a, message::KEY_LEN.at),
            get_u32(a, message::VALUE_LEN.at),
        );
        &a[..MSG_FIXED_BYTES + k as usize + v as usize]
    }

    /// The positions in `run` of the entries of `key`: one binary search,
    /// then a scan of the key's entries (few: a put or delete ends them).
    fn key_span(&self, run: &[u32], key: &[u8]) -> Range<usize> {
        let lo = run.partition_point(|&o| self.key_at(o) < key);
        lo..self.run_end(run, lo, key)
    }

    /// The end of the entries of `key` in `run` that start at `lo` (few: a
    /// put or delete ends them).
    fn run_end(&self, run: &[u32], lo: usize, key: &[u8]) -> usize {
        let same = run[lo..].iter().take_while(|&&o| self.key_at(o) == key);
        lo + same.count()
    }

    /// [`Buffer::run_end`] in `main`, where `lo` is [`Buffer::main_bound`]'s
    /// (not upper): a head other than the key's ends the run without
    /// reading the arena (a key not buffered yet, the common case).
    fn main_run_end(&self, lo: usize, key: &[u8]) -> usize {
        match self.heads.get(lo) {
            Some(&h) if h == key_head(key) => self.run_end(&self.main, lo, key),
            _ => lo,
        }
    }

    /// The first position of `main` from `from` whose key is above `key`
    /// (`upper`), else not below it.
    fn main_bound(&self, from: usize, key: &[u8], upper: bool) -> usize {
        let h = key_head(key);
        let lo = match from {
            0 => self.heads.partition_point(|&x| x < h), // a search from scratch
            _ => from + gallop(&self.heads[from..], h),
        };
        let at = head::break_tie(&self.heads, lo, h, key, upper, |i| {
            self.key_at(self.main[i])
        });
        debug_assert!(at >= from && at <= self.main.len());
        at
    }

    /// Adds `m` after what its key holds.
    /// Effect: a put or delete marks the key's older messages dead; the
    /// message is appended to the arena and its offset inserted in the tail,
    /// which merges into `main` once full.
    pub fn add(&mut self, m: Message) {
        assert!(m.key.len() <= u16::MAX as usize && m.val.len() <= u32::MAX as usize);
        let before = self.count;
        let in_tail = self.key_span(&self.tail, m.key);
        if m.kind.is_base() {
            let lo = self.main_bound(0, m.key, false);
            let in_main = lo..self.main_run_end(lo, m.key);
            self.kill(false, in_main);
            self.kill(true, in_tail.clone());
        }
        let off = self.append(&m);
        self.tail.insert(in_tail.end, off);
        self.count += 1;
        self.live_bytes += m.bytes();
        self.ops += (m.kind == Kind::Upsert) as usize;
        self.max_seq = self.max_seq.max(m.seq);
        if self.tail.len() >= TAIL_MAX {
            self.merge_tail();
        }
        assert!(self.count <= before + 1 && self.live_bytes >= m.bytes());
    }

    /// Adds `batch` as [`Buffer::add`] would one message at a time, in one
    /// pass. Requires: `batch` sorted by key, equal keys oldest first, every
    /// message newer than what its key holds here (a flush from the parent).
    /// Effect: the arena grows once; each message costs a binary search of
    /// `main` from the previous one's place, and one merge places them all.
    pub fn add_sorted(&mut self, batch: &[Message]) {
        assert!(batch.windows(2).all(|w| w[0].key <= w[1].key), "sorted");
        let (before, bytes) = (self.count, batch.iter().map(|m| m.bytes()).sum::<usize>());
        if !self.tail.is_empty() {
            self.merge_tail();
        }
        self.grow_for(bytes);
        let mut added: Vec<u32> = Vec::with_capacity(batch.len());
        // Where each added entry goes in `main`: after the key's entries.
        let mut places: Vec<usize> = Vec::with_capacity(batch.len());
        let mut from = 0;
        for m in batch {
            assert!(m.key.len() <= u16::MAX as usize && m.val.len() <= u32::MAX as usize);
            let lo = self.main_bound(from, m.key, false);
            let hi = self.main_run_end(lo, m.key);
            places.push(hi);
            if m.kind.is_base() {
                self.kill(false, lo..hi);
                // Earlier messages of this batch for the key (bounded by it).
                for k in (0..added.len()).rev() {
                    if self.key_at(added[k]) != m.key {
                        break;
                    }
                    if added[k] & DEAD == 0 {
                        self.retire(added[k]);
                        added[k] |= DEAD;
                    }
                }
            }
            from = lo;
            added.push(self.append(m));
            self.count += 1;
            self.live_bytes += m.bytes();
            self.ops += (m.kind == Kind::Upsert) as usize;
            self.max_seq = self.max_seq.max(m.seq);
        }
        self.merge_into_main(&added, |_, k, _| places[k]);
        assert!(self.count <= before + batch.len() && (batch.is_empty() || self.count > 0));
    }

    /// The stored values of replaced puts that may name value extents,
    /// since the last call (the writer frees those that do).
    pub fn take_dropped(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.dropped)
    }

    /// Takes the live message at entry `off` out of the counts (the caller
    /// marks the entry dead).
    fn retire(&mut self, off: u32) {
        assert!(off & DEAD == 0, "retire a live entry");
        let m = self.at(off);
        if m.kind == Kind::Put && super::value::may_name_extent(m.val) {
            let v = m.val.to_vec();
            self.dropped.push(v);
        }
        let m = self.at(off);
        let (bytes, op) = (m.bytes(), m.kind == Kind::Upsert);
        self.live_bytes -= bytes;
        self.dead_bytes += bytes;
        self.count -= 1;
        self.ops -= op as usize;
    }

    /// Marks the live entries at `span` of the tail (else `main`) dead (a
    /// put or delete of their key follows).
    fn kill(&mut self, in_tail: bool, span: Range<usize>) {
        for i in span {
            let off = if in_tail { self.tail[i] } else { self.main[i] };
            if off & DEAD != 0 {
                continue;
            }
            self.retire(off);
            let run = if in_tail {
                &mut self.tail
            } else {
                &mut self.main
            };
            run[i] |= DEAD;
        }
    }

    /// Makes room for `n` more arena bytes in its last chunk: a new chunk
    /// of an eighth of the arena at least (or `n`, to its size class,
    /// [`heap::size_class`], so a freed chunk fits another buffer's), or,
    /// once there are [`MAX_CHUNKS`], one arena of them all. So an add
    /// copies nothing the arena holds, each byte is copied about once per
    /// doubling, and the spare capacity stays about what size classes leave.
    fn grow_for(&mut self, n: usize) {
        let last = self.chunks.last().unwrap_or(&self.arena);
        if last.len() + n <= last.capacity() {
            return;
        }
        let len = self.arena_len();
        if self.arena.is_empty() {
            self.arena = Vec::with_capacity(heap::size_class(n.max(ARENA_MIN_BYTES)));
        } else if self.chunks.len() < MAX_CHUNKS {
            let cap = heap::size_class(n.max(ARENA_MIN_BYTES).max(len / MAX_CHUNKS));
            self.starts.push(len as u32);
            self.chunks.push(Vec::with_capacity(cap));
        } else {
            let mut arena = Vec::with_capacity(heap::size_class(len + n));
            arena.extend_from_slice(&self.arena);
            for c in self.chunks.drain(..) {
                arena.extend_from_slice(&c);
            }
            (self.arena, self.starts) = (arena, Vec::new());
        }
        let last = self.chunks.last().unwrap_or(&self.arena);
        assert!(last.capacity() >= last.len() + n && self.arena_len() == len);
    }

    /// Writes `m` at the end of the arena; returns its offset.
    fn append(&mut self, m: &Message) -> u32 {
        let n = m.bytes();
        let at = self.arena_len();
        assert!(at + n < DEAD as usize, "a buffer over 2 GiB");
        self.grow_for(n);
        if at > 0 && m.key < self.key_at(self.last) {
            self.scattered = true;
        }
        let chunk = self.chunks.last_mut().unwrap_or(&mut self.arena);
        chunk.push(m.kind as u8);
        chunk.extend_from_slice(&m.seq.to_le_bytes());
        chunk.extend_from_slice(&(m.key.len() as u16).to_le_bytes());
        chunk.extend_from_slice(&(m.val.len() as u32).to_le_bytes());
        chunk.extend_from_slice(m.key);
        chunk.extend_from_slice(m.val);
        self.last = at as u32;
        debug_assert_eq!(self.arena_len(), at + n);
        at as u32
    }

    /// Merges the tail into `main`, dropping dead entries; then reclaims
    /// the dead bytes once they outweigh half the live. Each tail entry
    /// finds its place by binary search and the run of `main` before it is
    /// copied without comparing keys.
    fn merge_tail(&mut self) {
        let tail = std::mem::take(&mut self.tail);
        self.merge_into_main(&tail, |b, k, from| {
            b.main_bound(from, b.key_at(tail[k]), true)
        });
        self.tail = tail;
        self.tail.clear();
    }

    /// Merges `entries` (sorted, each newer than `main`'s entries of its
    /// key) into `main`, dropping dead entries; `place(self, k, from)` is
    /// where entry k goes (after its key's entries, at or after `from`).
    /// Then reclaims the dead bytes once they outweigh half the live.
    fn merge_into_main(
        &mut self,
        entries: &[u32],
        mut place: impl FnMut(&Self, usize, usize) -> usize,
    ) {
        let cap = heap::size_class(self.count);
        let (mut out, mut heads) = (Vec::with_capacity(cap), Vec::with_capacity(cap));
        let mut from = 0;
        for (k, &t) in entries.iter().enumerate() {
            let to = place(self, k, from);
            assert!(to >= from && to <= self.main.len(), "places ascend");
            for i in from..to {
                if self.main[i] & DEAD == 0 {
                    out.push(self.main[i]);
                    heads.push(self.heads[i]);
                }
            }
            if t & DEAD == 0 {
                out.push(t);
                heads.push(key_head(self.key_at(t)));
            }
            from = to;
        }
        for i in from..self.main.len() {
            if self.main[i] & DEAD == 0 {
                out.push(self.main[i]);
                heads.push(self.heads[i]);
            }
        }
        assert!(out.len() == self.count && heads.len() == self.count);
        (self.main, self.heads) = (out, heads);
        if self.dead_bytes > self.live_bytes / 2 {
            self.compact();
        }
    }

    /// Rewrites the arena as the live messages in key order.
    /// Requires: an empty tail and nothing dead in `main`.
    fn compact(&mut self) {
        assert!(self.tail.is_empty() && self.main.len() == self.count);
        let mut arena = Vec::with_capacity(self.live_bytes);
        let mut main = std::mem::take(&mut self.main);
        for off in main.iter_mut() {
            let raw = self.raw_at(*off);
            *off = arena.len() as u32;
            arena.extend_from_slice(raw);
        }
        self.main = main;
        self.last = self.main.last().copied().unwrap_or(0);
        (self.arena, self.chunks, self.starts) = (arena, Vec::new(), Vec::new());
        (self.dead_bytes, self.scattered) = (0, false);
        assert_eq!(self.arena.len(), self.live_bytes);
    }

    /// The live messages in key order, equal keys oldest first.
    pub fn messages(&self) -> Live<'_> {
        Live::new(self, 0..self.main.len(), 0..self.tail.len())
    }

    /// The live messages with keys in `[lo, hi)` (None: unbounded).
    fn live_range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Live<'_> {
        let tail = |k: &[u8]| self.tail.partition_point(|&o| self.key_at(o) < k);
        let (a, b) = (lo.map_or(0, tail), hi.map_or(self.tail.len(), tail));
        let a_main = lo.map_or(0, |l| self.main_bound(0, l, false));
        let b_main = hi.map_or(self.main.len(), |h| self.main_bound(0, h, false));
        Live::new(self, a_main..b_main.max(a_main), a..b.max(a))
    }

    /// Each key with its messages collapsed, in key order.
    #[cfg(test)]
    pub fn pendings(&self) -> Pendings<'_> {
        Pendings(self.messages().peekable())
    }

    /// Each key with its messages as a leaf applies them, in key order: a
    /// lone put or delete borrowed, else collapsed.
    pub fn changes(&self) -> Changes<'_> {
        Changes(self.messages())
    }

    /// [`Self::changes`] from `at`, a place of this buffer's (unchanged
    /// since) changes: no search.
    pub fn changes_at(&self, at: &Place) -> Changes<'_> {
        Changes(Live::new(self, at.main.clone(), at.tail.clone()))
    }

    /// [`Self::pendings`] of the keys in `[lo, hi)`.
    #[cfg(test)]
    pub fn range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Pendings<'_> {
        Pendings(self.live_range(lo, hi).peekable())
    }

    /// [`Self::changes`] of the keys in `[lo, hi)`.
    pub fn range_changes(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Changes<'_> {
        Changes(self.live_range(lo, hi))
    }

    /// The live messages of `key`, collapsed (None: none here). A buffer
    /// without them collapses nothing (a get passes every buffer on its
    /// path, most of them without its key).
    pub fn get(&self, key: &[u8]) -> Option<Pending> {
        // The key's entries in `main` (older) and then in the tail (newer
        // than all of main's), each run found by one search.
        let lo = self.main_bound(0, key, false);
        let main = &self.main[lo..self.main_run_end(lo, key)];
        let tail = &self.tail[self.key_span(&self.tail, key)];
        let mut found: Option<Pending> = None;
        for &off in main.iter().chain(tail) {
            if off & DEAD == 0 {
                found
                    .get_or_insert_with(Pending::default)
                    .push(&self.at(off));
            }
        }
        found
    }

    /// The distinct keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut prev: Option<&[u8]> = None;
        self.messages().filter_map(move |m| {
            let new = prev != Some(m.key);
            prev = Some(m.key);
            new.then_some(m.key)
        })
    }

    pub fn first_key(&self) -> Option<&[u8]> {
        self.messages().next().map(|m| m.key)
    }

    pub fn last_key(&self) -> Option<&[u8]> {
        let last = |run: &[u32]| {
            let off = run.iter().rev().find(|&&o| o & DEAD == 0)?;
            Some(self.key_at(*off))
        };
        last(&self.main).max(last(&self.tail))
    }

    /// Appends the live messages, in key order, to `out` as stored: the
    /// arena in one copy when it is that already, else one copy each.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let start = out.len();
        if !self.scattered && self.dead_bytes == 0 {
            out.extend_from_slice(&self.arena);
            self.chunks.iter().for_each(|c| out.extend_from_slice(c));
        } else {
            let mut live = self.messages();
            for _ in 0..self.main.len() + self.tail.len() {
                let Some(off) = live.next_off() else { break };
                out.extend_from_slice(self.raw_at(off));
            }
        }
        assert_eq!(out.len() - start, self.live_bytes);
    }
}

impl Buffer {
    /// Indexes `raw` (a stored buffer), checking every length and type, the
    /// key order, that keys lie in `[lo, hi)` and that a put or delete comes
    /// first among its key's messages; `raw` becomes the arena as it is.
    /// `entries` (the directory's count) sizes the index, bounded by what
    /// `raw` can hold.
    pub fn decode(
        raw: Vec<u8>,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        entries: usize,
    ) -> Result<Buffer, String> {
        if raw.len() >= DEAD as usize {
            return Err(format!("a buffer of {} bytes", raw.len()));
        }
        let cap = entries.min(raw.len() / MSG_FIXED_BYTES);
        let (mut main, mut heads) = (Vec::with_capacity(cap), Vec::with_capacity(cap));
        let (mut r, mut prev) = (0usize, None::<&[u8]>);
        let (mut ops, mut max_seq) = (0usize, 0u64);
        while r < raw.len() {
            let (m, end) = read_message(&raw, r)?;
            let inside = lo.is_none_or(|l| m.key >= l) && hi.is_none_or(|h| m.key < h);
            if !inside || prev.is_some_and(|p| p > m.key) {
                return Err("message keys out of order or outside the pivots".into());
            }
            if m.kind.is_base() && prev == Some(m.key) {
                return Err("a put or delete after other messages of its key".into());
            }
            main.push(r as u32);
            heads.push(key_head(m.key));
            ops += (m.kind == Kind::Upsert) as usize;
            max_seq = max_seq.max(m.seq);
            (prev, r) = (Some(m.key), end);
        }
        assert_eq!(r, raw.len());
        let count = main.len();
        let last = main.last().copied().unwrap_or(0);
        Ok(Buffer {
            live_bytes: raw.len(),
            arena: raw,
            chunks: Vec::new(),
            starts: Vec::new(),
            main,
            heads,
            tail: Vec::new(),
            count,
            ops,
            dead_bytes: 0,
            max_seq,
            scattered: false,
            last,
            dropped: Vec::new(),
        })
    }
}

/// The message stored at `r` in `raw` and the offset after it, every
/// length and the type checked.
pub fn read_message(raw: &[u8], r: usize) -> Result<(Message<'_>, usize), String> {
    let h = raw
        .get(r..r + MSG_FIXED_BYTES)
        .ok_or("message overruns the partition")?;
    let kind = Kind::from_code(h[message::TYPE.at])
        .ok_or_else(|| format!("message type {}", h[message::TYPE.at]))?;
    let (k, v) = (
        get_u16(h, message::KEY_LEN.at) as usize,
        get_u32(h, message::VALUE_LEN.at) as usize,
    );
    let at = r + MSG_FIXED_BYTES;
    let key = raw.get(at..at + k).ok_or("key overruns the partition")?;
    let val = raw
        .get(at + k..at + k + v)
        .ok_or("value overruns the partition")?;
    let m = Message {
        kind,
        seq: get_u64(h, message::SEQ.at),
        key,
        val,
    };
    Ok((m, at + k + v))
}

/// The live messages of ranges of `main` and `tail`, merged: for equal
/// keys `main`'s first (older).
pub struct Live<'a> {
    buf: &'a Buffer,
    main: Range<usize>,
    tail: Range<usize>,
}

/// Where a [`Changes`] stands: the ranges of `main` and `tail` it has not
/// returned. Valid for the buffer it was taken from, unchanged.
#[derive(Clone, Debug)]
pub struct Place {
    main: Range<usize>,
    tail: Range<usize>,
}

impl<'a> Live<'a> {
    fn new(buf: &'a Buffer, main: Range<usize>, tail: Range<usize>) -> Self {
        assert!(main.start <= main.end && main.end <= buf.main.len());
        assert!(tail.start <= tail.end && tail.end <= buf.tail.len());
        Live { buf, main, tail }
    }

    /// The next live entry's offset, not taken, and whether it is
    /// `main`'s; dead entries before it are passed over. Bounded by the
    /// ranges' lengths.
    fn peek_off(&mut self) -> Option<(u32, bool)> {
        let b = self.buf;
        while !self.main.is_empty() || !self.tail.is_empty() {
            let from_main = if self.main.is_empty() || self.tail.is_empty() {
                !self.main.is_empty()
            } else {
                b.key_at(b.main[self.main.start]) <= b.key_at(b.tail[self.tail.start])
            };
            let (range, run) = match from_main {
                true => (&mut self.main, &b.main),
                false => (&mut self.tail, &b.tail),
            };
            let off = run[range.start];
            if off & DEAD == 0 {
                return Some((off, from_main));
            }
            range.start += 1;
        }
        None
    }

    /// The next live entry's offset, taken.
    fn next_off(&mut self) -> Option<u32> {
        let (off, from_main) = self.peek_off()?;
        self.pass(from_main);
        Some(off)
    }

    /// Takes the next live message if its key is `key`.
    fn next_if_key(&mut self, key: &[u8]) -> Option<Message<'a>> {
        let (off, from_main) = self.peek_off()?;
        if self.buf.key_at(off) != key {
            return None;
        }
        self.pass(from_main);
        Some(self.buf.at(off))
    }

    /// Passes the entry [`Self::peek_off`] found (`main`'s or the tail's).
    fn pass(&mut self, from_main: bool) {
        match from_main {
            true => self.main.start += 1,
            false => self.tail.start += 1,
        }
    }
}

impl<'a> Iterator for Live<'a> {
    type Item = Message<'a>;
    fn next(&mut self) -> Option<Message<'a>> {
        let off = self.next_off()?;
        Some(self.buf.at(off))
    }
}

/// Each key of a run of messages with its messages collapsed (tests: the
/// model a buffer's reads are checked against).
#[cfg(test)]
pub struct Pendings<'a>(std::iter::Peekable<Live<'a>>);

#[cfg(test)]
impl<'a> Iterator for Pendings<'a> {
    type Item = (&'a [u8], Pending);
    fn next(&mut self) -> Option<Self::Item> {
        let first = self.0.next()?;
        let mut p = Pending::default();
        p.push(&first);
        while let Some(m) = self.0.next_if(|m| m.key == first.key) {
            p.push(&m);
        }
        Some((first.key, p))
    }
}

/// Each key of a run of messages with its messages as a leaf applies them.
/// Between two calls it stands before the next key's first message, so
/// [`Changes::place`] is where it goes on from ([`Buffer::changes_at`]).
pub struct Changes<'a>(Live<'a>);

impl Changes<'_> {
    pub fn place(&self) -> Place {
        Place {
            main: self.0.main.clone(),
            tail: self.0.tail.clone(),
        }
    }
}

impl<'a> Iterator for Changes<'a> {
    type Item = (&'a [u8], Change<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        let first = self.0.next()?;
        let mut more: Option<Pending> = None;
        // Bounded by the messages left in the ranges.
        for _ in 0..=self.0.main.len() + self.0.tail.len() {
            let Some(m) = self.0.next_if_key(first.key) else {
                break;
            };
            more.get_or_insert_with(|| Pending::of(&first)).push(&m);
        }
        let change = match (more, first.kind) {
            (Some(p), _) => Change::Merge(p),
            (None, Kind::Put) => Change::Put(first.val),
            (None, Kind::Delete) => Change::Delete,
            (None, Kind::Upsert) => Change::Merge(Pending::of(&first)),
        };
        Some((first.key, change))
    }
}

#[cfg(test)]
impl Buffer {
    /// Adds the messages of `p` for `key`, base first.
    pub fn add_pending(&mut self, key: &[u8], p: &Pending) {
        let m = |kind, seq, val| Message {
            kind,
            seq,
            key,
            val,
        };
        match &p.base {
            Some(Base::Put(s, v)) => self.add(m(Kind::Put, *s, v)),
            Some(Base::Delete(s)) => self.add(m(Kind::Delete, *s, &[])),
            None => {}
        }
        for (s, v) in &p.ops {
            self.add(m(Kind::Upsert, *s, v));
        }
    }

    /// Checks the kept counts against a recount of the entries.
    pub fn assert_counts(&self) {
        let (mut count, mut bytes, mut ops, mut dead) = (0, 0, 0, 0);
        for &off in self.main.iter().chain(&self.tail) {
            let m = self.at(off);
            if off & DEAD != 0 {
                dead += m.bytes();
                continue;
            }
            (count, bytes) = (count + 1, bytes + m.bytes());
            ops += (m.kind == Kind::Upsert) as usize;
        }
        assert_eq!((count, bytes, ops), (self.count, self.live_bytes, self.ops));
        let heads = self.main.iter().map(|&o| key_head(self.key_at(o)));
        assert!(
            heads.eq(self.heads.iter().copied()),
            "a head per entry of main"
        );
        assert!(dead <= self.dead_bytes, "dropped entries keep their bytes");
        assert_eq!(
            self.arena_len(),
            self.live_bytes + self.dead_bytes,
            "the arena is the live and the dead"
        );
        assert!(self.chunks.len() == self.starts.len() && self.chunks.len() <= MAX_CHUNKS);
        let ends = std::iter::once(self.arena.len()).chain(self.chunks.iter().map(Vec::len));
        let starts: Vec<usize> = ends
            .scan(0, |at, n| {
                *at += n;
                Some(*at)
            })
            .collect();
        assert!(
            self.starts
                .iter()
                .zip(&starts)
                .all(|(&s, &e)| s as usize == e),
            "a chunk starts where the one before it ends"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::bepsilon::heap::counting::live;
    use std::collections::BTreeMap;

    type Model = BTreeMap<Vec<u8>, Pending>;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    fn key(i: u64) -> Vec<u8> {
        format!("k{:05}", i).into_bytes()
    }

    /// The model's messages serialized in key order: the stored form.
    fn serialized(model: &Model) -> Vec<u8> {
        let mut b = Buffer::new();
        for (k, p) in model {
            b.add_pending(k, p);
        }
        let mut out = Vec::new();
        b.encode_into(&mut out);
        out
    }

    /// Every reader of `b` agrees with `model`.
    fn assert_matches(b: &Buffer, model: &Model, rng: &mut Rng) {
        b.assert_counts();
        let got: Vec<(Vec<u8>, Pending)> = b.pendings().map(|(k, p)| (k.to_vec(), p)).collect();
        let want: Vec<(Vec<u8>, Pending)> = model.clone().into_iter().collect();
        assert_eq!(got, want);
        let changes = b.changes().map(|(k, c)| (k.to_vec(), c));
        assert!(changes.eq(want.iter().map(|(k, p)| (k.clone(), Change::of(p)))));
        let per_key = |p: &Pending| p.base.is_some() as usize + p.ops.len();
        let count: usize = model.values().map(per_key).sum();
        let bytes: usize = model.iter().map(|(k, p)| p.bytes(k.len())).sum();
        assert_eq!((b.count(), b.bytes()), (count, bytes));
        assert_eq!(b.has_ops(), model.values().any(|p| !p.ops.is_empty()));
        let keys: Vec<&[u8]> = b.keys().collect();
        assert!(keys.iter().copied().eq(model.keys().map(Vec::as_slice)));
        assert_eq!(b.first_key(), model.keys().next().map(Vec::as_slice));
        assert_eq!(b.last_key(), model.keys().next_back().map(Vec::as_slice));
        for _ in 0..20 {
            let (x, y) = (rng.next() % 600, rng.next() % 600);
            assert_eq!(b.get(&key(x)), model.get(&key(x)).cloned());
            let (lo, hi) = (key(x.min(y)), key(x.max(y)));
            let got: Vec<(&[u8], Pending)> = b.range(Some(&lo), Some(&hi)).collect();
            let want = model.range(lo.clone()..hi.clone());
            assert!(got
                .iter()
                .map(|(k, p)| (*k, p))
                .eq(want.map(|(k, p)| (k.as_slice(), p))));
        }
        let mut enc = Vec::new();
        b.encode_into(&mut enc);
        assert_eq!(enc, serialized(model), "stored in key order, collapsed");
        let d = Buffer::decode(enc.clone(), None, None, b.count()).unwrap();
        let back: Vec<(&[u8], Pending)> = d.pendings().collect();
        assert!(back
            .iter()
            .map(|(k, p)| (*k, p))
            .eq(model.iter().map(|(k, p)| (k.as_slice(), p))));
        assert_eq!(d.max_seq(), b.max_seq());
    }

    /// Random puts, deletes and upserts over few keys (many per key), in
    /// random order or ascending (the arena in order), against a map of
    /// `Pending` folded by `absorb`.
    #[test]
    fn matches_a_map_of_collapsed_messages() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for ascending in [false, true] {
            let (mut b, mut model) = (Buffer::new(), Model::new());
            for seq in 1..6000u64 {
                let k = key(if ascending { seq / 3 } else { rng.next() % 500 });
                let val = vec![seq as u8; (rng.next() % 40) as usize];
                let kind = match rng.next() % 10 {
                    0 => Kind::Delete,
                    1..=4 => Kind::Put,
                    _ => Kind::Upsert,
                };
                let val = if kind == Kind::Delete { &[][..] } else { &val };
                let m = Message {
                    kind,
                    seq,
                    key: &k,
                    val,
                };
                b.add(m);
                let mut p = Pending::default();
                p.push(&m);
                model.entry(k.clone()).or_default().absorb(p);
                if seq % 397 == 0 || seq < 20 {
                    assert_matches(&b, &model, &mut rng);
                }
            }
            assert_matches(&b, &model, &mut rng);
            assert_eq!(b.max_seq(), 5999);
        }
    }

    #[test]
    fn gallop_finds_what_a_binary_search_finds() {
        let mut rng = Rng(7);
        for len in [0usize, 1, 2, 3, 7, 8, 9, 100, 1000] {
            let mut heads: Vec<u64> = (0..len).map(|_| rng.next() % 50).collect();
            heads.sort_unstable();
            for h in 0..52 {
                let want = heads.partition_point(|&x| x < h);
                assert_eq!(gallop(&heads, h), want, "len {len}, h {h}");
            }
        }
    }

    /// Flush-shaped batches (sorted, equal keys oldest first, newer than
    /// the buffer) added by `add_sorted` leave the buffer as adding them one
    /// at a time does, and as the map model says; buffers of any size,
    /// including a tail left by single adds.
    #[test]
    fn sorted_batches_match_single_adds_and_the_model() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let (mut bulk, mut single, mut model) = (Buffer::new(), Buffer::new(), Model::new());
        let mut seq = 0u64;
        for round in 0..60 {
            // A batch: random keys, 1 to 3 messages each, sorted by key.
            let mut batch: Vec<(Vec<u8>, Kind, u64, Vec<u8>)> = Vec::new();
            let mut keys: Vec<u64> = (0..rng.next() % 200).map(|_| rng.next() % 700).collect();
            keys.sort_unstable();
            keys.dedup();
            for k in keys {
                for _ in 0..1 + rng.next() % 3 {
                    seq += 1;
                    let kind = match rng.next() % 10 {
                        0 => Kind::Delete,
                        1..=4 => Kind::Put,
                        _ => Kind::Upsert,
                    };
                    let len = if kind == Kind::Delete {
                        0
                    } else {
                        rng.next() % 40
                    };
                    batch.push((key(k), kind, seq, vec![seq as u8; len as usize]));
                }
            }
            let msgs: Vec<Message> = batch
                .iter()
                .map(|(key, kind, seq, val)| Message {
                    kind: *kind,
                    seq: *seq,
                    key,
                    val,
                })
                .collect();
            bulk.add_sorted(&msgs);
            for m in &msgs {
                single.add(*m);
                let mut p = Pending::default();
                p.push(m);
                model.entry(m.key.to_vec()).or_default().absorb(p);
            }
            if round % 7 == 3 {
                // A lone add leaves a tail that the next batch merges first.
                seq += 1;
                let k = key(rng.next() % 700);
                let m = Message {
                    kind: Kind::Upsert,
                    seq,
                    key: &k,
                    val: b"x",
                };
                bulk.add(m);
                single.add(m);
                let mut p = Pending::default();
                p.push(&m);
                model.entry(k.clone()).or_default().absorb(p);
            }
            assert_matches(&bulk, &model, &mut rng);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            bulk.encode_into(&mut a);
            single.encode_into(&mut b);
            assert_eq!(a, b, "round {round}: the same stored bytes");
            assert_eq!(bulk.max_seq(), single.max_seq());
        }
        assert!(bulk.count() > 300, "{}", bulk.count());
    }

    /// Batches the arena's last chunk cannot take go to new chunks: the
    /// bytes already held stay where they are (no copy) until
    /// [`MAX_CHUNKS`] chunks are copied into one arena; every message reads
    /// back across the chunk boundaries, the counts hold, and the stored
    /// form is what single adds give.
    #[test]
    fn batches_add_chunks_without_moving_the_arena() {
        let (mut bulk, mut single) = (Buffer::new(), Buffer::new());
        let val = [7u8; 90];
        let mut first: Option<*const u8> = None;
        let mut moved_at = None;
        for round in 0..3 * MAX_CHUNKS as u64 {
            let keys: Vec<Vec<u8>> = (0..50).map(|i| key(round * 7 + i * 1000)).collect();
            let msgs: Vec<Message> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| Message {
                    kind: Kind::Put,
                    seq: round * 100 + i as u64 + 1,
                    key: k,
                    val: &val,
                })
                .collect();
            bulk.add_sorted(&msgs);
            msgs.iter().for_each(|m| single.add(*m));
            bulk.assert_counts();
            let p = bulk.arena.as_ptr();
            match first {
                None => first = Some(p),
                Some(f) if f != p && moved_at.is_none() => moved_at = Some(round),
                _ => {}
            }
            assert!(bulk.chunks.len() <= MAX_CHUNKS);
        }
        // The first batch fills the arena; each later one opens a chunk
        // until MAX_CHUNKS exist, and the next one copies them all.
        assert_eq!(moved_at, Some(MAX_CHUNKS as u64 + 1));
        for m in single.messages() {
            assert_eq!(
                bulk.get(m.key).map(|p| p.base),
                single.get(m.key).map(|p| p.base)
            );
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        bulk.encode_into(&mut a);
        single.encode_into(&mut b);
        assert_eq!(a, b);
    }

    /// A buffer's charge is what the allocator holds for it, and close to
    /// its serialized bytes: 131-byte puts 1.10 times, 39-byte upserts 1.36
    /// (12 bytes of offset and key head each), with no allocation per
    /// message.
    #[test]
    fn charge_is_the_heap_and_close_to_the_serialized() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for (vlen, kind, most) in [(100, Kind::Put, 1.15), (8, Kind::Upsert, 1.45)] {
            let before = live();
            let mut b = Buffer::new();
            for seq in 0..20_000 {
                let k = format!("{:016x}", rng.next()).into_bytes();
                let val = vec![1u8; vlen];
                b.add(Message {
                    kind,
                    seq,
                    key: &k,
                    val: &val,
                });
            }
            let heap = (live() - before) as usize;
            assert_eq!(b.heap_bytes(), heap, "charged at the allocations");
            let ratio = heap as f64 / b.bytes() as f64;
            eprintln!("{kind:?} of {vlen}: heap {heap}, serialized {}", b.bytes());
            assert!(ratio < most, "{kind:?}: {ratio}");
        }
    }

    #[test]
    fn decode_refuses_damage_without_panicking() {
        let mut b = Buffer::new();
        for i in 0..50u64 {
            let m = |kind, seq| Message {
                kind,
                seq,
                key: b"key",
                val: b"v",
            };
            b.add(m(Kind::Put, i));
            let k = key(i);
            b.add(Message {
                key: &k,
                ..m(Kind::Upsert, 100 + i)
            });
        }
        let mut raw = Vec::new();
        b.encode_into(&mut raw);
        assert!(Buffer::decode(raw.clone(), None, None, 51).is_ok());
        let e = Buffer::decode(raw.clone(), Some(b"k00010"), None, 51).unwrap_err();
        assert!(e.contains("outside the pivots"), "{e}");
        let mut twice = raw.clone();
        twice.extend_from_slice(&raw[raw.len() - 19..]); // "key": a put again
        twice[raw.len()] = Kind::Put as u8;
        let e = Buffer::decode(twice, None, None, 52).unwrap_err();
        assert!(e.contains("a put or delete after"), "{e}");
        let mut rng = Rng(7);
        for _ in 0..2000 {
            let mut bad = raw.clone();
            let at = (rng.next() as usize) % bad.len();
            bad[at] ^= 1 << (rng.next() % 8);
            bad.truncate(bad.len() - (rng.next() % 3) as usize);
            if let Ok(d) = Buffer::decode(bad.clone(), None, None, usize::MAX) {
                let mut again = Vec::new();
                d.encode_into(&mut again);
                assert_eq!(again, bad, "what decodes encodes as it was");
            }
        }
    }
}
