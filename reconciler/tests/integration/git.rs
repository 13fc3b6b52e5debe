//! The git source against real repositories made with the git CLI in temp dirs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::commands::git;
use reconciler::git::{
    Backoff, GitAuth, GitConfig, GitError, GitRepo, PollEvent, PollResult, Poller, cached_head,
    first_parent_history, open_revision,
};
use reconciler::source::{Entry, EntryKind, FileSource, SourceError};
use tokio::sync::Notify;

/// A work-tree repository with one commit of these files.
fn repo_with(dir: &Path, files: &[(&str, &str)]) -> String {
    git(dir, &["init", "-q"]);
    commit_files(dir, files, "first")
}

fn commit_files(dir: &Path, files: &[(&str, &str)], message: &str) -> String {
    for (path, body) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().expect("file has a parent")).expect("mkdir");
        std::fs::write(&p, body).expect("write");
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
    git(dir, &["rev-parse", "HEAD"])
}

fn entry(path: &str, kind: EntryKind) -> Entry {
    Entry {
        path: path.to_string(),
        kind,
    }
}

#[test]
fn open_revision_resolves_branches_tags_ids_and_ancestors() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let first = repo_with(dir, &[("pools/gpu.yaml", "v: 1\n")]);
    git(dir, &["tag", "v1"]);
    let second = commit_files(dir, &[("pools/gpu.yaml", "v: 2\n")], "second\n\nbody");

    let head = open_revision(dir, "HEAD").expect("HEAD");
    assert_eq!(head.commit_id(), second);
    assert_eq!(head.summary(), "second");
    assert_eq!(head.author(), "Test <test@example.com>");
    assert!(head.time() > 0);
    assert_eq!(head.read("pools/gpu.yaml").expect("read"), b"v: 2\n");

    for rev in ["HEAD~1", "v1", &first[..10], &first] {
        let src = open_revision(dir, rev).unwrap_or_else(|e| panic!("{rev}: {e}"));
        assert_eq!(src.commit_id(), first, "{rev}");
        assert_eq!(src.read("pools/gpu.yaml").expect("read"), b"v: 1\n");
    }
    assert_eq!(
        open_revision(dir, "main").expect("branch").commit_id(),
        second
    );

    let described = head.describe();
    assert!(
        described.starts_with(&format!("commit {}", &second[..7])),
        "{described}"
    );
    assert!(
        described.ends_with(&format!(" of {}", dir.display())),
        "{described}"
    );
}

#[test]
fn open_revision_reads_the_commit_not_the_work_tree() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    repo_with(dir, &[("base/kubelet.yaml", "committed\n")]);
    std::fs::write(dir.join("base/kubelet.yaml"), "edited, not committed\n").expect("write");
    std::fs::write(dir.join("untracked.yaml"), "x").expect("write");

    let src = open_revision(dir, "HEAD").expect("open");
    assert_eq!(src.read("base/kubelet.yaml").expect("read"), b"committed\n");
    assert_eq!(
        src.entries().expect("entries"),
        vec![entry("base/kubelet.yaml", EntryKind::File)]
    );
}

#[test]
fn entries_report_files_symlinks_and_submodules_sorted() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    git(dir, &["init", "-q"]);
    std::fs::create_dir_all(dir.join("pools")).expect("mkdir");
    std::fs::write(dir.join("pools/a.yaml"), "a").expect("write");
    std::fs::write(dir.join("pools.yaml"), "p").expect("write");
    std::fs::write(dir.join("run.sh"), "#!/bin/sh\n").expect("write");
    git(dir, &["update-index", "--add", "--chmod=+x", "run.sh"]);
    std::os::unix::fs::symlink("a.yaml", dir.join("pools/link.yaml")).expect("symlink");
    git(dir, &["add", "pools", "pools.yaml"]);
    // A gitlink (mode 160000), as `git submodule add` records it, without a second repo.
    let some_commit = "0123456789abcdef0123456789abcdef01234567";
    git(
        dir,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{some_commit},vendor/sub"),
        ],
    );
    git(dir, &["commit", "-q", "-m", "kinds"]);

    let src = open_revision(dir, "HEAD").expect("open");
    assert_eq!(
        src.entries().expect("entries"),
        vec![
            entry("pools.yaml", EntryKind::File),
            entry("pools/a.yaml", EntryKind::File),
            entry("pools/link.yaml", EntryKind::Symlink),
            entry("run.sh", EntryKind::File),
            entry("vendor/sub", EntryKind::Submodule),
        ]
    );
    assert_eq!(src.read("run.sh").expect("executable file"), b"#!/bin/sh\n");
    for (path, says) in [
        ("pools/link.yaml", "symbolic link"),
        ("vendor/sub", "submodule"),
        ("pools", "directory"),
    ] {
        match src.read(path) {
            Err(SourceError::Read { path: p, message }) => {
                assert_eq!(p, path);
                assert!(message.contains(says), "{path}: {message}");
            }
            other => panic!("{path}: expected a read error, got {other:?}"),
        }
    }
    for missing in [
        "nope.yaml",
        "pools/nope.yaml",
        "../etc/passwd",
        "/pools/a.yaml",
        "",
    ] {
        assert!(
            matches!(src.read(missing), Err(SourceError::NotFound { .. })),
            "{missing:?}"
        );
    }
}

