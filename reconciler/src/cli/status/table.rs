//! `kubelet-gitops status` as text: pure functions of a report, the time and the
//! terminal's width. Everything that comes from the cluster (names, states, messages) is
//! escaped ([`escape_line`]): a message cannot move the cursor or forge a line.

use std::fmt::Write;

use jiff::Timestamp;
use kubelet_gitops_core::message::escape_line;

use super::model::{ConfigView, NodeProgress, NodeReport, PoolStatus, Report};

/// How the text is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Lines are cut to this many characters (`None`: not cut, as when piped).
    pub width: Option<usize>,
    /// The bar drawn with block characters (a terminal) or `#` and `-`.
    pub unicode: bool,
    /// At most this many nodes listed per pool (`-o json` lists all).
    pub max_nodes: usize,
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            width: None,
            unicode: false,
            max_nodes: 20,
        }
    }
}

/// The width of the progress bar, in cells.
pub const BAR: usize = 20;

/// Every pool, one line each, then each pool's nodes that are not Done.
pub fn pools(report: &Report, layout: &Layout) -> String {
    let mut out = String::new();
    if report.pools.is_empty() {
        out.push_str("No pools: no Node carries kubelet-gitops.io/pool and no ConfigMap of ours is published.\n");
        return out;
    }
    let mut rows = vec![[
        "POOL".to_string(),
        "PHASE".to_string(),
        "COMMIT".to_string(),
        "CONFIGMAP".to_string(),
        "PROGRESS".to_string(),
    ]];
    for p in &report.pools {
        rows.push([
            clean(&p.pool),
            p.phase.as_str().to_string(),
            p.commit.as_deref().map_or("-".into(), short_commit),
            p.config_map
                .as_deref()
                .map_or("-".into(), |c| clean(c.rsplit('/').next().unwrap_or(c))),
            progress(p, layout.unicode),
        ]);
    }
    table(&mut out, &rows, layout.width);
    // Why the reconciler holds a pool (its rollout record): a window, a soak, a manual
    // drain, which the phase alone (`waiting`) does not say.
    for p in &report.pools {
        if let Some(hold) = &p.hold {
            out.push_str(&cut(
                &format!("{}: {}", clean(&p.pool), clean(hold)),
                layout.width,
            ));
            out.push('\n');
        }
    }

    let mut lines = vec![[
        "NODE".to_string(),
        "POOL".to_string(),
        "STATUS".to_string(),
        "AGE".to_string(),
        "MESSAGE".to_string(),
    ]];
    let mut hidden = Vec::new();
    for p in &report.pools {
        for n in p.not_done.iter().take(layout.max_nodes) {
            let status = match (n.progress, n.state.as_deref()) {
                (NodeProgress::Waiting, _) => "waiting".to_string(),
                (NodeProgress::Draining, _) => "draining".to_string(),
                (_, Some(state)) => clean(state),
                (NodeProgress::InProgress, None) => "assigned".to_string(),
                (p, None) => p.as_str().to_string(),
            };
            let message = match (n.progress, n.message.as_deref()) {
                (NodeProgress::Waiting, _) => match &n.current_config {
                    Some(c) => format!("on {}", clean(c)),
                    None => String::new(),
                },
                (NodeProgress::Draining, _) => {
                    "cordoned; its pods are being evicted before the pool's config is assigned"
                        .to_string()
                }
                (NodeProgress::Busy, m) => format!(
                    "busy with {}{}",
                    clean(n.desired_config.as_deref().unwrap_or("-")),
                    m.map(|m| format!(": {}", clean(m))).unwrap_or_default()
                ),
                (_, Some(m)) => clean(m),
                (_, None) => String::new(),
            };
            lines.push([
                clean(&n.node),
                clean(&p.pool),
                status,
                n.since.map_or("-".into(), |t| age(report.time, t)),
                message,
            ]);
        }
        if p.not_done.len() > layout.max_nodes {
            hidden.push(format!(
                "{}: {} more nodes not Done (-o json lists every node)",
                clean(&p.pool),
                p.not_done.len() - layout.max_nodes
            ));
        }
    }
    if lines.len() > 1 {
        out.push('\n');
        table(&mut out, &lines, layout.width);
    }
    for h in hidden {
        out.push_str(&cut(&h, layout.width));
        out.push('\n');
    }
    out
}

