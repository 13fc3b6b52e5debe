//! The node agent's error types, one enum per host concern, each message naming what
//! failed and where.
//!
//! Classified by what happens next:
//!
//! - [`CheckpointError`]: the checkpoint directory. [`CheckpointError::is_corrupt`] errors
//!   mean a file must be discarded and re-downloaded (never used); the others are I/O
//!   failures to retry.
//! - [`HostError`]: reading the kubelet's command line. Retried; stalls the agent until the
//!   node is fixed when the command line does not parse.
//! - [`CgroupError`]: creating, limiting or reading cgroups. Reported; the apply stops.
//! - [`KubeletError`]: restarting and probing the kubelet. A restart or readiness failure
//!   leads to a roll back.
//! - [`FileError`]: the kubelet's config file (or the agent's drop-in).

use std::path::PathBuf;
use std::time::Duration;

use kubelet_gitops_core::flags::FlagError;
use kubelet_gitops_core::message::{self, Limit};

/// The checkpoint directory (`meta/`, `checkpoints/`, `local/`).
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// A file or directory operation failed.
    #[error("failed to {op} {path}")]
    Io {
        /// What was being done: `write`, `read`, `create directory`, `remove` ...
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file's content does not match its sha256: it is never used.
    #[error("checkpoint file {path} is corrupt: sha256 {actual}, expected {expected}")]
    Corrupt {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    /// A checkpoint whose companion file is missing (an interrupted save, or a file
    /// deleted by hand): it is never used.
    #[error("checkpoint {path} is incomplete: {missing} is missing")]
    Incomplete { path: PathBuf, missing: PathBuf },
    /// A metadata file that does not parse (truncated, or edited by hand): never used.
    #[error("checkpoint file {path} is unreadable: {reason}")]
    Malformed { path: PathBuf, reason: String },
    /// A ConfigMap uid or resourceVersion that cannot be a directory name.
    #[error("invalid {what} {value:?} for a checkpoint directory name")]
    InvalidName { what: &'static str, value: String },
}

impl CheckpointError {
    /// The file is damaged or incomplete: discard it (and download again); retrying the
    /// read will not help.
    pub fn is_corrupt(&self) -> bool {
        matches!(
            self,
            CheckpointError::Corrupt { .. }
                | CheckpointError::Incomplete { .. }
                | CheckpointError::Malformed { .. }
        )
    }
}

/// Reading the kubelet's command line from the host.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A host file could not be read.
    #[error("failed to read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// No process under `<host root>/proc` runs a program named `kubelet`.
    #[error(
        "no kubelet process found under {proc_dir} (is the host's /proc mounted there, with hostPID or a hostPath mount?)"
    )]
    NoKubeletProcess { proc_dir: PathBuf },
    /// More than one kubelet process; which one is this node's is ambiguous.
    #[error("found {} kubelet processes under {proc_dir} (pids {pids:?}); cannot tell which is this node's", pids.len())]
    SeveralKubelets { proc_dir: PathBuf, pids: Vec<u32> },
    /// The command line (or the files it comes from) does not parse as the kubelet's.
    #[error("failed to parse kubelet flag from {from}: {source}")]
    Flags {
        /// Where the command line came from.
        from: String,
        #[source]
        source: FlagError,
    },
}

/// Creating, limiting and reading the node-allocatable cgroups.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// The cgroup hierarchy's version could not be recognised.
    #[error("cannot tell the cgroup version of {root}: {reason}")]
    UnknownHierarchy { root: PathBuf, reason: String },
    /// A cgroup could not be created.
    #[error("failed to create cgroup {cgroup} under {root}")]
    Create {
        cgroup: String,
        root: PathBuf,
        /// cgroups-rs's error (v1) or the I/O error (v2).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A controller the limits need is not available in the hierarchy.
    #[error(
        "cgroup {cgroup}: controller {controller} is not available under {root}, cannot write {file}"
    )]
    ControllerMissing {
        cgroup: String,
        controller: String,
        file: String,
        root: PathBuf,
    },
    /// A limit could not be written.
    #[error("failed to write {value} to {file} of cgroup {cgroup}")]
    SetLimit {
        cgroup: String,
        file: String,
        value: String,
        #[source]
        source: Box<cgroups_rs::fs::error::Error>,
    },
    /// A value the kubelet would write that is not a number this controller takes.
    #[error("cgroup {cgroup}: {file} value {value:?} is not a valid number")]
    BadValue {
        cgroup: String,
        file: String,
        value: String,
    },
    /// Enabling a controller for the children of a cgroup (v2) failed.
    #[error("failed to enable controller {controller} in {path}")]
    EnableController {
        controller: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An interface file could not be read.
    #[error("failed to read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A cgroup could not be removed.
    #[error("failed to remove cgroup directory {path}")]
    Remove {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Restarting and probing the kubelet.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    /// The systemd unit name is not one systemd accepts.
    #[error("invalid systemd unit name {unit:?}: {reason}")]
    InvalidUnit { unit: String, reason: String },
    /// Talking to systemd over D-Bus failed (connecting, or the RestartUnit call).
    #[error("systemd: failed to {op} {unit} over D-Bus ({bus})")]
    Systemd {
        op: &'static str,
        unit: String,
        /// The bus address, or `system bus` for the default.
        bus: String,
        #[source]
        source: Box<zbus::Error>,
    },
    /// systemd ran the restart job and it did not succeed.
    #[error("systemd: restart job for {unit} finished with result {result:?}")]
    SystemdJob { unit: String, result: String },
    /// The restart command could not be run.
    #[error("failed to run restart command {command:?}")]
    CommandSpawn {
        command: Vec<String>,
        #[source]
        source: std::io::Error,
    },
    /// The restart command exited unsuccessfully.
    #[error("restart command {command:?} failed ({status}): {stderr}")]
    CommandFailed {
        command: Vec<String>,
        status: String,
        stderr: String,
    },
    /// The restart (command or D-Bus job) did not finish in time.
    #[error("kubelet restart did not finish within {}", humantime::format_duration(*.timeout))]
    RestartTimeout { timeout: Duration },
    /// The restart command is empty.
    #[error("the restart command is empty")]
    EmptyCommand,
    /// The bearer token file could not be read.
    #[error("failed to read the bearer token file {path}")]
    Token {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The TLS settings could not be loaded (CA file, client).
    #[error("kubelet client TLS setup failed for {what}: {message}")]
    Tls { what: String, message: String },
    /// An HTTP request failed before a response. `message` is the root cause only
    /// (`connection refused`, `operation timed out`), see [`root_cause`].
    #[error("{url}: {message}")]
    Http { url: String, message: String },
    /// The kubelet answered with a status other than 200 (`body` capped).
    #[error("{url}: HTTP {code}: {body}")]
    Status {
        url: String,
        code: u16,
        body: String,
    },
    /// `/configz` answered something that is not `{"kubeletconfig": {...}}`.
    #[error("{url}: unexpected configz body: {message}")]
    Configz { url: String, message: String },
    /// No configz URL was configured.
    #[error("no configz URL is configured")]
    NoConfigz,
    /// The kubelet did not become ready (healthz, and configz showing the expected
    /// config) in time. `last` says what was seen last.
    #[error(
        "kubelet not ready within {}: {last}",
        humantime::format_duration(*.timeout)
    )]
    NotReady { timeout: Duration, last: String },
}

