//! A fast path for the YAML that configuration files are made of.
//!
//! The full YAML parser costs about ten times more than decoding the same data from JSON.
//! Configuration files use a small part of YAML: block mappings and sequences, one-line
//! plain and quoted scalars, one-line flow collections, comments, a leading `---`. This
//! module reads that part line by line and turns it into the events the full parser would
//! produce, fed to the same [`Builder`], so the tree, the source map and the scalar rules
//! are the same. On anything else (anchors, aliases, tags, block scalars, multi-line
//! scalars or flow collections, merge keys, tabs, carriage returns, directives, a second
//! document, any error at all) it gives up and the caller runs the full parser, which
//! also produces the error messages. The differential tests hold it to this contract.

use std::borrow::Cow;
use std::cell::Cell;

use serde_saphyr::granit_parser::{Event, Marker, ScalarStyle, Span, StructureStyle};

use super::node::Node;
use super::source_map::SourceMap;
use super::yaml::Builder;

/// Deeper documents take the full parser (which enforces the real limit).
const MAX_FAST_DEPTH: usize = 32;
/// Longer keys take the full parser (YAML limits implicit keys to 1024 characters).
const MAX_KEY_CHARS: usize = 1000;
/// Deeper flow collections take the full parser.
const MAX_FLOW_DEPTH: usize = 8;

/// The decoded document, or `None` when the full parser must decide.
pub(super) fn parse<'t>(file: &str, text: &'t str) -> Option<(Node<'t>, SourceMap)> {
    if has_unusual_chars(text) {
        return None;
    }
    let mut fast = Fast {
        builder: Builder::new(file),
        stack: Vec::new(),
        awaiting: None,
        max_indent: None,
        marker_seen: false,
        root_opened: false,
        columns: Columns {
            ascii: text.is_ascii(),
            last: Cell::new((0, 0, 0)),
        },
    };
    for (index, line) in text.split('\n').enumerate() {
        fast.line(index + 1, line)?;
    }
    fast.finish()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Map,
    Seq,
}

struct Open {
    kind: Kind,
    /// Column (0-based) of this collection's keys or `-` indicators.
    indent: usize,
}

struct Fast<'f, 't> {
    builder: Builder<'f, 't>,
    stack: Vec<Open>,
    /// A key whose value starts on a later line: its mapping's indent and its line.
    awaiting: Option<(usize, usize)>,
    /// After a one-line value, a more indented line would continue it as a multi-line
    /// scalar: the full parser handles that.
    max_indent: Option<usize>,
    marker_seen: bool,
    root_opened: bool,
    columns: Columns,
}

/// Byte offsets to 0-based character columns, counting each line's characters once
/// however many nodes it holds (a long flow collection on one line).
struct Columns {
    /// The whole text is ASCII: a column is its byte offset.
    ascii: bool,
    /// The last offset converted: (line number, byte offset, column).
    last: Cell<(usize, usize, usize)>,
}

impl Columns {
    fn at(&self, number: usize, line: &str, byte: usize) -> usize {
        if self.ascii {
            return byte;
        }
        let (from, before) = match self.last.get() {
            (n, b, c) if n == number && b <= byte => (b, c),
            _ => (0, 0),
        };
        let column = before + line.get(from..byte).map_or(0, |s| s.chars().count());
        self.last.set((number, byte, column));
        column
    }
}

/// Tabs, carriage returns, and characters YAML does not allow unescaped (or that YAML 1.1
/// reads as line breaks), anywhere including comments.
fn has_unusual_chars(text: &str) -> bool {
    // A fold without early exit, which the compiler vectorizes.
    text.bytes().fold(false, |found, b| {
        found | ((b < 0x20) & (b != b'\n')) | (b == 0x7f)
    }) || (!text.is_ascii()
        && text.chars().any(|c| {
            matches!(
                c,
                '\u{80}'
                    ..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
            )
        }))
}

/// Whether a plain scalar may not start with `b` (YAML indicators), given what follows.
fn bad_plain_start(b: u8, next: Option<u8>) -> bool {
    match b {
        b'&' | b'*' | b'!' | b'|' | b'>' | b'\'' | b'"' | b'%' | b'@' | b'`' | b'#' | b','
        | b'[' | b']' | b'{' | b'}' => true,
        // `-1`, `-x`, `-.5` are plain scalars; the full parser judges the rest.
        b'-' => !matches!(next, Some(c) if c.is_ascii_alphanumeric() || c == b'.'),
        b'?' | b':' => true,
        _ => false,
    }
}

/// Whether the rest of a line after a value is only spaces and maybe a comment.
fn only_comment_after(rest: &str) -> bool {
    let trimmed = rest.trim_start_matches(' ');
    trimmed.is_empty() || (trimmed.starts_with('#') && rest.starts_with(' '))
}