/// `[#####---------------] 5/20 done, 2 in progress, 1 failed`.
pub fn progress(p: &PoolStatus, unicode: bool) -> String {
    let c = &p.nodes;
    let mut s = format!("{} {}/{}", bar(c.done, c.total, unicode), c.done, c.total);
    let mut extra = Vec::new();
    for (n, what) in [
        (c.in_progress, "in progress"),
        (c.busy, "busy"),
        (c.failed, "failed"),
    ] {
        if n > 0 {
            extra.push(format!("{n} {what}"));
        }
    }
    if !extra.is_empty() {
        let _ = write!(s, " ({})", extra.join(", "));
    }
    s
}

/// A bar of [`BAR`] cells, `done` of `total` filled.
pub fn bar(done: usize, total: usize, unicode: bool) -> String {
    let filled = (done * BAR).checked_div(total).unwrap_or(0).min(BAR);
    let (full, empty) = if unicode { ('█', '░') } else { ('#', '-') };
    let mut s = String::with_capacity(BAR + 2);
    s.push('[');
    s.extend(std::iter::repeat_n(full, filled));
    s.extend(std::iter::repeat_n(empty, BAR - filled));
    s.push(']');
    s
}

/// One node in full: `status node NAME`.
pub fn node(r: &NodeReport, width: Option<usize>) -> String {
    let mut out = String::new();
    let mut field = |name: &str, value: String| {
        out.push_str(&cut(&format!("{name:<17}{value}"), width));
        out.push('\n');
    };
    let opt = |v: &Option<String>| v.as_deref().map_or("-".to_string(), clean);
    field("Node:", clean(&r.node));
    field("Pool:", opt(&r.pool));
    field(
        "State:",
        match (&r.state, &r.observed_config) {
            (Some(s), Some(o)) => format!("{} (about {})", clean(s), clean(o)),
            (s, _) => opt(s),
        },
    );
    field("Message:", opt(&r.message));
    field("Desired:", config(&r.desired));
    field("Current:", config(&r.current));
    field("Last-known-good:", config(&r.last_known_good));
    let condition = match &r.condition {
        None => "- (the agent has not reported)".to_string(),
        Some(c) => {
            let mut s = format!("KubeletConfigReady={} {}", clean(&c.status), opt(&c.reason));
            if let Some(t) = c.last_transition_time {
                let _ = write!(s, ", since {} ({} ago)", t, age(r.time, t));
            }
            if let Some(m) = &c.message {
                let _ = write!(s, ": {}", clean(m));
            }
            s
        }
    };
    field("Condition:", condition);
    if r.events.is_empty() {
        field("Events:", "- (none from kubelet-gitops-agent)".to_string());
    } else {
        out.push_str("Events:\n");
        let mut rows = vec![[
            "  AGE".to_string(),
            "TYPE".to_string(),
            "REASON".to_string(),
            "MESSAGE".to_string(),
        ]];
        for e in &r.events {
            rows.push([
                format!("  {}", e.time.map_or("-".into(), |t| age(r.time, t))),
                clean(&e.type_),
                clean(&e.reason),
                clean(&e.message),
            ]);
        }
        table(&mut out, &rows, width);
    }
    out
}

fn config(v: &Option<ConfigView>) -> String {
    match v {
        None => "-".to_string(),
        Some(v) => {
            let mut s = clean(&v.config);
            let from: Vec<String> = [
                v.commit
                    .as_deref()
                    .map(|c| format!("commit {}", short_commit(c))),
                v.source_path.as_deref().map(clean),
            ]
            .into_iter()
            .flatten()
            .collect();
            if !from.is_empty() {
                let _ = write!(s, " ({})", from.join(", "));
            }
            s
        }
    }
}

