//! YAML to a [`Node`] tree and a [`SourceMap`], in one pass over the parser's events.
//!
//! The tree is what sigs.k8s.io/yaml hands to the kubelet's strict JSON decoder: go-yaml
//! v2 scalar resolution ([`super::scalar`]), aliases expanded, merge keys (`<<`) applied,
//! non-string keys turned into strings. On top of that, and stricter than the kubelet: a
//! duplicate key at any level, a second document with content, nesting deeper than
//! [`MAX_DEPTH`], unsupported tags and alias bombs are errors.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle, Span, StrInput, Tag};

use super::node::{Node, first_duplicate};
use super::scalar::{self, KeyError, Resolved, ScalarTag, ToJsonError};
use super::source_map::{EntryId, Position, SourceMap, push_index, push_key};
use super::{DecodeError, MAX_DEPTH, MAX_EXPANDED_BYTES, MAX_NODES};

/// Parses `text` (already checked for size, encoding and emptiness of bytes) into a
/// mapping and the positions of its fields.
pub(super) fn parse<'t>(file: &str, text: &'t str) -> Result<(Node<'t>, SourceMap), DecodeError> {
    let mut options = serde_saphyr::granit_parser::Options::default();
    // The builder reports nesting deeper than MAX_DEPTH itself; these limits only bound
    // the parser's own state on hostile input and sit well above that.
    options.flow_nesting_limit = MAX_DEPTH * 2;
    options.block_nesting_limit = MAX_DEPTH * 2;
    options.emit_comments = false;
    let mut parser = Parser::new_from_str_with_options(text, options);
    let mut builder = Builder::new(file);
    let mut documents = 0usize;

    loop {
        let (event, span) = match parser.next_event() {
            None => break,
            Some(Ok(next)) => next,
            Some(Err(e)) => {
                let marker = e.marker();
                let mut message = e.info();
                if message == "recursion limit exceeded" {
                    message = format!("nested deeper than {MAX_DEPTH} levels");
                }
                return Err(
                    DecodeError::new(file, format!("invalid YAML: {message}")).at(Position {
                        line: marker.line(),
                        column: marker.col() + 1,
                    }),
                );
            }
        };
        match event {
            Event::StreamStart | Event::DocumentEnd => {}
            Event::StreamEnd => break,
            Event::DocumentStart(..) => {
                documents += 1;
                if documents > 1 {
                    check_extra_document(file, &mut parser, span)?;
                }
            }
            other => builder.event(other, span)?,
        }
    }
    builder.into_result()
}

/// A document after the first is tolerated only when it is empty (a trailing `---`).
fn check_extra_document<'t>(
    file: &str,
    parser: &mut Parser<'t, StrInput<'t>>,
    start: Span,
) -> Result<(), DecodeError> {
    match parser.next_event() {
        Some(Ok((Event::Scalar(value, ScalarStyle::Plain, 0, None), _)))
            if scalar::resolve_plain(&value) == Resolved::Null =>
        {
            Ok(())
        }
        None => Ok(()),
        Some(_) => Err(DecodeError::new(
            file,
            "a second YAML document starts here; a kubelet configuration file holds exactly \
             one document (the kubelet would silently ignore everything after the first)",
        )
        .at(pos(start))),
    }
}

fn pos(span: Span) -> Position {
    Position {
        line: span.start.line(),
        column: span.start.col() + 1,
    }
}

type Entries<'t> = Vec<(Cow<'t, str>, Node<'t>)>;

/// What the next node in a mapping is for.
enum Pending<'t> {
    /// The next node is a key.
    Key,
    /// The next node is the value of this key.
    Value(Cow<'t, str>),
    /// The next node is the value of a merge key `<<`.
    Merge,
}

struct MapFrame<'t> {
    entries: Entries<'t>,
    /// Mappings merged in with `<<`, earliest first; explicit keys win over them.
    merges: Vec<(Entries<'t>, Position)>,
    pending: Pending<'t>,
}

