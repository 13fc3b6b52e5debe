//! Checkpoints, like the kubelet's old `--dynamic-config-dir`: every config the agent may
//! apply or fall back to is kept on the node's disk, with its sha256, so that the agent can
//! resume after a restart at any point and can always return to a known config without the
//! API server.
//!
//! Layout under the checkpoint directory:
//!
//! | path | what |
//! | --- | --- |
//! | `meta/assigned` | the config being applied or applied ([`Assigned`]), JSON with its own sha256 |
//! | `meta/last-known-good` | the config to fall back to ([`Checkpoint`]), JSON with its own sha256 |
//! | `checkpoints/<uid>/<resourceVersion>/kubelet` | a ConfigMap's payload, byte for byte |
//! | `checkpoints/<uid>/<resourceVersion>/kubelet.sha256` | its sha256, in `sha256sum` format; written last, it marks the checkpoint complete |
//! | `local/kubelet`, `local/kubelet.sha256` | the node's own config file, saved before the agent first overwrites it, and saved again when the node's file changes while the node runs its local config |
//!
//! Every file is written with `kubelet_gitops_core::atomic::write_atomic`: a temp file in the same directory,
//! `sync_all`, rename over the target, fsync of the directory. A crash at any instant
//! leaves either the old or the new file, never a mix; leftover temp files are removed by
//! [`CheckpointStore::open`] and [`CheckpointStore::prune`]. A file whose content does not
//! match its sha256 (bit rot, truncation, hand edits), a metadata file that does not parse
//! or has lost its sha256, and a payload without its `.sha256` are reported as
//! [`CheckpointError`]s for which [`CheckpointError::is_corrupt`] is true, and never used.
//!
//! Metadata files look like `{"sha256":"<hex>","value":{...}}`; the sha256 is over the
//! exact bytes of the inner object as stored, so the check does not depend on how JSON is
//! re-serialized.

mod framed;
mod record;

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use kubelet_gitops_core::protocol::ConfigRef;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tracing::{debug, info, instrument, warn};

pub use framed::{meta_path, read_framed, write_framed};
use kubelet_gitops_core::atomic::{is_temp_file, sync_dir, write_atomic};
pub use record::{ApplyPhase, Assigned, Checkpoint, Verdict};

use crate::error::CheckpointError;

/// The file name of a checkpointed payload (the ConfigMap key).
pub const PAYLOAD_FILE: &str = "kubelet";
/// The file holding a payload's sha256.
pub const PAYLOAD_SHA_FILE: &str = "kubelet.sha256";
/// In `local/`: the sha256 of the copy a refresh is writing (present only during one).
const NEXT_SHA_FILE: &str = "kubelet.next.sha256";

const META_DIR: &str = "meta";
const CHECKPOINTS_DIR: &str = "checkpoints";
const LOCAL_DIR: &str = "local";
/// In `meta/`: the apply in flight ([`Assigned`]).
pub const ASSIGNED_FILE: &str = "assigned";
const LKG_FILE: &str = "last-known-good";

/// The sha256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        // Writing to a String cannot fail.
        let _ = fmt::Write::write_fmt(&mut out, format_args!("{b:02x}"));
    }
    out
}

/// The checkpoint directory.
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    dir: PathBuf,
}

