//! The git-notes status backend with real repositories in temp dirs, read back with the
//! git CLI.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
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
        ..RetryPolicy::default()
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

/// A remote whose fetches and pushes are counted: libgit2 asks the factory for callbacks
/// once per fetch and once per push. `on_call(n)` runs at the `n`th (from 1).
fn counted_remote(
    url: &Path,
    on_call: impl Fn(usize) + Send + Sync + 'static,
) -> (NotesRemote, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let remote = NotesRemote::with_callbacks(url.to_str().unwrap(), move || {
        on_call(counter.fetch_add(1, Ordering::SeqCst) + 1);
        git2::RemoteCallbacks::new()
    });
    (remote, calls)
}

/// Ref updates of the notes ref on a bare remote, from its reflog (newest first).
fn notes_updates(bare: &Path) -> Vec<String> {
    git(
        bare,
        &[
            "reflog",
            "show",
            "--format=%H %gs",
            "refs/notes/kubelet-gitops",
        ],
    )
    .lines()
    .map(str::to_string)
    .collect()
}

/// Records every update of the bare repository's refs in its reflog (off by default in a
/// bare repository), so pushes can be counted.
fn log_ref_updates(bare: &Path) {
    git(bare, &["config", "core.logAllRefUpdates", "true"]);
}

#[tokio::test]
async fn a_round_is_one_notes_commit_one_fetch_and_one_push() {
    let r = repos();
    log_ref_updates(&r.origin);
    let (remote, calls) = counted_remote(&r.origin, |_| {});
    let (writer, notes) = notes_writer(config(&r.work).with_remote(remote));
    let round = [
        pool(
            &r.second,
            "gpu",
            StatusState::Pending,
            "rolling out: 3/10 nodes on kubelet-gpu-x",
        ),
        pool(
            &r.second,
            "cpu",
            StatusState::Success,
            "4/4 nodes on kubelet-cpu-y",
        ),
        pool(
            &r.first,
            "mem",
            StatusState::Success,
            "2/2 nodes on kubelet-mem-z",
        ),
        CommitStatus::new(
            &r.second,
            "kubelet-gitops",
            StatusState::Pending,
            "3 pools: 1 in progress, 2 done",
        ),
    ];
    let deliveries = writer.post_all(&round).await;
    assert!(
        deliveries.iter().all(|d| matches!(d, Delivery::Posted)),
        "{deliveries:?}"
    );
    assert_eq!(notes.unpushed(), 0);
    // One fetch and one push for the four statuses (it was four of each, one per
    // status), and one update of the remote's ref.
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        notes_updates(&r.origin).len(),
        1,
        "{:?}",
        notes_updates(&r.origin)
    );
    // One notes commit holds the round.
    assert_eq!(
        git(
            &r.origin,
            &["rev-list", "--count", "refs/notes/kubelet-gitops"]
        )
        .trim(),
        "1"
    );
    // A clone sees every status.
    git(
        &r.work,
        &[
            "fetch",
            "-q",
            "origin",
            "+refs/notes/kubelet-gitops:refs/notes/kubelet-gitops",
        ],
    );
    assert_eq!(
        show(&r.work, &r.second),
        "kubelet-gitops/gpu: pending: rolling out: 3/10 nodes on kubelet-gpu-x\n\
         kubelet-gitops/cpu: success: 4/4 nodes on kubelet-cpu-y\n\
         kubelet-gitops: pending: 3 pools: 1 in progress, 2 done\n"
    );
    assert_eq!(
        show(&r.work, &r.first),
        "kubelet-gitops/mem: success: 2/2 nodes on kubelet-mem-z\n"
    );
    let log = git(
        &r.work,
        &["log", "--notes=kubelet-gitops", "--format=%H%n%N--"],
    );
    assert!(
        log.contains(&format!(
            "{}\nkubelet-gitops/gpu: pending: rolling out: 3/10 nodes on kubelet-gpu-x\n",
            r.second
        )),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "{}\nkubelet-gitops/mem: success: 2/2 nodes on kubelet-mem-z\n",
            r.first
        )),
        "{log}"
    );

    // The next round changes two statuses: one more fetch and push, one more commit.
    let mut next = round.clone();
    next[0] = pool(
        &r.second,
        "gpu",
        StatusState::Success,
        "10/10 nodes on kubelet-gpu-x",
    );
    next[3] = CommitStatus::new(
        &r.second,
        "kubelet-gitops",
        StatusState::Success,
        "3 pools: 3 done",
    );
    let deliveries = writer.post_all(&next).await;
    assert!(
        matches!(
            deliveries.as_slice(),
            [
                Delivery::Posted,
                Delivery::Unchanged,
                Delivery::Unchanged,
                Delivery::Posted
            ]
        ),
        "{deliveries:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(notes_updates(&r.origin).len(), 2);
    assert_eq!(
        git(
            &r.origin,
            &["rev-list", "--count", "refs/notes/kubelet-gitops"]
        )
        .trim(),
        "2"
    );
    assert_eq!(
        show(&r.origin, &r.second),
        "kubelet-gitops/gpu: success: 10/10 nodes on kubelet-gpu-x\n\
         kubelet-gitops/cpu: success: 4/4 nodes on kubelet-cpu-y\n\
         kubelet-gitops: success: 3 pools: 3 done\n"
    );
    // A round that changes nothing does not touch the remote.
    let deliveries = writer.post_all(&next).await;
    assert!(deliveries.iter().all(|d| matches!(d, Delivery::Unchanged)));
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn a_bad_status_in_a_round_fails_alone() {
    let r = repos();
    let (remote, calls) = counted_remote(&r.origin, |_| {});
    let (writer, _) = notes_writer(config(&r.work).with_remote(remote));
    let good = pool(&r.second, "gpu", StatusState::Success, "1/1 nodes");
    let bad = pool("not-a-sha", "cpu", StatusState::Success, "1/1 nodes");
    let deliveries = writer.post_all(&[bad, good]).await;
    let [Delivery::Rejected(error), Delivery::Posted] = deliveries.as_slice() else {
        panic!("{deliveries:?}");
    };
    assert!(matches!(error, StatusError::Config { .. }), "{error}");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        show(&r.origin, &r.second),
        "kubelet-gitops/gpu: success: 1/1 nodes\n"
    );
    assert!(writer.queued().is_empty());
}

