//! Strict decoding of kubelet configuration files (YAML or JSON), with errors that name the
//! file, the line, the column and the field, and suggest the field that was meant.
//!
//! # What is accepted, and why
//!
//! The kubelet reads its configuration file through apimachinery: a file whose first
//! non-space character is `{` goes to the JSON serializer; anything else goes through
//! sigs.k8s.io/yaml, which parses YAML with go-yaml v2 (YAML 1.1 scalars: unquoted
//! `yes`/`no`/`on`/`off` are booleans, `0755` is octal), converts the result to JSON, and
//! decodes that JSON strictly into the typed struct. This module does the same in two steps:
//!
//! 1. Bytes to an untyped tree plus a [`SourceMap`]: go-yaml v2 scalar resolution for YAML
//!    (so a YAML `cpu: 1` is the JSON number `1`, which a string field rejects, exactly as
//!    in the kubelet), serde_json for JSON. [`decode_value`] returns that tree as a
//!    `serde_json::Value`, for drop-in merging and fragments.
//! 2. The tree to the typed model, as strictly as Go's `encoding/json`: unknown fields,
//!    a list for a struct, a number for a string are errors, with the field path
//!    (serde_path_to_error) and its line (the [`SourceMap`]). [`decode_strict`] does both
//!    steps; [`from_value`] does the second on a (merged) `Value`.
//!
//! It is deliberately stricter than the kubelet, which on a strict-decoding error (unknown
//! or duplicate field) falls back to lenient decoding of v1beta1 and only logs a warning:
//! here unknown fields, duplicate keys at any level, a second YAML document, YAML tags other
//! than the core ones, nesting deeper than [`MAX_DEPTH`] and files over [`MAX_FILE_BYTES`]
//! are errors.
//!
//! Fragments without `apiVersion`/`kind` (pool files, drop-ins) decode with
//! [`decode_value`] or [`decode_strict`]; whole documents use [`decode_document`] (or
//! [`decode_kubelet_configuration`]), which also runs the [`check_type_meta`] check.
//!
//! # Speed
//!
//! YAML is read by serde-saphyr's parser (granit-parser), except for the plain block YAML
//! that configuration files are made of, which a line-oriented fast path reads into the
//! same events (see `fast_yaml`); the full parser costs about three times as much.
//! Mappings are built as lists and deserialized without hashing, and the field path is
//! tracked only once decoding has failed.

// `DecodeError`'s public fields are the contract (file, line, column, field, message,
// suggestion): 128 bytes, returned only on the error path.
#![allow(clippy::result_large_err)]

mod fast_yaml;
mod json;
mod node;
mod scalar;
mod source_map;
mod typed;
mod yaml;

#[cfg(test)]
mod tests;

use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use source_map::{Position, SourceMap, is_within, join_index, join_key};

use node::Node;
use typed::closest;

/// The largest file accepted: a ConfigMap holds at most 1 MiB.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;

/// The deepest nesting of lists and mappings accepted (the top-level mapping is level 1).
/// A kubelet configuration nests at most a handful of levels.
pub const MAX_DEPTH: usize = 64;

/// The most YAML nodes a document may expand to, aliases counted at their expanded size.
pub const MAX_NODES: usize = 250_000;

/// The most scalar bytes a YAML document may expand to through aliases.
pub const MAX_EXPANDED_BYTES: usize = 8 * MAX_FILE_BYTES;

/// A file that cannot be decoded, and where.
///
/// Displays as `file:line:col: field.path: message (did you mean `systemReserved`?)`,
/// leaving out the parts that are unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// The file, as the caller named it.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column in characters, when known.
    pub column: Option<usize>,
    /// The field path in JSON names (`authentication.webhook.cacheTTL`, `evictionHard`,
    /// `tlsCipherSuites[2]`), when the error concerns a field.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
    /// The closest known field (or value) to an unknown or misspelled one.
    pub suggestion: Option<String>,
}

impl DecodeError {
    /// An error about `file` with no position, field or suggestion yet.
    pub fn new(file: impl Into<String>, message: impl Into<String>) -> Self {
        DecodeError {
            file: file.into(),
            line: None,
            column: None,
            field: None,
            message: message.into(),
            suggestion: None,
        }
    }

    /// Sets the line and column.
    pub fn at(mut self, position: Position) -> Self {
        self.line = Some(position.line);
        self.column = Some(position.column);
        self
    }