#[test]
fn a_bare_repository_is_read_from_its_object_database() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).expect("mkdir");
    let id = repo_with(&work, &[("kubelet-gitops.yaml", "namespace: x\n")]);
    let bare = tmp.path().join("bare.git");
    git(
        tmp.path(),
        &["clone", "-q", "--bare", path_str(&work), path_str(&bare)],
    );
    std::fs::remove_dir_all(&work).expect("remove the work tree");

    let src = open_revision(&bare, "main").expect("open bare");
    assert_eq!(src.commit_id(), id);
    assert_eq!(
        src.read("kubelet-gitops.yaml").expect("read"),
        b"namespace: x\n"
    );
}

#[test]
fn open_revision_errors_name_the_repository_and_revision() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let err = open_revision(tmp.path(), "HEAD").expect_err("not a repo");
    assert!(matches!(err, GitError::NotARepository { .. }), "{err:?}");
    assert!(err.to_string().contains(&tmp.path().display().to_string()));

    let dir = tmp.path();
    repo_with(dir, &[("a", "a")]);
    let tree = git(dir, &["rev-parse", "HEAD^{tree}"]);
    let err = open_revision(dir, "no-such-branch").expect_err("missing rev");
    assert!(matches!(err, GitError::NoSuchRevision { .. }), "{err:?}");
    assert!(err.to_string().contains("no-such-branch"), "{err}");
    let err = open_revision(dir, &tree).expect_err("a tree is not a commit");
    assert!(matches!(err, GitError::NotACommit { .. }), "{err:?}");
    assert!(!err.is_retryable());
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}

// ---------------------------------------------------------------------------------------
// Fetching from a remote into the bare cache.

/// A work tree that pushes to a bare "remote", as a forge would hold it.
struct Remote {
    _tmp: tempfile::TempDir,
    work: PathBuf,
    bare: PathBuf,
    root: PathBuf,
}

impl Remote {
    fn new(files: &[(&str, &str)]) -> Remote {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().to_path_buf();
        let work = root.join("work");
        let bare = root.join("remote.git");
        std::fs::create_dir(&work).expect("mkdir");
        repo_with(&work, files);
        git(&root, &["init", "-q", "--bare", path_str(&bare)]);
        git(&work, &["remote", "add", "origin", path_str(&bare)]);
        git(&work, &["push", "-q", "origin", "main"]);
        Remote {
            _tmp: tmp,
            work,
            bare,
            root,
        }
    }

    /// git in the work tree.
    fn git(&self, args: &[&str]) -> String {
        git(&self.work, args)
    }

    /// The work tree's HEAD commit.
    fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"])
    }

    /// Commits and pushes; returns the new commit id.
    fn push(&self, files: &[(&str, &str)], message: &str) -> String {
        let id = commit_files(&self.work, files, message);
        self.git(&["push", "-q", "origin", "main"]);
        id
    }

    fn url(&self) -> String {
        format!("file://{}", self.bare.display())
    }

    fn config(&self, cache: &str) -> GitConfig {
        GitConfig {
            url: self.url(),
            branch: "main".to_string(),
            auth: GitAuth::None,
            cache_dir: self.root.join(cache),
            extra_refspecs: Vec::new(),
        }
    }
}

#[test]
fn fetch_over_file_url_then_incrementally() {
    let remote = Remote::new(&[
        ("pools/gpu.yaml", "maxPods: 1\n"),
        ("base/kubelet.yaml", "b\n"),
    ]);
    let first = remote.head();
    let mut repo = GitRepo::open(remote.config("cache")).expect("open cache");
    assert_eq!(repo.head(), None);

    let got = repo.fetch().expect("first fetch");
    assert_eq!(got.head, first);
    assert_eq!(got.previous, None);
    assert!(got.changed && !got.forced);
    assert!(got.received_bytes > 0);
    let src = repo.commit_source(&got.head).expect("commit source");
    assert_eq!(src.read("pools/gpu.yaml").expect("read"), b"maxPods: 1\n");
    assert!(
        src.describe().ends_with(&format!("of {}", remote.url())),
        "{}",
        src.describe()
    );
    assert!(
        !repo.cache_path().join("pools").exists(),
        "the cache is bare: no work tree"
    );

    let again = repo.fetch().expect("unchanged fetch");
    assert_eq!(again.head, first);
    assert_eq!(again.previous.as_deref(), Some(first.as_str()));
    assert!(!again.changed && !again.forced);
    assert_eq!(
        again.received_objects, 0,
        "nothing new, nothing transferred"
    );
    assert!(!again.fetched, "an unchanged remote is listed, not fetched");

    let second = remote.push(&[("pools/gpu.yaml", "maxPods: 2\n")], "bump");
    let next = repo.fetch().expect("incremental fetch");
    assert_eq!(next.head, second);
    assert_eq!(next.previous.as_deref(), Some(first.as_str()));
    assert!(next.changed && !next.forced);
    // Only what is new: the commit, the root tree, the pools tree and the changed blob.
    assert_eq!(next.received_objects, 4);
    assert!(next.fetched);
    let src = repo.commit_source(&second).expect("commit source");
    assert_eq!(src.read("pools/gpu.yaml").expect("read"), b"maxPods: 2\n");
    assert_eq!(src.summary(), "bump");
}

