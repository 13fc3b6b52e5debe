//! JSON input: a file whose first non-space character is `{`.
//!
//! The kubelet hands such a file to its JSON serializer, not to the YAML one (apimachinery's
//! recognizer checks for a leading `{`), so it is parsed as strict JSON here too: serde_json
//! for the syntax and numbers, a seed that rejects duplicate keys and deep nesting while it
//! builds the tree, then a light scan of the (now known valid) text for field positions.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;

use super::node::{Node, first_duplicate};

use super::source_map::{EntryId, Position, SourceMap, push_index, push_key};
use super::{DecodeError, MAX_DEPTH};

/// Whether the kubelet would read `text` as JSON.
pub(super) fn looks_like_json(text: &str) -> bool {
    text.trim_start().starts_with('{')
}

pub(super) fn parse<'t>(file: &str, text: &'t str) -> Result<(Node<'t>, SourceMap), DecodeError> {
    let mut state = State::default();
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let result = ValueSeed { state: &mut state }
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value));
    match result {
        Ok(value) => Ok((value, positions(text))),
        Err(error) => Err(to_decode_error(file, text, &error, state)),
    }
}

fn to_decode_error(file: &str, text: &str, error: &serde_json::Error, state: State) -> DecodeError {
    let at = (error.line() > 0).then(|| Position {
        line: error.line(),
        column: error.column(),
    });
    let has_detail = state.detail.is_some();
    let mut decode_error = match state.detail {
        Some(Detail::Duplicate(key)) => {
            let found = positions(text);
            let mut occurrences = found.all(&state.path);
            let (first, second) = (occurrences.next(), occurrences.next());
            drop(occurrences);
            let message = match first {
                Some(p) => format!("duplicate key {key:?} (first set at line {})", p.line),
                None => format!("duplicate key {key:?}"),
            };
            let error = DecodeError::new(file, message);
            // Point at the repeated key rather than where serde_json noticed it.
            if let Some(second) = second {
                return error.at(second).with_field(state.path.clone());
            }
            error
        }
        Some(Detail::TooDeep) => {
            DecodeError::new(file, format!("nested deeper than {MAX_DEPTH} levels"))
        }
        None => {
            let full = error.to_string();
            let message = match at {
                Some(p) => full
                    .strip_suffix(&format!(" at line {} column {}", p.line, p.column))
                    .unwrap_or(&full)
                    .to_string(),
                None => full,
            };
            let message = if message == "trailing characters" {
                "invalid JSON: trailing characters after the top-level object (a configuration \
                 file holds exactly one object)"
                    .to_string()
            } else {
                format!("invalid JSON: {message}")
            };
            DecodeError::new(file, message)
        }
    };
    if let Some(at) = at {
        decode_error = decode_error.at(at);
    }
    // A syntax error has a position but no meaningful field.
    if has_detail && !state.path.is_empty() {
        decode_error = decode_error.with_field(state.path);
    }
    decode_error
}

#[derive(Default)]
struct State {
    /// Path of the node being built; on error, where it happened.
    path: String,
    depth: usize,
    detail: Option<Detail>,
}

/// Errors the seed raises itself, kept out of serde's string-only error channel.
enum Detail {
    Duplicate(String),
    TooDeep,
}

struct ValueSeed<'s> {
    state: &'s mut State,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Node<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Node<'de>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Node<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Node<'de>, E> {
        Ok(Node::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Node<'de>, E> {
        Ok(Node::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Node<'de>, E> {
        Ok(Node::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node<'de>, E> {
        serde_json::Number::from_f64(v)
            .map(Node::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Borrowed(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Owned(v.to_string())))
    }

    fn visit_string<E>(self, v: String) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Owned(v)))
    }

    fn visit_unit<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }

    fn visit_none<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node<'de>, A::Error> {
        let state = self.state;
        enter(state)?;
        let base = state.path.len();
        let mut items = Vec::new();
        loop {
            state.path.truncate(base);
            push_index(&mut state.path, items.len());
            match seq.next_element_seed(ValueSeed { state: &mut *state })? {
                Some(item) => items.push(item),
                None => break,
            }
        }
        state.path.truncate(base);
        state.depth -= 1;
        Ok(Node::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Node<'de>, A::Error> {
        let state = self.state;
        enter(state)?;
        let base = state.path.len();
        let mut entries = Vec::new();
        while let Some(key) = access.next_key_seed(KeySeed)? {
            state.path.truncate(base);
            push_key(&mut state.path, &key);
            let value = access.next_value_seed(ValueSeed { state: &mut *state })?;
            entries.push((key, value));
        }
        state.path.truncate(base);
        // Duplicates are looked for once per object, without hashing each key.
        if let Some(index) = first_duplicate(&entries) {
            let key = entries[index].0.to_string();
            push_key(&mut state.path, &key);
            state.detail = Some(Detail::Duplicate(key));
            return Err(de::Error::custom("duplicate key"));
        }
        state.depth -= 1;
        Ok(Node::Object(entries))
    }
}