    /// Sets the line and column when `position` is known.
    pub fn at_opt(self, position: Option<Position>) -> Self {
        match position {
            Some(position) => self.at(position),
            None => self,
        }
    }

    /// Sets the field path.
    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// Sets the suggestion.
    pub fn with_suggestion(mut self, suggestion: impl Into<String>) -> Self {
        self.suggestion = Some(suggestion.into());
        self
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        f.write_str(": ")?;
        if let Some(field) = self.field.as_deref().filter(|s| !s.is_empty()) {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.message)?;
        if let Some(suggestion) = &self.suggestion {
            write!(f, " (did you mean `{suggestion}`?)")?;
        }
        Ok(())
    }
}

impl std::error::Error for DecodeError {}

/// Decodes `bytes` (the content of `file`) into an untyped JSON object and the positions
/// of its fields, with every check that does not need the typed model: size, binary
/// content, emptiness, a single document, a mapping at the top level, no duplicate keys,
/// bounded nesting.
pub fn decode_value(file: &str, bytes: &[u8]) -> Result<(Value, SourceMap), DecodeError> {
    let (node, map) = decode_node(file, bytes)?;
    Ok((node.into_value(), map))
}

/// Decodes `bytes` strictly into `T`: the checks of [`decode_value`], then the typed model
/// (see [`from_value`]). Does not look at `apiVersion`/`kind` (see [`decode_document`]),
/// so it also decodes fragments.
pub fn decode_strict<T: DeserializeOwned>(
    file: &str,
    bytes: &[u8],
) -> Result<(T, SourceMap), DecodeError> {
    let (node, map) = decode_node(file, bytes)?;
    let typed = typed::from_node(file, &node, &map)?;
    Ok((typed, map))
}

/// Decodes a whole document: like [`decode_strict`], after checking `apiVersion` and `kind`
/// (see [`check_type_meta`]), so that a document of another kind or version is reported
/// as such rather than as a list of unknown fields.
pub fn decode_document<T: DeserializeOwned>(
    file: &str,
    bytes: &[u8],
    expected_api_version: &str,
    expected_kind: &str,
) -> Result<(T, SourceMap), DecodeError> {
    let (node, map) = decode_node(file, bytes)?;
    check_meta(
        file,
        &map,
        meta_of_node(node.get("apiVersion")),
        meta_of_node(node.get("kind")),
        expected_api_version,
        expected_kind,
    )?;
    let typed = typed::from_node(file, &node, &map)?;
    Ok((typed, map))
}

/// Decodes a kubelet configuration file: [`decode_document`] into
/// [`KubeletConfiguration`](crate::types::KubeletConfiguration), expecting
/// `apiVersion: kubelet.config.k8s.io/v1beta1` and `kind: KubeletConfiguration`.
pub fn decode_kubelet_configuration(
    file: &str,
    bytes: &[u8],
) -> Result<(crate::types::KubeletConfiguration, SourceMap), DecodeError> {
    decode_document(file, bytes, crate::types::API_VERSION, crate::types::KIND)
}

/// Deserializes an untyped tree (from [`decode_value`], possibly merged with others) into
/// `T` as strictly as the kubelet does: unknown fields, a list where a mapping is expected,
/// a number where a string is expected are errors. Errors carry the field path and,
/// through `map`, its line and column; an unknown field comes with the closest known one.
pub fn from_value<T: DeserializeOwned>(
    file: &str,
    value: &Value,
    map: &SourceMap,
) -> Result<T, DecodeError> {
    typed::from_node(file, &Node::from_value(value), map)
}

/// Checks that a document's `apiVersion` and `kind` are the expected ones.
pub fn check_type_meta(
    file: &str,
    value: &Value,
    map: &SourceMap,
    expected_api_version: &str,
    expected_kind: &str,
) -> Result<(), DecodeError> {
    let meta = |name: &str| match value.get(name) {
        None | Some(Value::Null) => Meta::Missing,
        Some(Value::String(s)) => Meta::Str(s),
        Some(other) => Meta::Other(Node::from_value(other).describe()),
    };
    check_meta(
        file,
        map,
        meta("apiVersion"),
        meta("kind"),
        expected_api_version,
        expected_kind,
    )
}