enum Collection<'t> {
    Map(MapFrame<'t>),
    Seq(Vec<Node<'t>>),
}

struct Frame<'t> {
    collection: Collection<'t>,
    /// Length of `Builder::path` for this collection's own path.
    path_len: usize,
    /// The source map's entry for this collection's own path (`None` at the top level and
    /// inside a merge value), the parent of its keys' or elements' entries.
    entry: Option<EntryId>,
    position: Position,
    anchor: usize,
    /// Node and byte counters when the collection started, to size an anchored value.
    nodes_at_start: usize,
    bytes_at_start: usize,
    /// The greatest height of a child collection (0 with scalars only).
    child_height: usize,
    /// Inside a merge value: its keys are recorded when merged, not under a path of their own.
    in_merge: bool,
}

struct Anchored<'t> {
    node: Node<'t>,
    nodes: usize,
    bytes: usize,
    /// Levels of nesting the value brings where an alias puts it.
    height: usize,
}

/// Turns node events (from the full parser or the fast path) into a tree and a source map.
pub(super) struct Builder<'f, 't> {
    file: &'f str,
    stack: Vec<Frame<'t>>,
    path: String,
    map: SourceMap,
    /// The entry recorded last: the key or list element whose value comes next.
    last: Option<EntryId>,
    anchors: HashMap<usize, Anchored<'t>>,
    /// Nodes and scalar bytes produced so far, aliases counted at their expanded size.
    nodes: usize,
    bytes: usize,
    root: Option<(Node<'t>, Position)>,
}

/// How an explicit tag applies to a scalar.
enum TagUse {
    Scalar(ScalarTag),
    Merge,
}

impl<'f, 't> Builder<'f, 't> {
    pub(super) fn new(file: &'f str) -> Self {
        Builder {
            file,
            stack: Vec::with_capacity(16),
            path: String::with_capacity(128),
            map: SourceMap::new(),
            last: None,
            anchors: HashMap::new(),
            nodes: 0,
            bytes: 0,
            root: None,
        }
    }

    /// The decoded document: a mapping, or the error saying what it is instead.
    pub(super) fn into_result(self) -> Result<(Node<'t>, SourceMap), DecodeError> {
        let file = self.file;
        let Some((root, position)) = self.root else {
            return Err(DecodeError::new(
                file,
                "the file is empty: it holds no YAML document, only whitespace or comments",
            ));
        };
        match root {
            Node::Object(_) => Ok((root, self.map)),
            Node::Null => Err(DecodeError::new(file, "the YAML document is empty").at(position)),
            other => Err(DecodeError::new(
                file,
                format!(
                    "the top level must be a mapping of configuration fields, found {}",
                    other.describe()
                ),
            )
            .at(position)),
        }
    }

    fn error(&self, at: Position, message: impl Into<String>) -> DecodeError {
        let error = DecodeError::new(self.file, message).at(at);
        if self.path.is_empty() {
            error
        } else {
            error.with_field(self.path.clone())
        }
    }

    pub(super) fn event(&mut self, event: Event<'t>, span: Span) -> Result<(), DecodeError> {
        let at = pos(span);
        match event {
            Event::Scalar(text, style, anchor, tag) => self.scalar(text, style, anchor, tag, at),
            Event::Alias(id) => self.alias(id, at),
            Event::MappingStart(_, anchor, tag) => {
                self.check_collection_tag(tag.as_deref(), "map", at)?;
                let map = Collection::Map(MapFrame {
                    entries: Vec::new(),
                    merges: Vec::new(),
                    pending: Pending::Key,
                });
                self.start(map, anchor, at)
            }
            Event::SequenceStart(_, anchor, tag) => {
                self.check_collection_tag(tag.as_deref(), "seq", at)?;
                self.start(Collection::Seq(Vec::new()), anchor, at)
            }
            Event::MappingEnd | Event::SequenceEnd => self.end(),
            // Anchor metadata, comments and the like carry no data.
            _ => Ok(()),
        }
    }

    fn check_collection_tag(
        &self,
        tag: Option<&Tag>,
        expected: &str,
        at: Position,
    ) -> Result<(), DecodeError> {
        match tag {
            None => Ok(()),
            Some(tag) if core_tag(tag) == Some(expected) => Ok(()),
            Some(tag) => Err(self.error(at, format!("YAML tag {tag} is not supported here"))),
        }
    }

