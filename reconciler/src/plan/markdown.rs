//! A [`Plan`] as Markdown for a pull request, and as a one-line summary for a commit
//! status.
//!
//! What comes from a repository or a node (paths, field names, values, node names,
//! messages) is written through [`kubelet_gitops_core::message`]'s Markdown escapes:
//! inline code or table cells for names and values, fenced blocks whose fence no line can
//! close for diffs and errors, escaped prose for node lists. Nothing it holds can add a
//! line, a heading, a link, HTML or a table cell to the plan.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use kubelet_gitops_core::message::{
    OneLine, cap_per_file, markdown_cell, markdown_code, markdown_fence, markdown_text,
};

use kubelet_gitops_core::disruption::{ChangeClass, Class, Why};

use super::disruptive::Disruption;
use super::{Desired, Move, Plan, PoolChange, PoolPlan};
use crate::model::Rollout;
use crate::render::RepoError;

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// One line for a commit status: `2 pools change, 42 nodes; 1 field overridden by flags on
/// 3 nodes; disruptive: cpuManagerPolicy`. Overlaps come first, as an error.
pub fn summary(plan: &Plan) -> String {
    let mut parts = Vec::new();
    if !plan.overlaps.is_empty() {
        let nodes: BTreeSet<&str> = plan.overlaps.iter().map(|o| o.node.as_str()).collect();
        parts.push(format!(
            "error: {} selected by two pools of the same priority",
            plural(nodes.len(), "node", "nodes")
        ));
    }
    if !plan.refusals.is_empty() {
        let nodes: usize = plan.refusals.iter().map(|r| r.nodes.len()).sum();
        parts.push(format!(
            "error: {} would refuse {} config",
            plural(nodes, "node", "nodes"),
            if nodes == 1 { "its" } else { "their" }
        ));
    }
    let pools = plan.changed_pools().count();
    let nodes = plan.changed_nodes().len();
    let verb = if pools == 1 { "changes" } else { "change" };
    parts.push(if pools == 0 && nodes == 0 {
        "no changes".to_string()
    } else if plan.node_count == 0 {
        format!("{} {verb} (no nodes given)", plural(pools, "pool", "pools"))
    } else {
        format!(
            "{} {verb}, {}",
            plural(pools, "pool", "pools"),
            plural(nodes, "node", "nodes")
        )
    });
    let overridden: BTreeSet<&str> = plan
        .pools
        .iter()
        .flat_map(|p| p.overrides.iter().map(|o| o.field.as_str()))
        .collect();
    if !overridden.is_empty() {
        let on: BTreeSet<&str> = plan
            .pools
            .iter()
            .flat_map(|p| {
                p.overrides
                    .iter()
                    .flat_map(|o| o.nodes.iter().map(String::as_str))
            })
            .collect();
        parts.push(format!(
            "{} overridden by flags on {}",
            plural(overridden.len(), "field", "fields"),
            plural(on.len(), "node", "nodes")
        ));
    }
    // An added pool's disruptive fields are compared with the kubelet's defaults, not
    // with what its nodes run: listed in its section, not counted as changes here.
    let disruptive: BTreeSet<&str> = plan
        .pools
        .iter()
        .flat_map(|p| {
            let own = if p.change == PoolChange::Added {
                &[][..]
            } else {
                &p.disruptive[..]
            };
            own.iter()
                .chain(p.moves.iter().flat_map(|m| m.disruptive.iter()))
                .map(|d| d.field.as_str())
        })
        .collect();
    if !disruptive.is_empty() {
        let mut names: Vec<&str> = disruptive.iter().take(3).copied().collect();
        if disruptive.len() > 3 {
            names.push("...");
        }
        parts.push(format!("disruptive: {}", names.join(", ")));
    }
    if let Some((class, pools)) = highest_class(plan).filter(|(c, _)| *c > Class::Restart) {
        let mut names: Vec<&str> = pools.iter().take(3).copied().collect();
        if pools.len() > 3 {
            names.push("...");
        }
        parts.push(format!("class {class}: {}", names.join(", ")));
    }
    parts.join("; ")
}

