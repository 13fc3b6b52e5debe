//! The git-notes status backend with real repositories in temp dirs, read back with the
//! git CLI.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use reconciler::status::{
    Backend, CommitStatus, Delivery, Notes, NotesConfig, NotesRemote, RetryPolicy, StatusError,
    StatusState, StatusWriter,
};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// A bare `origin` and a clone `work` with two commits pushed to it.
struct Repos {
    dir: tempfile::TempDir,
    origin: PathBuf,
    work: PathBuf,
    first: String,
    second: String,
}

fn repos() -> Repos {
    let dir = tempfile::tempdir().unwrap();
    let origin = dir.path().join("origin.git");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(
        dir.path(),
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            origin.to_str().unwrap(),
        ],
    );
    git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("pools.yaml"), "pools: []\n").unwrap();
    git(&work, &["add", "."]);
    git(&work, &["commit", "-q", "-m", "first"]);
    std::fs::write(work.join("pools.yaml"), "pools: [gpu]\n").unwrap();
    git(&work, &["commit", "-q", "-am", "second"]);
    git(
        &work,
        &["remote", "add", "origin", origin.to_str().unwrap()],
    );
    git(&work, &["push", "-q", "origin", "main"]);
    let first = git(&work, &["rev-parse", "HEAD~1"]).trim().to_string();
    let second = git(&work, &["rev-parse", "HEAD"]).trim().to_string();
    Repos {
        dir,
        origin,
        work,
        first,
        second,
    }
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        attempts: 2,
        initial: Duration::from_millis(1),
        max_delay: Duration::from_millis(2),
        max_wait: Duration::from_secs(1),
    }
}

fn config(repo: &Path) -> NotesConfig {
    let mut config = NotesConfig::new(repo);
    config.push_retry_initial = Duration::ZERO;
    config
}

fn notes_writer(config: NotesConfig) -> (StatusWriter, Notes) {
    let notes = Notes::new(config).unwrap();
    (
        StatusWriter::new(Backend::Notes(notes.clone()), policy()),
        notes,
    )
}

fn show(repo: &Path, sha: &str) -> String {
    git(repo, &["notes", "--ref=kubelet-gitops", "show", sha])
}

fn pool(sha: &str, pool: &str, state: StatusState, description: &str) -> CommitStatus {
    CommitStatus::new(sha, format!("kubelet-gitops/{pool}"), state, description)
}

#[tokio::test]
async fn statuses_are_lines_of_a_note_updated_in_place() {
    let r = repos();
    let (writer, _) = notes_writer(config(&r.work));
    let sha = &r.second;
    for status in [
        pool(
            sha,
            "gpu",
            StatusState::Pending,
            "rolling out: 3/10 nodes on kubelet-gpu-9mbkccg2cc",
        ),
        pool(
            sha,
            "cpu",
            StatusState::Success,
            "4/4 nodes on kubelet-cpu-5b7f9d2k4h",
        ),
        pool(
            sha,
            "gpu",
            StatusState::Success,
            "10/10 nodes on kubelet-gpu-9mbkccg2cc",
        ),
        CommitStatus::new(
            sha,
            "kubelet-gitops",
            StatusState::Success,
            "2 pools: 2 done",
        ),
    ] {
        assert!(matches!(writer.post(&status).await, Delivery::Posted));
    }
    assert_eq!(
        show(&r.work, sha),
        "kubelet-gitops/gpu: success: 10/10 nodes on kubelet-gpu-9mbkccg2cc\n\
         kubelet-gitops/cpu: success: 4/4 nodes on kubelet-cpu-5b7f9d2k4h\n\
         kubelet-gitops: success: 2 pools: 2 done\n"
    );
    let log = git(
        &r.work,
        &["log", "--notes=kubelet-gitops", "--format=%H%n%N--"],
    );
    assert!(
        log.contains(&format!(
            "{sha}\nkubelet-gitops/gpu: success: 10/10 nodes on kubelet-gpu-9mbkccg2cc\n"
        )),
        "{log}"
    );
    // The first commit has no note.
    assert!(log.contains(&format!("{}\n--", r.first)), "{log}");
    let pretty = git(&r.work, &["log", "-1", "--notes=kubelet-gitops"]);
    assert!(pretty.contains("Notes (kubelet-gitops):"), "{pretty}");
    // One notes commit per change.
    assert_eq!(
        git(
            &r.work,
            &["rev-list", "--count", "refs/notes/kubelet-gitops"]
        )
        .trim(),
        "4"
    );
    // The default notes ref is left alone.
    assert!(git(&r.work, &["notes", "list"]).is_empty());
}

