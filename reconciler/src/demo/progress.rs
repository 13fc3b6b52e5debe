//! The live view of a rollout: one line per pool, `gpu  [canary]  1/3 Done
//! kubelet-gpu-…  gpu-1 Verifying`, computed purely from the reconciler's pool reports and
//! the nodes' annotations ([`pool_lines`]), drawn as indicatif progress bars on a terminal
//! or printed as plain lines whenever one changes (logs, CI, tests).

use std::collections::BTreeMap;
use std::fmt;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::view::{NodeView, short};
use crate::rollout::{PoolPhase, PoolReport};

/// Where a pool's rollout stands, as the demo names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The canary nodes are being moved; the rest waits for them.
    Canary,
    /// The canaries are Done; the rest moves, maxUnavailable at a time.
    Rolling,
    /// Every node is Done.
    Complete,
    /// A node failed: nothing new is assigned.
    Halted,
    /// `rollout.paused`.
    Paused,
    /// No node in the pool.
    Empty,
}

impl Stage {
    /// The label shown in brackets.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Canary => "canary",
            Stage::Rolling => "rolling",
            Stage::Complete => "complete",
            Stage::Halted => "halted",
            Stage::Paused => "paused",
            Stage::Empty => "empty",
        }
    }
}

/// One pool's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolLine {
    pub pool: String,
    pub stage: Stage,
    pub done: usize,
    pub nodes: usize,
    /// The ConfigMap the pool rolls out.
    pub target: String,
    /// What its nodes are doing: `gpu-1 Verifying`, `gpu-1 RolledBack`.
    pub activity: Vec<String>,
}

impl fmt::Display for PoolLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<11} {:<10} {}/{} Done  {}",
            self.pool,
            format!("[{}]", self.stage.as_str()),
            self.done,
            self.nodes,
            self.target
        )?;
        if !self.activity.is_empty() {
            write!(f, "  {}", self.activity.join(", "))?;
        }
        Ok(())
    }
}

/// The lines of `reports` (the reconciler's last round), with what `nodes` show.
pub fn pool_lines(reports: &[PoolReport], nodes: &[NodeView]) -> Vec<PoolLine> {
    let by_name: BTreeMap<&str, &NodeView> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    reports
        .iter()
        .map(|r| {
            let target = r.target.to_string();
            let done_on = |name: &String| {
                by_name
                    .get(name.as_str())
                    .is_some_and(|n| n.done_on(&target))
            };
            let stage = match r.phase {
                PoolPhase::Complete => Stage::Complete,
                PoolPhase::Halted => Stage::Halted,
                PoolPhase::Paused => Stage::Paused,
                PoolPhase::Empty => Stage::Empty,
                PoolPhase::Progressing if r.canary.iter().all(done_on) => Stage::Rolling,
                PoolPhase::Progressing => Stage::Canary,
            };
            let mut activity: Vec<String> = r
                .failed
                .iter()
                .map(|f| format!("{} {}", f.node, f.state))
                .collect();
            activity.extend(nodes.iter().filter_map(|n| {
                let doing = n.activity_on(&target)?;
                (!r.failed.iter().any(|f| f.node == n.name)).then(|| format!("{} {doing}", n.name))
            }));
            PoolLine {
                pool: r.pool.clone(),
                stage,
                done: r.done,
                nodes: r.nodes,
                target: short(&target).to_string(),
                activity,
            }
        })
        .collect()
}

/// The pool lines on screen.
pub struct Board {
    mode: Mode,
}

enum Mode {
    Live {
        multi: MultiProgress,
        style: ProgressStyle,
        bars: BTreeMap<String, ProgressBar>,
    },
    Plain {
        last: BTreeMap<String, String>,
    },
}

impl Board {
    /// Progress bars when `live` (stdout is a terminal), else plain lines.
    pub fn new(live: bool) -> Board {
        let style = ProgressStyle::with_template(
            "  {prefix} {bar:8.green/white} {pos}/{len} Done  {wide_msg}",
        );
        let mode = match style {
            Ok(style) if live => Mode::Live {
                multi: MultiProgress::with_draw_target(ProgressDrawTarget::stdout()),
                style: style.progress_chars("█▌░"),
                bars: BTreeMap::new(),
            },
            // Plain lines also when the (constant) template were ever rejected.
            _ => Mode::Plain {
                last: BTreeMap::new(),
            },
        };
        Board { mode }
    }