/// The highest disruption class of the plan's changes and the pools (sorted) whose change
/// or moving nodes have it. As for disruptive fields, an added pool's own class (against
/// the kubelet's defaults) is not counted.
fn highest_class(plan: &Plan) -> Option<(Class, Vec<&str>)> {
    let mut out: Option<(Class, Vec<&str>)> = None;
    for p in &plan.pools {
        let own = p.class.as_ref().filter(|_| p.change != PoolChange::Added);
        let Some(class) = own
            .into_iter()
            .chain(p.moves.iter().filter_map(|m| m.class.as_ref()))
            .map(|c| c.class)
            .max()
        else {
            continue;
        };
        match &mut out {
            Some((c, pools)) if *c == class => pools.push(&p.name),
            Some((c, _)) if *c > class => {}
            _ => out = Some((class, vec![p.name.as_str()])),
        }
    }
    out
}

/// Inline code, safe for any content.
fn code(s: &str) -> String {
    markdown_code(s)
}

/// A table cell: inline code that its content cannot split or leave.
fn cell(s: &str) -> String {
    markdown_cell(s)
}

/// Node names in prose (or a table cell), comma-separated.
fn node_list(nodes: &[String]) -> String {
    markdown_text(&nodes.join(", "))
}

/// A fenced `text` block of `lines`, each on one line, each line after `indent`; the
/// fence is longer than any run of backticks inside, so no line closes the block.
fn fenced<T: std::fmt::Display>(out: &mut String, indent: &str, lines: &[T]) {
    let lines: Vec<String> = lines
        .iter()
        .map(|l| OneLine(&l.to_string()).to_string())
        .collect();
    let fence = markdown_fence(&lines.join("\n"));
    let _ = writeln!(out, "{indent}{fence}text");
    for line in &lines {
        let _ = writeln!(out, "{indent}{line}");
    }
    let _ = writeln!(out, "{indent}{fence}");
}

fn name_of(reference: &str) -> &str {
    reference.rsplit('/').next().unwrap_or(reference)
}

/// The plan as Markdown: a summary line, overlaps (errors) first, a table of pools, then
/// one section per pool that changes or receives nodes.
pub fn to_markdown(plan: &Plan) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail: the results of writeln! are ignored below.
    let _ = writeln!(out, "## kubelet-gitops plan\n");
    match (&plan.base_revision, &plan.head_revision) {
        (Some(b), Some(h)) => {
            let _ = writeln!(out, "Base {} -> head {}\n", code(b), code(h));
        }
        (None, Some(h)) => {
            let _ = writeln!(out, "Head {}\n", code(h));
        }
        _ => {}
    }
    let _ = writeln!(out, "**{}**\n", summary(plan));

    if !plan.overlaps.is_empty() {
        let _ = writeln!(
            out,
            "> [!CAUTION]\n> **{} selected by two pools of the same priority: this revision \
             cannot be applied.** Give one pool a higher `priority` or narrow a `nodeSelector`.\n>",
            plural(plan.overlaps.len(), "node is", "nodes are")
        );
        for o in &plan.overlaps {
            let _ = writeln!(out, "> - {}", markdown_text(&o.to_string()));
        }
        out.push('\n');
    }
    if !plan.refusals.is_empty() {
        let nodes: usize = plan.refusals.iter().map(|r| r.nodes.len()).sum();
        let _ = writeln!(
            out,
            "> [!CAUTION]\n> **{} would refuse the config of {} pool (checked as the node agent \
             checks it, against the node's kubelet flags and drop-ins): this revision cannot be \
             applied.** Change the pool or the base, or the nodes' kubelet set-up.\n>",
            plural(nodes, "node", "nodes"),
            if nodes == 1 { "its" } else { "their" }
        );
        for r in &plan.refusals {
            // The node's flags and the kubelet's message are the node's words: escaped.
            let _ = writeln!(
                out,
                "> - {}: {}",
                markdown_code(&r.source_path),
                markdown_text(&r.to_string())
            );
        }
        out.push('\n');
    }
    // A note is Markdown already (its untrusted parts in code spans or escaped); on one
    // line, it stays inside its quote.
    for note in &plan.notes {
        let _ = writeln!(out, "> [!NOTE]\n> {}\n", OneLine(note));
    }
    if !plan.has_base {
        let _ = writeln!(
            out,
            "There is no base revision: every pool is new and every node comes from its local config.\n"
        );
    }
    if plan.node_count == 0 {
        let _ = writeln!(
            out,
            "No nodes were given (`--nodes` or `--kubeconfig`): the nodes that would change are not listed.\n"
        );
    }

    if !plan.settings.is_empty() {
        let _ = writeln!(out, "### Repository settings\n");
        fenced(&mut out, "", &plan.settings);
        out.push('\n');
    }

    if !plan.pools.is_empty() {
        let _ = writeln!(
            out,
            "| pool | change | ConfigMap before | ConfigMap after | nodes changing |\n| --- | --- | --- | --- | ---: |"
        );
        for p in &plan.pools {
            let nodes: usize = p.moves.iter().map(|m| m.nodes.len()).sum();
            let cm = |r: &Option<String>| {
                r.as_deref()
                    .map(|r| cell(name_of(r)))
                    .unwrap_or_else(|| "-".into())
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                cell(&p.name),
                p.change,
                cm(&p.old_configmap),
                cm(&p.new_configmap),
                if plan.node_count == 0 {
                    "-".to_string()
                } else {
                    nodes.to_string()
                }
            );
        }
        out.push('\n');
    } else {
        let _ = writeln!(out, "The repository defines no pools.\n");
    }

    for p in &plan.pools {
        if p.change == PoolChange::Unchanged && p.moves.is_empty() {
            continue;
        }
        pool_section(&mut out, plan, p);
    }
    out
}

