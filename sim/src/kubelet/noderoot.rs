//! Paths as a simulated node sees them, resolved under the node's root directory.
//!
//! A stand-in kubelet reads what its flags and configuration name (`--config`,
//! `--config-dir`, the container runtime's socket) as paths on its node
//! (`/var/lib/kubelet/config.yaml`). [`resolve`] finds them under the node's root the way
//! a process chrooted there would: `..` stops at the root, and symlinks are followed
//! inside the root (an absolute link target starts again at the root, not at this
//! machine's `/`), so nothing a node's files say can lead outside its root.

use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Linux's limit on symlinks followed in one lookup (`MAXSYMLINKS`); one more is `ELOOP`.
const MAX_SYMLINKS: usize = 40;

/// One step still to take: a name, or `..`.
enum Step {
    Name(OsString),
    Parent,
}

/// The steps of `path` (absolute or relative to the node's `/`), last one first, so
/// that popping takes them in order.
fn steps_reversed(path: &Path) -> Vec<Step> {
    let mut steps: Vec<Step> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(Step::Name(name.to_os_string())),
            Component::ParentDir => Some(Step::Parent),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    steps.reverse();
    steps
}

/// `path` on the node whose `/` is `root`, as a path on this machine: the node's path
/// resolved as a process chrooted to `root` resolves it. `..` never climbs above `root`;
/// a symlink under `root` is followed within `root` (an absolute target counts from
/// `root`). A relative `path` counts from the node's `/`, the kubelet's working
/// directory under systemd. A component that does not exist stays in the result, so
/// that opening it fails with `NotFound` as it would on the node.
///
/// Fails only when more than 40 symlinks are met (`too many levels of symbolic links`,
/// as `ELOOP`), or when a symlink cannot be read.
pub fn resolve(root: &Path, path: impl AsRef<Path>) -> io::Result<PathBuf> {
    let mut pending = steps_reversed(path.as_ref());
    let mut resolved: Vec<OsString> = Vec::new();
    let mut links = 0usize;
    while let Some(step) = pending.pop() {
        let name = match step {
            Step::Parent => {
                resolved.pop();
                continue;
            }
            Step::Name(name) => name,
        };
        let mut candidate = root.to_path_buf();
        candidate.extend(&resolved);
        candidate.push(&name);
        // Every component is looked at, even past a missing one: a later `..` may lead
        // back to names that exist, and a link among them must not be left for the
        // operating system to follow from this machine's `/`.
        let link = std::fs::symlink_metadata(&candidate).is_ok_and(|m| m.file_type().is_symlink());
        if !link {
            resolved.push(name);
            continue;
        }
        links += 1;
        if links > MAX_SYMLINKS {
            return Err(io::Error::other(format!(
                "{}: too many levels of symbolic links",
                path.as_ref().display()
            )));
        }
        let target = std::fs::read_link(&candidate)?;
        if target.has_root() {
            resolved.clear();
        }
        pending.extend(steps_reversed(&target));
    }
    let mut out = root.to_path_buf();
    out.extend(&resolved);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubelet_gitops_core::hostpath::host_path;
    use std::os::unix::fs::symlink;

    #[test]
    fn node_paths_land_under_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(
            resolve(root, "/var/lib/kubelet/config.yaml").unwrap(),
            root.join("var/lib/kubelet/config.yaml")
        );
        assert_eq!(
            resolve(root, "etc/kubernetes").unwrap(),
            root.join("etc/kubernetes"),
            "relative to the node's /"
        );
        assert_eq!(resolve(root, "/").unwrap(), root);
    }

    #[test]
    fn dot_dot_stops_at_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(
            resolve(root, "/../../etc/passwd").unwrap(),
            root.join("etc/passwd")
        );
        assert_eq!(resolve(root, "/a/../../b").unwrap(), root.join("b"));
        assert_eq!(host_path(root, "/../../x.slice"), root.join("x.slice"));
        assert_eq!(host_path(root, "/a/../b.slice"), root.join("b.slice"));
    }

    #[test]
    fn symlinks_are_followed_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("node");
        std::fs::create_dir_all(root.join("run/systemd/resolve")).unwrap();
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(root.join("run/systemd/resolve/stub-resolv.conf"), "x").unwrap();
        // Ubuntu's /etc/resolv.conf, a relative link.
        symlink(
            "../run/systemd/resolve/stub-resolv.conf",
            root.join("etc/resolv.conf"),
        )
        .unwrap();
        assert_eq!(
            resolve(&root, "/etc/resolv.conf").unwrap(),
            root.join("run/systemd/resolve/stub-resolv.conf")
        );
        // An absolute target counts from the node's /, not this machine's.
        symlink("/run/systemd", root.join("etc/sd")).unwrap();
        assert_eq!(
            resolve(&root, "/etc/sd/resolve/stub-resolv.conf").unwrap(),
            root.join("run/systemd/resolve/stub-resolv.conf")
        );
        // A link that climbs out stops at the root.
        symlink("../../../../../../outside", root.join("etc/out")).unwrap();
        assert_eq!(resolve(&root, "/etc/out").unwrap(), root.join("outside"));
        // Through a link to a directory, `..` is the target's parent.
        assert_eq!(
            resolve(&root, "/etc/sd/..").unwrap(),
            root.join("run"),
            "as the kernel resolves it"
        );
    }

    #[test]
    fn missing_components_and_loops() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(
            resolve(root, "/no/such/../file").unwrap(),
            root.join("no/file")
        );
        symlink("/loop", root.join("loop")).unwrap();
        let err = resolve(root, "/loop/x").unwrap_err();
        assert!(
            err.to_string()
                .contains("too many levels of symbolic links"),
            "{err}"
        );
    }
}
