//! [`StrMap`], the compact string map a node's labels and annotations are kept in, and
//! the [`Interner`] that lets a fleet's nodes share their strings.
//!
//! A fleet's nodes repeat themselves: the same twenty label keys on every node, the same
//! zone, instance type and node group on thousands, the same desired-config on a whole
//! pool. A `BTreeMap<String, String>` per node stores each copy again (about 2.5 KiB for
//! an EKS node's labels alone); a [`StrMap`] is a sorted slice of `Arc<str>` pairs, and
//! the [`Interner`] hands every node the same `Arc` for the same string, so a node costs
//! its pointers and the strings only it has (its hostname).

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;

/// A small map from string to string, sorted by key. Lookups are binary searches over a
/// few dozen entries; values are shared `Arc<str>`s.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct StrMap(Vec<(Arc<str>, Arc<str>)>);

impl StrMap {
    /// An empty map.
    pub fn new() -> StrMap {
        StrMap::default()
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_ref().cmp(key))
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.find(key).ok().map(|i| self.0[i].1.as_ref())
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Sets `key` to `value`.
    pub fn insert(&mut self, key: impl Into<Arc<str>>, value: impl Into<Arc<str>>) {
        let key = key.into();
        match self.find(&key) {
            Ok(i) => self.0[i].1 = value.into(),
            Err(i) => self.0.insert(i, (key, value.into())),
        }
    }

    /// Removes `key`; returns whether it was there.
    pub fn remove(&mut self, key: &str) -> bool {
        match self.find(key) {
            Ok(i) => {
                self.0.remove(i);
                true
            }
            Err(_) => false,
        }
    }

    /// Keeps the entries `keep` says yes to.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &str) -> bool) {
        self.0.retain(|(k, v)| keep(k, v));
    }

    /// The entries, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v.as_ref()))
    }

    /// The keys, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_ref())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A copy as an ordinary map (for serialisation and for callers that edit).
    pub fn to_btree(&self) -> BTreeMap<String, String> {
        self.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The entries with their shared values.
    pub fn iter_shared(&self) -> impl Iterator<Item = (&str, &Arc<str>)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v))
    }

    /// Builds a map from entries already interned, sorting them.
    fn from_vec(mut entries: Vec<(Arc<str>, Arc<str>)>) -> StrMap {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        // A later duplicate wins, as inserting one by one would.
        entries.reverse();
        entries.dedup_by(|later, earlier| later.0 == earlier.0);
        entries.reverse();
        entries.shrink_to_fit();
        StrMap(entries)
    }
}

impl fmt::Debug for StrMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Into<Arc<str>>, V: Into<Arc<str>>> FromIterator<(K, V)> for StrMap {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> StrMap {
        StrMap::from_vec(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

impl<K: Into<Arc<str>>, V: Into<Arc<str>>> Extend<(K, V)> for StrMap {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl From<BTreeMap<String, String>> for StrMap {
    fn from(map: BTreeMap<String, String>) -> StrMap {
        map.into_iter().collect()
    }
}

/// Hands out one shared `Arc<str>` per distinct string.
///
/// Strings no map uses any more (an old desired-config, an agent's message) are dropped
/// by [`Interner::sweep`], which [`Interner::intern`] runs whenever the table has doubled
/// since the last sweep, so its cost is spread over the insertions that made it needed.
#[derive(Debug, Default)]
pub struct Interner {
    strings: HashSet<Arc<str>>,
    /// The table's size after the last sweep.
    swept_at: usize,
}

/// Below this many strings the table is never swept.
const SWEEP_FLOOR: usize = 4096;

impl Interner {
    pub fn new() -> Interner {
        Interner::default()
    }

    /// The shared copy of `s`.
    pub fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some(shared) = self.strings.get(s) {
            return shared.clone();
        }
        if self.strings.len() >= SWEEP_FLOOR.max(2 * self.swept_at) {
            self.sweep();
        }
        let shared: Arc<str> = Arc::from(s);
        self.strings.insert(shared.clone());
        shared
    }

    /// `entries` as a map of shared strings.
    pub fn map<'a>(&mut self, entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> StrMap {
        StrMap::from_vec(
            entries
                .into_iter()
                .map(|(k, v)| (self.intern(k), self.intern(v)))
                .collect(),
        )
    }

    /// Drops the strings only the table holds.
    pub fn sweep(&mut self) {
        self.strings.retain(|s| Arc::strong_count(s) > 1);
        self.swept_at = self.strings.len();
    }

    /// Distinct strings held.
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sorted_map() {
        let mut m: StrMap = [("b", "2"), ("a", "1"), ("b", "3")].into_iter().collect();
        assert_eq!(m.iter().collect::<Vec<_>>(), [("a", "1"), ("b", "3")]);
        assert_eq!(m.get("b"), Some("3"));
        assert_eq!(m.get("c"), None);
        m.insert("c", "4");
        m.insert("a", "0");
        assert_eq!(m.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(m.get("a"), Some("0"));
        assert!(m.remove("b"));
        assert!(!m.remove("b"));
        m.retain(|k, _| k != "c");
        assert_eq!(format!("{m:?}"), r#"{"a": "0"}"#);
        let other: StrMap = BTreeMap::from([("a".to_string(), "0".to_string())]).into();
        assert_eq!(m, other, "equality is by content, whoever built the map");
    }

    #[test]
    fn interned_strings_are_shared_and_swept() {
        let mut i = Interner::new();
        let a = i.map([("zone", "a"), ("host", "n1")]);
        let b = i.map([("zone", "a"), ("host", "n2")]);
        assert!(Arc::ptr_eq(&a.0[1].0, &b.0[1].0), "one copy of `zone`");
        assert!(Arc::ptr_eq(&a.0[1].1, &b.0[1].1), "one copy of `a`");
        assert_eq!(i.len(), 5, "zone, a, host, n1, n2");
        drop(a);
        i.sweep();
        assert_eq!(i.len(), 4, "n1 was only the table's");
        assert_eq!(b.get("host"), Some("n2"));
    }

    #[test]
    fn the_table_sweeps_itself_as_it_grows() {
        let mut i = Interner::new();
        for n in 0..(SWEEP_FLOOR * 3) {
            // Every string is dropped at once: the table must not keep them all.
            let _ = i.intern(&format!("message {n}"));
        }
        assert!(i.len() <= SWEEP_FLOOR + 1, "{} strings kept", i.len());
    }
}