/// Reading, writing or removing the kubelet's config file (or the agent's drop-in).
#[derive(Debug, thiserror::Error)]
#[error("failed to {op} {path}")]
pub struct FileError {
    /// What was being done: `read`, `write`, `remove` ...
    pub op: &'static str,
    /// On what.
    pub path: PathBuf,
    /// Why it failed.
    #[source]
    pub source: std::io::Error,
}

/// The innermost cause of `e`, made short for a message a person reads on a Node: an
/// I/O error as its kind in plain words without the `(os error N)` suffix (`connection
/// refused`), anything else as it prints. Library errors such as reqwest's wrap the one
/// useful cause in several layers (`error sending request for url (...): client error
/// (Connect): tcp connect error: Connection refused (os error 111)`).
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut root = e;
    while let Some(next) = root.source() {
        root = next;
    }
    if let Some(io) = root.downcast_ref::<std::io::Error>() {
        use std::io::ErrorKind as K;
        let plain = match io.kind() {
            K::ConnectionRefused => Some("connection refused"),
            K::ConnectionReset => Some("connection reset"),
            K::ConnectionAborted => Some("connection aborted"),
            K::TimedOut => Some("timed out"),
            K::NotFound => Some("no such file or directory"),
            K::PermissionDenied => Some("permission denied"),
            K::UnexpectedEof => Some("connection closed before a complete answer"),
            _ => None,
        };
        if let Some(p) = plain {
            return p.to_string();
        }
    }
    strip_os_error(&root.to_string())
}

/// `e`'s own message and, when it adds something, its [`root_cause`]: the short form of
/// an error chain for messages (the full chain stays in the logs).
pub fn brief(e: &(dyn std::error::Error + 'static)) -> String {
    let top = e.to_string();
    if e.source().is_none() {
        return top;
    }
    let cause = root_cause(e);
    if top.contains(&cause) {
        top
    } else {
        format!("{top}: {cause}")
    }
}

/// `No such device (os error 19)` -> `No such device`.
fn strip_os_error(text: &str) -> String {
    match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => text[..i].to_string(),
        _ => text.to_string(),
    }
}

/// `s` cut to at most `max` bytes (at a character boundary), marked with `...` when cut.
pub fn cap(s: &str, max: usize) -> String {
    message::truncate(s, Limit::Bytes(max), "...")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubelet_gitops_core::message::error_chain;

    #[derive(Debug, thiserror::Error)]
    #[error("error sending request for url (http://127.0.0.1:1/healthz)")]
    struct Outer(#[source] Middle);

    #[derive(Debug, thiserror::Error)]
    #[error("client error (Connect)")]
    struct Middle(#[source] std::io::Error);

    #[test]
    fn the_root_cause_is_short() {
        let e = Outer(Middle(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )));
        assert_eq!(root_cause(&e), "connection refused");
        assert_eq!(
            brief(&e),
            "error sending request for url (http://127.0.0.1:1/healthz): connection refused"
        );
        let other = Middle(std::io::Error::from_raw_os_error(19));
        assert_eq!(root_cause(&other), "No such device");
        let plain = std::io::Error::other("no route");
        assert_eq!(brief(&plain), "no route");
    }

    #[test]
    fn a_chain_leaves_out_causes_the_message_holds() {
        let e = Outer(Middle(std::io::Error::other("refused")));
        assert_eq!(
            error_chain(&e),
            "error sending request for url (http://127.0.0.1:1/healthz): client error (Connect): refused"
        );
        let file = FileError {
            op: "read",
            path: "/k".into(),
            source: std::io::Error::other("failed to read /k"),
        };
        assert_eq!(error_chain(&file), "failed to read /k", "said already");
    }

    #[test]
    fn cap_cuts_at_a_character_boundary() {
        assert_eq!(cap("short", 10), "short");
        assert_eq!(cap("abcdefghij", 6), "abc...");
        let cut = cap(&"é".repeat(10), 8);
        assert!(cut.len() <= 8 && cut.ends_with("..."), "{cut}");
    }
}
