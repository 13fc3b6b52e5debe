//! [`CommitSource`]: the files of one commit, read from the object database.

use std::path::{Path, PathBuf};

use git2::{ObjectType, Oid, Repository};
use kubelet_gitops_core::message::{escape_bytes, escape_line};

use super::GitError;
use super::signature::CommitSignature;
use crate::source::{Entry, EntryKind, FileSource, SourceError};

/// Tree entry modes (git stores them normalised; see `git_tree_entry_filemode`).
const MODE_TREE: i32 = 0o040000;
const MODE_BLOB: i32 = 0o100644;
const MODE_BLOB_EXECUTABLE: i32 = 0o100755;
const MODE_LINK: i32 = 0o120000;
const MODE_COMMIT: i32 = 0o160000;

/// Who made a commit and when, for messages and statuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    /// The full hex id.
    pub id: String,
    /// The shortest unambiguous abbreviation (at least 7 hex digits).
    pub short_id: String,
    /// The first paragraph of the message, on one line; empty when the message is.
    pub summary: String,
    /// The author's name.
    pub author_name: String,
    /// The author's e-mail address.
    pub author_email: String,
    /// Author time, seconds since the Unix epoch.
    pub time_seconds: i64,
    /// The author's UTC offset in minutes.
    pub time_offset_minutes: i32,
}

/// The files of one commit, implementing [`FileSource`] over its tree. Blobs are read
/// straight from the object database: no work tree is used or needed.
///
/// Holds its own handle on the repository, so it can be moved to another thread.
pub struct CommitSource {
    repo: Repository,
    commit: Oid,
    tree: Oid,
    origin: String,
    info: CommitInfo,
}

impl std::fmt::Debug for CommitSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitSource")
            .field("commit", &self.info.id)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

/// Opens the repository at `repo_path` (a work tree, its `.git`, or a bare repository),
/// resolves `rev` (a branch, tag, full or abbreviated id, `HEAD~1`, ...) to a commit, and
/// returns its files. Nothing in the work tree is read.
pub fn open_revision(repo_path: &Path, rev: &str) -> Result<CommitSource, GitError> {
    let repo = Repository::open(repo_path).map_err(|source| GitError::NotARepository {
        path: repo_path.to_path_buf(),
        source,
    })?;
    let origin = repo_path.display().to_string();
    let object = repo
        .revparse_single(rev)
        .map_err(|source| GitError::NoSuchRevision {
            rev: rev.to_string(),
            repo: origin.clone(),
            source,
        })?;
    let commit = object
        .peel_to_commit()
        .map_err(|source| GitError::NotACommit {
            rev: rev.to_string(),
            repo: origin.clone(),
            source,
        })?
        .id();
    drop(object);
    CommitSource::new(repo, commit, origin)
}

/// `head` and its first-parent ancestors, newest first, at most `limit` commits: the
/// states the branch itself went through (a merged pull request counts once, as its merge
/// commit; the commits inside it are not walked).
pub fn first_parent_history(
    repo_path: &Path,
    head: &str,
    limit: usize,
) -> Result<Vec<String>, GitError> {
    let repo = Repository::open(repo_path).map_err(|source| GitError::NotARepository {
        path: repo_path.to_path_buf(),
        source,
    })?;
    let no_such = |source| GitError::NoSuchRevision {
        rev: head.to_string(),
        repo: repo_path.display().to_string(),
        source,
    };
    let oid = Oid::from_str(head).map_err(no_such)?;
    let mut commit = repo.find_commit(oid).map_err(no_such)?;
    let mut out = vec![commit.id().to_string()];
    while out.len() < limit && commit.parent_count() > 0 {
        // A shallow or partial cache may lack a parent: the walk ends there.
        let Ok(parent) = commit.parent(0) else { break };
        out.push(parent.id().to_string());
        commit = parent;
    }
    Ok(out)
}

impl CommitSource {
    /// The files of commit `id` in the repository at `repo_path`; `origin` (a path or a
    /// URL) is what [`FileSource::describe`] names.
    pub fn open(repo_path: &Path, id: &str, origin: &str) -> Result<CommitSource, GitError> {
        let repo = Repository::open(repo_path).map_err(|source| GitError::NotARepository {
            path: repo_path.to_path_buf(),
            source,
        })?;
        let oid = Oid::from_str(id).map_err(|source| GitError::NoSuchRevision {
            rev: id.to_string(),
            repo: origin.to_string(),
            source,
        })?;
        CommitSource::new(repo, oid, origin.to_string())
    }

    fn new(repo: Repository, id: Oid, origin: String) -> Result<CommitSource, GitError> {
        let (tree, info) = {
            let commit = repo
                .find_commit(id)
                .map_err(|source| GitError::NoSuchRevision {
                    rev: id.to_string(),
                    repo: origin.clone(),
                    source,
                })?;
            let short_id = commit
                .as_object()
                .short_id()
                .ok()
                .and_then(|b| b.as_str().ok().map(str::to_string))
                .unwrap_or_else(|| id.to_string()[..7].to_string());
            let author = commit.author();
            let when = author.when();
            let info = CommitInfo {
                id: id.to_string(),
                short_id,
                summary: commit
                    .summary_bytes()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default(),
                author_name: String::from_utf8_lossy(author.name_bytes()).into_owned(),
                author_email: String::from_utf8_lossy(author.email_bytes()).into_owned(),
                time_seconds: when.seconds(),
                time_offset_minutes: when.offset_minutes(),
            };
            (commit.tree_id(), info)
        };
        Ok(CommitSource {
            repo,
            commit: id,
            tree,
            origin,
            info,
        })
    }

