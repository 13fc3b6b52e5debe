//! Status descriptions composed for the limit of where they are shown. Pure.
//!
//! A forge cuts a description at its limit (GitHub at 140 characters), and cutting at
//! the end loses what comes last, which was the count and, behind a long healthz URL, the
//! kubelet's own reason. So a description is made of [`Part`]s and composed for a limit
//! ([`compose`]): what must stay ([`Part::Fixed`]: the node and what became of it, the
//! count), the cause ([`Part::Reason`], shortened as late and as gently as possible), and
//! details that give way first ([`Part::Detail`]: the ConfigMap's name, the pools a
//! commit left unchanged). [`node_reason`] takes the kubelet's reason out of the message a
//! node agent writes (the healthz URL and the agent's preamble dropped; URLs are details,
//! the node's annotation and the plan comment keep them).
//!
//! Every function takes the parts as text, so the caller can escape each part before
//! composing (the parts come from a repository or a node).

use kubelet_gitops_core::message::{self, Limit};

/// The mark of text left out.
const ELLIPSIS: &str = "…";

/// A quoted string longer than this (in characters) may be shortened.
const LONG_QUOTE: usize = 16;

/// What a non-path quoted string keeps when it is shortened.
const QUOTE_KEEP: usize = 12;

/// One piece of a description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Always shown as it is (only the final cut of a description that cannot fit
    /// otherwise touches it).
    Fixed(String),
    /// The cause, in the kubelet's (or the agent's) words. When the whole does not fit,
    /// its long quoted strings are shortened first (`"/gpu.slice/…"`), then, after the
    /// details gave way, its leading context (`Failed to start ContainerManager: `, kept
    /// while a part of two or more of its `: `-separated segments remains), then it is
    /// cut at the end.
    Reason(String),
    /// Kept from its start and cut at its end when the whole does not fit: text whose
    /// beginning matters most (`pools/gpu.yaml:12:5: ...`).
    Text(String),
    /// Shown in the first of `forms` that fits (the most complete first; it can always
    /// be left out). Details of a lower `rank` give way first.
    Detail { forms: Vec<String>, rank: u8 },
}

impl Part {
    /// Fixed text.
    pub fn fixed(text: impl Into<String>) -> Part {
        Part::Fixed(text.into())
    }

    /// A detail with one form.
    pub fn detail(rank: u8, text: impl Into<String>) -> Part {
        Part::Detail {
            forms: vec![text.into()],
            rank,
        }
    }

    /// Every form of the part, the most complete first; the last one of a detail is empty.
    fn forms(&self) -> Vec<String> {
        match self {
            Part::Fixed(t) | Part::Text(t) => vec![t.clone()],
            Part::Reason(t) => reason_forms(t),
            Part::Detail { forms, .. } => {
                let mut forms = forms.clone();
                if forms.last().is_none_or(|f| !f.is_empty()) {
                    forms.push(String::new());
                }
                forms
            }
        }
    }
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

/// `parts` joined, in at most `limit` characters: as they are when they fit; otherwise,
/// in this order until the text fits, the reasons' long quoted strings shortened, the
/// details left out or shortened (lowest rank first), the reasons' leading context left
/// out, the reasons and texts cut at their end; then whatever was given up and fits after
/// all is put back (details first, the highest rank first). A text that still does not
/// fit is cut at the end.
pub fn compose(parts: &[Part], limit: usize) -> String {
    let mut forms: Vec<Vec<String>> = parts.iter().map(Part::forms).collect();
    let mut pick = vec![0usize; parts.len()];
    let len = |forms: &[Vec<String>], pick: &[usize]| -> usize {
        forms.iter().zip(pick).map(|(f, &i)| chars(&f[i])).sum()
    };
    let reasons: Vec<usize> = (0..parts.len())
        .filter(|&i| matches!(parts[i], Part::Reason(_)))
        .collect();
    let mut details: Vec<(u8, usize)> = parts
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match p {
            Part::Detail { rank, .. } => Some((*rank, i)),
            _ => None,
        })
        .collect();
    // Lowest rank first; within a rank, the later part first.
    details.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));

    if len(&forms, &pick) > limit {
        reduce(&forms, &mut pick, limit, &reasons, &details, len);
        // Still too long: cut the reasons and texts at their end, the last first.
        let cuttable: Vec<usize> = (0..parts.len())
            .rev()
            .filter(|&i| matches!(parts[i], Part::Reason(_) | Part::Text(_)))
            .collect();
        let mut cut = vec![false; parts.len()];
        for i in cuttable {
            let total = len(&forms, &pick);
            if total <= limit {
                break;
            }
            let own = chars(&forms[i][pick[i]]);
            let room = limit.saturating_sub(total - own);
            let shorter = if room > chars(ELLIPSIS) {
                message::truncate(&forms[i][pick[i]], Limit::Chars(room), ELLIPSIS)
            } else {
                String::new()
            };
            forms[i].push(shorter);
            pick[i] = forms[i].len() - 1;
            cut[i] = true;
        }
        // Put back what fits after all: details (highest rank first), then reasons.
        let mut restore: Vec<usize> = details.iter().rev().map(|&(_, i)| i).collect();
        restore.extend(reasons.iter().filter(|&&i| !cut[i]));
        for i in restore {
            for form in 0..pick[i] {
                let was = pick[i];
                pick[i] = form;
                if len(&forms, &pick) <= limit {
                    break;
                }
                pick[i] = was;
            }
        }
    }
    let text: String = forms
        .iter()
        .zip(&pick)
        .map(|(f, &i)| f[i].as_str())
        .collect();
    message::truncate(&text, Limit::Chars(limit), ELLIPSIS)
}