    /// Shows `lines`, changing only what changed.
    pub fn update(&mut self, lines: &[PoolLine]) {
        match &mut self.mode {
            Mode::Live { multi, style, bars } => {
                for line in lines {
                    let prefix = format!(
                        "{:<11} {:<10}",
                        line.pool,
                        format!("[{}]", line.stage.as_str())
                    );
                    let mut msg = line.target.clone();
                    if !line.activity.is_empty() {
                        msg.push_str("  ");
                        msg.push_str(&line.activity.join(", "));
                    }
                    match bars.get(&line.pool) {
                        Some(bar) => {
                            bar.set_length(line.nodes as u64);
                            bar.set_position(line.done as u64);
                            bar.set_prefix(prefix);
                            bar.set_message(msg);
                        }
                        None => {
                            // Complete before it is drawn, so the first frame is right.
                            let bar = ProgressBar::new(line.nodes as u64)
                                .with_style(style.clone())
                                .with_position(line.done as u64)
                                .with_prefix(prefix)
                                .with_message(msg);
                            bars.insert(line.pool.clone(), multi.add(bar));
                        }
                    }
                }
            }
            Mode::Plain { last } => {
                for line in lines {
                    let text = line.to_string();
                    if last.get(&line.pool) != Some(&text) {
                        println!("  {text}");
                        last.insert(line.pool.clone(), text);
                    }
                }
            }
        }
    }

    /// Leaves the last lines on screen as they are and stops drawing.
    pub fn finish(self) {
        if let Mode::Live { bars, .. } = self.mode {
            for bar in bars.values() {
                // Not `finish`, which would fill a halted pool's bar.
                bar.abandon();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::NodeFailure;
    use kubelet_gitops_core::protocol::{ConfigRef, State};

    const T: &str = "kubelet-gitops/kubelet-gpu-abc";

    fn report(phase: PoolPhase, done: usize, failed: Vec<NodeFailure>) -> PoolReport {
        PoolReport {
            nodes: 3,
            done,
            waiting: 3 - done,
            failed,
            phase,
            canary: vec!["gpu-1".into()],
            max_unavailable: 1,
            ..PoolReport::new(
                "gpu",
                ConfigRef::configmap("kubelet-gitops", "kubelet-gpu-abc"),
            )
        }
    }

    fn node(
        name: &str,
        desired: Option<&str>,
        observed: Option<&str>,
        current: &str,
        state: Option<&str>,
    ) -> NodeView {
        NodeView {
            name: name.into(),
            pool: Some("gpu".into()),
            desired: desired.map(Into::into),
            observed: observed.map(Into::into),
            current: Some(current.into()),
            last_known_good: Some("local".into()),
            state: state.map(Into::into),
            message: None,
        }
    }

    #[test]
    fn canary_then_rolling_then_complete() {
        let verifying = [
            node("gpu-1", Some(T), Some(T), "local", Some("Verifying")),
            node("gpu-2", None, None, "local", None),
        ];
        let lines = pool_lines(&[report(PoolPhase::Progressing, 0, vec![])], &verifying);
        assert_eq!(lines[0].stage, Stage::Canary);
        assert_eq!(lines[0].activity, vec!["gpu-1 Verifying".to_string()]);
        assert_eq!(
            lines[0].to_string(),
            "gpu         [canary]   0/3 Done  kubelet-gpu-abc  gpu-1 Verifying"
        );

        let rolling = [
            node("gpu-1", Some(T), Some(T), T, Some("Done")),
            node("gpu-2", Some(T), None, "local", None),
        ];
        let lines = pool_lines(&[report(PoolPhase::Progressing, 1, vec![])], &rolling);
        assert_eq!(lines[0].stage, Stage::Rolling);
        assert_eq!(lines[0].activity, vec!["gpu-2 assigned".to_string()]);

        let lines = pool_lines(&[report(PoolPhase::Complete, 3, vec![])], &rolling);
        assert_eq!(lines[0].stage, Stage::Complete);
    }

    #[test]
    fn a_failed_node_is_named_once() {
        let failed = vec![NodeFailure {
            node: "gpu-1".into(),
            state: crate::rollout::Failure::Agent(State::RolledBack),
            message: Some("kubelet did not become healthy".into()),
        }];
        let nodes = [node(
            "gpu-1",
            Some(T),
            Some(T),
            "kubelet-gitops/old",
            Some("RolledBack"),
        )];
        let lines = pool_lines(&[report(PoolPhase::Halted, 0, failed)], &nodes);
        assert_eq!(lines[0].stage, Stage::Halted);
        assert_eq!(lines[0].activity, vec!["gpu-1 RolledBack".to_string()]);
    }
}