fn pool_section(out: &mut String, plan: &Plan, p: &PoolPlan) {
    let _ = writeln!(out, "### Pool {} ({})\n", code(&p.name), p.change);
    let _ = writeln!(out, "File: {}  ", code(&p.source_path));
    match (&p.old_configmap, &p.new_configmap) {
        (Some(o), Some(n)) if o == n => {
            let _ = writeln!(out, "ConfigMap: {} (unchanged)\n", code(o));
        }
        (Some(o), Some(n)) => {
            let _ = writeln!(out, "ConfigMap: {} -> {}\n", code(o), code(n));
        }
        (None, Some(n)) => {
            let _ = writeln!(out, "ConfigMap: {} (new)\n", code(n));
        }
        (Some(o), None) => {
            let _ = writeln!(
                out,
                "ConfigMap: {} (no longer used: its nodes return to their local config)\n",
                code(o)
            );
        }
        (None, None) => out.push('\n'),
    }

    if !p.config_diff.is_empty() {
        let what = if p.change == PoolChange::Added {
            "Configuration: the fields that differ from the kubelet's defaults"
        } else {
            "Configuration (effective: the kubelet's defaults applied on both sides)"
        };
        let _ = writeln!(out, "{what}:\n");
        fenced(out, "", &p.config_diff);
        out.push('\n');
    } else if p.change == PoolChange::Changed {
        let _ = writeln!(out, "The effective configuration does not change.\n");
    }

    if let Some(c) = &p.class {
        let against = if p.change == PoolChange::Added {
            " (against the kubelet's defaults; the nodes' local config is not known here)"
        } else {
            ""
        };
        let _ = write!(out, "Disruption class{against}: ");
        class_line(out, c, "");
        out.push('\n');
    }

    if !p.spec_diff.is_empty() {
        let _ = writeln!(out, "Pool settings:\n");
        fenced(out, "", &p.spec_diff);
        out.push('\n');
    }

    if !p.disruptive.is_empty() {
        let what = if p.change == PoolChange::Added {
            "**Disruptive fields** (set by the new config; the nodes' local config is not known here, compare it)"
        } else {
            "**Disruptive changes**"
        };
        let _ = writeln!(out, "{what}:\n");
        disruptions(out, &p.disruptive, "");
        out.push('\n');
    }

    if let Some(r) = p.rollout.as_ref().filter(|_| !p.moves.is_empty()) {
        let _ = writeln!(out, "{}\n", rollout_line(plan, p, r));
        waves_section(out, plan, p, r);
        windows_section(out, p, r);
        drain_section(out, p, r);
    }

    if !p.moves.is_empty() {
        let total: usize = p.moves.iter().map(|m| m.nodes.len()).sum();
        let _ = writeln!(out, "Nodes that change ({total}):\n");
        for m in &p.moves {
            move_line(out, p, m);
        }
        out.push('\n');
    } else if plan.node_count > 0 && p.change != PoolChange::Unchanged {
        let _ = writeln!(out, "No node changes its desired config.\n");
    }

    if !p.overrides.is_empty() {
        let _ = writeln!(
            out,
            "Fields the nodes' kubelet flags override (a flag wins over the config file, so the config's value does not take effect there):\n"
        );
        let _ = writeln!(
            out,
            "| field | config | flag | value on the node | nodes |\n| --- | --- | --- | --- | --- |"
        );
        for o in &p.overrides {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                cell(&o.field),
                o.config_value
                    .as_deref()
                    .map(cell)
                    .unwrap_or_else(|| "(unset)".into()),
                cell(&o.flag),
                cell(&o.flag_value),
                node_list(&o.nodes)
            );
        }
        out.push('\n');
    }
}

