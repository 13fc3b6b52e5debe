//! Which files of a revision make up the config tree: the root directory, the globs, and
//! the layout (`base/kubelet.yaml`, `pools/<name>.yaml`). Symlinks, submodules, paths
//! that leave the root and paths holding a control character are errors naming the path
//! (escaped).

use kubelet_gitops_core::message;

use super::error::RepoError;
use super::settings::{Matcher, SETTINGS_FILE};
use crate::source::{Entry, EntryKind};

/// The base configuration, relative to the config root.
pub const BASE_FILE: &str = "base/kubelet.yaml";
/// The directory of pool files, relative to the config root.
pub const POOLS_DIR: &str = "pools";

/// The files to read, as paths relative to the repository root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Layout {
    pub base: Option<String>,
    /// Sorted by path.
    pub pools: Vec<String>,
}

/// `root` as a clean relative directory: no leading `./` or `/`, no trailing `/`, no `..`.
pub(super) fn normalize_root(root: &str) -> Result<String, RepoError> {
    let trimmed = root.trim();
    if trimmed.starts_with('/') {
        return Err(RepoError::new(
            "--root",
            "",
            format!("{root:?} must be a directory relative to the repository root"),
        ));
    }
    let mut parts = Vec::new();
    for part in trimmed.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(RepoError::new(
                    "--root",
                    "",
                    format!("{root:?} leaves the repository: `..` is not allowed"),
                ));
            }
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

/// `root/rel`, or `rel` at the top.
pub(super) fn join(root: &str, rel: &str) -> String {
    if root.is_empty() {
        rel.to_string()
    } else {
        format!("{root}/{rel}")
    }
}

/// The error for a symlink or submodule where a regular file or directory must be.
pub(super) fn not_a_file(path: &str, kind: EntryKind) -> RepoError {
    let what = match kind {
        EntryKind::Symlink => {
            "is a symlink: the config tree must hold regular files only (a link may point \
             outside the repository or change what a reviewed path means); commit the file \
             itself, or exclude the path"
        }
        EntryKind::Submodule => {
            "is a git submodule: the config tree must hold regular files of this repository \
             only (a submodule's content is not part of the reviewed commit); exclude the path"
        }
        EntryKind::File => "is a regular file where a directory is expected",
    };
    RepoError::new(path, "", what)
}

/// The root must be a real directory of the revision: no symlink or submodule on its way,
/// and something under it (unless it is the top).
pub(super) fn check_root(entries: &[Entry], root: &str, source: &str) -> Result<(), RepoError> {
    if root.is_empty() {
        return Ok(());
    }
    for e in entries {
        let is_ancestor = root == e.path || root.starts_with(&format!("{}/", e.path));
        if is_ancestor {
            return Err(match e.kind {
                EntryKind::File => RepoError::new(
                    &e.path,
                    "",
                    format!("the config root {root:?} must be a directory, but this is a file"),
                ),
                kind => not_a_file(&e.path, kind),
            });
        }
    }
    let prefix = format!("{root}/");
    if !entries.iter().any(|e| e.path.starts_with(&prefix)) {
        return Err(RepoError::new(
            "--root",
            "",
            format!("the config root {root:?} does not exist in {source}"),
        ));
    }
    Ok(())
}

/// Sorts the entries under `root` that the globs select into the layout. Other files are
/// ignored; symlinks, submodules, unsafe paths and misplaced YAML files are errors.
pub(super) fn layout(
    entries: &[Entry],
    root: &str,
    matcher: &Matcher,
    errors: &mut Vec<RepoError>,
) -> Layout {
    let mut out = Layout::default();
    let settings = join(root, SETTINGS_FILE);
    for e in entries {
        let rel = if root.is_empty() {
            e.path.as_str()
        } else {
            match e.path.strip_prefix(root).and_then(|r| r.strip_prefix('/')) {
                Some(r) => r,
                None => continue,
            }
        };
        if let Some(problem) = unsafe_path(rel) {
            errors.push(RepoError::new(&e.path, "", problem));
            continue;
        }
        if e.path == settings || !matcher.matches(rel) {
            continue;
        }
        if e.kind != EntryKind::File {
            errors.push(not_a_file(&e.path, e.kind));
            continue;
        }
        classify(&e.path, rel, &mut out, errors);
    }
    out.pools.sort();
    out
}