    /// The commit's full hex id.
    pub fn commit_id(&self) -> String {
        self.commit.to_string()
    }

    /// Who made the commit, when, and its summary line.
    pub fn info(&self) -> &CommitInfo {
        &self.info
    }

    /// The first line of the commit message.
    pub fn summary(&self) -> &str {
        &self.info.summary
    }

    /// The author as `Name <email>`.
    pub fn author(&self) -> String {
        format!("{} <{}>", self.info.author_name, self.info.author_email)
    }

    /// Author time, seconds since the Unix epoch.
    pub fn time(&self) -> i64 {
        self.info.time_seconds
    }

    /// The commit's signature (its `gpgsig` header), the bytes it signs and the committer
    /// time, for [`super::signature::verify`]. An unsigned commit is not an error.
    pub fn signature(&self) -> Result<CommitSignature, GitError> {
        let git = |source| GitError::Git {
            what: format!("reading the signature of {}", self.describe()),
            source,
        };
        let committer_time = self
            .repo
            .find_commit(self.commit)
            .map_err(git)?
            .committer()
            .when()
            .seconds();
        match self.repo.extract_signature(&self.commit, None) {
            Ok((signature, payload)) => Ok(CommitSignature {
                signature: Some(signature.to_vec()),
                payload: payload.to_vec(),
                committer_time,
            }),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(CommitSignature {
                signature: None,
                payload: Vec::new(),
                committer_time,
            }),
            Err(e) => Err(git(e)),
        }
    }

    /// Where the repository lives on disk.
    pub fn repo_path(&self) -> PathBuf {
        self.repo.path().to_path_buf()
    }

    fn read_error(&self, path: &str, message: impl std::fmt::Display) -> SourceError {
        SourceError::Read {
            path: path.to_string(),
            message: format!("{message} (in {})", self.describe()),
        }
    }

    fn not_found(&self, path: &str) -> SourceError {
        SourceError::NotFound {
            path: path.to_string(),
            source_name: self.describe(),
        }
    }
}

impl FileSource for CommitSource {
    fn describe(&self) -> String {
        format!("commit {} of {}", self.info.short_id, self.origin)
    }

    fn entries(&self) -> Result<Vec<Entry>, SourceError> {
        let root = self
            .repo
            .find_tree(self.tree)
            .map_err(|e| self.read_error("", format_args!("cannot read the root tree: {e}")))?;
        let mut out = Vec::new();
        // Depth-first over an explicit stack: (directory prefix, tree).
        let mut stack = vec![(String::new(), root)];
        while let Some((prefix, tree)) = stack.pop() {
            for entry in tree.iter() {
                let name = std::str::from_utf8(entry.name_bytes()).map_err(|_| {
                    self.read_error(
                        &format!(
                            "{}{}",
                            escape_line(&prefix),
                            escape_bytes(entry.name_bytes())
                        ),
                        "the path is not valid UTF-8 (its bytes shown escaped, `\\xff`): \
                         rename it; the commit is refused",
                    )
                })?;
                let path = format!("{prefix}{name}");
                let kind = match entry.filemode() {
                    MODE_TREE => {
                        let sub = self.repo.find_tree(entry.id()).map_err(|e| {
                            self.read_error(&path, format_args!("cannot read tree: {e}"))
                        })?;
                        stack.push((format!("{path}/"), sub));
                        continue;
                    }
                    MODE_BLOB | MODE_BLOB_EXECUTABLE => EntryKind::File,
                    MODE_LINK => EntryKind::Symlink,
                    MODE_COMMIT => EntryKind::Submodule,
                    other => {
                        return Err(self
                            .read_error(&path, format_args!("unknown tree entry mode {other:o}")));
                    }
                };
                out.push(Entry { path, kind });
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, SourceError> {
        if path.is_empty()
            || path.contains('\0')
            || path.starts_with('/')
            || path
                .split('/')
                .any(|c| c.is_empty() || c == "." || c == "..")
        {
            return Err(self.not_found(path));
        }
        let root = self
            .repo
            .find_tree(self.tree)
            .map_err(|e| self.read_error(path, format_args!("cannot read the root tree: {e}")))?;
        let entry = match root.get_path(Path::new(path)) {
            Ok(entry) => entry,
            Err(e) if e.code() == git2::ErrorCode::NotFound => return Err(self.not_found(path)),
            Err(e) => return Err(self.read_error(path, e)),
        };
        match (entry.filemode(), entry.kind()) {
            (MODE_BLOB | MODE_BLOB_EXECUTABLE, Some(ObjectType::Blob)) => {
                let blob = self
                    .repo
                    .find_blob(entry.id())
                    .map_err(|e| self.read_error(path, format_args!("cannot read blob: {e}")))?;
                Ok(blob.content().to_vec())
            }
            (MODE_LINK, _) => Err(self.read_error(path, "is a symbolic link, not a file")),
            (MODE_COMMIT, _) => Err(self.read_error(path, "is a submodule, not a file")),
            (MODE_TREE, _) => Err(self.read_error(path, "is a directory, not a file")),
            (other, _) => {
                Err(self.read_error(path, format_args!("unknown tree entry mode {other:o}")))
            }
        }
    }
}