#[test]
fn a_force_push_is_followed_and_flagged() {
    let remote = Remote::new(&[("a.yaml", "1\n")]);
    let second = remote.push(&[("a.yaml", "2\n")], "second");
    let mut repo = GitRepo::open(remote.config("cache")).expect("open");
    assert_eq!(repo.fetch().expect("fetch").head, second);

    // Rewrite history: drop "second", commit something else on top of the first.
    remote.git(&["reset", "-q", "--hard", "HEAD~1"]);
    let rewritten = commit_files(&remote.work, &[("a.yaml", "3\n")], "rewritten");
    remote.git(&["push", "-q", "--force", "origin", "main"]);

    let got = repo.fetch().expect("fetch after force-push");
    assert_eq!(got.head, rewritten);
    assert_eq!(got.previous.as_deref(), Some(second.as_str()));
    assert!(got.changed && got.forced);
    assert_eq!(
        repo.commit_source(&rewritten)
            .expect("src")
            .read("a.yaml")
            .expect("read"),
        b"3\n"
    );

    // A fast-forward afterwards is not forced.
    let ff = remote.push(&[("a.yaml", "4\n")], "ff");
    let got = repo.fetch().expect("fetch");
    assert_eq!(got.head, ff);
    assert!(got.changed && !got.forced);
}

#[test]
fn the_cache_is_reused_across_restarts_and_forgets_another_url() {
    let remote = Remote::new(&[("a.yaml", "1\n")]);
    let head = remote.head();
    {
        let mut repo = GitRepo::open(remote.config("cache")).expect("open");
        repo.fetch().expect("fetch");
    }
    let mut repo = GitRepo::open(remote.config("cache")).expect("reopen");
    assert_eq!(repo.head().as_deref(), Some(head.as_str()), "kept on disk");
    let got = repo.fetch().expect("fetch after restart");
    assert!(!got.changed);
    assert_eq!(got.received_objects, 0);
    drop(repo);

    // The same cache pointed at another remote starts from nothing known.
    let other = Remote::new(&[("b.yaml", "other\n")]);
    let mut cfg = other.config("unused");
    cfg.cache_dir = remote.root.join("cache");
    let mut repo = GitRepo::open(cfg).expect("open for another URL");
    assert_eq!(repo.head(), None);
    let got = repo.fetch().expect("fetch other");
    assert_eq!(got.previous, None);
    assert!(got.changed && !got.forced);
}

#[test]
fn cached_head_reads_the_cache_without_the_remote_and_only_for_its_url() {
    let remote = Remote::new(&[("a.yaml", "1\n")]);
    let head = remote.head();
    // No cache yet: nothing to resume from.
    assert_eq!(cached_head(&remote.config("cache")), None);
    {
        let mut repo = GitRepo::open(remote.config("cache")).expect("open");
        repo.fetch().expect("fetch");
    }
    // The remote is gone (a forge outage): the cache still says where the branch was.
    std::fs::remove_dir_all(&remote.bare).expect("remove the remote");
    assert_eq!(
        cached_head(&remote.config("cache")).as_deref(),
        Some(head.as_str())
    );
    // Another branch, or another remote on the same cache, is not what was cached.
    let mut other_branch = remote.config("cache");
    other_branch.branch = "release".to_string();
    assert_eq!(cached_head(&other_branch), None);
    let mut other_url = remote.config("cache");
    other_url.url = "file:///elsewhere.git".to_string();
    assert_eq!(cached_head(&other_url), None);
}