/// An object key, borrowed from the text when it has no escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

fn enter<E: de::Error>(state: &mut State) -> Result<(), E> {
    state.depth += 1;
    if state.depth > MAX_DEPTH {
        state.detail = Some(Detail::TooDeep);
        return Err(E::custom("nested too deeply"));
    }
    Ok(())
}

/// Positions of every key and list element in JSON text. Built for valid JSON; on anything
/// else it stops early and returns what it found.
fn positions(text: &str) -> SourceMap {
    let mut scanner = Scanner {
        text,
        bytes: text.as_bytes(),
        i: 0,
        line: 1,
        line_start: 0,
        column_at: (0, 0),
        map: SourceMap::new(),
    };
    scanner.skip_whitespace();
    let root = scanner.position();
    scanner.map.record("", root);
    scanner.value(0, None);
    scanner.map
}

struct Scanner<'t> {
    text: &'t str,
    bytes: &'t [u8],
    i: usize,
    line: usize,
    line_start: usize,
    /// The last column computed on the current line: (byte offset, characters before it
    /// on the line), so that a long line is counted once, not once per key.
    column_at: (usize, usize),
    map: SourceMap,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.i).copied()
    }

    fn position(&mut self) -> Position {
        let (from, before) = if self.column_at.0 >= self.line_start && self.column_at.0 <= self.i {
            self.column_at
        } else {
            (self.line_start, 0)
        };
        let column = before + self.text.get(from..self.i).map_or(0, |s| s.chars().count());
        self.column_at = (self.i, column);
        Position {
            line: self.line,
            column: column + 1,
        }
    }

    fn skip_whitespace(&mut self) {
        while let Some(c) = self.peek() {
            match c {
                b'\n' => {
                    self.i += 1;
                    self.line += 1;
                    self.line_start = self.i;
                }
                b' ' | b'\t' | b'\r' => self.i += 1,
                _ => break,
            }
        }
    }

    /// A value whose key or element is `entry`.
    fn value(&mut self, depth: usize, entry: Option<EntryId>) {
        if depth > MAX_DEPTH {
            return;
        }
        self.skip_whitespace();
        match self.peek() {
            Some(b'{') => self.object(depth + 1, entry),
            Some(b'[') => self.array(depth + 1, entry),
            Some(b'"') => {
                self.string();
            }
            Some(_) => {
                while let Some(c) = self.peek() {
                    if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
                        break;
                    }
                    self.i += 1;
                }
            }
            None => {}
        }
    }

    fn object(&mut self, depth: usize, parent: Option<EntryId>) {
        self.i += 1;
        loop {
            self.skip_whitespace();
            match self.peek() {
                Some(b'}') => {
                    self.i += 1;
                    return;
                }
                Some(b'"') => {}
                _ => return,
            }
            let at = self.position();
            let key = self.string();
            let entry = self.map.record_key(parent, &key, at);
            self.skip_whitespace();
            if self.peek() != Some(b':') {
                return;
            }
            self.i += 1;
            self.value(depth, Some(entry));
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return;
                }
                _ => return,
            }
        }
    }

    fn array(&mut self, depth: usize, parent: Option<EntryId>) {
        self.i += 1;
        let mut index = 0;
        loop {
            self.skip_whitespace();
            match self.peek() {
                Some(b']') => {
                    self.i += 1;
                    return;
                }
                None => return,
                Some(_) => {}
            }
            let at = self.position();
            let entry = self.map.record_index(parent, index, at);
            self.value(depth, Some(entry));
            index += 1;
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return;
                }
                _ => return,
            }
        }
    }

    /// Skips a string starting at the opening quote and returns its decoded text.
    fn string(&mut self) -> String {
        let start = self.i;
        self.i += 1;
        let mut escaped = false;
        while let Some(c) = self.peek() {
            match c {
                b'\\' => {
                    escaped = true;
                    self.i += 2;
                }
                b'"' => {
                    self.i += 1;
                    break;
                }
                _ => self.i += 1,
            }
        }
        let raw = self
            .text
            .get(start..self.i.min(self.text.len()))
            .unwrap_or("");
        if escaped && let Ok(decoded) = serde_json::from_str::<String>(raw) {
            return decoded;
        }
        raw.strip_prefix('"')
            .and_then(|s| s.strip_suffix('"'))
            .unwrap_or(raw)
            .to_string()
    }
}
