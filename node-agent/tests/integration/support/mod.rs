//! Shared by the tests: [`agent`] runs the agent in-process against a sim node (the
//! `agent_*` and `rescue` tests), [`host`] gives the `host_*` tests a sim node and its
//! stand-in kubelet.

use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

pub mod agent;
pub mod host;

/// The one node of the test inventories.
pub const NODE: &str = "w1";

/// Held shared by the tests that start child processes or a sim, exclusively by those
/// that must run alone.
static PROCESSES: RwLock<()> = RwLock::const_new(());

/// For a test that starts child processes (a restart command, the agent's binary, a
/// writer to kill, `dbus-daemon`) or a sim (whose stand-in kubelets keep the machine
/// busy). A child briefly holds a copy of every descriptor open in this process, flocked
/// ones included, until it execs, so a test that drops a lock and takes it again at that
/// moment would find it held. Such tests run together, never next to one holding
/// [`alone`]. (Not a concern on a node: the rescue never forks, and a fork of the agent's
/// only prolongs the agent's own hold for an instant.)
pub async fn children() -> RwLockReadGuard<'static, ()> {
    PROCESSES.read().await
}

/// For a test that checks who holds a `flock` (the rescue's), so that no other test starts
/// a process meanwhile (see [`children`]); for one that must not be slowed by tests beside
/// it; and for one too heavy to run beside others.
pub async fn alone() -> RwLockWriteGuard<'static, ()> {
    PROCESSES.write().await
}

/// [`alone`] for a test without a runtime.
pub fn alone_blocking() -> RwLockWriteGuard<'static, ()> {
    PROCESSES.blocking_write()
}