fn classify(path: &str, rel: &str, out: &mut Layout, errors: &mut Vec<RepoError>) {
    let yaml = rel.ends_with(".yaml") || rel.ends_with(".yml");
    if rel == BASE_FILE {
        out.base = Some(path.to_string());
    } else if let Some(in_pools) = rel
        .strip_prefix(POOLS_DIR)
        .and_then(|r| r.strip_prefix('/'))
    {
        if !yaml {
            return;
        }
        if in_pools.contains('/') {
            errors.push(RepoError::new(
                path,
                "",
                format!(
                    "pool files live directly in {POOLS_DIR}/ (one {POOLS_DIR}/<name>.yaml per \
                     pool): move this file there, or exclude it"
                ),
            ));
        } else {
            out.pools.push(path.to_string());
        }
    } else if yaml && rel.starts_with("base/") {
        errors.push(RepoError::new(
            path,
            "",
            format!("only {BASE_FILE} is read from base/: merge this file into it, or exclude it"),
        ));
    } else if rel == "kubelet-gitops.yml" {
        errors.push(RepoError::new(
            path,
            "",
            format!("the settings file is named {SETTINGS_FILE}: rename this file"),
        ));
    }
}

/// Why a path is not a plain relative path inside the root, if it is not.
fn unsafe_path(rel: &str) -> Option<String> {
    if message::has_unsafe(rel) {
        return Some(
            "the path holds a control character (a newline, an escape, a bidirectional \
             control; shown escaped here): such a name could forge lines of output, notes and \
             statuses, so the commit is refused; rename the file or directory"
                .to_string(),
        );
    }
    if rel.starts_with('/') {
        return Some("an absolute path cannot be part of the config tree".to_string());
    }
    if rel
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Some(
            "the path leaves the config root or is not normalized (`.`, `..` or an empty \
             component)"
                .to_string(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::render::{RenderOptions, render_repo};
    use crate::source::MemorySource;

    const POOL: &str = "apiVersion: kubelet-gitops.io/v1alpha1\nkind: NodePool\nmetadata:\n  name: a\nspec:\n  nodeSelector: {}\n";

    #[test]
    fn a_path_with_a_control_character_is_an_error_of_the_commit_named_escaped() {
        for (path, shown) in [
            (
                "pools/x.yaml: valid\nkubelet-gitops: success: all good\npools/y.yaml",
                "pools/x.yaml: valid\\nkubelet-gitops: success: all good\\npools/y.yaml",
            ),
            ("docs/\u{1b}[2Jnotes.md", "docs/\\u{1b}[2Jnotes.md"),
            ("pools/b\u{202e}lmay.yaml", "pools/b\\u{202e}lmay.yaml"),
            ("tab\there/README", "tab\\there/README"),
        ] {
            let src = MemorySource::new([("pools/a.yaml", POOL), (path, "x: 1\n")]);
            let errors = render_repo(&src, &RenderOptions::default()).unwrap_err();
            assert_eq!(errors.len(), 1, "{errors:?}");
            let line = errors[0].to_string();
            assert!(
                line.starts_with(&format!("{shown}: the path holds a control character")),
                "{line}"
            );
            assert!(!line.contains('\n'), "{line:?}");
        }
        // Printable Unicode is a name like any other.
        let src = MemorySource::new([("pools/a.yaml", POOL), ("docs/grüße 東京.md", "x\n")]);
        assert!(render_repo(&src, &RenderOptions::default()).is_ok());
    }
}