/// The end of a plain key starting at the beginning of `s`: the byte index of the `:`
/// that ends it, if `s` is `key: ...` or `key:`.
fn plain_key_end(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut prev = b' ';
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'#' if prev == b' ' => return None,
            b':' if matches!(bytes.get(i + 1), None | Some(b' ')) => return Some(i),
            _ => {}
        }
        prev = b;
    }
    None
}

/// A one-line quoted scalar starting at `s[0]` (a quote): its text and the byte index
/// just past the closing quote. `None` for multi-line scalars and unusual escapes.
fn quoted(s: &str) -> Option<(Cow<'_, str>, usize)> {
    let quote = s.as_bytes().first().copied()?;
    let body = &s[1..];
    if quote == b'\'' {
        let mut owned: Option<String> = None;
        let mut chars = body.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c == '\'' {
                if let Some((_, '\'')) = chars.peek() {
                    chars.next();
                    owned
                        .get_or_insert_with(|| body[..i].to_string())
                        .push('\'');
                    continue;
                }
                let text = owned.map_or(Cow::Borrowed(&body[..i]), Cow::Owned);
                return Some((text, i + 2));
            }
            if let Some(o) = owned.as_mut() {
                o.push(c);
            }
        }
        return None;
    }
    let mut owned: Option<String> = None;
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                let text = owned.map_or(Cow::Borrowed(&body[..i]), Cow::Owned);
                return Some((text, i + 2));
            }
            '\\' => {
                let out = owned.get_or_insert_with(|| body[..i].to_string());
                let (_, e) = chars.next()?;
                let decoded = match e {
                    '\\' => '\\',
                    '"' => '"',
                    '/' => '/',
                    ' ' => ' ',
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'v' => '\u{b}',
                    'a' => '\u{7}',
                    'e' => '\u{1b}',
                    '0' => '\0',
                    'N' => '\u{85}',
                    '_' => '\u{a0}',
                    'L' => '\u{2028}',
                    'P' => '\u{2029}',
                    'x' | 'u' | 'U' => {
                        let digits = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let mut code = 0u32;
                        for _ in 0..digits {
                            let (_, h) = chars.next()?;
                            code = code * 16 + h.to_digit(16)?;
                        }
                        // Surrogate pairs and the like: the full parser.
                        char::from_u32(code)?
                    }
                    _ => return None,
                };
                out.push(decoded);
            }
            _ => {
                if let Some(o) = owned.as_mut() {
                    o.push(c);
                }
            }
        }
    }
    None
}

