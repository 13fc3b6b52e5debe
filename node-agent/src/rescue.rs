//! The host-side rescue: rolls a node back to its last-known-good config when the kubelet
//! keeps failing with a config in flight and no agent is running to roll it back.
//!
//! The agent rolls back a config the kubelet does not come back healthy with, but the agent
//! is a pod, started by the kubelet. When the node reboots (or the agent's pod is gone)
//! while a config the kubelet cannot start with is on disk, the kubelet crash-loops, the
//! agent never starts, and nothing rolls back. `kubelet-gitops-rescue` closes that gap: it
//! runs on the host as an `ExecStartPre=-` of `kubelet.service`, before every start of the
//! kubelet, and decides from the checkpoint directory alone:
//!
//! 1. Nothing in flight (`meta/assigned` is absent, `Verified`, or `Checkpointed` without a
//!    verdict: the kubelet's file was not touched yet): nothing to do, nothing written.
//! 2. The agent runs (it holds [`crate::lock::AgentLock`] for its whole life): it
//!    handles the node, nothing to do.
//! 3. A config in flight (`Written` or `Restarted`, no verdict) and no agent: the first
//!    time, the sighting is recorded in `meta/rescue` ([`Sighting`]) and the kubelet gets
//!    its chance. Each later start updates it. Once the kubelet has kept starting for the
//!    health timeout since the first sighting (systemd restarts it every `RestartSec`),
//!    the rescue rolls back exactly as the agent would: the verdict and the fallback
//!    (last-known-good, else the node's own config) go into `meta/assigned` first, in one
//!    atomic write, then the fallback is written where the kubelet reads it, and the
//!    phase becomes `Restarted`: the kubelet start that follows the rescue is the restart.
//!    When the agent starts later, it verifies the fallback and reports `RolledBack` from
//!    the verdict, as after a rollback of its own, and never retries the failed config.
//! 4. A rollback whose verdict is recorded but whose fallback is not written yet
//!    (`Checkpointed` or `Written` with a verdict: the rescue or the agent was stopped in
//!    the middle) and no agent: the rescue carries it on at once.
//!
//! A start that comes more than the health timeout after the previous one means the
//! kubelet ran that long (or the node was off): the sighting starts over, so a kubelet
//! that ran well while the agent was away is never rolled back for one later restart.
//!
//! Every write is atomic; a kill between any two leaves a state that the next run of the
//! rescue (or the agent) completes (see [`act`]).
//!
//! [`decide`] is the pure decision, [`act`] reads the checkpoint directory and carries it
//! out, [`options`] is the command line.

pub mod act;
pub mod decide;
pub mod options;

use std::io;
use std::path::{Path, PathBuf};

use kubelet_gitops_core::protocol::ConfigRef;

pub use act::{Outcome, Settings, run};
pub use decide::{Action, Idle, Observed, Sighting, decide};
pub use options::RescueArgs;

use crate::error::{CheckpointError, FileError};

/// The rescue's record in the checkpoint directory's `meta/`: [`Sighting`].
pub const SIGHTING_FILE: &str = "rescue";

/// What the rescue ran into.
#[derive(Debug, thiserror::Error)]
pub enum RescueError {
    /// The checkpoint directory.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A file operation outside the checkpoint store.
    #[error("failed to {op} {path}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// On what.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// The fallback chosen cannot be read, so nothing was changed.
    #[error("cannot roll back to {config}: its payload cannot be read")]
    Fallback {
        /// The fallback.
        config: ConfigRef,
        /// Why.
        #[source]
        source: CheckpointError,
    },
    /// An option the rescue cannot run with.
    #[error("{0}")]
    Usage(String),
}

fn io_err<'p>(op: &'static str, path: &'p Path) -> impl FnOnce(io::Error) -> RescueError + 'p {
    move |source| RescueError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

impl From<FileError> for RescueError {
    fn from(FileError { op, path, source }: FileError) -> RescueError {
        RescueError::Io { op, path, source }
    }
}