    /// Whether the next node is a mapping key; records a list element's position.
    fn begin_node(&mut self, at: Position) -> bool {
        let Some(frame) = self.stack.last_mut() else {
            return false;
        };
        match &mut frame.collection {
            Collection::Map(m) => matches!(m.pending, Pending::Key),
            Collection::Seq(items) => {
                self.path.truncate(frame.path_len);
                push_index(&mut self.path, items.len());
                if !frame.in_merge {
                    self.last = Some(self.map.record_index(frame.entry, items.len(), at));
                }
                false
            }
        }
    }

    fn count(&mut self, nodes: usize, bytes: usize, at: Position) -> Result<(), DecodeError> {
        self.nodes = self.nodes.saturating_add(nodes);
        self.bytes = self.bytes.saturating_add(bytes);
        if self.nodes > MAX_NODES || self.bytes > MAX_EXPANDED_BYTES {
            return Err(self.error(
                at,
                format!(
                    "the document expands to more than {MAX_NODES} nodes or {MAX_EXPANDED_BYTES} \
                     bytes (aliases included); refusing to decode it"
                ),
            ));
        }
        Ok(())
    }

    fn scalar(
        &mut self,
        text: Cow<'t, str>,
        style: ScalarStyle,
        anchor: usize,
        tag: Option<Cow<'t, Tag>>,
        at: Position,
    ) -> Result<(), DecodeError> {
        let is_key = self.begin_node(at);
        self.count(1, text.len(), at)?;

        let plain = matches!(style, ScalarStyle::Plain);
        let tag = match tag.as_deref() {
            None => None,
            Some(t) => Some(self.scalar_tag(t, &text, is_key, at)?),
        };
        if matches!(tag, Some(TagUse::Merge)) || (is_key && plain && tag.is_none() && text == "<<")
        {
            return self.merge_key();
        }
        let resolved = match tag {
            Some(TagUse::Scalar(t)) => match scalar::resolve_tagged(&text, t) {
                Ok(r) => r,
                Err(message) => return Err(self.error(at, message)),
            },
            _ if plain => scalar::resolve_plain(&text),
            _ => Resolved::Str,
        };

        if is_key {
            let key = match scalar::key_string(resolved.clone(), text.clone()) {
                Ok(key) => key,
                Err(e) => return Err(self.key_error(e, &text, at)),
            };
            if anchor != 0 {
                let node = scalar::to_node(resolved, text.clone())
                    .unwrap_or_else(|_| Node::String(key.clone()));
                self.remember(anchor, node, 1, text.len(), 0);
            }
            return self.set_key(key, at);
        }

        let bytes = text.len();
        let node = match scalar::to_node(resolved, text) {
            Ok(node) => node,
            Err(ToJsonError::NonFinite) => {
                return Err(self.error(
                    at,
                    "NaN and infinity cannot be represented in JSON, so the kubelet rejects \
                     them; use a finite number",
                ));
            }
        };
        if anchor != 0 {
            self.remember(anchor, node.clone(), 1, bytes, 0);
        }
        self.finish(node, 0, at)
    }

    fn remember(
        &mut self,
        anchor: usize,
        node: Node<'t>,
        nodes: usize,
        bytes: usize,
        height: usize,
    ) {
        self.anchors.insert(
            anchor,
            Anchored {
                node,
                nodes,
                bytes,
                height,
            },
        );
    }