/// With `rollout.waves`: the order of the waves, their label value and node count, the
/// soak and the jitter.
fn waves_section(out: &mut String, plan: &Plan, p: &PoolPlan, r: &Rollout) {
    let Some(w) = &r.waves else {
        return;
    };
    let soak = if w.soak.is_zero() {
        "no soak".to_string()
    } else {
        format!(
            "soak {} after each wave",
            humantime::format_duration(w.soak)
        )
    };
    let jitter = if w.jitter.is_zero() {
        String::new()
    } else {
        format!(
            "; within a wave, assignments spread over {}",
            humantime::format_duration(w.jitter)
        )
    };
    let _ = writeln!(
        out,
        "Waves by {} (after the canary, one wave at a time; maxUnavailable within the wave; {soak}{jitter}):\n",
        code(&w.by)
    );
    if plan.node_count == 0 {
        let _ = writeln!(
            out,
            "(no nodes given: one wave per value of the label, sorted, then the nodes without it)\n"
        );
        return;
    }
    let _ = writeln!(
        out,
        "| wave | {} | nodes |\n| --- | --- | --- |",
        cell(&w.by)
    );
    for (i, (value, count)) in p.waves.iter().enumerate() {
        let _ = writeln!(out, "| {} | {} | {count} |", i + 1, cell(value));
    }
    out.push('\n');
}

/// With `rollout.maintenance`: the windows, and whether this change waits for one.
fn windows_section(out: &mut String, p: &PoolPlan, r: &Rollout) {
    let Some(m) = &r.maintenance else {
        return;
    };
    let waits = match m.applies_to {
        crate::rollout::window::AppliesTo::All => {
            "**this change waits for a window** (`appliesTo: all`)".to_string()
        }
        crate::rollout::window::AppliesTo::Drain => match &p.class {
            _ if p.change == PoolChange::Added => "**this change waits for a window** (the \
                 nodes' previous config is not known for an added pool: taken as `drain`)"
                .to_string(),
            Some(c) if c.class == Class::Drain => {
                "**this change waits for a window** (its class is `drain`)".to_string()
            }
            Some(c) => format!(
                "this change does not wait (its class is `{}`; only `drain` does)",
                c.class
            ),
            None => "only `drain`-class changes wait".to_string(),
        },
    };
    let _ = writeln!(out, "Maintenance windows: {waits}:\n");
    for w in &m.windows {
        let _ = writeln!(out, "- {}", code(&w.to_string()));
    }
    out.push('\n');
}