/// Columns padded to their widest cell, two spaces apart, each line cut to `width`.
fn table<const N: usize>(out: &mut String, rows: &[[String; N]], width: Option<usize>) {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == N {
                line.push_str(cell);
            } else {
                let pad = widths[i] - cell.chars().count();
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', pad + 2));
            }
        }
        out.push_str(cut(line.trim_end(), width).as_ref());
        out.push('\n');
    }
}

/// `text` cut to `width` characters, the last one `…` when cut.
pub fn cut(text: &str, width: Option<usize>) -> String {
    match width {
        Some(w) if text.chars().count() > w => {
            let mut s: String = text.chars().take(w.saturating_sub(1)).collect();
            s.push('…');
            s
        }
        _ => text.to_string(),
    }
}

/// Text from the cluster on one line: control characters shown escaped.
fn clean(text: &str) -> String {
    escape_line(text).into_owned()
}

/// The first 7 characters of a commit id, as git shortens.
fn short_commit(c: &str) -> String {
    clean(&c.chars().take(7).collect::<String>())
}

/// How long ago `then` was, as kubectl prints ages: `45s`, `12m`, `5h`, `3d`.
pub fn age(now: Timestamp, then: Timestamp) -> String {
    let secs = now.duration_since(then).as_secs().max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::status::model::{Counts, NodeLine, Phase};

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn report() -> Report {
        Report {
            kind: "KubeletGitopsStatus",
            version: 1,
            time: ts("2026-01-01T10:00:00Z"),
            applied_commit: None,
            pools: vec![
                PoolStatus {
                    pool: "general".into(),
                    phase: Phase::Complete,
                    config_map: Some("kubelet-gitops/kubelet-general-9d4g2t8bdc".into()),
                    commit: Some("0123456789abcdef".into()),
                    source_path: Some("pools/general.yaml".into()),
                    nodes: Counts {
                        total: 6,
                        done: 6,
                        ..Counts::default()
                    },
                    hold: None,
                    not_done: vec![],
                },
                PoolStatus {
                    pool: "gpu".into(),
                    phase: Phase::Halted,
                    config_map: Some("kubelet-gitops/kubelet-gpu-b9mf448k4d".into()),
                    commit: Some("fedcba9876543210".into()),
                    source_path: Some("pools/gpu.yaml".into()),
                    nodes: Counts {
                        total: 3,
                        failed: 1,
                        waiting: 2,
                        ..Counts::default()
                    },
                    hold: None,
                    not_done: vec![
                        NodeLine {
                            node: "gpu-1".into(),
                            progress: NodeProgress::Failed,
                            state: Some("RolledBack".into()),
                            desired_config: Some("kubelet-gitops/kubelet-gpu-b9mf448k4d".into()),
                            current_config: Some("kubelet-gitops/kubelet-gpu-694c7bk8m6".into()),
                            message: Some("kubelet did not become healthy\n\u{1b}[2Jforged".into()),
                            since: Some(ts("2026-01-01T09:57:00Z")),
                        },
                        NodeLine {
                            node: "gpu-2".into(),
                            progress: NodeProgress::Waiting,
                            state: Some("Done".into()),
                            desired_config: Some("kubelet-gitops/kubelet-gpu-694c7bk8m6".into()),
                            current_config: Some("kubelet-gitops/kubelet-gpu-694c7bk8m6".into()),
                            message: None,
                            since: None,
                        },
                    ],
                },
            ],
        }
    }

    #[test]
    fn pools_table_lists_pools_then_nodes_not_done() {
        let text = pools(&report(), &Layout::default());
        let expected = "\
POOL     PHASE     COMMIT   CONFIGMAP                   PROGRESS
general  complete  0123456  kubelet-general-9d4g2t8bdc  [####################] 6/6
gpu      halted    fedcba9  kubelet-gpu-b9mf448k4d      [--------------------] 0/3 (1 failed)

NODE   POOL  STATUS      AGE  MESSAGE
gpu-1  gpu   RolledBack  3m   kubelet did not become healthy\\n\\u{1b}[2Jforged
gpu-2  gpu   waiting     -    on kubelet-gitops/kubelet-gpu-694c7bk8m6
";
        assert_eq!(text, expected);
    }

    #[test]
    fn a_pools_hold_follows_the_pools_table() {
        let mut r = report();
        r.pools[0].phase = Phase::Waiting;
        r.pools[0].hold = Some("waiting for the window Sat 02:00 Europe/Berlin\u{1b}[2J".into());
        let text = pools(&r, &Layout::default());
        assert!(
            text.contains(
                "gpu      halted   fedcba9  kubelet-gpu-b9mf448k4d      [--------------------] 0/3 (1 failed)\n\
                 general: waiting for the window Sat 02:00 Europe/Berlin\\u{1b}[2J\n\nNODE"
            ),
            "{text}"
        );
    }

    #[test]
    fn lines_are_cut_to_the_width_and_control_characters_escaped() {
        let layout = Layout {
            width: Some(40),
            ..Layout::default()
        };
        let text = pools(&report(), &layout);
        for line in text.lines() {
            assert!(line.chars().count() <= 40, "{line:?}");
            assert!(!line.contains('\u{1b}'), "{line:?}");
        }
        assert!(
            text.contains("gpu-1  gpu   RolledBack  3m   kubelet d…"),
            "{text}"
        );
    }

    #[test]
    fn long_pools_list_a_few_nodes_and_say_how_many_more() {
        let layout = Layout {
            max_nodes: 1,
            ..Layout::default()
        };
        let text = pools(&report(), &layout);
        assert!(!text.contains("gpu-2"), "{text}");
        assert!(
            text.contains("gpu: 1 more nodes not Done (-o json lists every node)"),
            "{text}"
        );
    }

    #[test]
    fn bars_and_ages() {
        assert_eq!(bar(0, 0, false), format!("[{}]", "-".repeat(20)));
        assert_eq!(bar(1, 3, false), "[######--------------]");
        assert_eq!(bar(3, 3, true), format!("[{}]", "█".repeat(20)));
        let now = ts("2026-01-01T10:00:00Z");
        assert_eq!(age(now, ts("2026-01-01T09:59:15Z")), "45s");
        assert_eq!(age(now, ts("2026-01-01T09:48:00Z")), "12m");
        assert_eq!(age(now, ts("2026-01-01T05:00:00Z")), "5h");
        assert_eq!(age(now, ts("2025-12-29T10:00:00Z")), "3d");
        assert_eq!(age(now, ts("2026-01-01T10:00:05Z")), "0s", "a clock ahead");
    }

    #[test]
    fn a_node_in_full() {
        let r = NodeReport {
            kind: "KubeletGitopsNodeStatus",
            version: 1,
            time: ts("2026-01-01T10:00:00Z"),
            node: "gpu-1".into(),
            pool: Some("gpu".into()),
            state: Some("RolledBack".into()),
            observed_config: Some("kubelet-gitops/kubelet-gpu-b9mf448k4d".into()),
            message: Some("kubelet did not become healthy".into()),
            desired: Some(ConfigView {
                config: "kubelet-gitops/kubelet-gpu-b9mf448k4d".into(),
                commit: Some("fedcba9876543210".into()),
                source_path: Some("pools/gpu.yaml".into()),
            }),
            current: Some(ConfigView {
                config: "local".into(),
                commit: None,
                source_path: None,
            }),
            last_known_good: None,
            condition: None,
            events: vec![super::super::model::EventObs {
                time: Some(ts("2026-01-01T09:59:00Z")),
                type_: "Warning".into(),
                reason: "RolledBack".into(),
                message: "rolled back\r\nto local".into(),
                count: 1,
            }],
        };
        let text = node(&r, None);
        let expected = "\
Node:            gpu-1
Pool:            gpu
State:           RolledBack (about kubelet-gitops/kubelet-gpu-b9mf448k4d)
Message:         kubelet did not become healthy
Desired:         kubelet-gitops/kubelet-gpu-b9mf448k4d (commit fedcba9, pools/gpu.yaml)
Current:         local
Last-known-good: -
Condition:       - (the agent has not reported)
Events:
  AGE  TYPE     REASON      MESSAGE
  60s  Warning  RolledBack  rolled back\\r\\nto local
";
        assert_eq!(text, expected);
    }
}