    fn scalar_tag(
        &self,
        tag: &Tag,
        text: &str,
        is_key: bool,
        at: Position,
    ) -> Result<TagUse, DecodeError> {
        // The non-specific tag `!` forces a string.
        if tag.handle().is_empty() && tag.suffix() == "!" {
            return Ok(TagUse::Scalar(ScalarTag::Str));
        }
        Ok(match core_tag(tag) {
            Some("str") | Some("timestamp") => TagUse::Scalar(ScalarTag::Str),
            Some("int") => TagUse::Scalar(ScalarTag::Int),
            Some("float") => TagUse::Scalar(ScalarTag::Float),
            Some("bool") => TagUse::Scalar(ScalarTag::Bool),
            Some("null") => TagUse::Scalar(ScalarTag::Null),
            Some("merge") if is_key && text == "<<" => TagUse::Merge,
            Some("binary") => {
                return Err(self.error(
                    at,
                    "!!binary is not supported in a kubelet configuration (the YAML-to-JSON \
                     conversion cannot carry it); write the base64 text as a plain string",
                ));
            }
            _ => {
                return Err(self.error(
                    at,
                    format!("YAML tag {tag} is not supported in a kubelet configuration"),
                ));
            }
        })
    }

    fn key_error(&self, error: KeyError, text: &str, at: Position) -> DecodeError {
        let message = match error {
            KeyError::Null => "a mapping key cannot be null".to_string(),
            KeyError::Unsupported(kind) => {
                format!("mapping key {text:?} is a {kind}, which cannot be a JSON object key")
            }
        };
        self.error(at, message)
    }

    fn merge_key(&mut self) -> Result<(), DecodeError> {
        if let Some(Frame {
            collection: Collection::Map(m),
            ..
        }) = self.stack.last_mut()
        {
            m.pending = Pending::Merge;
        }
        Ok(())
    }

    fn set_key(&mut self, key: Cow<'t, str>, at: Position) -> Result<(), DecodeError> {
        let Some(frame) = self.stack.last_mut() else {
            return Ok(());
        };
        let Collection::Map(m) = &mut frame.collection else {
            return Ok(());
        };
        self.path.truncate(frame.path_len);
        push_key(&mut self.path, &key);
        if !frame.in_merge {
            self.last = Some(self.map.record_key(frame.entry, &key, at));
        }
        // Duplicates are looked for when the mapping ends, without hashing each key.
        m.pending = Pending::Value(key);
        Ok(())
    }

    fn alias(&mut self, id: usize, at: Position) -> Result<(), DecodeError> {
        let is_key = self.begin_node(at);
        let Some(anchored) = self.anchors.get(&id) else {
            return Err(self.error(
                at,
                "alias refers to an anchor that is not defined before it",
            ));
        };
        let (nodes, bytes, height) = (anchored.nodes, anchored.bytes, anchored.height);
        self.count(nodes, bytes, at)?;
        if self.stack.len() + height > MAX_DEPTH {
            return Err(self.error(
                at,
                format!("nested deeper than {MAX_DEPTH} levels (through aliases)"),
            ));
        }
        let node = self.anchors.get(&id).map_or(Node::Null, |a| a.node.clone());
        if is_key {
            let key = match node {
                Node::String(s) => s,
                Node::Bool(b) => Cow::Owned(b.to_string()),
                Node::Number(n) => Cow::Owned(n.to_string()),
                Node::Null => return Err(self.key_error(KeyError::Null, "", at)),
                Node::Array(_) | Node::Object(_) => {
                    return Err(self.error(
                        at,
                        "a mapping key must be a scalar, not an alias of a list or mapping",
                    ));
                }
            };
            return self.set_key(key, at);
        }
        self.finish(node, height, at)
    }

    fn start(
        &mut self,
        collection: Collection<'t>,
        anchor: usize,
        at: Position,
    ) -> Result<(), DecodeError> {
        if self.begin_node(at) {
            return Err(self.error(
                at,
                "a mapping key must be a scalar; lists and mappings as keys are not supported",
            ));
        }
        if self.stack.len() >= MAX_DEPTH {
            return Err(self.error(at, format!("nested deeper than {MAX_DEPTH} levels")));
        }
        self.count(1, 0, at)?;
        let in_merge = self.stack.last().is_some_and(|parent| {
            parent.in_merge
                || matches!(
                    &parent.collection,
                    Collection::Map(MapFrame {
                        pending: Pending::Merge,
                        ..
                    })
                )
        });
        let entry = if self.stack.is_empty() {
            self.map.record("", at);
            None
        } else if in_merge {
            None
        } else {
            // The key or element this collection is the value of, recorded just before.
            self.last
        };
        self.stack.push(Frame {
            collection,
            path_len: self.path.len(),
            entry,
            position: at,
            anchor,
            nodes_at_start: self.nodes - 1,
            bytes_at_start: self.bytes,
            child_height: 0,
            in_merge,
        });
        Ok(())
    }

