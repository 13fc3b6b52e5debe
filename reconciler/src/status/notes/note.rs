//! One commit's note: a line per context, replaced in place, other lines kept; a round
//! of lines written as one notes commit.

use git2::{Commit, ErrorCode, Oid, Repository, Signature};
use kubelet_gitops_core::message::OneLine;

use crate::status::commit::CommitStatus;

/// The notes ref our statuses live on.
pub const NOTES_REF: &str = "refs/notes/kubelet-gitops";
/// The message of a notes commit that carries several statuses (libgit2 writes one
/// commit per note; a round's are folded into one).
const ROUND_MESSAGE: &str = "Notes added by kubelet-gitops";

/// One status as the line it sets in its commit's note.
#[derive(Debug, Clone)]
pub(super) struct Line {
    pub(super) oid: Oid,
    pub(super) sha: String,
    pub(super) context: String,
    pub(super) text: String,
}

impl Line {
    /// `status`'s line in the note of `oid`, its commit.
    pub(super) fn new(oid: Oid, status: &CommitStatus) -> Line {
        Line {
            oid,
            sha: status.sha.clone(),
            context: status.context.clone(),
            text: status_line(status),
        }
    }
}

/// `<context>: <state>: <description>[ (<url>)]`, on one line: a control character in
/// any part (a path, a node's message) is shown escaped, so no part can start a line of
/// its own in the note.
pub fn status_line(status: &CommitStatus) -> String {
    let mut line = format!(
        "{}: {}: {}",
        OneLine(&status.context),
        status.state,
        OneLine(&status.description)
    );
    if let Some(url) = &status.target_url {
        line.push_str(&format!(" ({})", OneLine(url)));
    }
    line
}

/// `note` with the line of `context` replaced by `line` (where it was), or `line`
/// appended; later duplicates of that context are dropped, other lines kept.
pub fn replace_line(note: &str, context: &str, line: &str) -> String {
    let prefix = format!("{context}: ");
    let mut out: Vec<&str> = Vec::new();
    let mut placed = false;
    for existing in note.lines() {
        if existing.starts_with(&prefix) {
            if !placed {
                out.push(line);
                placed = true;
            }
        } else {
            out.push(existing);
        }
    }
    if !placed {
        out.push(line);
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}

pub(super) fn read_note(repo: &Repository, oid: Oid) -> Result<Option<String>, git2::Error> {
    match repo.find_note(Some(NOTES_REF), oid) {
        Ok(note) => Ok(Some(note.message().unwrap_or_default().to_string())),
        Err(e) if e.code() == ErrorCode::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Sets `context`'s line in `oid`'s note; returns whether the note changed.
fn write_line(
    repo: &Repository,
    signature: &Signature<'_>,
    oid: Oid,
    context: &str,
    line: &str,
) -> Result<bool, git2::Error> {
    let existing = read_note(repo, oid)?.unwrap_or_default();
    let updated = replace_line(&existing, context, line);
    if updated == existing {
        return Ok(false);
    }
    repo.note(signature, signature, Some(NOTES_REF), oid, &updated, true)?;
    Ok(true)
}

/// Sets every line in its commit's note as one notes commit on top of the notes ref;
/// returns how many notes changed (none: no commit is written).
pub(super) fn write_lines(
    repo: &Repository,
    signature: &Signature<'_>,
    lines: &[Line],
) -> Result<usize, git2::Error> {
    let base = repo.refname_to_id(NOTES_REF).ok();
    let mut changed = 0;
    for line in lines {
        if write_line(repo, signature, line.oid, &line.context, &line.text)? {
            changed += 1;
        }
    }
    if changed > 1 {
        // libgit2 writes one notes commit per note: fold them into one on `base`, so
        // that a round is one commit in the notes' history.
        let head = repo.refname_to_id(NOTES_REF)?;
        let tree = repo.find_commit(head)?.tree()?;
        let parent = base.map(|b| repo.find_commit(b)).transpose()?;
        let parents: Vec<&Commit<'_>> = parent.iter().collect();
        let folded = repo.commit(
            None,
            signature,
            signature,
            &format!("{ROUND_MESSAGE} ({changed} statuses)"),
            &tree,
            &parents,
        )?;
        repo.reference_matching(
            NOTES_REF,
            folded,
            true,
            head,
            "kubelet-gitops: one notes commit per round",
        )?;
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::StatusState;

    #[test]
    fn lines_are_replaced_in_place() {
        let note = "kubelet-gitops/gpu: pending: rolling out: 3/10\nkubelet-gitops: pending: x\n";
        let updated = replace_line(
            note,
            "kubelet-gitops/gpu",
            "kubelet-gitops/gpu: success: 10/10",
        );
        assert_eq!(
            updated,
            "kubelet-gitops/gpu: success: 10/10\nkubelet-gitops: pending: x\n"
        );
        // The summary context is a prefix of the pool contexts' names but not of their
        // lines' prefixes.
        let updated = replace_line(&updated, "kubelet-gitops", "kubelet-gitops: success: y");
        assert_eq!(
            updated,
            "kubelet-gitops/gpu: success: 10/10\nkubelet-gitops: success: y\n"
        );
        let appended = replace_line("", "kubelet-gitops/cpu", "kubelet-gitops/cpu: success: 1/1");
        assert_eq!(appended, "kubelet-gitops/cpu: success: 1/1\n");
        let deduped = replace_line("a: x\nhand-written\na: y\n", "a", "a: z");
        assert_eq!(deduped, "a: z\nhand-written\n");
    }

    #[test]
    fn lines_stay_on_one_line() {
        let status = CommitStatus::new(
            "a".repeat(40),
            "kubelet-gitops/gpu",
            StatusState::Failure,
            "node-1 rolled back:\nkubelet-gitops/cpu: success: all good\u{1b}[0m",
        )
        .with_target_url("https://example.com/x\r\ny");
        assert_eq!(
            status_line(&status),
            "kubelet-gitops/gpu: failure: node-1 rolled back:\\nkubelet-gitops/cpu: success: all good\\u{1b}[0m (https://example.com/x\\r\\ny)"
        );
        // No line of its own: the cpu context keeps its own line in the note.
        let note = replace_line(
            "kubelet-gitops/cpu: pending: 1/3\n",
            &status.context,
            &status_line(&status),
        );
        assert_eq!(note.lines().count(), 2, "{note}");
        assert!(
            note.starts_with("kubelet-gitops/cpu: pending: 1/3\n"),
            "{note}"
        );
    }
}
