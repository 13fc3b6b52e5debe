//! Where each field of a decoded file sits: field path to line and column.

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
/// Building the map is cheap (one shared buffer, no hashing), because it is built for
/// every file decoded; a lookup scans it, which is fine for the handful of lookups an
/// error report makes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceMap {
    /// All recorded paths, back to back.
    paths: String,
    /// Each path's range in `paths` and its position, in the order recorded.
    entries: Vec<(usize, usize, Position)>,
}

impl SourceMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `path` at `position`. If the path was recorded before, the first position
    /// stays the one [`SourceMap::get`] returns.
    pub fn record(&mut self, path: &str, position: Position) {
        let start = self.paths.len();
        self.paths.push_str(path);
        self.entries.push((start, self.paths.len(), position));
    }

    /// The position recorded first for exactly `path`.
    pub fn get(&self, path: &str) -> Option<Position> {
        self.all(path).next()
    }

    /// Every position recorded for exactly `path`, in the order recorded.
    pub(crate) fn all<'a>(&'a self, path: &'a str) -> impl Iterator<Item = Position> + 'a {
        self.entries
            .iter()
            .filter(move |(start, end, _)| self.paths.get(*start..*end) == Some(path))
            .map(|(_, _, position)| *position)
    }

    /// The position of `path`, or of its nearest ancestor that has one
    /// (`evictionHard.memory.available`, then `evictionHard.memory`, then `evictionHard`).
    /// The root is not a fallback: a path whose top-level field is absent has no position.
    pub fn position(&self, path: &str) -> Option<Position> {
        let mut current = path;
        loop {
            if let Some(position) = self.get(current) {
                return Some(position);
            }
            current = parent_path(current)?;
        }
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

    /// All recorded paths and positions, in the order recorded (document order).
    pub fn iter(&self) -> impl Iterator<Item = (&str, Position)> {
        self.entries
            .iter()
            .map(|(start, end, position)| (self.paths.get(*start..*end).unwrap_or(""), *position))
    }
}

/// `parent.key` (or `key` at the root), in [`SourceMap`] path syntax.
pub fn join_key(parent: &str, key: &str) -> String {
    let mut path = parent.to_string();
    push_key(&mut path, key);
    path
}

/// `parent[index]`, in [`SourceMap`] path syntax.
pub fn join_index(parent: &str, index: usize) -> String {
    let mut path = parent.to_string();
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

/// The path one segment up, or `None` at a top-level field or the root.
fn parent_path(path: &str) -> Option<&str> {
    let cut = path.rfind(['.', '['])?;
    let parent = &path[..cut];
    (!parent.is_empty()).then_some(parent)
}
