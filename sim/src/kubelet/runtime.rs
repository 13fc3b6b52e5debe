//! containerd's part on a simulated node: a Unix socket listening at
//! `/run/containerd/containerd.sock` under the node's root, where a kubelet and a node
//! agent's pre-flight look for the container runtime.
//!
//! It accepts connections and closes them; it speaks no CRI. The stand-in kubelet dials
//! its `containerRuntimeEndpoint` (and `imageServiceEndpoint`) at every start and exits
//! as a kubelet does when nothing answers there.
//!
//! A socket path is limited to 107 bytes (`sun_path`); a node root deep in a temp
//! directory can make it longer, so a long path is bound and dialled through
//! `/proc/self/fd/<dir>/<name>`, which names the same file.

use std::io;
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::net::UnixListener;
use tokio::task::JoinHandle;

/// The longest path `sun_path` holds with its terminating NUL.
const SUN_PATH_MAX: usize = 107;

/// A short address for the socket at `path`: `path` itself when it fits, else
/// `/proc/self/fd/<n>/<name>` with `<n>` an open handle on its directory, which must
/// stay open while the address is used.
fn address(path: &Path) -> io::Result<(Option<std::fs::File>, PathBuf)> {
    if path.as_os_str().len() <= SUN_PATH_MAX {
        return Ok((None, path.to_path_buf()));
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: not a socket path", path.display()),
        ));
    };
    let handle = std::fs::File::open(dir)?;
    let short = PathBuf::from(format!("/proc/self/fd/{}", handle.as_raw_fd())).join(name);
    Ok((Some(handle), short))
}

/// Connects to the Unix socket at `path` and hangs up: `Ok` when something listens there.
pub fn dial(path: &Path) -> io::Result<()> {
    let (_dir, addr) = address(path)?;
    std::os::unix::net::UnixStream::connect(addr).map(drop)
}

/// A listening stand-in for containerd's socket. Stops listening when dropped; the socket
/// file stays, as containerd's does when it stops.
#[derive(Debug)]
pub struct RuntimeSocket {
    path: PathBuf,
    task: JoinHandle<()>,
}

impl RuntimeSocket {
    /// Listens at `path` (a path on this machine), creating its directory. A file left
    /// there (the socket of an earlier run) is removed first, as containerd does. Must be
    /// called within a tokio runtime.
    pub fn listen(path: &Path) -> io::Result<RuntimeSocket> {
        let at = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(at)?;
        }
        match std::fs::symlink_metadata(path) {
            Ok(meta) if !meta.is_dir() => std::fs::remove_file(path).map_err(at)?,
            _ => {}
        }
        let (_dir, addr) = address(path).map_err(at)?;
        let listener = UnixListener::bind(&addr).map_err(at)?;
        let shown = path.to_path_buf();
        let task = tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((conn, _)) => drop(conn),
                    Err(e) => {
                        tracing::debug!(socket = %shown.display(), error = %e, "runtime socket accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        });
        Ok(RuntimeSocket {
            path: path.to_path_buf(),
            task,
        })
    }

    /// Where it listens.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RuntimeSocket {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt as _;

    #[tokio::test]
    async fn listens_answers_and_replaces_a_stale_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/containerd/containerd.sock");
        assert_eq!(
            dial(&path).unwrap_err().kind(),
            io::ErrorKind::NotFound,
            "nothing there yet"
        );
        let socket = RuntimeSocket::listen(&path).unwrap();
        assert!(
            std::fs::metadata(&path).unwrap().file_type().is_socket(),
            "a socket file"
        );
        dial(&path).unwrap();
        drop(socket);
        tokio::task::yield_now().await;
        // The file stays; a new listener replaces it.
        assert!(path.exists());
        let _again = RuntimeSocket::listen(&path).unwrap();
        dial(&path).unwrap();
    }

    #[tokio::test]
    async fn a_path_longer_than_sun_path_works() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("n".repeat(60)).join("o".repeat(60));
        let path = deep.join("run/containerd/containerd.sock");
        assert!(path.as_os_str().len() > SUN_PATH_MAX);
        let _socket = RuntimeSocket::listen(&path).unwrap();
        assert!(std::fs::metadata(&path).unwrap().file_type().is_socket());
        dial(&path).unwrap();
    }
}