#[tokio::test]
async fn an_identical_line_writes_no_notes_commit() {
    let r = repos();
    let success = pool(
        &r.second,
        "gpu",
        StatusState::Success,
        "10/10 nodes on kubelet-gpu-x",
    );
    let (first, _) = notes_writer(config(&r.work));
    assert!(matches!(first.post(&success).await, Delivery::Posted));
    // A fresh writer (a restarted reconciler) posts the same status again.
    let (restarted, notes) = notes_writer(config(&r.work));
    assert!(matches!(restarted.post(&success).await, Delivery::Posted));
    assert_eq!(
        git(
            &r.work,
            &["rev-list", "--count", "refs/notes/kubelet-gitops"]
        )
        .trim(),
        "1"
    );
    assert_eq!(
        notes.read(&r.second).await.unwrap().as_deref(),
        Some("kubelet-gitops/gpu: success: 10/10 nodes on kubelet-gpu-x\n")
    );
    assert_eq!(notes.read(&r.first).await.unwrap(), None);
}

#[tokio::test]
async fn notes_are_pushed_to_the_remote() {
    let r = repos();
    let remote = NotesRemote::anonymous(r.origin.to_str().unwrap());
    let (writer, notes) = notes_writer(config(&r.work).with_remote(remote));
    let failed = pool(
        &r.first,
        "gpu",
        StatusState::Failure,
        "node-7 rolled back: kubelet unhealthy (1 failed; 3/10 nodes on kubelet-gpu-x)",
    );
    assert!(matches!(writer.post(&failed).await, Delivery::Posted));
    assert_eq!(notes.unpushed(), 0);
    assert_eq!(
        show(&r.origin, &r.first),
        "kubelet-gitops/gpu: failure: node-7 rolled back: kubelet unhealthy (1 failed; 3/10 nodes on kubelet-gpu-x)\n"
    );
    let log = git(
        &r.origin,
        &["log", "--notes=kubelet-gitops", "--format=%H %N"],
    );
    assert!(
        log.contains(&format!("{} kubelet-gitops/gpu: failure", r.first)),
        "{log}"
    );
    // Local and remote refs are the same commit.
    assert_eq!(
        git(&r.work, &["rev-parse", "refs/notes/kubelet-gitops"]),
        git(&r.origin, &["rev-parse", "refs/notes/kubelet-gitops"])
    );
}

#[tokio::test]
async fn the_reconcilers_bare_cache_works_too() {
    let r = repos();
    let cache = r.dir.path().join("cache.git");
    git(
        r.dir.path(),
        &[
            "clone",
            "-q",
            "--bare",
            r.origin.to_str().unwrap(),
            cache.to_str().unwrap(),
        ],
    );
    let remote = NotesRemote::anonymous(format!("file://{}", r.origin.display()));
    let (writer, _) = notes_writer(config(&cache).with_remote(remote));
    let success = pool(
        &r.second,
        "gpu",
        StatusState::Success,
        "10/10 nodes on kubelet-gpu-x",
    );
    assert!(matches!(writer.post(&success).await, Delivery::Posted));
    let expected = "kubelet-gitops/gpu: success: 10/10 nodes on kubelet-gpu-x\n";
    assert_eq!(show(&cache, &r.second), expected);
    assert_eq!(show(&r.origin, &r.second), expected);
    // A clone fetches them with the notes refspec.
    git(
        &r.work,
        &[
            "fetch",
            "-q",
            "origin",
            "refs/notes/kubelet-gitops:refs/notes/kubelet-gitops",
        ],
    );
    assert_eq!(show(&r.work, &r.second), expected);
}

#[tokio::test]
async fn a_failed_push_is_not_fatal_and_is_retried() {
    let r = repos();
    let later = r.dir.path().join("later.git");
    let remote = NotesRemote::anonymous(later.to_str().unwrap());
    let (writer, notes) = notes_writer(config(&r.work).with_remote(remote));
    let success = pool(
        &r.second,
        "gpu",
        StatusState::Success,
        "10/10 nodes on kubelet-gpu-x",
    );
    // The remote does not exist: the note is written locally all the same.
    assert!(matches!(writer.post(&success).await, Delivery::Posted));
    assert_eq!(notes.unpushed(), 1);
    assert!(show(&r.work, &r.second).contains("success"));
    assert!(
        writer.queued().is_empty(),
        "a push failure does not queue the status"
    );
    // Flushing while it is still missing changes nothing.
    writer.flush().await;
    assert_eq!(notes.unpushed(), 1);

    // The remote appears: the next flush pushes.
    git(
        r.dir.path(),
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            later.to_str().unwrap(),
        ],
    );
    writer.flush().await;
    assert_eq!(notes.unpushed(), 0);
    assert_eq!(
        show(&later, &r.second),
        "kubelet-gitops/gpu: success: 10/10 nodes on kubelet-gpu-x\n"
    );
}

