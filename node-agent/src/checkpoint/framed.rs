//! The framing of every metadata file: `{"sha256":"<hex>","value":{...}}`, the sha256 over
//! the exact bytes of the inner object as stored, so the check does not depend on how JSON
//! is re-serialized.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use kubelet_gitops_core::atomic::write_atomic;

use super::{META_DIR, io_err, is_sha256_hex, sha256_hex};
use crate::error::CheckpointError;

/// The on-disk envelope of a metadata file: the object's exact bytes and their sha256.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvelopeIn<'a> {
    sha256: String,
    #[serde(borrow)]
    value: &'a RawValue,
}

/// Metadata file `name` of the checkpoint directory `dir`: `<dir>/meta/<name>`.
pub fn meta_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(META_DIR).join(name)
}

/// Reads a metadata file in the store's framing (`{"sha256":..,"value":..}`) without
/// opening the store (which tidies the directory): `None` when the file is missing; a
/// corrupt or malformed file is an error for which [`CheckpointError::is_corrupt`] holds.
pub fn read_framed<T: for<'de> Deserialize<'de>>(
    path: &Path,
) -> Result<Option<T>, CheckpointError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("read", path)(e)),
    };
    let malformed = |reason: String| CheckpointError::Malformed {
        path: path.to_path_buf(),
        reason,
    };
    let envelope: EnvelopeIn<'_> =
        serde_json::from_slice(&bytes).map_err(|e| malformed(e.to_string()))?;
    if !is_sha256_hex(&envelope.sha256) {
        return Err(malformed(format!(
            "sha256 {:?} is not 64 lowercase hex digits",
            envelope.sha256
        )));
    }
    let actual = sha256_hex(envelope.value.get().as_bytes());
    if actual != envelope.sha256 {
        return Err(CheckpointError::Corrupt {
            path: path.to_path_buf(),
            expected: envelope.sha256,
            actual,
        });
    }
    let value = serde_json::from_str(envelope.value.get()).map_err(|e| malformed(e.to_string()))?;
    Ok(Some(value))
}

/// Writes `value` as a metadata file in the store's framing, atomically.
pub fn write_framed<T: Serialize>(path: &Path, value: &T) -> Result<(), CheckpointError> {
    let body = serde_json::to_string(value).map_err(|e| CheckpointError::Malformed {
        path: path.to_path_buf(),
        reason: format!("cannot serialize: {e}"),
    })?;
    // `body` is a JSON object; embedding it verbatim keeps its exact bytes, which is
    // what the sha256 covers.
    let file = format!(
        "{{\"sha256\":\"{}\",\"value\":{body}}}\n",
        sha256_hex(body.as_bytes())
    );
    write_atomic(path, file.as_bytes()).map_err(io_err("write", path))
}
