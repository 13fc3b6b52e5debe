//! Where each field of a decoded file sits: field path to line and column.

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::OnceLock;

/// A 1-based line and column (in characters) in a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Position {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
}

/// Maps a field path to the position of its key (or, for a list element, of the element)
/// in the file it was decoded from.
///
/// Paths use JSON field names: struct fields and map keys are joined with `.`, list
/// elements are `[index]`: `authentication.webhook.cacheTTL`, `evictionHard.memory.available`
/// (a map key may itself contain dots), `tlsCipherSuites[2]`. The document root is `""`.
/// Use [`join_key`] and [`join_index`] to build paths in the same syntax.
///
/// # Cost
///
/// Decoding records every key and list element, so recording is cheap: an entry holds its
/// parent entry and its own key (or index), never the whole path, so the map's size is
/// linear in the file whatever its nesting and key lengths. The first lookup builds an
/// index (a hash of every entry's path, keyed at random per process so that no file can
/// make paths collide on purpose); each lookup then costs the length of the path looked
/// up, however many entries the map holds.
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    /// The keys of all entries, back to back.
    keys: String,
    entries: Vec<Entry>,
    /// The entries by the hash of their path; built on the first lookup.
    index: OnceLock<Index>,
}

/// Entries by path hash: the first entry of each hash, and each entry's next one with the
/// same hash (in the order recorded).
#[derive(Debug, Clone, Default)]
struct Index {
    first: HashMap<u64, usize, BuildHasherDefault<Spread>>,
    next: Vec<usize>,
}

/// No entry: the end of a chain in [`Index::next`].
const NONE: usize = usize::MAX;

/// The hasher of [`Index::first`]: its keys are hashes already, keyed at random, so they
/// only need spreading over the 64 bits the table looks at.
#[derive(Default)]
struct Spread(u64);