    fn end(&mut self) -> Result<(), DecodeError> {
        let Some(frame) = self.stack.pop() else {
            return Ok(());
        };
        self.path.truncate(frame.path_len);
        let node = match frame.collection {
            Collection::Seq(items) => Node::Array(items),
            Collection::Map(MapFrame {
                mut entries,
                merges,
                ..
            }) => {
                if let Some(index) = first_duplicate(&entries) {
                    return Err(self.duplicate(&entries[index].0, frame.position));
                }
                if !merges.is_empty() {
                    self.merge(&mut entries, merges, frame.in_merge, frame.entry);
                }
                Node::Object(entries)
            }
        };
        let height = frame.child_height + 1;
        if frame.anchor != 0 {
            let nodes = self.nodes - frame.nodes_at_start;
            let bytes = self.bytes - frame.bytes_at_start;
            self.remember(frame.anchor, node.clone(), nodes, bytes, height);
        }
        self.finish(node, height, frame.position)
    }

    /// The error for a key repeated in the mapping whose path is `self.path`.
    fn duplicate(&mut self, key: &str, mapping_at: Position) -> DecodeError {
        push_key(&mut self.path, key);
        let mut occurrences = self.map.all(&self.path);
        let (first, repeat) = (occurrences.next(), occurrences.next());
        let message = match (first, repeat) {
            (Some(first), Some(_)) => {
                format!("duplicate key {key:?} (first set at line {})", first.line)
            }
            _ => format!("duplicate key {key:?}"),
        };
        self.error(repeat.unwrap_or(mapping_at), message)
    }

    /// Adds the keys of merged mappings that the mapping does not set itself.
    fn merge(
        &mut self,
        entries: &mut Entries<'t>,
        merges: Vec<(Entries<'t>, Position)>,
        in_merge: bool,
        entry: Option<EntryId>,
    ) {
        let mut seen: HashSet<String> = entries.iter().map(|(k, _)| k.to_string()).collect();
        for (merged, at) in merges {
            for (key, value) in merged {
                if seen.insert(key.to_string()) {
                    if !in_merge {
                        self.map.record_key(entry, &key, at);
                    }
                    entries.push((key, value));
                }
            }
        }
    }

    /// Hands a complete node to its parent.
    fn finish(&mut self, node: Node<'t>, height: usize, at: Position) -> Result<(), DecodeError> {
        let Some(frame) = self.stack.last_mut() else {
            if self.root.is_none() {
                self.root = Some((node, at));
            }
            return Ok(());
        };
        frame.child_height = frame.child_height.max(height);
        match &mut frame.collection {
            Collection::Seq(items) => items.push(node),
            Collection::Map(m) => match std::mem::replace(&mut m.pending, Pending::Key) {
                Pending::Value(key) => m.entries.push((key, node)),
                Pending::Merge => match node {
                    Node::Object(merged) => m.merges.push((merged, at)),
                    Node::Array(items) if items.iter().all(|i| matches!(i, Node::Object(_))) => {
                        for item in items {
                            if let Node::Object(merged) = item {
                                m.merges.push((merged, at));
                            }
                        }
                    }
                    _ => {
                        return Err(self.error(
                            at,
                            "the value of a merge key `<<` must be a mapping or a list of mappings",
                        ));
                    }
                },
                // Keys never reach here: they go through `set_key`.
                Pending::Key => {}
            },
        }
        self.path.truncate(frame.path_len);
        Ok(())
    }
}

/// The name of a YAML core tag (`str` for `!!str`), if `tag` is one.
fn core_tag(tag: &Tag) -> Option<&str> {
    tag.core_suffix()
        .or_else(|| (tag.handle() == "tag:yaml.org,2002:").then(|| tag.suffix()))
}