/// The decoded tree: JSON, the YAML fast path, or the full YAML parser.
fn decode_node<'t>(file: &str, bytes: &'t [u8]) -> Result<(Node<'t>, SourceMap), DecodeError> {
    let text = preflight(file, bytes)?;
    if json::looks_like_json(text) {
        json::parse(file, text)
    } else if let Some(decoded) = fast_yaml::parse(file, text) {
        Ok(decoded)
    } else {
        yaml::parse(file, text)
    }
}

/// An `apiVersion` or `kind` field as found.
enum Meta<'a> {
    Missing,
    Str(&'a str),
    Other(&'static str),
}

fn meta_of_node<'a>(node: Option<&'a Node<'_>>) -> Meta<'a> {
    match node {
        None | Some(Node::Null) => Meta::Missing,
        Some(Node::String(s)) => Meta::Str(s),
        Some(other) => Meta::Other(other.describe()),
    }
}

fn check_meta(
    file: &str,
    map: &SourceMap,
    api_version: Meta<'_>,
    kind: Meta<'_>,
    expected_api_version: &str,
    expected_kind: &str,
) -> Result<(), DecodeError> {
    let field_error = |name: &str, message: String| {
        DecodeError::new(file, message)
            .with_field(name)
            .at_opt(map.get(name))
    };
    match kind {
        Meta::Missing => {
            return Err(DecodeError::new(
                file,
                format!(
                    "kind is missing, expected {expected_kind:?} (a configuration document \
                     starts with `apiVersion: {expected_api_version}` and `kind: {expected_kind}`)"
                ),
            ));
        }
        Meta::Str(kind) if kind == expected_kind => {}
        Meta::Str(kind) => {
            let mut error = field_error(
                "kind",
                format!("kind is {kind:?}, expected {expected_kind:?}"),
            );
            if closest(kind, &[expected_kind]).is_some() {
                error = error.with_suggestion(expected_kind);
            }
            return Err(error);
        }
        Meta::Other(found) => {
            return Err(field_error(
                "kind",
                format!("kind must be a string, found {found}"),
            ));
        }
    }
    match api_version {
        Meta::Missing => Err(DecodeError::new(
            file,
            format!("apiVersion is missing, expected {expected_api_version:?}"),
        )),
        Meta::Str(version) if version == expected_api_version => Ok(()),
        Meta::Str(version) => Err(field_error(
            "apiVersion",
            format!("apiVersion {version:?} is not supported, expected {expected_api_version:?}"),
        )),
        Meta::Other(found) => Err(field_error(
            "apiVersion",
            format!("apiVersion must be a string, found {found}"),
        )),
    }
}

/// Size, binary content, UTF-8 and emptiness; returns the text without a UTF-8 BOM.
fn preflight<'b>(file: &str, bytes: &'b [u8]) -> Result<&'b str, DecodeError> {
    if bytes.len() > MAX_FILE_BYTES {
        return Err(DecodeError::new(
            file,
            format!(
                "the file is {}over the limit of {MAX_FILE_BYTES} bytes (1 MiB, the most a \
                 ConfigMap can hold)",
                // Callers may read just one byte past the limit: then the size is unknown.
                if bytes.len() == MAX_FILE_BYTES + 1 {
                    String::new()
                } else {
                    format!("{} bytes, ", bytes.len())
                }
            ),
        ));
    }
    if let Some(offset) = bytes.iter().position(|&b| b == 0) {
        return Err(DecodeError::new(
            file,
            format!("the file looks binary: it contains a NUL byte at offset {offset}"),
        )
        .at(byte_position(bytes, offset)));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let offset = e.valid_up_to();
        DecodeError::new(
            file,
            format!("the file is not valid UTF-8 (invalid byte at offset {offset})"),
        )
        .at(byte_position(bytes, offset))
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Err(DecodeError::new(
            file,
            "the file is empty: it holds no YAML or JSON document",
        ));
    }
    Ok(text)
}

/// Line and column of a byte offset; the column counts characters when the line is valid
/// UTF-8 up to the offset, bytes otherwise.
fn byte_position(bytes: &[u8], offset: usize) -> Position {
    let before = bytes.get(..offset).unwrap_or(bytes);
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
    let prefix = before.get(line_start..).unwrap_or_default();
    let column = std::str::from_utf8(prefix).map_or(prefix.len(), |s| s.chars().count()) + 1;
    Position { line, column }
}