#[tokio::test]
async fn a_writer_pushing_between_our_fetch_and_our_push_loses_nothing() {
    let r = repos();
    log_ref_updates(&r.origin);
    // Another replica (another clone) with notes of its own.
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
            "notes",
            "--ref=kubelet-gitops",
            "add",
            "-m",
            "kubelet-gitops/mem: success: 2/2 nodes on kubelet-mem-z",
            &r.first,
        ],
    );
    git(
        &other,
        &[
            "notes",
            "--ref=kubelet-gitops",
            "add",
            "-m",
            "reviewed-by: alice",
            &r.second,
        ],
    );
    // It pushes them right after our fetch (the 1st call), before our push (the 2nd).
    let pusher = other.clone();
    let (remote, calls) = counted_remote(&r.origin, move |call| {
        if call == 2 {
            git(
                &pusher,
                &["push", "-q", "origin", "refs/notes/kubelet-gitops"],
            );
        }
    });
    let (writer, notes) = notes_writer(config(&r.work).with_remote(remote));
    let round = [
        pool(
            &r.second,
            "gpu",
            StatusState::Success,
            "10/10 nodes on kubelet-gpu-x",
        ),
        pool(
            &r.second,
            "cpu",
            StatusState::Success,
            "4/4 nodes on kubelet-cpu-y",
        ),
        CommitStatus::new(
            &r.second,
            "kubelet-gitops",
            StatusState::Success,
            "2 pools: 2 done",
        ),
    ];
    let deliveries = writer.post_all(&round).await;
    assert!(
        deliveries.iter().all(|d| matches!(d, Delivery::Posted)),
        "{deliveries:?}"
    );
    // Our push was refused (not a fast-forward any more); the round fetched again,
    // wrote its lines on top of theirs, and pushed again, within the same round.
    assert_eq!(notes.unpushed(), 0);
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(notes_updates(&r.origin).len(), 2, "theirs, then ours");
    assert_eq!(
        show(&r.origin, &r.second),
        "reviewed-by: alice\n\
         kubelet-gitops/gpu: success: 10/10 nodes on kubelet-gpu-x\n\
         kubelet-gitops/cpu: success: 4/4 nodes on kubelet-cpu-y\n\
         kubelet-gitops: success: 2 pools: 2 done\n"
    );
    assert_eq!(
        show(&r.origin, &r.first),
        "kubelet-gitops/mem: success: 2/2 nodes on kubelet-mem-z\n"
    );
    // History is linear: theirs is an ancestor of what we pushed, and our round is one
    // commit on top of it.
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
    assert_eq!(
        git(
            &r.origin,
            &[
                "rev-list",
                "--count",
                &format!("{}..refs/notes/kubelet-gitops", theirs.trim())
            ]
        )
        .trim(),
        "1"
    );
    // Local and remote agree.
    assert_eq!(
        git(&r.work, &["rev-parse", "refs/notes/kubelet-gitops"]),
        git(&r.origin, &["rev-parse", "refs/notes/kubelet-gitops"])
    );
}