/// The reductions of [`compose`] before any cut: quoted strings, details, context.
fn reduce(
    forms: &[Vec<String>],
    pick: &mut [usize],
    limit: usize,
    reasons: &[usize],
    details: &[(u8, usize)],
    len: impl Fn(&[Vec<String>], &[usize]) -> usize,
) {
    let fits = |pick: &[usize]| len(forms, pick) <= limit;
    // 1. Long quoted strings of the reasons (their second form, when they have one that
    //    differs by it: see `reason_forms`).
    for &i in reasons {
        if forms[i].len() > 1 && forms[i][1] != forms[i][0] && quotes_differ(&forms[i]) {
            pick[i] = 1;
        }
    }
    if fits(pick) {
        return;
    }
    // 2. Details, one form at a time, lowest rank first.
    for &(_, i) in details {
        while !fits(pick) && pick[i] + 1 < forms[i].len() {
            pick[i] += 1;
        }
        if fits(pick) {
            return;
        }
    }
    // 3. The reasons' leading context, one segment at a time.
    for &i in reasons {
        while !fits(pick) && pick[i] + 1 < forms[i].len() {
            pick[i] += 1;
        }
        if fits(pick) {
            return;
        }
    }
}

/// Whether a reason's second form is its first with quoted strings shortened (rather
/// than with its leading context left out, which comes after the details).
fn quotes_differ(forms: &[String]) -> bool {
    compact_quotes(&forms[0]) == forms[1]
}

/// A reason's forms: as it is; with long quoted strings shortened (when that changes
/// it); then without its leading `: `-separated segments, one at a time, down to the last
/// two (`failed to create "/gpu.slice/…" cgroup: Not a directory (os error 20)`).
fn reason_forms(reason: &str) -> Vec<String> {
    let mut forms = vec![reason.to_string()];
    let compact = compact_quotes(reason);
    if compact != reason {
        forms.push(compact.clone());
    }
    let segments = context_segments(&compact);
    for k in 1..segments.len().saturating_sub(1) {
        forms.push(segments[k..].join(": "));
    }
    forms
}