/// For a `drain`-class change: how its nodes are emptied first (`rollout.drain`).
fn drain_section(out: &mut String, p: &PoolPlan, r: &Rollout) {
    use crate::rollout::drain::DrainMode;
    let drain_class = p.class.as_ref().is_some_and(|c| c.class == Class::Drain);
    if !drain_class {
        return;
    }
    if p.change == PoolChange::Added {
        let _ = writeln!(
            out,
            "Drain: none: the nodes' previous config is not known for an added pool, so the \
             reconciler applies without a drain (drain them by hand first if they run pods \
             that must not see the change).\n"
        );
        return;
    }
    let d = &r.drain;
    let timeout = humantime::format_duration(d.timeout);
    let line = match d.mode {
        DrainMode::Auto => format!(
            "Drain: **each node is drained first** (`drain: auto`): cordoned, its pods \
             evicted through the Eviction API (PodDisruptionBudgets respected; DaemonSet, \
             mirror and finished pods stay), the config applied once it is empty, and the \
             node uncordoned when the agent reports; a drain still blocked after \
             `drainTimeout` {timeout} {}.",
            if d.force {
                "deletes the pods left (`drainForce: true`)"
            } else {
                "gives up: the node is uncordoned and the pool halts"
            }
        ),
        DrainMode::Manual => "Drain: **by a person** (`drain: manual`): each node waits until \
             it is cordoned and its pods are gone (`kubectl drain NODE --ignore-daemonsets \
             --delete-emptydir-data`), then takes the config; uncordoning is yours."
            .to_string(),
        DrainMode::Never => "Drain: **none** (`drain: never`): the change is applied with the \
             pods running although its class is `drain`."
            .to_string(),
    };
    let _ = writeln!(out, "{line}\n");
}

/// How the pool's nodes will take the change: paused, or canary then batches.
fn rollout_line(plan: &Plan, p: &PoolPlan, r: &Rollout) -> String {
    if r.paused {
        return "Rollout: **paused**: these nodes change only once `rollout.paused` is false."
            .to_string();
    }
    let canary = if r.canary == 0 {
        "no canary".to_string()
    } else {
        format!(
            "{} first",
            plural(r.canary as usize, "canary node", "canary nodes")
        )
    };
    if plan.node_count == 0 {
        return format!(
            "Rollout: {canary}, then at most maxUnavailable {} at a time.",
            r.max_unavailable
        );
    }
    format!(
        "Rollout: {} in the pool; {canary}, then at most {} at a time (maxUnavailable {}).",
        plural(p.node_total, "node", "nodes"),
        r.max_unavailable.resolve(p.node_total),
        r.max_unavailable
    )
}

fn disruptions(out: &mut String, list: &[Disruption], indent: &str) {
    for d in list {
        let side = |v: &Option<String>| v.clone().unwrap_or_else(|| "(unset)".into());
        let _ = writeln!(
            out,
            "{indent}- {} {} -> {}: {}",
            code(&d.field),
            code(&side(&d.old)),
            code(&side(&d.new)),
            d.effect
        );
    }
}

/// `**drain** (the node is drained ...), because of:` and a line per field that makes it
/// so, with why; a restart (every field's default) names no field.
fn class_line(out: &mut String, c: &ChangeClass, indent: &str) {
    let _ = write!(out, "**{}** ({})", c.class, c.class.meaning());
    if c.class == Class::Restart {
        let _ = writeln!(out, ".");
        return;
    }
    let _ = writeln!(out, ", because of:");
    for f in &c.fields {
        let why = match &f.why {
            Why::Override { field, file } => {
                format!(
                    "{} in {} sets {}",
                    code(field),
                    code(file),
                    code(c.class.as_str())
                )
            }
            other => markdown_text(&other.to_string()),
        };
        let _ = writeln!(out, "{indent}- {}: {why}", code(&f.field));
    }
}

fn move_line(out: &mut String, p: &PoolPlan, m: &Move) {
    let n = plural(m.nodes.len(), "node", "nodes");
    let describe = |d: &Desired| match d {
        Desired::Local => "their local config".to_string(),
        Desired::Config { pool, configmap } if pool == &p.name => code(name_of(configmap)),
        Desired::Config { pool, configmap } => {
            format!("pool {} ({})", code(pool), code(name_of(configmap)))
        }
    };
    let _ = writeln!(
        out,
        "- {n} from {} to {}: {}",
        describe(&m.from),
        describe(&m.to),
        node_list(&m.nodes)
    );
    if let Some(diff) = &m.diff {
        if diff.is_empty() {
            let _ = writeln!(out, "  (the two pools' effective configs are identical)");
        } else {
            out.push('\n');
            fenced(out, "  ", diff);
        }
        if !m.disruptive.is_empty() {
            let _ = writeln!(out, "  Disruptive for these nodes:");
            disruptions(out, &m.disruptive, "  ");
        }
        if let Some(c) = &m.class {
            let _ = write!(out, "  Disruption class for these nodes: ");
            class_line(out, c, "  ");
        }
    } else if m.from == Desired::Local && m.to != Desired::Local {
        // Nothing to diff against: say so once per move.
        let _ = writeln!(
            out,
            "  (their local config is not known here: every field of the new config may change)"
        );
    }
}

