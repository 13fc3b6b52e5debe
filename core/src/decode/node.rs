//! The untyped tree that decoding builds: JSON's data model, with strings borrowed from
//! the input where possible and mappings kept as lists, so that building it does no
//! hashing. It becomes a `serde_json::Value` for [`super::decode_value`] and is
//! deserialized directly into the typed model by [`super::decode_strict`].

use std::borrow::Cow;
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use serde_json::{Map, Number, Value};

/// A JSON value whose strings may borrow from the decoded text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node<'t> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'t, str>),
    Array(Vec<Node<'t>>),
    /// Entries in document order; keys are unique once decoding succeeded.
    Object(Vec<(Cow<'t, str>, Node<'t>)>),
}

impl<'t> Node<'t> {
    /// The equivalent `serde_json::Value`.
    pub(crate) fn into_value(self) -> Value {
        match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(b),
            Node::Number(n) => Value::Number(n),
            Node::String(s) => Value::String(s.into_owned()),
            Node::Array(items) => Value::Array(items.into_iter().map(Node::into_value).collect()),
            Node::Object(entries) => {
                let mut map = Map::with_capacity(entries.len());
                for (key, value) in entries {
                    map.insert(key.into_owned(), value.into_value());
                }
                Value::Object(map)
            }
        }
    }

    /// A tree borrowing from `value`.
    pub(crate) fn from_value(value: &'t Value) -> Node<'t> {
        match value {
            Value::Null => Node::Null,
            Value::Bool(b) => Node::Bool(*b),
            Value::Number(n) => Node::Number(n.clone()),
            Value::String(s) => Node::String(Cow::Borrowed(s)),
            Value::Array(items) => Node::Array(items.iter().map(Node::from_value).collect()),
            Value::Object(map) => Node::Object(
                map.iter()
                    .map(|(k, v)| (Cow::Borrowed(k.as_str()), Node::from_value(v)))
                    .collect(),
            ),
        }
    }

    /// The value of `key` in a mapping.
    pub(crate) fn get(&self, key: &str) -> Option<&Node<'t>> {
        match self {
            Node::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// What kind of value this is, for messages.
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "a boolean",
            Node::Number(_) => "a number",
            Node::String(_) => "a string",
            Node::Array(_) => "a list",
            Node::Object(_) => "a mapping",
        }
    }
}

/// The index of the earliest entry whose key repeats an earlier entry's key.
pub(crate) fn first_duplicate<V>(entries: &[(Cow<'_, str>, V)]) -> Option<usize> {
    if entries.len() <= 16 {
        return (1..entries.len()).find(|&i| entries[..i].iter().any(|(k, _)| *k == entries[i].0));
    }
    let mut seen: HashSet<&str, BuildHasherDefault<Fnv>> =
        HashSet::with_capacity_and_hasher(entries.len(), BuildHasherDefault::default());
    entries.iter().position(|(key, _)| !seen.insert(key))
}

/// FNV-1a: keys are short and not chosen by an adversary who gains anything from
/// collisions beyond a slower error (files are at most 1 MiB), and SipHash costs more
/// than the rest of building a mapping.
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut hash = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = hash;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(keys: &[String]) -> Vec<(Cow<'_, str>, ())> {
        keys.iter()
            .map(|k| (Cow::Borrowed(k.as_str()), ()))
            .collect()
    }

    #[test]
    fn finds_the_earliest_repeat_in_small_and_large_mappings() {
        let small = |keys: &[&str]| keys.iter().map(|k| k.to_string()).collect::<Vec<_>>();
        assert_eq!(first_duplicate(&entries(&small(&["a", "b", "c"]))), None);
        assert_eq!(
            first_duplicate(&entries(&small(&["a", "b", "a", "b"]))),
            Some(2)
        );
        let mut keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
        assert_eq!(first_duplicate(&entries(&keys)), None);
        keys.push("k30".to_string());
        keys.push("k3".to_string());
        assert_eq!(first_duplicate(&entries(&keys)), Some(40));
    }

    #[test]
    fn converts_to_and_from_json_values() {
        let value = serde_json::json!({"a": [1, -2, 1.5, "x", null, true], "b": {"c": {}}});
        let node = Node::from_value(&value);
        assert_eq!(node.get("b").map(Node::describe), Some("a mapping"));
        assert_eq!(node.clone().into_value(), value);
    }
}
