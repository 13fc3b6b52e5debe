//! Files replaced atomically: a crash at any instant leaves either the old file or the new
//! one, never a mix. The agent's checkpoints and the kubelet's config file, and the
//! simulated nodes' files, are all written this way.
//!
//! A write goes to a temp file in the same directory (`.<name>.tmp-<pid>-<nanos>-<n>`),
//! is `sync_all`ed, renamed over the target, and the directory is fsynced so that the
//! rename itself is durable. A temp file left by a writer that died is never in the way
//! (pid, clock and counter make each name new, even for an agent that is pid 1 in every
//! container it runs in) and is removed by [`clean_temp_files`]. Its name never ends in
//! the target's own name or in `.conf`, so a kubelet reading a directory never reads one.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The infix of temp files: `.<name>.tmp-<pid>-<nanos>-<n>`.
pub const TMP_MARK: &str = ".tmp-";

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` atomically (see the module). The temp file is removed when any
/// step fails. The directory must exist.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} has no file name", path.display()),
        )
    })?;
    let name = name.to_string_lossy();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut attempts = 0;
    let (tmp, mut file) = loop {
        let tmp = dir.join(format!(
            ".{name}{TMP_MARK}{}-{nanos}-{}",
            std::process::id(),
            TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempts < 8 => attempts += 1,
            Err(e) => return Err(e),
        }
    };
    let result = (|| {
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Whether `file_name` is a temp file of an interrupted [`write_atomic`] (of any target).
pub fn is_temp_file(file_name: &str) -> bool {
    file_name.starts_with('.') && file_name.contains(TMP_MARK)
}

/// Removes the temp files that interrupted [`write_atomic`]s of `dir/name` left behind;
/// returns how many.
pub fn clean_temp_files(dir: &Path, name: &str) -> io::Result<usize> {
    let prefix = format!(".{name}{TMP_MARK}");
    let mut removed = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// fsyncs a directory, making renames and removals in it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_atomic_replaces_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two, longer").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two, longer");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["config.yaml"]);
        let err = write_atomic(&dir.path().join("missing/x"), b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_stale_temp_file_is_not_in_the_way_and_can_be_cleaned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("50-kubelet-gitops.conf");
        // What a writer killed mid-write leaves.
        let stale = dir
            .path()
            .join(format!(".50-kubelet-gitops.conf{TMP_MARK}1-0-0"));
        fs::write(&stale, b"half").unwrap();
        write_atomic(&path, b"whole").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"whole");
        assert!(
            !stale.to_string_lossy().ends_with(".conf"),
            "never read as a drop-in"
        );
        assert!(is_temp_file(&stale.file_name().unwrap().to_string_lossy()));
        assert!(!is_temp_file("50-kubelet-gitops.conf") && !is_temp_file(".hidden"));
        fs::write(dir.path().join("other"), b"x").unwrap();
        assert_eq!(
            clean_temp_files(dir.path(), "50-kubelet-gitops.conf").unwrap(),
            1
        );
        assert!(!stale.exists());
        assert!(dir.path().join("other").exists() && path.exists());
    }

    #[test]
    fn a_path_without_a_file_name_is_refused() {
        let err = write_atomic(Path::new("/"), b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
