//! The typed step: an untyped JSON tree into the typed model, as strictly as Go's
//! `encoding/json` does it, and serde's errors rewritten for people.

use std::borrow::Cow;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Unexpected,
    Visitor,
};
use serde_json::Error;

use super::node::Node;

use super::DecodeError;
use super::scalar::{Resolved, resolve_plain};
use super::source_map::{SourceMap, push_index, push_key};

/// A decoded tree as a serde `Deserializer` with Go's `encoding/json` strictness: a list
/// is not a struct (serde's derived structs would take a list of their fields in order),
/// and an enum is a string (the kubelet's types have no other kind).
#[derive(Clone, Copy)]
pub(super) struct Strict<'de>(pub(super) &'de Node<'de>);

/// Decodes `node` into `T`, tracking the field path only when decoding fails (tracking
/// costs as much as the decoding itself).
pub(super) fn from_node<T: DeserializeOwned>(
    file: &str,
    node: &Node<'_>,
    map: &SourceMap,
) -> Result<T, DecodeError> {
    T::deserialize(Strict(node)).or_else(|_| {
        serde_path_to_error::deserialize(Strict(node))
            .map_err(|error| typed_error(file, map, &error))
    })
}

impl<'de> Strict<'de> {
    fn unexpected(self) -> Unexpected<'de> {
        match self.0 {
            Node::Null => Unexpected::Unit,
            Node::Bool(b) => Unexpected::Bool(*b),
            Node::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => Unexpected::Unsigned(u),
                (_, Some(i), _) => Unexpected::Signed(i),
                (_, _, Some(f)) => Unexpected::Float(f),
                _ => Unexpected::Other("number"),
            },
            Node::String(s) => Unexpected::Str(s),
            Node::Array(_) => Unexpected::Seq,
            Node::Object(_) => Unexpected::Map,
        }
    }
}

impl<'de> Deserializer<'de> for Strict<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Node::Null => visitor.visit_unit(),
            Node::Bool(b) => visitor.visit_bool(*b),
            Node::Number(n) => n.deserialize_any(visitor),
            Node::String(s) => visitor.visit_borrowed_str(s),
            Node::Array(items) => {
                let mut access = Items(items.iter());
                let value = visitor.visit_seq(&mut access)?;
                if access.0.len() == 0 {
                    Ok(value)
                } else {
                    Err(de::Error::invalid_length(
                        items.len(),
                        &"fewer elements in the list",
                    ))
                }
            }
            Node::Object(entries) => {
                let mut access = Entries {
                    iter: entries.iter(),
                    value: None,
                };
                let value = visitor.visit_map(&mut access)?;
                if access.iter.len() == 0 {
                    Ok(value)
                } else {
                    Err(de::Error::invalid_length(
                        entries.len(),
                        &"fewer entries in the mapping",
                    ))
                }
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Node::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Node::Object(_) => self.deserialize_any(visitor),
            _ => Err(de::Error::invalid_type(self.unexpected(), &visitor)),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Node::String(s) => visitor.visit_enum(de::value::BorrowedStrDeserializer::new(s)),
            _ => Err(de::Error::invalid_type(self.unexpected(), &"a string")),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map identifier
    }
}

struct Items<'de>(std::slice::Iter<'de, Node<'de>>);

impl<'de> SeqAccess<'de> for Items<'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.0
            .next()
            .map(|v| seed.deserialize(Strict(v)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct Entries<'de> {
    iter: std::slice::Iter<'de, (Cow<'de, str>, Node<'de>)>,
    value: Option<&'de Node<'de>>,
}

impl<'de> MapAccess<'de> for Entries<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.iter.next() {
            Some((key, value)) => {
                self.value = Some(value);
                seed.deserialize(Key(key)).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(Strict(value)),
            None => Err(de::Error::custom(
                "a mapping value was requested before its key",
            )),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

/// A mapping key: a string, which like Go's `encoding/json` may also stand for an integer
/// (for maps keyed by numbers), a newtype around a string, or an enum variant.
struct Key<'de>(&'de str);

macro_rules! integer_key {
    ($($method:ident $parse:ty, $visit:ident;)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            match self.0.parse::<$parse>() {
                Ok(n) => visitor.$visit(n),
                Err(_) => Err(de::Error::invalid_value(Unexpected::Str(self.0), &visitor)),
            }
        }
    )*};
}