impl<'t> Fast<'_, 't> {
    fn emit(&mut self, event: Event<'t>, line: usize, col: usize) -> Option<()> {
        let marker = Marker::new(0, line, col);
        self.builder.event(event, Span::new(marker, marker)).ok()
    }

    fn scalar(
        &mut self,
        text: Cow<'t, str>,
        style: ScalarStyle,
        line: usize,
        col: usize,
    ) -> Option<()> {
        self.emit(Event::Scalar(text, style, 0, None), line, col)
    }

    fn open(&mut self, kind: Kind, indent: usize, line: usize, col: usize) -> Option<()> {
        if self.stack.len() >= MAX_FAST_DEPTH {
            return None;
        }
        let event = match kind {
            Kind::Map => Event::MappingStart(StructureStyle::Block, 0, None),
            Kind::Seq => Event::SequenceStart(StructureStyle::Block, 0, None),
        };
        self.emit(event, line, col)?;
        self.stack.push(Open { kind, indent });
        self.root_opened = true;
        Some(())
    }

    fn close(&mut self, line: usize) -> Option<()> {
        let open = self.stack.pop()?;
        let event = match open.kind {
            Kind::Map => Event::MappingEnd,
            Kind::Seq => Event::SequenceEnd,
        };
        self.emit(event, line, 0)
    }

    fn line(&mut self, number: usize, line: &'t str) -> Option<()> {
        let content = line.trim_start_matches(' ');
        let indent = line.len() - content.len();
        if content.is_empty() || content.starts_with('#') {
            return Some(());
        }
        if indent == 0
            && (content.starts_with("---")
                || content.starts_with("...")
                || content.starts_with('%'))
        {
            // Only a single `---` before any content is handled here.
            let rest = content.strip_prefix("---")?;
            if self.root_opened
                || self.marker_seen
                || !(rest.is_empty() || only_comment_after(rest))
            {
                return None;
            }
            self.marker_seen = true;
            return Some(());
        }
        if let Some(max) = self.max_indent.take()
            && indent > max
        {
            return None;
        }
        let is_item = content == "-" || content.starts_with("- ");

        let mut opening = false;
        if let Some((parent_indent, key_line)) = self.awaiting.take() {
            if indent > parent_indent || (indent == parent_indent && is_item) {
                opening = true;
            } else {
                self.scalar(Cow::Borrowed("~"), ScalarStyle::Plain, key_line, 0)?;
            }
        }
        if !opening {
            while let Some(top) = self.stack.last() {
                if top.indent > indent
                    || (top.indent == indent && top.kind == Kind::Seq && !is_item)
                {
                    self.close(number)?;
                } else {
                    break;
                }
            }
            match self.stack.last() {
                None if self.root_opened || is_item => return None,
                None => opening = true,
                Some(top) if top.indent == indent && (top.kind == Kind::Seq) == is_item => {}
                Some(_) => return None,
            }
        }

        if is_item {
            let after_dash = content.get(1..)?;
            let item = after_dash.trim_start_matches(' ');
            let offset = indent + 1 + (after_dash.len() - item.len());
            if item.is_empty() || item.starts_with('#') || item == "-" || item.starts_with("- ") {
                return None;
            }
            if opening {
                self.open(
                    Kind::Seq,
                    indent,
                    number,
                    self.columns.at(number, line, offset),
                )?;
            }
            if looks_like_entry(item) {
                self.open(
                    Kind::Map,
                    offset,
                    number,
                    self.columns.at(number, line, offset),
                )?;
                self.entry(number, line, offset)
            } else {
                self.value(number, line, offset, indent)
            }
        } else {
            if opening {
                self.open(
                    Kind::Map,
                    indent,
                    number,
                    self.columns.at(number, line, indent),
                )?;
            }
            self.entry(number, line, indent)
        }
    }

    /// `key: value` or `key:` starting at byte `at` of `line`.
    fn entry(&mut self, number: usize, line: &'t str, at: usize) -> Option<()> {
        let content = line.get(at..)?;
        let first = *content.as_bytes().first()?;
        let (key, style, colon) = if first == b'"' || first == b'\'' {
            let (key, end) = quoted(content)?;
            if content.as_bytes().get(end) != Some(&b':') {
                return None;
            }
            let style = if first == b'"' {
                ScalarStyle::DoubleQuoted
            } else {
                ScalarStyle::SingleQuoted
            };
            (key, style, end)
        } else {
            if bad_plain_start(first, content.as_bytes().get(1).copied()) {
                return None;
            }
            let end = plain_key_end(content)?;
            let key = content[..end].trim_end_matches(' ');
            if key == "<<" {
                return None;
            }
            (Cow::Borrowed(key), ScalarStyle::Plain, end)
        };
        // Bytes bound characters from above.
        if key.len() > MAX_KEY_CHARS {
            return None;
        }
        self.scalar(key, style, number, self.columns.at(number, line, at))?;

        let after = content.get(colon + 1..)?;
        if !(after.is_empty() || after.starts_with(' ')) {
            return None;
        }
        let value = after.trim_start_matches(' ');
        let map_indent = self.stack.last()?.indent;
        if value.is_empty() || value.starts_with('#') {
            self.awaiting = Some((map_indent, number));
            return Some(());
        }
        let value_at = at + colon + 1 + (after.len() - value.len());
        self.value(number, line, value_at, map_indent)
    }

    /// A value that fits on the rest of the line, starting at byte `at`.
    fn value(
        &mut self,
        number: usize,
        line: &'t str,
        at: usize,
        owner_indent: usize,
    ) -> Option<()> {
        let content = line.get(at..)?;
        let bytes = content.as_bytes();
        let first = *bytes.first()?;
        let end = match first {
            b'"' | b'\'' => {
                let (text, end) = quoted(content)?;
                let style = if first == b'"' {
                    ScalarStyle::DoubleQuoted
                } else {
                    ScalarStyle::SingleQuoted
                };
                self.scalar(text, style, number, self.columns.at(number, line, at))?;
                end
            }
            b'[' | b'{' => self.flow(number, line, at, 0)? - at,
            _ => {
                if bad_plain_start(first, bytes.get(1).copied()) {
                    return None;
                }
                // Up to a comment; a `: ` or a final `:` would make it a mapping.
                let mut end = bytes.len();
                for (i, &b) in bytes.iter().enumerate() {
                    let next = bytes.get(i + 1).copied();
                    if b == b' ' && next == Some(b'#') {
                        end = i;
                        break;
                    }
                    if b == b':' && matches!(next, None | Some(b' ')) {
                        return None;
                    }
                }
                let text = content[..end].trim_end_matches(' ');
                self.scalar(
                    Cow::Borrowed(text),
                    ScalarStyle::Plain,
                    number,
                    self.columns.at(number, line, at),
                )?;
                end
            }
        };
        if !only_comment_after(content.get(end..)?) {
            return None;
        }
        self.max_indent = Some(owner_indent);
        Some(())
    }

    /// A flow collection or scalar inside one, starting at byte `at`; returns the byte
    /// just past it.
    fn flow(&mut self, number: usize, line: &'t str, at: usize, depth: usize) -> Option<usize> {
        if depth > MAX_FLOW_DEPTH {
            return None;
        }
        let bytes = line.as_bytes();
        let skip = |mut i: usize| {
            while bytes.get(i) == Some(&b' ') {
                i += 1;
            }
            i
        };
        match *bytes.get(at)? {
            open @ (b'[' | b'{') => {
                let is_map = open == b'{';
                let (start, close, end_event) = if is_map {
                    (
                        Event::MappingStart(StructureStyle::Flow, 0, None),
                        b'}',
                        Event::MappingEnd,
                    )
                } else {
                    (
                        Event::SequenceStart(StructureStyle::Flow, 0, None),
                        b']',
                        Event::SequenceEnd,
                    )
                };
                self.emit(start, number, self.columns.at(number, line, at))?;
                let mut i = at + 1;
                loop {
                    i = skip(i);
                    if *bytes.get(i)? == close {
                        self.emit(end_event, number, self.columns.at(number, line, i))?;
                        return Some(i + 1);
                    }
                    if is_map {
                        if matches!(bytes.get(i)?, b'[' | b'{') {
                            return None;
                        }
                        i = self.flow(number, line, i, depth + 1)?;
                        // `key: value`, with a space after the colon.
                        if bytes.get(i) != Some(&b':') || bytes.get(i + 1) != Some(&b' ') {
                            return None;
                        }
                        i = skip(i + 1);
                        if matches!(bytes.get(i)?, b',' | b'}') {
                            return None;
                        }
                    }
                    i = self.flow(number, line, i, depth + 1)?;
                    i = skip(i);
                    match *bytes.get(i)? {
                        b',' => i += 1,
                        c if c == close => {}
                        _ => return None,
                    }
                }
            }
            b'"' | b'\'' => {
                let (text, len) = quoted(line.get(at..)?)?;
                let style = if bytes[at] == b'"' {
                    ScalarStyle::DoubleQuoted
                } else {
                    ScalarStyle::SingleQuoted
                };
                self.scalar(text, style, number, self.columns.at(number, line, at))?;
                Some(at + len)
            }
            first => {
                if bad_plain_start(first, bytes.get(at + 1).copied()) {
                    return None;
                }
                let mut end = at;
                while let Some(&b) = bytes.get(end) {
                    let next = bytes.get(end + 1).copied();
                    let stop = matches!(b, b',' | b'[' | b']' | b'{' | b'}')
                        || (b == b':'
                            && matches!(
                                next,
                                None | Some(b' ' | b',' | b'[' | b']' | b'{' | b'}')
                            ))
                        || (b == b' ' && next == Some(b'#'));
                    if stop {
                        break;
                    }
                    end += 1;
                }
                if end >= bytes.len() || (bytes[end] == b' ' && bytes.get(end + 1) == Some(&b'#')) {
                    // Unclosed on this line, or a comment inside the collection.
                    return None;
                }
                let text = line.get(at..end)?.trim_end_matches(' ');
                if text.is_empty() {
                    return None;
                }
                self.scalar(
                    Cow::Borrowed(text),
                    ScalarStyle::Plain,
                    number,
                    self.columns.at(number, line, at),
                )?;
                Some(at + text.len())
            }
        }
    }

    fn finish(mut self) -> Option<(Node<'t>, SourceMap)> {
        if let Some((_, key_line)) = self.awaiting.take() {
            self.scalar(Cow::Borrowed("~"), ScalarStyle::Plain, key_line, 0)?;
        }
        while !self.stack.is_empty() {
            self.close(0)?;
        }
        if !self.root_opened {
            return None;
        }
        self.builder.into_result().ok()
    }
}

/// Whether a sequence item's text is a compact mapping (`- key: value`).
fn looks_like_entry(item: &str) -> bool {
    let bytes = item.as_bytes();
    match bytes.first() {
        Some(b'"' | b'\'') => quoted(item).is_some_and(|(_, end)| {
            bytes.get(end) == Some(&b':') && matches!(bytes.get(end + 1), None | Some(b' '))
        }),
        Some(&first) if !bad_plain_start(first, bytes.get(1).copied()) => {
            plain_key_end(item).is_some()
        }
        _ => false,
    }
}
