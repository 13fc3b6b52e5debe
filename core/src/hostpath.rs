//! Paths on a node reached from somewhere else: the agent's container, which sees the
//! host under `--host-root` (`/host`), and the simulated nodes, each under its own root.

use std::path::{Component, Path, PathBuf};

/// `path` (a path on the host) under `host_root`: `/etc/x` under `/host` is `/host/etc/x`.
/// `..` components cannot climb above the root. Lexical: nothing is read, so a symlink
/// on the host is followed by the operating system from wherever it points.
pub fn host_path(host_root: &Path, path: impl AsRef<Path>) -> PathBuf {
    let mut out = host_root.to_path_buf();
    let mut depth = 0usize;
    for c in path.as_ref().components() {
        match c {
            Component::Normal(part) => {
                out.push(part);
                depth += 1;
            }
            Component::ParentDir if depth > 0 => {
                out.pop();
                depth -= 1;
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_paths_stay_under_the_root() {
        let root = Path::new("/host");
        assert_eq!(
            host_path(root, "/etc/kubernetes"),
            Path::new("/host/etc/kubernetes")
        );
        assert_eq!(host_path(root, "var/lib"), Path::new("/host/var/lib"));
        assert_eq!(
            host_path(root, "/../../etc/shadow"),
            Path::new("/host/etc/shadow")
        );
        assert_eq!(host_path(root, "/a/../b"), Path::new("/host/b"));
        assert_eq!(host_path(Path::new("/"), "/etc/x"), Path::new("/etc/x"));
    }
}
