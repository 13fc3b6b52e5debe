//! The agent's lock: an exclusive advisory lock (`flock(2)`, through [`File::try_lock`]) on
//! [`LOCK_FILE`] in the checkpoint directory, which the agent holds for its whole life and
//! kubelet-gitops-rescue while it works, so the two never write at the same time. The lock
//! is released when its holder drops it or ends, however it ends, and it works across the
//! container boundary: the agent's hostPath and the host see the same file.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tracing::{debug, warn};

/// The lock's file in the checkpoint directory.
pub const LOCK_FILE: &str = "agent.lock";

/// The agent's lock on a checkpoint directory, held until dropped.
#[derive(Debug)]
pub struct AgentLock {
    _file: File,
    path: PathBuf,
}

impl AgentLock {
    /// Where the lock lives in checkpoint directory `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(LOCK_FILE)
    }

    /// The lock, when nobody else holds it; `None` when someone does. Creates `dir` and
    /// the lock file when missing.
    pub fn try_acquire(dir: &Path) -> io::Result<Option<AgentLock>> {
        fs::create_dir_all(dir)?;
        let path = Self::path(dir);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(AgentLock { _file: file, path })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }

    /// The lock, waiting for whoever holds it (a rescue run takes milliseconds; an agent
    /// of a DaemonSet update that overlaps this one holds it until it stops).
    pub async fn acquire(dir: &Path) -> io::Result<AgentLock> {
        let mut told = false;
        loop {
            if let Some(lock) = Self::try_acquire(dir)? {
                debug!(path = %lock.path.display(), "holding the agent lock");
                return Ok(lock);
            }
            if !told {
                warn!(path = %Self::path(dir).display(), "another process holds the agent lock (kubelet-gitops-rescue, or another agent); waiting");
                told = true;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let cp = dir.path().join("checkpoints");
        let _held = AgentLock::try_acquire(&cp).unwrap().expect("free");
        assert!(AgentLock::path(&cp).exists(), "created with its directory");
        assert!(AgentLock::try_acquire(&cp).unwrap().is_none(), "held");
    }

    /// (Waiting, rather than one more `try_acquire`, also when the lock is free: a process
    /// another test starts holds a copy of the descriptor for an instant.)
    #[tokio::test]
    async fn acquire_waits_for_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let held = AgentLock::try_acquire(dir.path()).unwrap().unwrap();
        let path = dir.path().to_path_buf();
        let waiter = tokio::spawn(async move { AgentLock::acquire(&path).await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiter.is_finished(), "waits while the lock is held");
        drop(held);
        waiter.await.unwrap().unwrap();
    }
}
