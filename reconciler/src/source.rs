//! Where a repository's files come from: a git commit's tree ([`crate::git`]), or memory
//! (tests). The renderer reads through [`FileSource`] and never touches a work tree.

use std::collections::BTreeMap;

/// What a tree entry is. Only regular files are config; the others are errors inside
/// the config tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Symlink,
    Submodule,
}

/// One entry of the tree, its path relative to the repository root with `/` separators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub kind: EntryKind,
}

/// Reading a source failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    #[error("{path}: no such file in {source_name}")]
    NotFound { path: String, source_name: String },
    #[error("{path}: {message}")]
    Read { path: String, message: String },
}

/// The files of one revision of a config repository.
pub trait FileSource {
    /// For messages: `commit 1a2b3c4 of https://...`, `memory`.
    fn describe(&self) -> String;
    /// Every entry (files, symlinks, submodules; not directories), sorted by path.
    fn entries(&self) -> Result<Vec<Entry>, SourceError>;
    /// The bytes of a regular file.
    fn read(&self, path: &str) -> Result<Vec<u8>, SourceError>;
}

/// Files held in memory: tests and offline tools.
#[derive(Debug, Clone, Default)]
pub struct MemorySource {
    pub files: BTreeMap<String, Vec<u8>>,
    pub symlinks: Vec<String>,
    pub submodules: Vec<String>,
}

impl MemorySource {
    /// A source with these files.
    pub fn new<P: Into<String>, B: Into<Vec<u8>>>(files: impl IntoIterator<Item = (P, B)>) -> Self {
        MemorySource {
            files: files
                .into_iter()
                .map(|(p, b)| (p.into(), b.into()))
                .collect(),
            ..MemorySource::default()
        }
    }
}

impl FileSource for MemorySource {
    fn describe(&self) -> String {
        "memory".to_string()
    }

    fn entries(&self) -> Result<Vec<Entry>, SourceError> {
        let mut out: Vec<Entry> = self
            .files
            .keys()
            .map(|p| (p, EntryKind::File))
            .chain(self.symlinks.iter().map(|p| (p, EntryKind::Symlink)))
            .chain(self.submodules.iter().map(|p| (p, EntryKind::Submodule)))
            .map(|(p, kind)| Entry {
                path: p.clone(),
                kind,
            })
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, SourceError> {
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| SourceError::NotFound {
                path: path.to_string(),
                source_name: self.describe(),
            })
    }
}