impl Hasher for Spread {
    fn finish(&self) -> u64 {
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// An entry of a [`SourceMap`], which the decoders use as the parent of the entries
/// nested in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryId(usize);

/// An entry, in 24 bytes (a map holds one per key and list element of a file of up to a
/// mebibyte, so every number fits 32 bits; larger ones saturate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// The entry whose path this one extends; [`NO_PARENT`] at the top level.
    parent: u32,
    /// A key's range in `keys`, or a list index and [`INDEX`].
    a: u32,
    b: u32,
    /// The length of the whole path in bytes.
    len: u32,
    line: u32,
    column: u32,
}

const NO_PARENT: u32 = u32::MAX;
const INDEX: u32 = u32::MAX;

fn small(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Entry {
    fn new(parent: Option<usize>, segment: Segment, len: usize, position: Position) -> Self {
        let (a, b) = match segment {
            Segment::Key { start, end } => (small(start), small(end).min(INDEX - 1)),
            Segment::Index(index) => (small(index), INDEX),
        };
        Entry {
            parent: parent.map_or(NO_PARENT, small),
            a,
            b,
            len: small(len),
            line: small(position.line),
            column: small(position.column),
        }
    }

    fn parent(&self) -> Option<usize> {
        (self.parent != NO_PARENT).then_some(self.parent as usize)
    }

    fn segment(&self) -> Segment {
        if self.b == INDEX {
            Segment::Index(self.a as usize)
        } else {
            Segment::Key {
                start: self.a as usize,
                end: self.b as usize,
            }
        }
    }

    fn len(&self) -> usize {
        self.len as usize
    }

    fn position(&self) -> Position {
        Position {
            line: self.line as usize,
            column: self.column as usize,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Segment {
    /// A key: its range in `keys`.
    Key { start: usize, end: usize },
    /// A list index.
    Index(usize),
}

impl PartialEq for SourceMap {
    fn eq(&self, other: &Self) -> bool {
        // Two maps are equal when they record the same paths at the same positions.
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for SourceMap {}

impl SourceMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `path` at `position`. If the path was recorded before, the first position
    /// stays the one [`SourceMap::get`] returns.
    pub fn record(&mut self, path: &str, position: Position) {
        self.push_key(None, path, position);
    }

    /// Records the key `key` of the mapping at `parent` (`None`: the top level), and
    /// returns its entry, the parent of what is nested under it.
    pub(crate) fn record_key(
        &mut self,
        parent: Option<EntryId>,
        key: &str,
        position: Position,
    ) -> EntryId {
        self.push_key(parent.map(|p| p.0), key, position)
    }

    /// Records element `index` of the list at `parent` (`None`: the top level).
    pub(crate) fn record_index(
        &mut self,
        parent: Option<EntryId>,
        index: usize,
        position: Position,
    ) -> EntryId {
        let parent = parent.map(|p| p.0);
        let len = self.path_len(parent) + 2 + decimal_len(index);
        self.push(Entry::new(parent, Segment::Index(index), len, position))
    }

    fn push_key(&mut self, parent: Option<usize>, key: &str, position: Position) -> EntryId {
        let parent_len = self.path_len(parent);
        let separator = usize::from(parent_len > 0);
        let start = self.keys.len();
        self.keys.push_str(key);
        let end = self.keys.len();
        self.push(Entry::new(
            parent,
            Segment::Key { start, end },
            parent_len + separator + key.len(),
            position,
        ))
    }

    fn push(&mut self, entry: Entry) -> EntryId {
        self.index.take();
        self.entries.push(entry);
        EntryId(self.entries.len() - 1)
    }

    fn path_len(&self, entry: Option<usize>) -> usize {
        entry
            .and_then(|i| self.entries.get(i))
            .map_or(0, Entry::len)
    }

    /// The position recorded first for exactly `path`.
    pub fn get(&self, path: &str) -> Option<Position> {
        self.all(path).next()
    }

    /// Every position recorded for exactly `path`, in the order recorded.
    pub(crate) fn all<'a>(&'a self, path: &'a str) -> impl Iterator<Item = Position> + 'a {
        self.candidates(hash(path.as_bytes()))
            .filter(move |&i| self.is_path(i, path))
            .filter_map(|i| self.entries.get(i).map(Entry::position))
    }

    /// The position of `path`, or of its nearest ancestor that has one
    /// (`evictionHard.memory.available`, then `evictionHard.memory`, then `evictionHard`).
    /// The root is not a fallback: a path whose top-level field is absent has no position.
    pub fn position(&self, path: &str) -> Option<Position> {
        self.nearest(path, 1).map(|(_, position)| position)
    }

    /// The longest of `path` and its ancestors (each prefix ending before a `.` or a `[`)
    /// that is recorded, the ancestors no shorter than `min_len` bytes: its length and
    /// position. Costs the length of `path`, however many dots its keys hold.
    pub fn nearest(&self, path: &str, min_len: usize) -> Option<(usize, Position)> {
        if let Some(found) = self.get(path) {
            return Some((path.len(), found));
        }
        // One pass hashes every ancestor.
        let bytes = path.as_bytes();
        let mut cuts = Vec::new();
        let mut h = Hash::new();
        for (i, &b) in bytes.iter().enumerate() {
            if i > 0 && i >= min_len && (b == b'.' || b == b'[') {
                cuts.push((i, h.finish()));
            }
            h.write_byte(b);
        }
        cuts.into_iter().rev().find_map(|(end, hash)| {
            let prefix = path.get(..end)?;
            self.candidates(hash)
                .find(|&i| self.is_path(i, prefix))
                .and_then(|i| self.entries.get(i).map(|e| (end, e.position())))
        })
    }

    /// The line of `path`, falling back like [`SourceMap::position`].
    pub fn line_of(&self, path: &str) -> Option<usize> {
        self.position(path).map(|p| p.line)
    }

    /// Number of recorded entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// All recorded paths and positions, in the order recorded (document order). Each
    /// path is built on demand.
    pub fn iter(&self) -> impl Iterator<Item = (String, Position)> + '_ {
        (0..self.entries.len()).filter_map(|i| {
            let e = self.entries.get(i)?;
            Some((self.path_of(i), e.position()))
        })
    }

    /// The whole path of entry `i`.
    fn path_of(&self, i: usize) -> String {
        let mut chain = Vec::new();
        let mut cur = Some(i);
        while let Some(j) = cur {
            let Some(e) = self.entries.get(j) else {
                break;
            };
            chain.push(e);
            cur = e.parent();
        }
        let mut path = String::new();
        for e in chain.into_iter().rev() {
            match e.segment() {
                Segment::Key { start, end } => {
                    push_key(&mut path, self.keys.get(start..end).unwrap_or(""));
                }
                Segment::Index(index) => push_index(&mut path, index),
            }
        }
        path
    }

    /// Whether entry `i`'s path is exactly `path`: its segments, from the last, against
    /// the end of `path`. Costs at most the length of `path`.
    fn is_path(&self, i: usize, path: &str) -> bool {
        let Some(entry) = self.entries.get(i) else {
            return false;
        };
        if entry.len() != path.len() {
            return false;
        }
        let bytes = path.as_bytes();
        let mut end = path.len();
        let mut cur = Some(entry);
        while let Some(e) = cur {
            let parent = e.parent().and_then(|p| self.entries.get(p));
            let parent_len = parent.map_or(0, Entry::len);
            let Some(segment) = bytes.get(parent_len..end) else {
                return false;
            };
            let ok = match e.segment() {
                Segment::Key { start, end } => {
                    let key = self.keys.as_bytes().get(start..end).unwrap_or_default();
                    if parent_len == 0 {
                        segment == key
                    } else {
                        segment.first() == Some(&b'.') && segment.get(1..) == Some(key)
                    }
                }
                Segment::Index(index) => {
                    let (digits, len) = decimal(index);
                    segment.first() == Some(&b'[')
                        && segment.last() == Some(&b']')
                        && segment.get(1..segment.len() - 1) == digits.get(digits.len() - len..)
                }
            };
            if !ok {
                return false;
            }
            end = parent_len;
            cur = parent;
        }
        end == 0
    }

    /// The entries whose path hashes to `hash`, in the order recorded.
    fn candidates(&self, hash: u64) -> impl Iterator<Item = usize> + '_ {
        let index = self.index();
        let first = index.first.get(&hash).copied().unwrap_or(NONE);
        std::iter::successors(Some(first), |&i| index.next.get(i).copied())
            .take_while(|&i| i != NONE)
    }

    fn index(&self) -> &Index {
        self.index.get_or_init(|| {
            // Parents are recorded before their children, so each hash extends one
            // computed already.
            let mut hashes: Vec<Hash> = Vec::with_capacity(self.entries.len());
            for e in &self.entries {
                let mut h = e
                    .parent()
                    .and_then(|p| hashes.get(p).copied())
                    .unwrap_or_else(Hash::new);
                let parent_len = self.path_len(e.parent());
                match e.segment() {
                    Segment::Key { start, end } => {
                        if parent_len > 0 {
                            h.write_byte(b'.');
                        }
                        h.write(self.keys.as_bytes().get(start..end).unwrap_or_default());
                    }
                    Segment::Index(index) => {
                        let (digits, len) = decimal(index);
                        h.write_byte(b'[');
                        h.write(digits.get(digits.len() - len..).unwrap_or_default());
                        h.write_byte(b']');
                    }
                }
                hashes.push(h);
            }
            let mut index = Index {
                first: HashMap::with_capacity_and_hasher(hashes.len(), Default::default()),
                next: vec![NONE; hashes.len()],
            };
            // The last entry of each chain (at the index of its first), while it is built.
            let mut tails = vec![NONE; hashes.len()];
            for (i, h) in hashes.iter().enumerate() {
                let head = *index.first.entry(h.finish()).or_insert(i);
                if head != i
                    && let Some(tail) = tails.get_mut(head)
                {
                    let previous = if *tail == NONE { head } else { *tail };
                    if let Some(slot) = index.next.get_mut(previous) {
                        *slot = i;
                    }
                    *tail = i;
                }
            }
            index
        })
    }
}

/// A polynomial hash of bytes modulo the prime 2^61 - 1 at a base drawn at random once per
/// process: a path's hash extends its parent's, and no input can choose paths that
/// collide (two different paths of length n collide with probability below n / 2^61).
#[derive(Debug, Clone, Copy)]
struct Hash {
    value: u64,
    /// The base's powers: `powers[i]` is base^(i + 1).
    powers: &'static [u64; CHUNK],
}

const MODULUS: u64 = (1 << 61) - 1;

/// Bytes hashed per step of [`Hash::write`].
const CHUNK: usize = 8;

/// The base and its powers up to base^[`CHUNK`], modulo 2^61 - 1.
fn powers() -> &'static [u64; CHUNK] {
    static POWERS: OnceLock<[u64; CHUNK]> = OnceLock::new();
    POWERS.get_or_init(|| {
        let base = RandomState::new().hash_one(0x006b_7562_656c_6574_u64) % (MODULUS - 256) + 256;
        let mut powers = [base; CHUNK];
        for i in 1..CHUNK {
            let previous = powers.get(i - 1).copied().unwrap_or(base);
            if let Some(p) = powers.get_mut(i) {
                *p = reduce(u128::from(previous) * u128::from(base));
            }
        }
        powers
    })
}

/// A byte as a digit, from 1 to 256, so that no byte is a zero digit ("\0a" and "a"
/// differ).
fn digit(b: u8) -> u128 {
    u128::from(b) + 1
}

impl Hash {
    fn new() -> Self {
        Hash {
            value: 0,
            powers: powers(),
        }
    }

    fn write_byte(&mut self, b: u8) {
        let [base, ..] = *self.powers;
        let product = u128::from(self.value) * u128::from(base) + digit(b);
        self.value = reduce(product);
    }

    /// The same as [`Hash::write_byte`] of each byte, [`CHUNK`] bytes a step (Horner's
    /// rule unrolled: value * base^8 + d0 * base^7 + ... + d7, whose products do not wait
    /// for each other).
    fn write(&mut self, bytes: &[u8]) {
        let [b1, b2, b3, b4, b5, b6, b7, b8] = self.powers.map(u128::from);
        let mut chunks = bytes.chunks_exact(CHUNK);
        for chunk in &mut chunks {
            let Ok([d0, d1, d2, d3, d4, d5, d6, d7]) = <[u8; CHUNK]>::try_from(chunk) else {
                continue;
            };
            // Below 2^122 + 7 * 2^69 + 2^9: within what `reduce` takes.
            let sum = u128::from(self.value) * b8
                + digit(d0) * b7
                + digit(d1) * b6
                + digit(d2) * b5
                + digit(d3) * b4
                + digit(d4) * b3
                + digit(d5) * b2
                + digit(d6) * b1
                + digit(d7);
            self.value = reduce(sum);
        }
        for &b in chunks.remainder() {
            self.write_byte(b);
        }
    }

    fn finish(self) -> u64 {
        self.value
    }
}

/// `x` modulo 2^61 - 1, for `x` below 2^125 (2^61 is 1 modulo 2^61 - 1, so folding the
/// high bits onto the low ones twice leaves less than 2^61 + 9).
fn reduce(x: u128) -> u64 {
    let m = u128::from(MODULUS);
    let folded = (x & m) + (x >> 61);
    let folded = (folded & m) + (folded >> 61);
    let r = folded as u64;
    if r >= MODULUS { r - MODULUS } else { r }
}

fn hash(bytes: &[u8]) -> u64 {
    let mut h = Hash::new();
    h.write(bytes);
    h.finish()
}

/// The decimal digits of `n`, right-aligned in a buffer, and how many there are.
fn decimal(mut n: usize) -> ([u8; 20], usize) {
    let mut digits = [0u8; 20];
    let mut len = 0;
    loop {
        len += 1;
        if let Some(d) = digits.get_mut(20 - len) {
            *d = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 {
            return (digits, len);
        }
    }
}

/// The number of decimal digits of `n`.
fn decimal_len(n: usize) -> usize {
    decimal(n).1
}

/// `parent.key` (or `key` at the root), in [`SourceMap`] path syntax.
pub fn join_key(parent: &str, key: &str) -> String {
    let mut path = String::with_capacity(parent.len() + 1 + key.len());
    path.push_str(parent);
    push_key(&mut path, key);
    path
}

/// Whether the field path `path` is `ancestor` or lies under it
/// (`featureGates.CPUManager` is within `featureGates`; `kubeReservedCgroup` is not
/// within `kubeReserved`).
pub fn is_within(path: &str, ancestor: &str) -> bool {
    path == ancestor
        || path
            .strip_prefix(ancestor)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

/// `parent[index]`, in [`SourceMap`] path syntax.
pub fn join_index(parent: &str, index: usize) -> String {
    let mut path = String::with_capacity(parent.len() + 2 + decimal_len(index));
    path.push_str(parent);
    push_index(&mut path, index);
    path
}

/// Appends `.key` (or `key` when `path` is the root) to `path`.
pub(crate) fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

/// Appends `[index]` to `path`.
pub(crate) fn push_index(path: &mut String, index: usize) {
    use std::fmt::Write as _;
    // Writing to a String cannot fail.
    let _ = write!(path, "[{index}]");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashing_bytes_at_once_equals_hashing_them_one_by_one() {
        let bytes: Vec<u8> = (0..200u32).map(|i| (i * 37 % 256) as u8).collect();
        for len in 0..bytes.len() {
            for start in [0, 1, 7] {
                let part = bytes.get(start..len.max(start)).unwrap_or_default();
                let mut at_once = Hash::new();
                at_once.write_byte(b'x');
                at_once.write(part);
                let mut one_by_one = Hash::new();
                one_by_one.write_byte(b'x');
                for &b in part {
                    one_by_one.write_byte(b);
                }
                assert_eq!(at_once.finish(), one_by_one.finish(), "{len} {start}");
            }
        }
        // The largest digits at the largest value still reduce correctly.
        let mut h = Hash::new();
        h.value = MODULUS - 1;
        let mut g = h;
        h.write(&[255; 8]);
        for _ in 0..8 {
            g.write_byte(255);
        }
        assert_eq!(h.finish(), g.finish());
        assert!(h.finish() < MODULUS);
    }

    fn at(line: usize) -> Position {
        Position { line, column: 1 }
    }

    #[test]
    fn nested_entries_are_found_by_their_whole_path() {
        let mut map = SourceMap::new();
        let root = map.record_key(None, "", at(1));
        assert_eq!(map.get(""), Some(at(1)));
        let _ = root;
        let eviction = map.record_key(None, "evictionHard", at(2));
        map.record_key(Some(eviction), "memory.available", at(3));
        let taints = map.record_key(None, "registerWithTaints", at(4));
        let first = map.record_index(Some(taints), 0, at(5));
        map.record_key(Some(first), "effect", at(6));
        let top = map.record_index(None, 12, at(7));

        assert_eq!(map.get("evictionHard.memory.available"), Some(at(3)));
        assert_eq!(map.get("registerWithTaints[0].effect"), Some(at(6)));
        assert_eq!(map.get("registerWithTaints[0]"), Some(at(5)));
        assert_eq!(map.get("[12]"), Some(at(7)));
        let _ = top;
        for missing in [
            "evictionHard.memory",
            "registerWithTaints[1]",
            "registerWithTaints.0",
            "effect",
            "[1]",
        ] {
            assert_eq!(map.get(missing), None, "{missing}");
        }
        // Ancestors: the nearest recorded one; a key's own dots are cut points too.
        assert_eq!(
            map.position("evictionHard.memory.available.x[3]"),
            Some(at(3))
        );
        assert_eq!(map.position("evictionHard.nodefs.available"), Some(at(2)));
        assert_eq!(map.position("registerWithTaints[7].key"), Some(at(4)));
        assert_eq!(map.position("shutdownGracePeriod"), None);
        assert_eq!(
            map.nearest("registerWithTaints[0].effect.x", 1),
            Some((28, at(6)))
        );
        // No ancestor shorter than asked for.
        assert_eq!(map.nearest("registerWithTaints[7].key", 19), None);
        assert_eq!(
            map.nearest("registerWithTaints[7].key", 18),
            Some((18, at(4)))
        );
        assert_eq!(
            map.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            [
                "",
                "evictionHard",
                "evictionHard.memory.available",
                "registerWithTaints",
                "registerWithTaints[0]",
                "registerWithTaints[0].effect",
                "[12]"
            ]
        );
    }

    #[test]
    fn a_repeated_path_keeps_every_position_in_order() {
        let mut map = SourceMap::new();
        let gates = map.record_key(None, "featureGates", at(1));
        map.record_key(Some(gates), "A", at(2));
        map.record_key(Some(gates), "B", at(3));
        map.record_key(Some(gates), "A", at(4));
        map.record("featureGates.A", at(5));
        assert_eq!(map.get("featureGates.A"), Some(at(2)));
        assert_eq!(
            map.all("featureGates.A").collect::<Vec<_>>(),
            [at(2), at(4), at(5)]
        );
        // Recording after a lookup rebuilds the index.
        map.record("late", at(6));
        assert_eq!(map.get("late"), Some(at(6)));
    }

    #[test]
    fn empty_keys_and_keys_with_separators_keep_their_own_paths() {
        let mut map = SourceMap::new();
        let empty = map.record_key(None, "", at(1));
        map.record_key(Some(empty), "a", at(2));
        let a = map.record_key(None, "a", at(3));
        map.record_key(Some(a), "", at(4));
        map.record_key(Some(a), "b[0]", at(5));
        // `""` then `a` under it is the path `a`, as push_key builds it.
        assert_eq!(map.all("a").collect::<Vec<_>>(), [at(2), at(3)]);
        assert_eq!(map.get("a."), Some(at(4)));
        assert_eq!(map.get("a.b[0]"), Some(at(5)));
    }

    #[test]
    fn maps_compare_by_paths_and_positions() {
        let mut a = SourceMap::new();
        let k = a.record_key(None, "k", at(1));
        a.record_index(Some(k), 0, at(2));
        let mut b = SourceMap::new();
        b.record("k", at(1));
        b.record("k[0]", at(2));
        assert_eq!(a, b);
        b.record("k[1]", at(3));
        assert_ne!(a, b);
    }

    #[test]
    fn hashes_are_reduced_modulo_the_prime() {
        assert_eq!(reduce(u128::from(MODULUS)), 0);
        assert_eq!(reduce(u128::from(MODULUS) + 5), 5);
        let big = u128::from(MODULUS - 1) * u128::from(MODULUS - 1) + 256;
        assert_eq!(reduce(big), ((big % u128::from(MODULUS)) as u64));
        assert_eq!(decimal_len(0), 1);
        assert_eq!(decimal_len(9), 1);
        assert_eq!(decimal_len(10), 2);
        assert_eq!(decimal_len(123_456), 6);
        assert_eq!(decimal_len(usize::MAX), usize::MAX.to_string().len());
        let (digits, len) = decimal(9_087);
        assert_eq!(&digits[20 - len..], b"9087");
    }
}