fn io_err<'p>(op: &'static str, path: &'p Path) -> impl FnOnce(io::Error) -> CheckpointError + 'p {
    move |source| CheckpointError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// A uid or resourceVersion must be one plain path component.
fn check_name(what: &'static str, value: &str) -> Result<(), CheckpointError> {
    let ok = !value.is_empty()
        && value.len() <= 253
        && value != "."
        && value != ".."
        && !value.starts_with('.')
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(CheckpointError::InvalidName {
            what,
            value: value.to_string(),
        })
    }
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl CheckpointStore {
    /// Opens (creating if needed) the checkpoint directory `dir` with its `meta/`,
    /// `checkpoints/` and `local/` subdirectories, and removes temp files an interrupted
    /// write left behind.
    #[instrument(level = "debug", fields(dir = %dir.display()))]
    pub fn open(dir: &Path) -> Result<Self, CheckpointError> {
        let store = CheckpointStore {
            dir: dir.to_path_buf(),
        };
        for sub in [META_DIR, CHECKPOINTS_DIR, LOCAL_DIR] {
            let path = dir.join(sub);
            fs::create_dir_all(&path).map_err(io_err("create directory", &path))?;
        }
        sync_dir(dir).map_err(io_err("sync directory", dir))?;
        for sub in [META_DIR, LOCAL_DIR] {
            store.remove_temp_files(&dir.join(sub))?;
        }
        Ok(store)
    }

    /// The checkpoint directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn meta(&self, name: &str) -> PathBuf {
        meta_path(&self.dir, name)
    }

    fn checkpoint_dir(
        &self,
        uid: &str,
        resource_version: &str,
    ) -> Result<PathBuf, CheckpointError> {
        check_name("uid", uid)?;
        check_name("resourceVersion", resource_version)?;
        Ok(self
            .dir
            .join(CHECKPOINTS_DIR)
            .join(uid)
            .join(resource_version))
    }

    /// Where `cp`'s payload is stored.
    pub fn payload_path(&self, cp: &Checkpoint) -> Result<PathBuf, CheckpointError> {
        Ok(self
            .checkpoint_dir(&cp.uid, &cp.resource_version)?
            .join(PAYLOAD_FILE))
    }

    fn remove_temp_files(&self, dir: &Path) -> Result<(), CheckpointError> {
        let entries = match fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err("list", dir)(e)),
        };
        for entry in entries {
            let entry = entry.map_err(io_err("list", dir))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if is_temp_file(&name) {
                let path = entry.path();
                debug!(path = %path.display(), "removing a temp file left by an interrupted write");
                fs::remove_file(&path).map_err(io_err("remove", &path))?;
            }
        }
        Ok(())
    }

    /// Checkpoints `payload` as `checkpoints/<uid>/<resource_version>/kubelet` and its
    /// sha256 (written last, marking the checkpoint complete). Saving the same checkpoint
    /// again rewrites it (repairing a corrupt one).
    #[instrument(skip(self, payload), fields(config = %config, uid, resource_version, bytes = payload.len()))]
    pub fn save(
        &self,
        config: &ConfigRef,
        uid: &str,
        resource_version: &str,
        payload: &[u8],
    ) -> Result<Checkpoint, CheckpointError> {
        let dir = self.checkpoint_dir(uid, resource_version)?;
        fs::create_dir_all(&dir).map_err(io_err("create directory", &dir))?;
        // Make the new <uid>/<rv> directories themselves durable.
        for parent in dir.ancestors().skip(1).take(2) {
            sync_dir(parent).map_err(io_err("sync directory", parent))?;
        }
        self.remove_temp_files(&dir)?;
        let sha256 = sha256_hex(payload);
        // An older sha file must not vouch for the new payload while it is being written.
        let sha_path = dir.join(PAYLOAD_SHA_FILE);
        match fs::remove_file(&sha_path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("remove", &sha_path)(e)),
        }
        let payload_path = dir.join(PAYLOAD_FILE);
        write_atomic(&payload_path, payload).map_err(io_err("write", &payload_path))?;
        write_atomic(&sha_path, format!("{sha256}  {PAYLOAD_FILE}\n").as_bytes())
            .map_err(io_err("write", &sha_path))?;
        info!(path = %payload_path.display(), %sha256, "checkpointed");
        Ok(Checkpoint {
            config: config.clone(),
            uid: uid.to_string(),
            resource_version: resource_version.to_string(),
            sha256,
        })
    }

    /// The payload of `cp`, after checking that both the payload and its `.sha256` file
    /// are there and agree with `cp.sha256`.
    pub fn load(&self, cp: &Checkpoint) -> Result<Vec<u8>, CheckpointError> {
        let dir = self.checkpoint_dir(&cp.uid, &cp.resource_version)?;
        read_verified(&dir, &cp.sha256)
    }

    fn read_meta<T: for<'de> Deserialize<'de>>(
        &self,
        name: &str,
    ) -> Result<Option<T>, CheckpointError> {
        read_framed(&self.meta(name))
    }

    fn write_meta<T: Serialize>(&self, name: &str, value: &T) -> Result<(), CheckpointError> {
        write_framed(&self.meta(name), value)
    }

    fn remove_meta(&self, name: &str) -> Result<(), CheckpointError> {
        let path = self.meta(name);
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err("remove", &path)(e)),
        }
        let dir = self.dir.join(META_DIR);
        sync_dir(&dir).map_err(io_err("sync directory", &dir))
    }

    /// `meta/assigned`, if any.
    pub fn assigned(&self) -> Result<Option<Assigned>, CheckpointError> {
        self.read_meta(ASSIGNED_FILE)
    }

    /// Records `a` as `meta/assigned`.
    #[instrument(level = "debug", skip(self, a), fields(config = %a.checkpoint.config, phase = %a.phase))]
    pub fn set_assigned(&self, a: &Assigned) -> Result<(), CheckpointError> {
        check_name("uid", &a.checkpoint.uid)?;
        check_name("resourceVersion", &a.checkpoint.resource_version)?;
        self.write_meta(ASSIGNED_FILE, a)
    }

    /// Removes `meta/assigned`.
    pub fn clear_assigned(&self) -> Result<(), CheckpointError> {
        self.remove_meta(ASSIGNED_FILE)
    }

    /// `meta/last-known-good`, if any (`None`: the node's local config).
    pub fn last_known_good(&self) -> Result<Option<Checkpoint>, CheckpointError> {
        self.read_meta(LKG_FILE)
    }

    /// Records `cp` as `meta/last-known-good`.
    #[instrument(level = "debug", skip(self, cp), fields(config = %cp.config))]
    pub fn set_last_known_good(&self, cp: &Checkpoint) -> Result<(), CheckpointError> {
        check_name("uid", &cp.uid)?;
        check_name("resourceVersion", &cp.resource_version)?;
        self.write_meta(LKG_FILE, cp)
    }

    /// Removes `meta/last-known-good` (falling back to the local config).
    pub fn clear_last_known_good(&self) -> Result<(), CheckpointError> {
        self.remove_meta(LKG_FILE)
    }

    /// Saves the node's own config file, once: the first call stores `bytes` and returns
    /// `true`; later calls leave the saved copy alone and return `false`, so the original
    /// survives however many applies follow. A saved copy that is corrupt is left in place
    /// for a person to inspect ([`CheckpointStore::local_original`] reports it).
    pub fn save_local_original(&self, bytes: &[u8]) -> Result<bool, CheckpointError> {
        let dir = self.dir.join(LOCAL_DIR);
        let payload = dir.join(PAYLOAD_FILE);
        let sha = dir.join(PAYLOAD_SHA_FILE);
        if sha.exists() {
            return Ok(false);
        }
        if payload.exists() {
            // A payload without its sha256: an interrupted save (the sha is written last),
            // which is safe to redo since nothing was overwritten before it completed.
            warn!(path = %payload.display(), "redoing an interrupted save of the local config");
        }
        fs::create_dir_all(&dir).map_err(io_err("create directory", &dir))?;
        write_atomic(&payload, bytes).map_err(io_err("write", &payload))?;
        let sum = sha256_hex(bytes);
        write_atomic(&sha, format!("{sum}  {PAYLOAD_FILE}\n").as_bytes())
            .map_err(io_err("write", &sha))?;
        info!(path = %payload.display(), sha256 = %sum, "saved the node's local kubelet config");
        Ok(true)
    }

    /// Replaces the saved copy of the node's own config file with `bytes` (the node's
    /// file changed while it ran its local config: a `kubeadm upgrade`, a new node
    /// image). Returns `false` when the saved copy is `bytes` already. Without a saved
    /// copy it saves one ([`CheckpointStore::save_local_original`]).
    ///
    /// A crash at any instant leaves a copy that [`CheckpointStore::local_original`]
    /// accepts, the old one or the new one: the new sha256 is first recorded in
    /// `local/kubelet.next.sha256`, then the payload is replaced, then
    /// `local/kubelet.sha256`, then the `.next` record is removed. A payload that matches
    /// the `.next` record (a crash after the payload was replaced) is the new copy.
    #[instrument(level = "debug", skip_all, fields(bytes = bytes.len()))]
    pub fn refresh_local_original(&self, bytes: &[u8]) -> Result<bool, CheckpointError> {
        let dir = self.dir.join(LOCAL_DIR);
        let sha_path = dir.join(PAYLOAD_SHA_FILE);
        if !sha_path.exists() {
            return self.save_local_original(bytes);
        }
        let sum = sha256_hex(bytes);
        if matches!(self.local_original(), Ok(Some(saved)) if saved == bytes) {
            return Ok(false);
        }
        let record = format!("{sum}  {PAYLOAD_FILE}\n");
        let next = dir.join(NEXT_SHA_FILE);
        write_atomic(&next, record.as_bytes()).map_err(io_err("write", &next))?;
        let payload = dir.join(PAYLOAD_FILE);
        write_atomic(&payload, bytes).map_err(io_err("write", &payload))?;
        write_atomic(&sha_path, record.as_bytes()).map_err(io_err("write", &sha_path))?;
        fs::remove_file(&next).map_err(io_err("remove", &next))?;
        sync_dir(&dir).map_err(io_err("sync directory", &dir))?;
        info!(path = %payload.display(), sha256 = %sum, "saved the node's local kubelet config again");
        Ok(true)
    }

    /// The node's own config file as saved by [`CheckpointStore::save_local_original`]
    /// (or [`CheckpointStore::refresh_local_original`]), verified against its sha256.
    pub fn local_original(&self) -> Result<Option<Vec<u8>>, CheckpointError> {
        let dir = self.dir.join(LOCAL_DIR);
        let sha_path = dir.join(PAYLOAD_SHA_FILE);
        let payload = dir.join(PAYLOAD_FILE);
        if !sha_path.exists() && !payload.exists() {
            return Ok(None);
        }
        let expected = read_sha_file(&dir, PAYLOAD_SHA_FILE)?;
        match read_verified(&dir, &expected) {
            Ok(bytes) => Ok(Some(bytes)),
            // A refresh interrupted between the payload and its sha256: the payload is
            // the new copy when it matches the sha256 recorded for it first.
            Err(CheckpointError::Corrupt { .. })
                if dir.join(NEXT_SHA_FILE).exists()
                    && read_sha_file(&dir, NEXT_SHA_FILE).is_ok_and(|next| {
                        fs::read(&payload).is_ok_and(|b| sha256_hex(&b) == next)
                    }) =>
            {
                warn!(path = %payload.display(), "a refresh of the saved local config was interrupted; using the new copy");
                let bytes = fs::read(&payload).map_err(io_err("read", &payload))?;
                Ok(Some(bytes))
            }
            Err(e) => Err(e),
        }
    }

    /// Removes every checkpoint but those in `keep` and those `meta/assigned` (with its
    /// `previous`) and `meta/last-known-good` name, and temp files left by interrupted
    /// writes. Returns the removed checkpoint directories.
    #[instrument(level = "debug", skip_all)]
    pub fn prune(&self, keep: &[&Checkpoint]) -> Result<Vec<PathBuf>, CheckpointError> {
        let mut kept: Vec<(String, String)> = keep
            .iter()
            .map(|c| (c.uid.clone(), c.resource_version.clone()))
            .collect();
        // Never remove what the metadata still names, whatever the caller passed. A
        // corrupt metadata file names nothing we could trust, so it protects nothing.
        if let Ok(Some(a)) = self.assigned() {
            kept.push((a.checkpoint.uid, a.checkpoint.resource_version));
            if let Some(p) = a.previous {
                kept.push((p.uid, p.resource_version));
            }
        }
        if let Ok(Some(lkg)) = self.last_known_good() {
            kept.push((lkg.uid, lkg.resource_version));
        }
        let root = self.dir.join(CHECKPOINTS_DIR);
        let mut removed = Vec::new();
        let uids = fs::read_dir(&root).map_err(io_err("list", &root))?;
        for uid_entry in uids {
            let uid_entry = uid_entry.map_err(io_err("list", &root))?;
            let uid_path = uid_entry.path();
            let uid = uid_entry.file_name().to_string_lossy().into_owned();
            if !uid_path.is_dir() {
                continue;
            }
            let versions = fs::read_dir(&uid_path).map_err(io_err("list", &uid_path))?;
            let mut left = 0usize;
            for rv_entry in versions {
                let rv_entry = rv_entry.map_err(io_err("list", &uid_path))?;
                let rv = rv_entry.file_name().to_string_lossy().into_owned();
                let rv_path = rv_entry.path();
                if kept.iter().any(|(u, r)| *u == uid && *r == rv) {
                    self.remove_temp_files(&rv_path)?;
                    left += 1;
                    continue;
                }
                if rv_path.is_dir() {
                    fs::remove_dir_all(&rv_path).map_err(io_err("remove", &rv_path))?;
                } else {
                    fs::remove_file(&rv_path).map_err(io_err("remove", &rv_path))?;
                }
                debug!(path = %rv_path.display(), "pruned checkpoint");
                removed.push(rv_path);
            }
            if left == 0 {
                fs::remove_dir(&uid_path).map_err(io_err("remove", &uid_path))?;
            }
            sync_dir(&uid_path)
                .or_else(|e| {
                    if e.kind() == io::ErrorKind::NotFound {
                        Ok(())
                    } else {
                        Err(e)
                    }
                })
                .map_err(io_err("sync directory", &uid_path))?;
        }
        sync_dir(&root).map_err(io_err("sync directory", &root))?;
        Ok(removed)
    }
}