/// `text` split at `: ` outside double quotes.
fn context_segments(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    let mut escaped = false;
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if escaped {
            escaped = false;
            continue;
        }
        match b {
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b':' if !quoted && bytes.get(i + 1) == Some(&b' ') && i >= start => {
                out.push(&text[start..i]);
                start = i + 2;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out.retain(|s| !s.is_empty());
    out
}

/// `text` with every double-quoted string longer than [`LONG_QUOTE`] characters
/// shortened: a path to its first component (`"/gpu.slice/gpu-kubepods.slice"` becomes
/// `"/gpu.slice/…"`), anything else to its first [`QUOTE_KEEP`] characters, with `…`.
pub fn compact_quotes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('"') {
        out.push_str(&rest[..=open]);
        let after = &rest[open + 1..];
        let Some(close) = closing_quote(after) else {
            out.push_str(after);
            return out;
        };
        out.push_str(&shorten_quoted(&after[..close]));
        out.push('"');
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

/// The byte offset of the `"` that closes a quoted string starting at `text` (a `\`
/// escapes the next character, as Go's `%q` writes them).
fn closing_quote(text: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some(i),
            _ => {}
        }
    }
    None
}

fn shorten_quoted(inner: &str) -> String {
    if chars(inner) <= LONG_QUOTE {
        return inner.to_string();
    }
    let keep = match inner.strip_prefix('/').and_then(|r| r.find('/')) {
        // "/gpu.slice/…": the path's first component and its slash.
        Some(slash) if slash + 2 < inner.len() => &inner[..slash + 2],
        _ => {
            let end = inner
                .char_indices()
                .nth(QUOTE_KEEP)
                .map_or(inner.len(), |(i, _)| i);
            &inner[..end]
        }
    };
    format!("{keep}{ELLIPSIS}")
}

/// The kubelet's reason in a message the node agent wrote
/// (`kubelet-gitops.io/message`), for a status description:
///
/// - what became of the node is left out (`; rolled back to <config>`, `; rolling back to
///   ...`, `; there is no last-known-good to fall back to`): the description's outcome
///   says it;
/// - when the message quotes the Node's Ready condition (`node Ready=False: <words>`),
///   those words are the kubelet's own reason (why it exited, on a kubelet that did), and
///   what the agent saw before them (`kubelet did not become healthy within 10s: healthz
///   http://...: connection refused`) is left out; so is the preamble `kubelet is not
///   running: `;
/// - URLs are left out (`healthz http://127.0.0.1:10248/healthz: connection refused`
///   becomes `healthz: connection refused`);
/// - runs of spaces and tabs become one space, and a newline or another control character
///   is shown escaped (`\n`, `\u{1b}`): one line.
pub fn node_reason(message: &str) -> String {
    let mut m = message.trim();
    const OUTCOMES: [&str; 3] = [
        "; rolled back to ",
        "; rolling back to ",
        "; there is no last-known-good to fall back to",
    ];
    if let Some(end) = OUTCOMES.iter().filter_map(|o| m.find(o)).min() {
        m = &m[..end];
    }
    if let Some(at) = m.find("node Ready=") {
        let clause = &m[at..];
        if let Some(colon) = clause.find(": ") {
            let words = clause[colon + 2..].trim();
            if !words.is_empty() {
                m = words;
            }
        }
    }
    if let Some(rest) = m.strip_prefix("kubelet is not running: ") {
        m = rest;
    }
    let text = one_line(&without_urls(m));
    if text.is_empty() {
        "no message from the node agent".to_string()
    } else {
        text
    }
}

/// `text` without `http://` and `https://` URLs (each up to the next white space, a
/// trailing `:`, `;` or `,` kept) and the space before each.
fn without_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let at = ["http://", "https://"]
            .iter()
            .filter_map(|scheme| rest.find(scheme))
            .min();
        let Some(at) = at else {
            out.push_str(rest);
            return out;
        };
        out.push_str(rest[..at].strip_suffix(' ').unwrap_or(&rest[..at]));
        let url_end = rest[at..]
            .find(char::is_whitespace)
            .map_or(rest.len(), |i| at + i);
        let url = &rest[at..url_end];
        let kept = url.trim_end_matches([':', ';', ',']);
        out.push_str(&url[kept.len()..]);
        rest = &rest[url_end..];
    }
}

