//! Waiting for a step's goal: the reconciler's state and the nodes, looked at until the
//! goal holds, with the pools shown live during a rollout.

use std::time::{Duration, Instant};

use super::error::DemoError;
use super::progress::{Board, pool_lines};
use super::view::NodeView;
use super::{Demo, TICK};
use crate::state::SyncState;

impl Demo {
    /// Shows the pools live, once the reconciler applies `commit`, until `done` says the
    /// rollout reached its goal.
    pub(super) async fn rollout<T>(
        &mut self,
        step: &'static str,
        commit: &str,
        done: impl FnMut(&SyncState, &[NodeView]) -> Option<T>,
    ) -> Result<T, DemoError> {
        let mut board = Board::new(self.options.live);
        let result = self
            .watch(
                step,
                self.timings.rollout_limit,
                Some((&mut board, commit)),
                done,
            )
            .await;
        board.finish();
        result
    }

    /// Waits until `done` holds for the reconciler's state and the nodes, at most
    /// `limit`, updating `board` while the reconciler applies its commit; fails early
    /// when an agent, the reconciler or part of a real cluster stops.
    pub(super) async fn watch<T>(
        &mut self,
        step: &'static str,
        limit: Duration,
        mut board: Option<(&mut Board, &str)>,
        mut done: impl FnMut(&SyncState, &[NodeView]) -> Option<T>,
    ) -> Result<T, DemoError> {
        let deadline = Instant::now() + limit;
        let (mut sync_rx, stopped) = match &self.controller {
            Some(c) => (Some(c.sync_state()), Some(c.shutdown_token())),
            None => (None, None),
        };
        loop {
            self.agents.check()?;
            if let Some(cluster) = self.cluster.as_mut() {
                cluster.check()?;
            }
            let sync = sync_rx
                .as_ref()
                .map(|rx| rx.borrow().clone())
                .unwrap_or_default();
            if stopped.as_ref().is_some_and(|t| t.is_cancelled()) {
                return Err(DemoError::ReconcilerStopped(
                    sync.last_error
                        .unwrap_or_else(|| "see the reconciler's log".into()),
                ));
            }
            let nodes = self.cluster().nodes().await?;
            if let Some((b, commit)) = board.as_mut()
                && sync.applied.as_ref().is_some_and(|a| a.commit == *commit)
            {
                b.update(&pool_lines(&sync.pools, &nodes));
            }
            if let Some(result) = done(&sync, &nodes) {
                return Ok(result);
            }
            if Instant::now() >= deadline {
                return Err(DemoError::Timeout {
                    step,
                    timeout: limit.as_secs(),
                    state: describe(&sync, &nodes),
                });
            }
            match sync_rx.as_mut() {
                Some(rx) => {
                    let _ = tokio::time::timeout(TICK, rx.changed()).await;
                }
                None => tokio::time::sleep(TICK).await,
            }
        }
    }
}

/// Where every pool and node stands, for an error message.
fn describe(s: &SyncState, nodes: &[NodeView]) -> String {
    let mut out = Vec::new();
    if let Some(a) = &s.applied {
        out.push(format!("  applied commit {}", a.commit));
    }
    if let Some(r) = &s.rejected {
        out.push(format!(
            "  rejected commit {}: {} problems",
            r.commit,
            r.errors.len()
        ));
    }
    if let Some(e) = &s.last_error {
        out.push(format!("  last reconcile error: {e}"));
    }
    for line in pool_lines(&s.pools, nodes) {
        out.push(format!("  {line}"));
    }
    for n in nodes {
        out.push(format!(
            "  {}: desired {} current {} state {}{}",
            n.name,
            n.desired.as_deref().unwrap_or("-"),
            n.current.as_deref().unwrap_or("-"),
            n.state.as_deref().unwrap_or("-"),
            n.message
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        ));
    }
    out.join("\n")
}