/// One line for a commit status when the head does not validate: the count and the first
/// error (`error: 3 errors; pools/gpu.yaml:13:5: spec.kubelet.maxPod: unknown field ...`).
pub fn invalid_summary(errors: &[RepoError]) -> String {
    match errors.first() {
        None => "error: the revision does not validate".to_string(),
        Some(first) => format!(
            "error: {} in the repository; {first}",
            plural(errors.len(), "error", "errors")
        ),
    }
}

/// The Markdown for a head revision that does not validate: nothing would be applied,
/// and the errors, `file:line:col: field: message`, at most
/// [`MAX_ERRORS_SHOWN`](kubelet_gitops_core::message::MAX_ERRORS_SHOWN) of each file and
/// then how many more it has.
pub fn invalid_markdown(head: &str, errors: &[RepoError]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## kubelet-gitops plan\n");
    let _ = writeln!(out, "Head {}\n", code(head));
    let _ = writeln!(
        out,
        "**error: the head does not validate ({}): nothing would be applied.**\n",
        plural(errors.len(), "error", "errors")
    );
    fenced(&mut out, "", &cap_per_file(errors, |e| &e.file));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{FieldChange, Override};

    /// What a hostile repository can put in a value or a key: a newline and a line of
    /// its own, a fence, a heading, HTML, a link, a table pipe, a terminal escape.
    const EVIL: &str = "x\n## Forged heading\n```\n<img src=x onerror=alert(1)> [click](http://e) | a | b |\u{1b}[2J";

    fn change(field: &str, new: &str) -> FieldChange {
        FieldChange {
            field: field.to_string(),
            old: None,
            new: Some(new.to_string()),
        }
    }

    /// The lines outside fenced code blocks, with the inline code spans taken out.
    fn prose(md: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut fence: Option<String> = None;
        for line in md.lines() {
            let trimmed = line.trim_start();
            let ticks: String = trimmed.chars().take_while(|c| *c == '`').collect();
            match &fence {
                Some(f) if trimmed == f.as_str() => fence = None,
                Some(_) => {}
                None if ticks.len() >= 3 => fence = Some(ticks),
                None => out.push(without_code_spans(line)),
            }
        }
        assert!(fence.is_none(), "a fence is left open:\n{md}");
        out
    }

    /// `line` with each code span (a run of backticks to the next run of the same length)
    /// replaced by `CODE`.
    fn without_code_spans(line: &str) -> String {
        let mut out = String::new();
        let mut rest = line;
        while let Some(start) = rest.find('`') {
            out.push_str(&rest[..start]);
            let run = rest[start..].chars().take_while(|c| *c == '`').count();
            let after = &rest[start + run..];
            let closing = "`".repeat(run);
            let mut search = 0;
            let end = loop {
                match after[search..].find(&closing) {
                    Some(i) => {
                        let at = search + i;
                        let longer = after[at + run..].starts_with('`');
                        if !longer && (at == 0 || !after[..at].ends_with('`')) {
                            break Some(at);
                        }
                        search = at + after[at..].chars().take_while(|c| *c == '`').count();
                    }
                    None => break None,
                }
            };
            match end {
                Some(at) => {
                    out.push_str("CODE");
                    rest = &after[at + run..];
                }
                None => panic!("an unclosed code span in {line:?}"),
            }
        }
        out.push_str(rest);
        out
    }

    #[test]
    fn nothing_a_repository_or_a_node_says_adds_structure_to_the_plan() {
        let pool = PoolPlan {
            name: "gpu".into(),
            change: PoolChange::Changed,
            source_path: format!("pools/{EVIL}.yaml"),
            old_configmap: Some("kubelet-gitops/kubelet-gpu-a".into()),
            new_configmap: Some("kubelet-gitops/kubelet-gpu-b".into()),
            config_diff: vec![change(&format!("staticPodURLHeader.{EVIL}"), EVIL)],
            spec_diff: vec![change("rollout.canary", EVIL)],
            disruptive: vec![Disruption {
                field: "cpuManagerPolicy".into(),
                old: Some(EVIL.into()),
                new: Some("`static`".into()),
                effect: "restarts pods",
            }],
            class: Some(kubelet_gitops_core::disruption::classify(
                ["cpuManagerPolicy"],
                &Default::default(),
            )),
            moves: vec![Move {
                from: Desired::Local,
                to: Desired::Config {
                    pool: "gpu".into(),
                    configmap: "kubelet-gitops/kubelet-gpu-b".into(),
                },
                nodes: vec!["g1".into(), "g<2>|x".into()],
                diff: Some(vec![change("maxPods", EVIL)]),
                disruptive: Vec::new(),
                class: None,
            }],
            overrides: vec![Override {
                field: "maxPods".into(),
                flag: "--max-pods".into(),
                config_value: Some(format!("\"a\\\\|{EVIL}\"")),
                flag_value: EVIL.into(),
                nodes: vec!["g1".into()],
            }],
            rollout: None,
            node_total: 2,
            waves: Vec::new(),
        };
        let plan = Plan {
            pools: vec![pool],
            node_count: 2,
            has_base: true,
            notes: vec![format!("the first: {}\n# Forged", markdown_code(EVIL))],
            settings: vec![change("namespace", EVIL)],
            base_revision: Some("abc1234".into()),
            head_revision: Some("def5678".into()),
            ..Plan::default()
        };
        let md = to_markdown(&plan);
        assert!(
            !kubelet_gitops_core::message::has_unsafe(&md.replace('\n', "")),
            "{md}"
        );
        let prose = prose(&md);
        for line in &prose {
            let start = line.trim_start_matches(['>', ' ', '-']);
            assert!(!start.starts_with("## Forged"), "{line:?} in\n{md}");
            assert!(!start.starts_with("# Forged"), "{line:?} in\n{md}");
            assert!(!line.contains('<') || line.contains("\\<"), "{line:?}");
            assert!(!line.contains("](") || line.contains("\\]("), "{line:?}");
            if line.starts_with('#') {
                assert!(line.starts_with("## kubelet-gitops plan") || line.starts_with("### "));
            }
        }
        // Every row of the overrides table has its five cells, whatever the values hold.
        let header = "| field | config | flag | value on the node | nodes |";
        let rows: Vec<&str> = md
            .lines()
            .skip_while(|l| *l != header)
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .collect();
        assert_eq!(rows.len(), 1, "{md}");
        for row in rows {
            let mut cells = 0;
            let mut chars = row.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '|' => cells += 1,
                    _ => {}
                }
            }
            assert_eq!(cells, 6, "{row}");
        }
        // The values are all there, escaped, for the reader.
        assert!(md.contains("x\\n## Forged heading\\n```\\n<img"), "{md}");
        assert!(md.contains("g\\<2\\>\\|x"), "{md}");
    }

    #[test]
    fn errors_of_an_invalid_head_stay_inside_their_block() {
        let errors = vec![
            RepoError::new(format!("pools/{EVIL}.yaml"), "", "is not a pool file"),
            RepoError::new("pools/a.yaml", format!("spec.kubelet.{EVIL}"), EVIL),
        ];
        let md = invalid_markdown("abc1234", &errors);
        let prose = prose(&md);
        assert!(prose.iter().all(|l| !l.contains("Forged")), "{md}");
        assert!(
            !kubelet_gitops_core::message::has_unsafe(&md.replace('\n', "")),
            "{md}"
        );
        assert_eq!(
            md.lines().filter(|l| l.starts_with("pools/")).count(),
            2,
            "{md}"
        );
        assert!(
            md.contains("````text\n"),
            "a fence longer than the ``` inside: {md}"
        );
    }
}