#[tokio::test]
async fn notes_written_elsewhere_on_the_remote_are_kept() {
    let r = repos();
    let remote = NotesRemote::anonymous(r.origin.to_str().unwrap());
    let (writer, _) = notes_writer(config(&r.work).with_remote(remote.clone()));
    let pending = pool(
        &r.second,
        "gpu",
        StatusState::Pending,
        "rolling out: 1/10 nodes on kubelet-gpu-x",
    );
    assert!(matches!(writer.post(&pending).await, Delivery::Posted));

    // Another replica (another clone) adds a note and pushes it.
    let other = r.dir.path().join("other");
    git(
        r.dir.path(),
        &[
            "clone",
            "-q",
            r.origin.to_str().unwrap(),
            other.to_str().unwrap(),
        ],
    );
    git(
        &other,
        &[
            "fetch",
            "-q",
            "origin",
            "refs/notes/kubelet-gitops:refs/notes/kubelet-gitops",
        ],
    );
    git(
        &other,
        &[
            "notes",
            "--ref=kubelet-gitops",
            "add",
            "-m",
            "kubelet-gitops/cpu: success: 4/4 nodes on kubelet-cpu-y",
            &r.first,
        ],
    );
    git(
        &other,
        &["push", "-q", "origin", "refs/notes/kubelet-gitops"],
    );

    // Our next status goes on top of theirs.
    let success = pool(
        &r.second,
        "gpu",
        StatusState::Success,
        "10/10 nodes on kubelet-gpu-x",
    );
    assert!(matches!(writer.post(&success).await, Delivery::Posted));
    assert_eq!(
        show(&r.origin, &r.first),
        "kubelet-gitops/cpu: success: 4/4 nodes on kubelet-cpu-y\n"
    );
    assert_eq!(
        show(&r.origin, &r.second),
        "kubelet-gitops/gpu: success: 10/10 nodes on kubelet-gpu-x\n"
    );
    // History is linear: theirs is an ancestor of what we pushed.
    let theirs = git(&other, &["rev-parse", "refs/notes/kubelet-gitops"]);
    git(
        &r.origin,
        &[
            "merge-base",
            "--is-ancestor",
            theirs.trim(),
            "refs/notes/kubelet-gitops",
        ],
    );

    // A restarted reconciler with a fresh clone (no local notes ref) keeps them too.
    let fresh = r.dir.path().join("fresh.git");
    git(
        r.dir.path(),
        &[
            "clone",
            "-q",
            "--bare",
            r.origin.to_str().unwrap(),
            fresh.to_str().unwrap(),
        ],
    );
    let (restarted, _) = notes_writer(config(&fresh).with_remote(remote));
    let summary = CommitStatus::new(
        &r.second,
        "kubelet-gitops",
        StatusState::Success,
        "1 pool: 1 done",
    );
    assert!(matches!(restarted.post(&summary).await, Delivery::Posted));
    assert_eq!(
        show(&r.origin, &r.second),
        "kubelet-gitops/gpu: success: 10/10 nodes on kubelet-gpu-x\nkubelet-gitops: success: 1 pool: 1 done\n"
    );
    assert_eq!(
        show(&r.origin, &r.first),
        "kubelet-gitops/cpu: success: 4/4 nodes on kubelet-cpu-y\n"
    );
}

#[tokio::test]
async fn configuration_mistakes_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let Err(error) = Notes::new(NotesConfig::new(dir.path().join("nope"))) else {
        panic!("a missing repository must be refused");
    };
    assert!(error.to_string().contains("nope"), "{error}");
    let r = repos();
    let (writer, _) = notes_writer(config(&r.work));
    let bad = pool("not-a-sha", "gpu", StatusState::Success, "x");
    let Delivery::Rejected(error) = writer.post(&bad).await else {
        panic!("a bad commit id must be rejected");
    };
    assert!(matches!(error, StatusError::Config { .. }), "{error}");
    let Err(error) = writer.comment(1, "plan").await else {
        panic!("git notes has no pull requests");
    };
    assert!(matches!(error, StatusError::CommentsUnsupported { .. }));
}