/// `text` on one line: runs of spaces and tabs made one space, and every other control character
/// (a newline or a terminal escape in a node's message) shown escaped as the writer shows
/// it ([`message::escape_line`]), so that the length composed for is the length sent.
pub fn one_line(text: &str) -> String {
    let spaced = text.replace('\t', " ");
    let escaped = message::escape_line(&spaced);
    let mut out = String::with_capacity(escaped.len());
    for word in escaped.split(' ').filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message the node agent wrote for the demo's canary `gpu-1` (README.md, "How a
    /// rollout looks"), with the healthz port of the run the issue quotes.
    const GPU_1: &str = "kubelet did not become healthy within 10s: healthz http://127.0.0.1:35741/healthz: connection refused; node Ready=False: kubelet is not running: Failed to start ContainerManager: failed to create \"/gpu.slice/gpu-kubepods.slice\" cgroup: Not a directory (os error 20); rolled back to kubelet-gitops/kubelet-gpu-694c7bk8m6";

    #[test]
    fn the_kubelets_reason_comes_out_of_the_agents_message() {
        assert_eq!(
            node_reason(GPU_1),
            "Failed to start ContainerManager: failed to create \"/gpu.slice/gpu-kubepods.slice\" cgroup: Not a directory (os error 20)"
        );
        // Without the Node's words: the agent's, without the URL and the outcome.
        assert_eq!(
            node_reason(
                "kubelet did not become healthy within 2m: healthz http://127.0.0.1:10248/healthz: connection refused; rolled back to kubelet-gitops/a"
            ),
            "kubelet did not become healthy within 2m: healthz: connection refused"
        );
        assert_eq!(
            node_reason(
                "kubelet did not become healthy within 2m: healthz https://10.0.0.7:10250/healthz: HTTP 500: [-]ping failed; node Ready=Unknown: Kubelet stopped posting node status.; rolled back to kubelet-gitops/kubelet-a-1"
            ),
            "Kubelet stopped posting node status."
        );
        // A rollback whose fallback failed too: the first failure.
        assert_eq!(
            node_reason(
                "kubelet did not become healthy within 2m: x; rolling back to kubelet-gitops/a did not help either: kubelet did not become healthy; a person must act: ..."
            ),
            "kubelet did not become healthy within 2m: x"
        );
        // Rejected before the kubelet was touched: the validator's words, the flag's hint kept.
        assert_eq!(
            node_reason(
                "failed to validate config: /var/lib/kubelet/config.yaml: enforceNodeAllocatable: [pods] requires cgroupsPerQOS (value set by the kubelet flag --cgroups-per-qos=false); there is no last-known-good to fall back to"
            ),
            "failed to validate config: /var/lib/kubelet/config.yaml: enforceNodeAllocatable: [pods] requires cgroupsPerQOS (value set by the kubelet flag --cgroups-per-qos=false)"
        );
        assert_eq!(
            node_reason(
                "failed to sync: failed to download config: GET https://10.96.0.1/api/v1/namespaces/kubelet-gitops/configmaps/kubelet-a-1: 403 Forbidden"
            ),
            "failed to sync: failed to download config: GET: 403 Forbidden"
        );
        assert_eq!(node_reason("  "), "no message from the node agent");
        assert_eq!(node_reason("a\nb\t c"), "a\\nb c");
    }

    #[test]
    fn parts_that_fit_are_joined_as_they_are() {
        let parts = [
            Part::fixed("gpu-1 rolled back: "),
            Part::Reason(node_reason(GPU_1)),
            Part::fixed(" (1 failed; 0/3 nodes"),
            Part::detail(0, " on kubelet-gpu-mbd75dgm4h"),
            Part::fixed(")"),
        ];
        let full = compose(&parts, 1024);
        assert_eq!(
            full,
            "gpu-1 rolled back: Failed to start ContainerManager: failed to create \"/gpu.slice/gpu-kubepods.slice\" cgroup: Not a directory (os error 20) (1 failed; 0/3 nodes on kubelet-gpu-mbd75dgm4h)"
        );
        assert_eq!(compose(&parts, chars(&full)), full);
    }

    #[test]
    fn the_rollback_keeps_node_outcome_reason_and_count_on_github() {
        let parts = [
            Part::fixed("gpu-1 rolled back: "),
            Part::Reason(node_reason(GPU_1)),
            Part::fixed(" (1 failed; 0/3 nodes"),
            Part::detail(0, " on kubelet-gpu-mbd75dgm4h"),
            Part::fixed(")"),
        ];
        // GitHub: the ConfigMap's name gives way, then the long path, then the leading
        // context; the name comes back as there is room for it again.
        let github = compose(&parts, 140);
        assert_eq!(
            github,
            "gpu-1 rolled back: failed to create \"/gpu.slice/…\" cgroup: Not a directory (os error 20) (1 failed; 0/3 nodes on kubelet-gpu-mbd75dgm4h)"
        );
        let narrow = compose(&parts, 110);
        assert_eq!(
            narrow,
            "gpu-1 rolled back: failed to create \"/gpu.slice/…\" cgroup: Not a directory (os error 20) (1 failed; 0/3 nodes)"
        );
        // Then the cause is cut at its end; the node, the outcome and the count stay.
        let tiny = compose(&parts, 60);
        assert_eq!(chars(&tiny), 60, "{tiny}");
        assert!(tiny.starts_with("gpu-1 rolled back: failed to"), "{tiny}");
        assert!(tiny.ends_with("… (1 failed; 0/3 nodes)"), "{tiny}");
        // Gitea and GitLab (255) have room for everything.
        assert_eq!(compose(&parts, 255), compose(&parts, usize::MAX));
    }

    #[test]
    fn details_give_way_lowest_rank_first_and_come_back_when_there_is_room() {
        let parts = [
            Part::fixed("3 pools: 1 failed, 2 done; gpu: gpu-1 rolled back: "),
            Part::Reason(node_reason(GPU_1)),
            Part::Detail {
                forms: vec![
                    " (1 failed; 0/3 nodes on kubelet-gpu-mbd75dgm4h)".into(),
                    " (1 failed; 0/3 nodes)".into(),
                ],
                rank: 1,
            },
            Part::detail(0, "; unchanged: general, high-memory (from 7c1d0e2)"),
        ];
        // GitHub: the unchanged pools, then the pool's count give way (its own status
        // has it), and the reason keeps its cause.
        assert_eq!(
            compose(&parts, 140),
            "3 pools: 1 failed, 2 done; gpu: gpu-1 rolled back: failed to create \"/gpu.slice/…\" cgroup: Not a directory (os error 20)"
        );
        // With a little more room the count comes back, without the ConfigMap's name.
        assert_eq!(
            compose(&parts, 150),
            "3 pools: 1 failed, 2 done; gpu: gpu-1 rolled back: failed to create \"/gpu.slice/…\" cgroup: Not a directory (os error 20) (1 failed; 0/3 nodes)"
        );
        // Gitea and GitLab (255): everything but the path's tail.
        let gitea = compose(&parts, 255);
        assert_eq!(
            gitea,
            "3 pools: 1 failed, 2 done; gpu: gpu-1 rolled back: Failed to start ContainerManager: failed to create \"/gpu.slice/…\" cgroup: Not a directory (os error 20) (1 failed; 0/3 nodes on kubelet-gpu-mbd75dgm4h); unchanged: general, high-memory (from 7c1d0e2)"
        );
        let notes = compose(&parts, 1024);
        assert!(
            notes.contains("\"/gpu.slice/gpu-kubepods.slice\""),
            "{notes}"
        );
    }

    #[test]
    fn texts_are_cut_at_their_end_and_fixed_parts_stay() {
        let parts = [
            Part::Text(format!("pools/gpu.yaml:12:5: {}", "x".repeat(200))),
            Part::fixed(" (+2 more errors)"),
        ];
        let cut = compose(&parts, 140);
        assert_eq!(chars(&cut), 140);
        assert!(cut.starts_with("pools/gpu.yaml:12:5: xxx"), "{cut}");
        assert!(cut.ends_with("x… (+2 more errors)"), "{cut}");
        // Fixed parts that cannot fit are cut as a whole, at the end.
        let over = compose(&[Part::fixed("x".repeat(50))], 10);
        assert_eq!(over, format!("{}…", "x".repeat(9)));
    }

    #[test]
    fn quoted_strings_are_shortened() {
        assert_eq!(
            compact_quotes("failed to create \"/gpu.slice/gpu-kubepods.slice\" cgroup"),
            "failed to create \"/gpu.slice/…\" cgroup"
        );
        assert_eq!(
            compact_quotes("unknown field \"topologyManagerPolicyOptionz\", short \"maxPods\""),
            "unknown field \"topologyMana…\", short \"maxPods\""
        );
        assert_eq!(compact_quotes("open \"a"), "open \"a");
        assert_eq!(
            compact_quotes("\"with \\\" an escaped quote inside it\" then"),
            "\"with \\\" an e…\" then"
        );
    }

    #[test]
    fn context_is_split_outside_quotes() {
        assert_eq!(
            context_segments("a: \"b: c\": d"),
            vec!["a", "\"b: c\"", "d"]
        );
        assert_eq!(
            reason_forms("A: B: \"/x.slice/y.slice/zzzzzz\" c: D"),
            vec![
                "A: B: \"/x.slice/y.slice/zzzzzz\" c: D",
                "A: B: \"/x.slice/…\" c: D",
                "B: \"/x.slice/…\" c: D",
                "\"/x.slice/…\" c: D",
            ]
        );
    }

    #[test]
    fn urls_are_left_out() {
        assert_eq!(
            without_urls("healthz http://127.0.0.1:1/healthz: connection refused"),
            "healthz: connection refused"
        );
        assert_eq!(
            without_urls("see https://a/b, then http://c/d"),
            "see, then"
        );
    }
}
