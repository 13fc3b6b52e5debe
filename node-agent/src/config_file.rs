//! The file the agent writes for the kubelet: its `--config` file (replace mode) or the
//! agent's drop-in in its `--config-dir` (drop-in mode). The agent and kubelet-gitops-rescue
//! both write it through [`ConfigFile`], the same way: atomically ([`write_atomic`]), and
//! in drop-in mode the node's own config, an empty payload, is no drop-in at all.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use kubelet_gitops_core::atomic::write_atomic;

use crate::checkpoint::sha256_hex;
use crate::error::FileError;
use crate::hostflags::host_path;

/// Where the agent puts the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Replace mode: the payload replaces the kubelet's `--config` file (a host path,
    /// which must be the one the kubelet's flags name).
    ConfigFile { path: PathBuf },
    /// Drop-in mode: the payload is the drop-in `name` (ending in `.conf`) in the
    /// kubelet's `--config-dir` `dir` (a host path, which must be the flags' one).
    DropIn { dir: PathBuf, name: String },
}

impl Placement {
    /// The host path the payload is written to.
    pub fn target(&self) -> PathBuf {
        match self {
            Placement::ConfigFile { path } => path.clone(),
            Placement::DropIn { dir, name } => dir.join(name),
        }
    }
}

/// The kubelet's config file (or the agent's drop-in) as this process reaches it.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    placement: Placement,
    path: PathBuf,
}

fn failed(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> FileError {
    let path = path.to_path_buf();
    move |source| FileError { op, path, source }
}

impl ConfigFile {
    /// The file of `placement` (host paths) under `host_root` (`/` on the host).
    pub fn new(placement: Placement, host_root: &Path) -> ConfigFile {
        let path = host_path(host_root, placement.target());
        ConfigFile { placement, path }
    }

    /// Where it goes, as host paths.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// The file, as this process reaches it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn is_drop_in(&self) -> bool {
        matches!(self.placement, Placement::DropIn { .. })
    }

    /// Its bytes; a missing file is an error.
    pub fn read(&self) -> Result<Vec<u8>, FileError> {
        fs::read(&self.path).map_err(failed("read", &self.path))
    }

    /// Its bytes; `None` when it is missing.
    pub fn read_if_present(&self) -> Result<Option<Vec<u8>>, FileError> {
        self.read_as("read")
    }

    fn read_as(&self, op: &'static str) -> Result<Option<Vec<u8>>, FileError> {
        match fs::read(&self.path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(failed(op, &self.path)(e)),
        }
    }

    /// The sha256 of its bytes; `None` when it is missing.
    pub fn sha256(&self) -> Result<Option<String>, FileError> {
        Ok(self.read_if_present()?.map(|bytes| sha256_hex(&bytes)))
    }

    /// Whether it holds the config whose payload has `sha256`, byte for byte (in drop-in
    /// mode the node's own config, the empty payload, is no file): `None` when it does,
    /// else what was found, for a message.
    pub fn read_back(&self, sha256: &str) -> Result<Option<String>, FileError> {
        let expected = if self.is_drop_in() && sha256 == sha256_hex(b"") {
            None
        } else {
            Some(sha256)
        };
        let found = self.read_as("read back")?.map(|bytes| sha256_hex(&bytes));
        Ok(read_back_mismatch(&self.path, expected, found.as_deref()))
    }

    /// Writes `payload` atomically; in drop-in mode an empty payload (the node's own
    /// config) removes the drop-in. Creates the directory when missing.
    pub fn write(&self, payload: &[u8]) -> Result<(), FileError> {
        let path = &self.path;
        if payload.is_empty() && self.is_drop_in() {
            match fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(failed("remove", path)(e)),
            }
            if let Some(dir) = path.parent() {
                File::open(dir)
                    .and_then(|f| f.sync_all())
                    .map_err(failed("sync directory", dir))?;
            }
            return Ok(());
        }
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(failed("create directory", dir))?;
        }
        write_atomic(path, payload).map_err(failed("write", path))
    }
}

/// What a read-back of `path` found against what it should hold (sha256s; `None`: no
/// file): `None` when they agree.
fn read_back_mismatch(path: &Path, expected: Option<&str>, found: Option<&str>) -> Option<String> {
    let short = |sha: &str| sha.chars().take(12).collect::<String>();
    let path = path.display();
    match (expected, found) {
        _ if expected == found => None,
        (Some(want), Some(got)) => Some(format!(
            "{path} read back is not the config written (sha256 {}..., expected {}...)",
            short(got),
            short(want)
        )),
        (Some(_), None) => Some(format!("{path} is missing after the restart")),
        (None, _) => Some(format!(
            "{path} exists after the return to the local config, which has no drop-in"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drop_in(host: &Path) -> ConfigFile {
        ConfigFile::new(
            Placement::DropIn {
                dir: "/etc/kubernetes/kubelet.conf.d".into(),
                name: "50-kubelet-gitops.conf".into(),
            },
            host,
        )
    }

    #[test]
    fn the_file_is_the_placements_target_under_the_host_root() {
        let f = drop_in(Path::new("/host"));
        assert_eq!(
            f.path(),
            Path::new("/host/etc/kubernetes/kubelet.conf.d/50-kubelet-gitops.conf")
        );
    }

    #[test]
    fn a_write_is_atomic_and_the_empty_drop_in_is_no_file() {
        let host = tempfile::tempdir().unwrap();
        let replace = ConfigFile::new(
            Placement::ConfigFile {
                path: "/var/lib/kubelet/config.yaml".into(),
            },
            host.path(),
        );
        assert_eq!(replace.read_if_present().unwrap(), None);
        assert_eq!(replace.sha256().unwrap(), None);
        replace.write(b"maxPods: 10\n").unwrap();
        assert_eq!(replace.read().unwrap(), b"maxPods: 10\n");
        assert_eq!(
            replace.sha256().unwrap(),
            Some(sha256_hex(b"maxPods: 10\n"))
        );
        replace.write(b"").unwrap();
        assert_eq!(
            replace.read().unwrap(),
            b"",
            "replace mode writes what it is given"
        );

        let d = drop_in(host.path());
        d.write(b"maxPods: 10\n").unwrap();
        assert!(d.path().exists());
        d.write(b"").unwrap();
        assert!(!d.path().exists(), "the node's own config: no drop-in");
        d.write(b"").unwrap();
        let e = d.read().unwrap_err();
        assert_eq!(e.op, "read");
        assert_eq!(e.source.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_read_back_says_what_it_found() {
        let host = tempfile::tempdir().unwrap();
        let d = drop_in(host.path());
        let empty = sha256_hex(b"");
        let ours = sha256_hex(b"maxPods: 10\n");
        assert_eq!(
            d.read_back(&empty).unwrap(),
            None,
            "no drop-in, as it should be"
        );
        let missing = d.read_back(&ours).unwrap().unwrap();
        assert!(
            missing.ends_with("is missing after the restart"),
            "{missing}"
        );
        d.write(b"maxPods: 10\n").unwrap();
        assert_eq!(d.read_back(&ours).unwrap(), None);
        let extra = d.read_back(&empty).unwrap().unwrap();
        assert!(extra.ends_with("which has no drop-in"), "{extra}");
        d.write(b"maxPods: 11\n").unwrap();
        let other = d.read_back(&ours).unwrap().unwrap();
        assert!(
            other.contains("read back is not the config written")
                && other.contains(&format!("expected {}...", &ours[..12])),
            "{other}"
        );
    }
}
