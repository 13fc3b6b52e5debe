//! [`E2eError`]: what went wrong while driving the processes of a scenario.

use std::path::PathBuf;
use std::time::Duration;

/// A failure of the harness or of a condition a scenario waits for. Its `Debug` is its
/// message, so a test returning `Err` prints something readable.
#[derive(thiserror::Error)]
pub enum E2eError {
    /// The binaries the harness runs are not built.
    #[error(
        "{missing:?} not found in {dir} (run `cargo build --workspace` first, or run the suite with `cargo test --workspace`)"
    )]
    MissingBinaries { dir: PathBuf, missing: Vec<String> },
    /// The Kubernetes binaries the real cluster runs are not built.
    #[error(
        "{missing:?} not found in {dir} (run `upstream/build.sh` first: it builds them from Kubernetes' Go modules)"
    )]
    MissingUpstream { dir: PathBuf, missing: Vec<String> },
    /// A condition did not hold before the deadline.
    #[error("{what}: not reached within {waited:?}\n{state}")]
    Timeout {
        what: String,
        waited: Duration,
        state: String,
    },
    /// A process the scenario needs exited on its own.
    #[error("{name} exited unexpectedly ({status}); its log is {log}")]
    Exited {
        name: String,
        status: String,
        log: PathBuf,
    },
    /// A process could not be started.
    #[error("failed to start {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// A helper command (git, kubectl) failed.
    #[error("`{command}` failed: {detail}")]
    Command { command: String, detail: String },
    /// A file or socket operation failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A Kubernetes API call failed.
    #[error("Kubernetes API: {what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// An HTTP endpoint (a kubelet's configz, the reconciler's admin port) failed.
    #[error("{what}: {message}")]
    Http { what: String, message: String },
    /// Something a process printed or served does not have the expected shape.
    #[error("{what}: {message}")]
    Unexpected { what: String, message: String },
    /// The node recorder's watch lost events, so the history cannot be trusted.
    #[error("the node watch lost events: {0}")]
    Recorder(String),
}

impl std::fmt::Debug for E2eError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl E2eError {
    /// An [`E2eError::Io`] about `what`.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> E2eError {
        let what = what.into();
        move |source| E2eError::Io { what, source }
    }

    /// An [`E2eError::Kube`] about `what`.
    pub fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> E2eError {
        let what = what.into();
        move |source| E2eError::Kube { what, source }
    }
}