impl<'de> Deserializer<'de> for Key<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_borrowed_str(self.0)
    }

    integer_key! {
        deserialize_i8 i8, visit_i8;
        deserialize_i16 i16, visit_i16;
        deserialize_i32 i32, visit_i32;
        deserialize_i64 i64, visit_i64;
        deserialize_u8 u8, visit_u8;
        deserialize_u16 u16, visit_u16;
        deserialize_u32 u32, visit_u32;
        deserialize_u64 u64, visit_u64;
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_enum(de::value::BorrowedStrDeserializer::new(self.0))
    }

    serde::forward_to_deserialize_any! {
        bool i128 u128 f32 f64 char str string bytes byte_buf unit unit_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

/// Turns a serde error on the typed model into a [`DecodeError`].
pub(super) fn typed_error(
    file: &str,
    map: &SourceMap,
    error: &serde_path_to_error::Error<serde_json::Error>,
) -> DecodeError {
    use serde_path_to_error::Segment;

    let mut path = String::new();
    let mut last_key = None;
    for segment in error.path().iter() {
        match segment {
            Segment::Seq { index } => {
                push_index(&mut path, *index);
                last_key = None;
            }
            Segment::Map { key } | Segment::Enum { variant: key } => {
                push_key(&mut path, key);
                last_key = Some(key.as_str());
            }
            Segment::Unknown => {
                push_key(&mut path, "?");
                last_key = None;
            }
        }
    }
    let explained = explain(&error.inner().to_string(), last_key);
    let mut decode_error = DecodeError::new(file, explained.message).at_opt(map.position(&path));
    if !path.is_empty() {
        decode_error = decode_error.with_field(path);
    }
    if let Some(suggestion) = explained.suggestion {
        decode_error = decode_error.with_suggestion(suggestion);
    }
    decode_error
}

struct Explained {
    message: String,
    suggestion: Option<String>,
}

/// Rewrites serde's messages for people: unknown fields with the closest known one, type
/// errors with Go-like type names and a hint about YAML quoting.
fn explain(raw: &str, last_key: Option<&str>) -> Explained {
    let plain = |message: String| Explained {
        message,
        suggestion: None,
    };
    if let Some(rest) = raw.strip_prefix("unknown field `") {
        let known_split = last_key.and_then(|key| {
            rest.strip_prefix(key)
                .and_then(|tail| tail.strip_prefix("`, "))
                .map(|tail| (key, tail))
        });
        let (name, tail) = known_split.unwrap_or_else(|| split_name(rest));
        let expected = backticked(tail);
        let message = if expected.is_empty() {
            format!("unknown field {name:?}: this object takes no fields")
        } else {
            format!("unknown field {name:?}")
        };
        return Explained {
            message,
            suggestion: closest(name, &expected).map(str::to_string),
        };
    }
    if let Some(rest) = raw.strip_prefix("unknown variant `") {
        let (name, tail) = split_name(rest);
        let expected = backticked(tail);
        return Explained {
            message: format!(
                "unknown value {name:?}, expected one of: {}",
                expected.join(", ")
            ),
            suggestion: closest(name, &expected).map(str::to_string),
        };
    }
    if let Some(rest) = raw.strip_prefix("invalid type: ")
        && let Some((unexpected, expected)) = rest.rsplit_once(", expected ")
    {
        let mut message = format!(
            "wrong type: expected {}, got {}",
            describe_expected(expected),
            describe_unexpected(unexpected)
        );
        if let Some(hint) = quoting_hint(expected, unexpected) {
            message.push_str(hint);
        }
        return plain(message);
    }
    if let Some(rest) = raw.strip_prefix("invalid value: ")
        && let Some((unexpected, expected)) = rest.rsplit_once(", expected ")
    {
        return plain(format!(
            "invalid value: expected {}, got {}",
            describe_expected(expected),
            describe_unexpected(unexpected)
        ));
    }
    if let Some(name) = raw
        .strip_prefix("missing field `")
        .and_then(|rest| rest.strip_suffix('`'))
    {
        return plain(format!("missing required field {name:?}"));
    }
    plain(raw.to_string())
}

/// Splits "name`, rest" at the first "`, ".
fn split_name(rest: &str) -> (&str, &str) {
    match rest.find("`, ") {
        Some(i) => (&rest[..i], &rest[i + 3..]),
        None => (rest.trim_end_matches('`'), ""),
    }
}

/// The names between backticks in serde's "expected one of `a`, `b`".
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// serde's description of an expected type, with Go's type names.
fn describe_expected(expected: &str) -> String {
    let go = match expected {
        "i8" => "an integer (int8)",
        "i16" => "an integer (int16)",
        "i32" => "an integer (int32)",
        "i64" => "an integer (int64)",
        "u8" => "a non-negative integer (uint8)",
        "u16" => "a non-negative integer (uint16)",
        "u32" => "a non-negative integer (uint32)",
        "u64" => "a non-negative integer (uint64)",
        "f32" | "f64" => "a number",
        "a sequence" => "a list",
        "a map" => "a mapping",
        "a borrowed string" => "a string",
        other if other.starts_with("struct ") => "a mapping",
        other => other,
    };
    go.to_string()
}

/// serde's description of the value found, without Rust-isms.
fn describe_unexpected(unexpected: &str) -> String {
    match unexpected {
        "unit value" => "null".to_string(),
        "map" => "a mapping".to_string(),
        "sequence" => "a list".to_string(),
        other => other.replace("floating point", "number").replace('`', ""),
    }
}

/// A hint for the classic YAML mistakes: `cpu: 1` or `enabled: yes` where a string is
/// expected, `maxPods: "110"` where a number is.
fn quoting_hint(expected: &str, unexpected: &str) -> Option<&'static str> {
    let wants_string = expected == "a string" || expected == "a borrowed string";
    let wants_number = matches!(
        expected,
        "i8" | "i16" | "i32" | "i64" | "u8" | "u16" | "u32" | "u64" | "f32" | "f64"
    );
    // What the quoted text would be without its quotes.
    let unquoted = unexpected
        .strip_prefix("string \"")
        .and_then(|s| s.strip_suffix('"'))
        .map(resolve_plain);
    if wants_string && unexpected.starts_with("boolean") {
        Some(
            " (YAML reads unquoted yes/no/on/off/true/false as booleans; quote the value to \
             keep it a string)",
        )
    } else if wants_string
        && (unexpected.starts_with("integer") || unexpected.starts_with("floating"))
    {
        Some(" (quote the value to make it a string, e.g. \"1\")")
    } else if wants_number
        && matches!(
            unquoted,
            Some(Resolved::Int(_) | Resolved::Uint(_) | Resolved::Float(_))
        )
    {
        Some(" (remove the quotes to make it a number)")
    } else if expected == "a boolean" && matches!(unquoted, Some(Resolved::Bool(_))) {
        Some(" (remove the quotes to make it a boolean)")
    } else {
        None
    }
}

/// The candidate closest to `name`, if close enough to be what was meant: the same name
/// in another case or in kebab/snake case (`max-pods` for `maxPods`), or within a few
/// edits (a third of the name's length, at most four).
pub(super) fn closest<'c>(name: &str, candidates: &[&'c str]) -> Option<&'c str> {
    let camel = to_camel(name);
    if let Some(exact) = candidates
        .iter()
        .find(|c| **c == camel || c.eq_ignore_ascii_case(name) || c.eq_ignore_ascii_case(&camel))
    {
        return Some(exact);
    }
    let lower = name.to_lowercase();
    let chars = lower.chars().count();
    let limit = (chars / 3).min(4);
    if limit == 0 {
        return None;
    }
    // The distance is at least the difference in length: only candidates of about the
    // same length are compared, so a name of any length costs little.
    candidates
        .iter()
        .filter(|c| c.chars().count().abs_diff(chars) <= limit)
        .map(|c| (strsim::damerau_levenshtein(&lower, &c.to_lowercase()), *c))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, c)| c)
}

/// `max-pods` and `max_pods` to `maxPods`.
fn to_camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '-' || c == '_' {
            upper = !out.is_empty();
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}
