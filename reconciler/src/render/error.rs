//! [`RepoError`]: one problem of a file, with its line, column and field path, and
//! decoding a part of a document so that its problems carry the field's full path.

use std::fmt;

use kubelet_gitops_core::decode::{self, DecodeError, Position, SourceMap};
use kubelet_gitops_core::message::OneLine;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::fields::join_path;

/// One problem with the repository: `file:line:col: field: message`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RepoError {
    /// The file, relative to the repository root (`pools/gpu.yaml`), or the command-line
    /// option (`--include`) or the source (`commit 1a2b3c4 of ...`) it concerns.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// The field path in the file (`spec.rollout.maxUnavailable`,
    /// `spec.kubelet.systemReserved.cpu`); empty when the error concerns the whole file.
    pub field: String,
    /// What is wrong, and how to fix it where that is not obvious.
    pub message: String,
}

impl RepoError {
    /// An error about `file` and `field` (empty: the whole file), with no position.
    pub fn new(
        file: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        RepoError {
            file: file.into(),
            line: None,
            column: None,
            field: field.into(),
            message: message.into(),
        }
    }

    /// Sets the line and column when `position` is known.
    pub fn at(mut self, position: Option<Position>) -> Self {
        if let Some(p) = position {
            self.line = Some(p.line);
            self.column = Some(p.column);
        }
        self
    }

    /// An error at `field` of a decoded file, positioned through `map` (the field's line,
    /// or its nearest ancestor's).
    pub(super) fn at_field(
        file: &str,
        map: &SourceMap,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        let field = field.into();
        let position = map.position(&field);
        RepoError::new(file, field, message).at(position)
    }
}

impl From<DecodeError> for RepoError {
    fn from(e: DecodeError) -> Self {
        let message = match &e.suggestion {
            Some(s) => format!("{} (did you mean `{s}`?)", e.message),
            None => e.message,
        };
        RepoError {
            file: e.file,
            line: e.line,
            column: e.column,
            field: e.field.unwrap_or_default(),
            message,
        }
    }
}

/// One line, whatever the file, field or message hold: a control character in them (a
/// path or a key of the repository, a value quoted in the message) is shown escaped
/// ([`kubelet_gitops_core::message::escape_line`]), so that an error cannot forge another
/// line of output.
impl fmt::Display for RepoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", OneLine(&self.file))?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        f.write_str(": ")?;
        if !self.field.is_empty() {
            write!(f, "{}: ", OneLine(&self.field))?;
        }
        write!(f, "{}", OneLine(&self.message))
    }
}

impl std::error::Error for RepoError {}

/// Decodes the part of a decoded document found at `prefix` (`spec.rollout`) into `T`,
/// strictly; an error carries the field's full path and its position in the whole file.
pub(super) fn decode_part<T: DeserializeOwned>(
    file: &str,
    value: &Value,
    map: &SourceMap,
    prefix: &str,
) -> Result<T, RepoError> {
    decode::from_value::<T>(file, value, &SourceMap::new()).map_err(|e| {
        let field = match e.field.as_deref() {
            Some(rel) if !rel.is_empty() => join_path(prefix, rel),
            _ => prefix.to_string(),
        };
        let position = map.position(&field);
        let message = match &e.suggestion {
            Some(s) => format!("{} (did you mean `{s}`?)", e.message),
            None => e.message,
        };
        RepoError::new(file, field, message).at(position)
    })
}
