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

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_the_file_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(names(dir.path()), ["config.yaml"]);
    }

    #[test]
    fn a_missing_directory_fails_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let err = write_atomic(&dir.path().join("no/such/file"), b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(names(dir.path()).is_empty());
    }

    #[test]
    fn a_path_without_a_file_name_is_refused() {
        let err = write_atomic(Path::new("/"), b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn stale_temp_files_are_recognised_and_cleaned_by_target() {
        let dir = tempfile::tempdir().unwrap();
        let stale = format!(".config.yaml{TMP_MARK}1-0-0");
        let other = format!(".50-kubelet-gitops.conf{TMP_MARK}1-0-0");
        fs::write(dir.path().join(&stale), b"half").unwrap();
        fs::write(dir.path().join(&other), b"half").unwrap();
        assert!(is_temp_file(&stale));
        assert!(!is_temp_file("config.yaml"));
        assert!(!is_temp_file(".hidden"));
        // A stale temp file is not in the way of a new write.
        write_atomic(&dir.path().join("config.yaml"), b"new").unwrap();
        assert_eq!(clean_temp_files(dir.path(), "config.yaml").unwrap(), 1);
        assert_eq!(names(dir.path()), [other.as_str(), "config.yaml"]);
    }
}