#[test]
fn first_parent_history_walks_the_mainline_newest_first() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let first = repo_with(dir, &[("a.yaml", "1\n")]);
    let second = commit_files(dir, &[("a.yaml", "2\n")], "second");
    // A merged side branch: its commit is not on the first-parent line.
    git(dir, &["checkout", "-q", "-b", "side", &first]);
    let side = commit_files(dir, &[("b.yaml", "side\n")], "side");
    git(dir, &["checkout", "-q", "main"]);
    git(dir, &["merge", "-q", "--no-ff", "-m", "merge side", "side"]);
    let merge = git(dir, &["rev-parse", "HEAD"]);

    let all = first_parent_history(dir, &merge, 10).expect("history");
    assert_eq!(all, [merge.clone(), second.clone(), first.clone()]);
    assert!(!all.contains(&side), "the side branch is not the mainline");
    // The limit counts the head itself.
    assert_eq!(
        first_parent_history(dir, &merge, 2).expect("limited"),
        [merge.clone(), second]
    );
    assert_eq!(first_parent_history(dir, &merge, 1).expect("one"), [merge]);

    // An unknown commit names the revision and the repository.
    let missing = "0123456789012345678901234567890123456789";
    let err = first_parent_history(dir, missing, 10).expect_err("no such commit");
    let msg = err.to_string();
    assert!(
        msg.contains(missing) && msg.contains(&dir.display().to_string()),
        "{msg}"
    );
}

#[test]
fn a_plain_local_path_works_as_a_url() {
    let remote = Remote::new(&[("a.yaml", "1\n")]);
    let mut cfg = remote.config("cache");
    cfg.url = path_str(&remote.bare).to_string();
    let mut repo = GitRepo::open(cfg).expect("open");
    let got = repo.fetch().expect("fetch");
    assert_eq!(got.head, remote.head());
}

#[test]
fn symlinks_and_submodules_show_up_in_a_fetched_commit() {
    let remote = Remote::new(&[("pools/a.yaml", "a\n")]);
    std::os::unix::fs::symlink("a.yaml", remote.work.join("pools/b.yaml")).expect("symlink");
    remote.git(&["add", "pools/b.yaml"]);
    git(
        &remote.work,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            "160000,0123456789abcdef0123456789abcdef01234567,pools/sub",
        ],
    );
    remote.git(&["commit", "-q", "-m", "link and gitlink"]);
    remote.git(&["push", "-q", "origin", "main"]);

    let mut repo = GitRepo::open(remote.config("cache")).expect("open");
    let head = repo.fetch().expect("fetch").head;
    let src = repo.commit_source(&head).expect("src");
    assert_eq!(
        src.entries().expect("entries"),
        vec![
            entry("pools/a.yaml", EntryKind::File),
            entry("pools/b.yaml", EntryKind::Symlink),
            entry("pools/sub", EntryKind::Submodule),
        ]
    );
}