/// The sha256 the file `name` (`kubelet.sha256`) in `dir` records.
fn read_sha_file(dir: &Path, name: &str) -> Result<String, CheckpointError> {
    let sha_path = dir.join(name);
    let text = match fs::read_to_string(&sha_path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(CheckpointError::Incomplete {
                path: dir.to_path_buf(),
                missing: sha_path,
            });
        }
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            return Err(CheckpointError::Malformed {
                path: sha_path,
                reason: "not UTF-8".into(),
            });
        }
        Err(e) => return Err(io_err("read", &sha_path)(e)),
    };
    let sum = text.split_whitespace().next().unwrap_or_default();
    if !is_sha256_hex(sum) || text.split_whitespace().nth(1) != Some(PAYLOAD_FILE) {
        return Err(CheckpointError::Malformed {
            path: sha_path,
            reason: format!("expected \"<sha256>  {PAYLOAD_FILE}\", found {text:?}"),
        });
    }
    Ok(sum.to_string())
}

/// Reads `dir/kubelet`, checking it and `dir/kubelet.sha256` against `expected`.
fn read_verified(dir: &Path, expected: &str) -> Result<Vec<u8>, CheckpointError> {
    let payload_path = dir.join(PAYLOAD_FILE);
    let recorded = read_sha_file(dir, PAYLOAD_SHA_FILE)?;
    if recorded != expected {
        return Err(CheckpointError::Corrupt {
            path: dir.join(PAYLOAD_SHA_FILE),
            expected: expected.to_string(),
            actual: recorded,
        });
    }
    let bytes = match fs::read(&payload_path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(CheckpointError::Incomplete {
                path: dir.to_path_buf(),
                missing: payload_path,
            });
        }
        Err(e) => return Err(io_err("read", &payload_path)(e)),
    };
    let actual = sha256_hex(&bytes);
    if actual != expected {
        return Err(CheckpointError::Corrupt {
            path: payload_path,
            expected: expected.to_string(),
            actual,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(name: &str) -> ConfigRef {
        ConfigRef::configmap("kubelet-gitops", name)
    }

    fn store() -> (tempfile::TempDir, CheckpointStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = CheckpointStore::open(&dir.path().join("cp")).unwrap();
        (dir, store)
    }

    #[test]
    fn sha256_matches_a_known_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn open_creates_the_layout_and_removes_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cp");
        let store = CheckpointStore::open(&root).unwrap();
        for sub in ["meta", "checkpoints", "local"] {
            assert!(root.join(sub).is_dir(), "{sub}");
        }
        let stale = root.join("meta/.assigned.tmp-1-0");
        fs::write(&stale, b"half").unwrap();
        drop(store);
        CheckpointStore::open(&root).unwrap();
        assert!(!stale.exists());
    }

    #[test]
    fn save_and_load_round_trip() {
        let (_d, store) = store();
        let cp = store
            .save(&cm("kubelet-gpu-abc"), "u-1", "42", b"maxPods: 10\n")
            .unwrap();
        assert_eq!(cp.sha256, sha256_hex(b"maxPods: 10\n"));
        assert_eq!(store.load(&cp).unwrap(), b"maxPods: 10\n");
        let path = store.payload_path(&cp).unwrap();
        assert!(
            path.ends_with("checkpoints/u-1/42/kubelet"),
            "{}",
            path.display()
        );
        let sha = fs::read_to_string(path.with_file_name(PAYLOAD_SHA_FILE)).unwrap();
        assert_eq!(sha, format!("{}  kubelet\n", cp.sha256));
    }

    #[test]
    fn names_that_escape_the_directory_are_refused() {
        let (_d, store) = store();
        for (uid, rv) in [("..", "1"), ("a/b", "1"), ("u", ""), ("u", ".x"), ("", "1")] {
            let err = store.save(&cm("x"), uid, rv, b"x").unwrap_err();
            assert!(
                matches!(err, CheckpointError::InvalidName { .. }),
                "{uid} {rv}: {err}"
            );
        }
    }

    #[test]
    fn meta_round_trips_and_clears() {
        let (_d, store) = store();
        assert_eq!(store.assigned().unwrap(), None);
        let cp = store.save(&cm("kubelet-a-1"), "u", "1", b"a").unwrap();
        let prev = store.save(&cm("kubelet-a-0"), "v", "7", b"b").unwrap();
        let a = Assigned {
            state_files: Some(vec!["cpu_manager_state".into()]),
            ready_pods: vec!["default/web-0".into()],
            ..Assigned::new(
                cp.clone(),
                ApplyPhase::Written,
                1_700_000_000,
                Some(prev.clone()),
            )
        };
        store.set_assigned(&a).unwrap();
        assert_eq!(store.assigned().unwrap(), Some(a));
        store.set_last_known_good(&prev).unwrap();
        assert_eq!(store.last_known_good().unwrap(), Some(prev));
        store.clear_assigned().unwrap();
        store.clear_last_known_good().unwrap();
        store.clear_assigned().unwrap();
        assert_eq!(store.assigned().unwrap(), None);
        assert_eq!(store.last_known_good().unwrap(), None);
    }

    #[test]
    fn assigned_from_an_older_agent_reads_with_nothing_decided_and_no_pods() {
        let (_d, store) = store();
        let cp = store.save(&cm("kubelet-a-1"), "u", "1", b"a").unwrap();
        // What an agent before state files and pods were recorded wrote.
        let body = format!(
            r#"{{"checkpoint":{{"config":"kubelet-gitops/kubelet-a-1","uid":"u","resourceVersion":"1","sha256":"{}"}},"phase":"Written","since":5,"previous":null}}"#,
            cp.sha256
        );
        let file = format!(
            "{{\"sha256\":\"{}\",\"value\":{body}}}\n",
            sha256_hex(body.as_bytes())
        );
        fs::write(store.dir().join("meta/assigned"), file).unwrap();
        let a = store.assigned().unwrap().unwrap();
        assert_eq!(a, Assigned::new(cp.clone(), ApplyPhase::Written, 5, None));
        assert_eq!(a.state_files, None);
        assert!(a.ready_pods.is_empty());
        // And the new fields are left out while they say nothing, so the file stays what
        // an older agent can read.
        store.set_assigned(&a).unwrap();
        let text = fs::read_to_string(store.dir().join("meta/assigned")).unwrap();
        assert!(
            !text.contains("stateFiles") && !text.contains("readyPods"),
            "{text}"
        );
        let decided = Assigned {
            state_files: Some(Vec::new()),
            ..a
        };
        store.set_assigned(&decided).unwrap();
        let text = fs::read_to_string(store.dir().join("meta/assigned")).unwrap();
        assert!(text.contains(r#""stateFiles":[]"#), "{text}");
        assert_eq!(store.assigned().unwrap(), Some(decided));
    }

    #[test]
    fn meta_file_is_readable_json() {
        let (_d, store) = store();
        let cp = store.save(&cm("kubelet-a-1"), "u", "1", b"a").unwrap();
        store.set_last_known_good(&cp).unwrap();
        let text = fs::read_to_string(store.dir().join("meta/last-known-good")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["value"]["config"], "kubelet-gitops/kubelet-a-1");
        assert_eq!(v["value"]["resourceVersion"], "1");
        assert_eq!(v["sha256"].as_str().map(str::len), Some(64));
    }

    #[test]
    fn local_original_is_saved_once() {
        let (_d, store) = store();
        assert_eq!(store.local_original().unwrap(), None);
        assert!(store.save_local_original(b"original").unwrap());
        assert!(!store.save_local_original(b"ours").unwrap());
        assert_eq!(
            store.local_original().unwrap().as_deref(),
            Some(&b"original"[..])
        );
    }

    #[test]
    fn an_interrupted_local_save_is_redone() {
        let (_d, store) = store();
        // The payload landed, the sha (written last) did not.
        fs::write(store.dir().join("local/kubelet"), b"half").unwrap();
        assert!(matches!(
            store.local_original(),
            Err(CheckpointError::Incomplete { .. })
        ));
        assert!(store.save_local_original(b"original").unwrap());
        assert_eq!(
            store.local_original().unwrap().as_deref(),
            Some(&b"original"[..])
        );
    }

    #[test]
    fn prune_keeps_what_is_named() {
        let (_d, store) = store();
        let a = store.save(&cm("k-a"), "ua", "1", b"a").unwrap();
        let b = store.save(&cm("k-b"), "ub", "1", b"b").unwrap();
        let b2 = store.save(&cm("k-b"), "ub", "2", b"b2").unwrap();
        let c = store.save(&cm("k-c"), "uc", "1", b"c").unwrap();
        let lkg = store.save(&cm("k-l"), "ul", "9", b"l").unwrap();
        store.set_last_known_good(&lkg).unwrap();
        let removed = store.prune(&[&b2, &c]).unwrap();
        let mut removed: Vec<String> = removed
            .iter()
            .map(|p| p.strip_prefix(store.dir()).unwrap().display().to_string())
            .collect();
        removed.sort();
        assert_eq!(removed, ["checkpoints/ua/1", "checkpoints/ub/1"]);
        assert!(
            !store.dir().join("checkpoints/ua").exists(),
            "empty uid dir removed"
        );
        for cp in [&b2, &c, &lkg] {
            assert!(store.load(cp).is_ok(), "{cp:?}");
        }
        for cp in [&a, &b] {
            assert!(store.load(cp).is_err());
        }
    }

    #[test]
    fn a_verdict_round_trips_and_is_left_out_when_there_is_none() {
        let (_d, store) = store();
        let good = store.save(&cm("kubelet-a-1"), "u", "1", b"a").unwrap();
        let bad = store.save(&cm("kubelet-b-1"), "v", "2", b"b").unwrap();
        let a = Assigned {
            failed: Some(Verdict {
                config: bad.config.clone(),
                reason: "kubelet did not become healthy within 2m: x".into(),
                at: 7,
                reported_to: None,
            }),
            ..Assigned::new(good.clone(), ApplyPhase::Checkpointed, 7, Some(bad.clone()))
        };
        store.set_assigned(&a).unwrap();
        assert_eq!(store.assigned().unwrap(), Some(a.clone()));
        let text = fs::read_to_string(store.dir().join("meta/assigned")).unwrap();
        assert!(
            text.contains(r#""failed":{"config":"kubelet-gitops/kubelet-b-1""#)
                && !text.contains("reportedTo"),
            "{text}"
        );
        let reported = Assigned {
            failed: a.failed.clone().map(|v| Verdict {
                reported_to: Some("node-uid".into()),
                ..v
            }),
            ..a.clone()
        };
        store.set_assigned(&reported).unwrap();
        assert_eq!(store.assigned().unwrap(), Some(reported));
        // Without a verdict the file is what an older agent wrote and reads.
        store
            .set_assigned(&Assigned::new(good, ApplyPhase::Verified, 8, None))
            .unwrap();
        let text = fs::read_to_string(store.dir().join("meta/assigned")).unwrap();
        assert!(!text.contains("failed"), "{text}");
    }

    #[test]
    fn the_local_original_is_refreshed_and_an_interrupted_refresh_leaves_a_usable_copy() {
        let (_d, store) = store();
        // Nothing saved yet: a refresh is the first save.
        assert!(store.refresh_local_original(b"v1").unwrap());
        assert!(!store.refresh_local_original(b"v1").unwrap(), "no-op");
        assert!(
            store
                .refresh_local_original(b"v2, after kubeadm upgrade")
                .unwrap()
        );
        assert_eq!(
            store.local_original().unwrap().as_deref(),
            Some(&b"v2, after kubeadm upgrade"[..])
        );
        assert!(!store.dir().join("local/kubelet.next.sha256").exists());
        let sha = fs::read_to_string(store.dir().join("local/kubelet.sha256")).unwrap();
        assert_eq!(
            sha,
            format!("{}  kubelet\n", sha256_hex(b"v2, after kubeadm upgrade"))
        );

        // Killed after the new payload replaced the old, before its sha256 did.
        let next = format!("{}  kubelet\n", sha256_hex(b"v3"));
        fs::write(store.dir().join("local/kubelet.next.sha256"), &next).unwrap();
        write_atomic(&store.dir().join("local/kubelet"), b"v3").unwrap();
        assert_eq!(store.local_original().unwrap().as_deref(), Some(&b"v3"[..]));
        // Killed after the .next record, before the payload: the old copy stands.
        write_atomic(
            &store.dir().join("local/kubelet"),
            b"v2, after kubeadm upgrade",
        )
        .unwrap();
        let old_sha = format!("{}  kubelet\n", sha256_hex(b"v2, after kubeadm upgrade"));
        fs::write(store.dir().join("local/kubelet.sha256"), &old_sha).unwrap();
        assert_eq!(
            store.local_original().unwrap().as_deref(),
            Some(&b"v2, after kubeadm upgrade"[..])
        );
        // A payload that matches neither is corrupt, as before.
        fs::write(store.dir().join("local/kubelet"), b"garbage").unwrap();
        assert!(store.local_original().unwrap_err().is_corrupt());
        // And the next refresh repairs everything.
        assert!(store.refresh_local_original(b"v4").unwrap());
        assert_eq!(store.local_original().unwrap().as_deref(), Some(&b"v4"[..]));
        assert!(!store.dir().join("local/kubelet.next.sha256").exists());
    }
}