#[test]
fn a_missing_branch_names_the_branch_and_what_exists() {
    let remote = Remote::new(&[("a.yaml", "1\n")]);
    remote.git(&["push", "-q", "origin", "main:staging"]);
    let mut cfg = remote.config("cache");
    cfg.branch = "release".to_string();
    let err = GitRepo::open(cfg)
        .expect("open")
        .fetch()
        .expect_err("no such branch");
    match &err {
        GitError::NoSuchBranch {
            branch, available, ..
        } => {
            assert_eq!(branch, "release");
            assert_eq!(available, &["main".to_string(), "staging".to_string()]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        err.to_string(),
        format!(
            "branch \"release\" not found on {}; the remote has main, staging",
            remote.url()
        )
    );
    assert!(!err.is_retryable());
}

#[test]
fn a_deleted_branch_is_reported_missing_not_served_from_the_cache() {
    let remote = Remote::new(&[("a.yaml", "1\n")]);
    remote.git(&["push", "-q", "origin", "main:release"]);
    let mut cfg = remote.config("cache");
    cfg.branch = "release".to_string();
    let mut repo = GitRepo::open(cfg).expect("open");
    repo.fetch().expect("fetch release");
    remote.git(&["push", "-q", "origin", ":release"]);
    let err = repo.fetch().expect_err("branch deleted");
    assert!(matches!(err, GitError::NoSuchBranch { .. }), "{err:?}");
}

#[test]
fn extra_refspecs_fetch_pull_request_heads() {
    let remote = Remote::new(&[("a.yaml", "1\n")]);
    let main = remote.head();
    remote.git(&["checkout", "-q", "-b", "feature"]);
    let pr = commit_files(&remote.work, &[("a.yaml", "pr\n")], "pr change");
    git(
        &remote.work,
        &["push", "-q", "origin", "feature:refs/pull/7/head"],
    );
    let mut cfg = remote.config("cache");
    cfg.extra_refspecs = vec!["+refs/pull/*/head:refs/pull/*/head".to_string()];
    let mut repo = GitRepo::open(cfg).expect("open");
    let got = repo.fetch().expect("fetch");
    assert_eq!(got.head, main, "the branch is still main");
    assert_eq!(
        got.extra_refs.into_iter().collect::<Vec<_>>(),
        vec![("refs/pull/7/head".to_string(), pr.clone())]
    );
    let src = repo
        .commit_source(&pr)
        .expect("the PR head is in the cache");
    assert_eq!(src.read("a.yaml").expect("read"), b"pr\n");
}

/// Bitbucket Cloud's review refspec fetches every branch under `refs/bitbucket/heads/`
/// (the reviewer finds the pull requests' source branches there): a branch with a slash,
/// idle polls that only list, a moved branch, a deleted one pruned.
#[test]
fn bitbucket_cloud_review_fetches_every_branch() {
    let remote = Remote::new(&[("a.yaml", "1\n")]);
    let main = remote.head();
    remote.git(&["checkout", "-q", "-b", "feature/gpu"]);
    let feature = commit_files(&remote.work, &[("a.yaml", "gpu\n")], "gpu");
    remote.git(&["push", "-q", "origin", "feature/gpu"]);
    let mut cfg = remote.config("cache");
    cfg.extra_refspecs = vec![reconciler::status::BITBUCKET_CLOUD_BRANCHES_REFSPEC.to_string()];
    let mut repo = GitRepo::open(cfg).expect("open");
    let branches = |got: &reconciler::git::FetchOutcome| {
        got.extra_refs
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
    };
    let got = repo.fetch().expect("first");
    assert_eq!(got.head, main);
    let both = vec![
        (
            "refs/bitbucket/heads/feature/gpu".to_string(),
            feature.clone(),
        ),
        ("refs/bitbucket/heads/main".to_string(), main.clone()),
    ];
    assert_eq!(branches(&got), both);
    assert_eq!(
        repo.commit_source(&feature)
            .expect("in the cache")
            .read("a.yaml")
            .expect("read"),
        b"gpu\n"
    );
    let idle = repo.fetch().expect("idle");
    assert!(!idle.fetched, "nothing moved: listed only");
    assert_eq!(branches(&idle), both);

    let moved = commit_files(&remote.work, &[("a.yaml", "gpu 2\n")], "gpu 2");
    remote.git(&["push", "-q", "origin", "feature/gpu"]);
    let got = repo.fetch().expect("the feature branch moved");
    assert!(
        got.fetched && !got.changed,
        "the followed branch did not move"
    );
    assert_eq!(got.extra_refs["refs/bitbucket/heads/feature/gpu"], moved);

    remote.git(&["push", "-q", "origin", ":feature/gpu"]);
    let got = repo.fetch().expect("the feature branch deleted");
    assert_eq!(
        branches(&got),
        vec![("refs/bitbucket/heads/main".to_string(), main)],
        "pruned"
    );
    assert!(!repo.fetch().expect("idle").fetched);
}

#[test]
fn an_idle_poll_lists_the_remote_and_fetches_only_when_a_ref_moved() {
    let remote = Remote::new(&[("a.yaml", "1\n")]);
    let push_pr = |n: u32, content: &str| {
        remote.git(&["checkout", "-q", "-B", &format!("pr{n}"), "main"]);
        let id = commit_files(&remote.work, &[("a.yaml", content)], "pr change");
        remote.git(&[
            "push",
            "-q",
            "-f",
            "origin",
            &format!("pr{n}:refs/pull/{n}/head"),
        ]);
        remote.git(&["checkout", "-q", "main"]);
        id
    };
    let seven = push_pr(7, "seven\n");
    let mut cfg = remote.config("cache");
    cfg.extra_refspecs = vec!["+refs/pull/*/head:refs/pull/*/head".to_string()];
    let mut repo = GitRepo::open(cfg).expect("open");
    let pulls = |got: &reconciler::git::FetchOutcome| {
        got.extra_refs
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
    };
    assert!(repo.fetch().expect("first").fetched);

    let idle = repo.fetch().expect("idle");
    assert!(!idle.fetched, "nothing moved: listed only");
    assert_eq!(
        pulls(&idle),
        vec![("refs/pull/7/head".to_string(), seven.clone())],
        "an idle poll still reports the pull-request heads"
    );

    let eight = push_pr(8, "eight\n");
    let got = repo.fetch().expect("a new pull request");
    assert!(got.fetched && !got.changed, "the branch did not move");
    assert_eq!(
        pulls(&got),
        vec![
            ("refs/pull/7/head".to_string(), seven.clone()),
            ("refs/pull/8/head".to_string(), eight.clone()),
        ]
    );
    assert!(!repo.fetch().expect("idle").fetched);

    let seven_again = push_pr(7, "seven, amended\n");
    let got = repo.fetch().expect("a pull request updated");
    assert!(got.fetched);
    assert_eq!(got.extra_refs["refs/pull/7/head"], seven_again);

    remote.git(&["push", "-q", "origin", ":refs/pull/8/head"]);
    let got = repo.fetch().expect("a pull request closed");
    assert!(
        got.fetched,
        "a ref gone from the remote is pruned by a fetch"
    );
    assert_eq!(
        pulls(&got),
        vec![("refs/pull/7/head".to_string(), seven_again)]
    );

    let main = remote.push(&[("a.yaml", "2\n")], "main moves");
    let got = repo.fetch().expect("the branch moved");
    assert!(got.fetched && got.changed);
    assert_eq!(got.head, main);
    assert!(!repo.fetch().expect("idle").fetched);
}

// ---------------------------------------------------------------------------------------
// Polling.

#[test]
fn the_backoff_doubles_up_to_its_cap() {
    let b = Backoff::default();
    let secs: Vec<u64> = (1..=8).map(|a| b.delay(a).as_secs()).collect();
    assert_eq!(secs, vec![10, 20, 40, 80, 160, 300, 300, 300]);
    assert_eq!(b.delay(0), Duration::from_secs(10));
    assert_eq!(b.delay(u32::MAX), Duration::from_secs(300));
    let fatal = GitError::BadBranch { branch: "x".into() };
    assert_eq!(b.delay_for(&fatal, 1), Duration::from_secs(300));
    let custom = Backoff {
        initial: Duration::from_millis(250),
        max: Duration::from_secs(1),
    };
    let ms: Vec<u128> = (1..=4).map(|a| custom.delay(a).as_millis()).collect();
    assert_eq!(ms, vec![250, 500, 1000, 1000]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_remote_keeps_the_last_commit_and_backs_off() {
    let remote = Remote::new(&[("a.yaml", "1\n")]);
    let head = remote.head();
    let records = Arc::new(Mutex::new(Vec::new()));
    let sink = records.clone();
    let mut poller = Poller::new(
        remote.config("cache"),
        Duration::from_secs(30),
        Arc::new(Notify::new()),
    )
    .with_observer(move |r| sink.lock().expect("lock").push(r.result));
    assert_eq!(poller.next_delay(), None, "the first poll is immediate");

    match poller.poll_now().await {
        PollEvent::NewCommit { id, forced } => {
            assert_eq!(id, head);
            assert!(!forced);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(poller.next_delay(), Some(Duration::from_secs(30)));
    assert!(matches!(poller.poll_now().await, PollEvent::Unchanged));

    // The remote disappears.
    let moved = remote.root.join("moved.git");
    std::fs::rename(&remote.bare, &moved).expect("rename");
    for (attempt, wait) in [(1, 10), (2, 20), (3, 40)] {
        match poller.poll_now().await {
            PollEvent::Unreachable {
                error,
                attempt: a,
                retry_in,
            } => {
                assert_eq!(a, attempt);
                assert_eq!(retry_in, Duration::from_secs(wait));
                assert!(error.is_retryable(), "{error}");
                assert!(error.to_string().contains(&remote.url()), "{error}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            poller.last_good(),
            Some(head.as_str()),
            "keeps the last commit"
        );
        assert_eq!(poller.next_delay(), Some(Duration::from_secs(wait)));
    }

    // It comes back: same commit, so Unchanged, and the schedule resets.
    std::fs::rename(&moved, &remote.bare).expect("rename back");
    assert!(matches!(poller.poll_now().await, PollEvent::Unchanged));
    assert_eq!(poller.failures(), 0);
    assert_eq!(poller.next_delay(), Some(Duration::from_secs(30)));
    assert_eq!(
        *records.lock().expect("lock"),
        vec![
            PollResult::NewCommit,
            PollResult::Unchanged,
            PollResult::Retryable,
            PollResult::Retryable,
            PollResult::Retryable,
            PollResult::Unchanged,
        ]
    );
}

/// Polls `url(port)` once, `port` being one nothing listens on, with the auth `auth`
/// makes from a temp dir: the temp dir (the poller's cache is in it), the poller and the
/// event the poll gave.
async fn poll_a_closed_port(
    url: impl FnOnce(u16) -> String,
    auth: impl FnOnce(&Path) -> GitAuth,
) -> (tempfile::TempDir, Poller, PollEvent) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let cfg = GitConfig {
        url: url(port),
        branch: "main".into(),
        auth: auth(tmp.path()),
        cache_dir: tmp.path().join("cache"),
        extra_refspecs: vec![],
    };
    let mut poller = Poller::new(cfg, Duration::from_secs(30), Arc::new(Notify::new()));
    let event = poller.poll_now().await;
    (tmp, poller, event)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_port_is_unreachable_and_retryable() {
    let (_tmp, poller, event) = poll_a_closed_port(
        |port| format!("http://127.0.0.1:{port}/r.git"),
        |_| GitAuth::None,
    )
    .await;
    match event {
        PollEvent::Unreachable {
            error,
            attempt,
            retry_in,
        } => {
            assert!(matches!(error, GitError::Unreachable { .. }), "{error:?}");
            assert_eq!((attempt, retry_in), (1, Duration::from_secs(10)));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(poller.last_good(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fatal_error_waits_the_longest_backoff() {
    let remote = Remote::new(&[("a.yaml", "1\n")]);
    let mut cfg = remote.config("cache");
    cfg.branch = "nope".into();
    let mut poller = Poller::new(cfg, Duration::from_secs(30), Arc::new(Notify::new()));
    match poller.poll_now().await {
        PollEvent::Unreachable {
            error, retry_in, ..
        } => {
            assert!(matches!(error, GitError::NoSuchBranch { .. }), "{error:?}");
            assert_eq!(retry_in, Duration::from_secs(300));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(poller.next_delay(), Some(Duration::from_secs(300)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_polls_at_once_and_finds_the_pushed_commit() {
    let remote = Remote::new(&[("a.yaml", "1\n")]);
    let wake = Arc::new(Notify::new());
    // An interval far longer than the test's guard: only the wake can start the poll.
    let mut poller = Poller::new(
        remote.config("cache"),
        Duration::from_secs(3600),
        wake.clone(),
    );
    assert!(matches!(poller.next().await, PollEvent::NewCommit { .. }));

    let pushed = remote.push(&[("a.yaml", "2\n")], "pushed");
    wake.notify_one();
    let event = tokio::time::timeout(Duration::from_secs(120), poller.next())
        .await
        .expect("woken, not waiting for the hour-long interval");
    match event {
        PollEvent::NewCommit { id, forced } => {
            assert_eq!(id, pushed);
            assert!(!forced);
        }
        other => panic!("{other:?}"),
    }
    let src = poller.commit_source(&pushed).expect("source");
    assert_eq!(src.read("a.yaml").expect("read"), b"2\n");
}

// ---------------------------------------------------------------------------------------
// Smart HTTP with a token: `git http-backend` behind a small CGI server that demands
// `Authorization: Basic` with the token as the password.

mod http_backend {
    use std::net::SocketAddr;
    use std::path::PathBuf;
    use std::process::Stdio;
    use std::sync::Arc;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::body::{Body, to_bytes};
    use axum::extract::{Request, State};
    use axum::http::{HeaderValue, StatusCode, header};
    use axum::response::Response;
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use tokio::io::AsyncWriteExt;

    pub struct Server {
        pub addr: SocketAddr,
        pub state: Arc<Backend>,
    }

    pub struct Backend {
        root: PathBuf,
        user: String,
        pub token: Mutex<String>,
        pub served: AtomicUsize,
        pub refused: AtomicUsize,
    }

    /// Serves the bare repositories under `root` at `http://addr/<name>`.
    pub async fn start(root: PathBuf, user: &str, token: &str) -> Server {
        let state = Arc::new(Backend {
            root,
            user: user.to_string(),
            token: Mutex::new(token.to_string()),
            served: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
        });
        let app = axum::Router::new().fallback(cgi).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Server { addr, state }
    }

    fn authorized(b: &Backend, req: &Request) -> bool {
        let Some(value) = req.headers().get(header::AUTHORIZATION) else {
            return false;
        };
        let Some(encoded) = value.to_str().ok().and_then(|v| v.strip_prefix("Basic ")) else {
            return false;
        };
        let Ok(decoded) = STANDARD.decode(encoded) else {
            return false;
        };
        let expected = format!("{}:{}", b.user, b.token.lock().expect("lock"));
        decoded == expected.as_bytes()
    }

    async fn cgi(State(b): State<Arc<Backend>>, req: Request) -> Response {
        if !authorized(&b, &req) {
            b.refused.fetch_add(1, Ordering::SeqCst);
            let mut resp = Response::new(Body::from("authentication required"));
            *resp.status_mut() = StatusCode::UNAUTHORIZED;
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"git\""),
            );
            return resp;
        }
        b.served.fetch_add(1, Ordering::SeqCst);
        let (parts, body) = req.into_parts();
        let body = to_bytes(body, 64 << 20).await.expect("request body");
        let header = |name: header::HeaderName| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        };
        let mut child = tokio::process::Command::new("git")
            .arg("http-backend")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_PROJECT_ROOT", &b.root)
            .env("GIT_HTTP_EXPORT_ALL", "1")
            .env("REQUEST_METHOD", parts.method.as_str())
            .env("PATH_INFO", parts.uri.path())
            .env("QUERY_STRING", parts.uri.query().unwrap_or(""))
            .env("CONTENT_TYPE", header(header::CONTENT_TYPE))
            .env("CONTENT_LENGTH", body.len().to_string())
            .env("HTTP_CONTENT_ENCODING", header(header::CONTENT_ENCODING))
            .env(
                "GIT_PROTOCOL",
                header(header::HeaderName::from_static("git-protocol")),
            )
            .env("REMOTE_USER", &b.user)
            .env("REMOTE_ADDR", "127.0.0.1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("git http-backend");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(&body).await.expect("write body");
        drop(stdin);
        let out = child.wait_with_output().await.expect("http-backend output");
        // CGI output: headers, a blank line, the body.
        let raw = out.stdout;
        let (head_len, sep) = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map(|p| (p, 4))
            .or_else(|| raw.windows(2).position(|w| w == b"\n\n").map(|p| (p, 2)))
            .expect("CGI headers");
        let head = String::from_utf8_lossy(&raw[..head_len]).to_string();
        let mut resp = Response::new(Body::from(raw[head_len + sep..].to_vec()));
        for line in head.lines() {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("status") {
                let code: u16 = value[..3].parse().expect("status code");
                *resp.status_mut() = StatusCode::from_u16(code).expect("status");
            } else if let (Ok(n), Ok(v)) = (
                header::HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                resp.headers_mut().append(n, v);
            }
        }
        resp
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_style_token_auth_against_git_http_backend() {
    use std::sync::atomic::Ordering;

    let remote = Remote::new(&[("pools/gpu.yaml", "maxPods: 1\n")]);
    let first = remote.head();
    let server = http_backend::start(remote.root.clone(), "bot", "token-one").await;
    let token_file = remote.root.join("token");
    std::fs::write(&token_file, "token-one\n").expect("write token");
    let cfg = GitConfig {
        url: format!("http://{}/remote.git", server.addr),
        branch: "main".into(),
        auth: GitAuth::Token {
            username: "bot".into(),
            token_file: token_file.clone(),
            // The test's server is plain http on loopback.
            allow_insecure_http: true,
        },
        cache_dir: remote.root.join("cache"),
        extra_refspecs: vec![],
    };
    let mut poller = Poller::new(
        cfg.clone(),
        Duration::from_secs(30),
        Arc::new(Notify::new()),
    );
    match poller.poll_now().await {
        PollEvent::NewCommit { id, .. } => assert_eq!(id, first),
        other => panic!("{other:?}"),
    }
    assert!(server.state.served.load(Ordering::SeqCst) > 0);
    assert!(
        server.state.refused.load(Ordering::SeqCst) > 0,
        "libgit2 first asks without credentials and is challenged"
    );
    let src = poller.commit_source(&first).expect("source");
    assert_eq!(src.read("pools/gpu.yaml").expect("read"), b"maxPods: 1\n");

    // Rotation: the server wants a new token and the file has it; no restart needed.
    *server.state.token.lock().expect("lock") = "token-two".into();
    std::fs::write(&token_file, "token-two").expect("rotate");
    let second = remote.push(&[("pools/gpu.yaml", "maxPods: 2\n")], "bump");
    match poller.poll_now().await {
        PollEvent::NewCommit { id, forced } => {
            assert_eq!(id, second);
            assert!(!forced);
        }
        other => panic!("{other:?}"),
    }

    // A stale token is an authentication error, retried, and never printed.
    std::fs::write(&token_file, "token-stale").expect("stale");
    match poller.poll_now().await {
        PollEvent::Unreachable {
            error,
            attempt,
            retry_in,
        } => {
            assert!(matches!(error, GitError::Auth { .. }), "{error:?}");
            assert!(error.is_retryable());
            let shown = format!("{error} {error:?}");
            assert!(shown.contains("bot"), "{shown}");
            assert!(!shown.contains("token-stale"), "{shown}");
            assert_eq!((attempt, retry_in), (1, Duration::from_secs(10)));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(poller.last_good(), Some(second.as_str()));
    let shown = format!("{cfg:?} {poller:?}");
    assert!(
        !shown.contains("token-two") && !shown.contains("token-stale"),
        "{shown}"
    );

    // No credentials at all against a server that demands them.
    let mut anonymous = cfg.clone();
    anonymous.auth = GitAuth::None;
    anonymous.cache_dir = remote.root.join("cache-anon");
    let err = tokio::task::spawn_blocking(move || GitRepo::open(anonymous)?.fetch())
        .await
        .expect("join")
        .expect_err("credentials required");
    assert!(matches!(err, GitError::Auth { .. }), "{err:?}");
}

#[test]
fn libgit2_is_built_with_https_and_ssh() {
    let version = git2::Version::get();
    assert!(version.https(), "https transport missing");
    assert!(version.ssh(), "ssh transport missing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ssh_remote_on_a_closed_port_is_unreachable_not_a_bad_url() {
    let (_tmp, _poller, event) = poll_a_closed_port(
        |port| format!("ssh://git@127.0.0.1:{port}/r.git"),
        |dir| GitAuth::Ssh {
            username: "git".into(),
            key_file: dir.join("id_ed25519"),
            known_hosts_file: dir.join("known_hosts"),
        },
    )
    .await;
    match event {
        PollEvent::Unreachable { error, .. } => {
            assert!(matches!(error, GitError::Unreachable { .. }), "{error:?}");
            assert!(error.is_retryable());
        }
        other => panic!("{other:?}"),
    }
}
