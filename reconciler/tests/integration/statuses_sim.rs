//! Commit statuses and pull-request review end to end: `kubelet-gitops run` against the
//! simulated cluster (no kubelets; the agent double of [`crate::support`] plays the node
//! agents), following a real bare git remote over `file://`. With the git-notes backend
//! the statuses are read back from the remote with the git CLI; with the GitHub backend
//! from the checking forge server of [`crate::forge_support`]. Every wait has a generous
//! limit that only a stuck rollout reaches: none is a speed assertion.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::forge_support::{ForgeServer, Kind, OWNER, OpenPullRequest, REPO, RecordedStatus};
use crate::support::commands::{git, git_command, text};
use crate::support::*;
use kubelet_gitops_core::inventory::Inventory;
use reconciler::controller::{RunConfig, RunningController, StatusBackendConfig, StatusConfig};
use reconciler::rollout::PoolPhase;
use reconciler::status::{BitbucketConfig, GitHubConfig, GiteaConfig, PLAN_MARKER};

const TOKEN: &str = "forge-t0ken-for-tests";

/// A bare repository playing the forge's git remote.
struct Remote {
    path: PathBuf,
}

impl Remote {
    fn init(dir: &Path) -> Remote {
        let path = dir.join("remote.git");
        let target = path.to_str().expect("temp paths are UTF-8");
        git(
            dir,
            &["init", "--quiet", "--bare", "--initial-branch=main", target],
        );
        Remote { path }
    }

    fn url(&self) -> String {
        format!("file://{}", self.path.display())
    }

    /// `git push --force <remote> <src>:<dst>` from the work repository.
    fn push(&self, work: &Path, src: &str, dst: &str) {
        let remote = self.path.to_str().expect("temp paths are UTF-8");
        git(
            work,
            &[
                "push",
                "--quiet",
                "--force",
                remote,
                &format!("{src}:{dst}"),
            ],
        );
    }

    /// Pushes the work repository's `main` to the remote's `main`.
    fn push_main(&self, h: &Harness) {
        self.push(&h.repo.path, "main", "refs/heads/main");
    }

    /// The note on `sha` as `git notes --ref=kubelet-gitops show` prints it.
    fn note(&self, sha: &str) -> Option<String> {
        let out = git_command(&self.path)
            .args(["notes", "--ref=kubelet-gitops", "show", sha])
            .output()
            .expect("git notes show");
        out.status.success().then(|| text(&out.stdout))
    }

    /// `git log --notes=kubelet-gitops -1 <sha>`.
    fn log(&self, sha: &str) -> String {
        git(&self.path, &["log", "--notes=kubelet-gitops", "-1", sha])
    }

    /// Waits until the note on `sha` satisfies `done` (every line of it is checked by the
    /// caller afterwards).
    async fn wait_note(&self, what: &str, sha: &str, done: impl Fn(&str) -> bool) -> String {
        eventually(what, LONG, || match self.note(sha) {
            Some(n) if done(&n) => Ok(n),
            note => Err(format!("note on {sha}: {note:?}")),
        })
        .await
    }
}

/// The line of `context` in a note.
fn line<'a>(note: &'a str, context: &str) -> Option<&'a str> {
    let prefix = format!("{context}: ");
    note.lines().find(|l| l.starts_with(&prefix))
}

/// Whether the line of `context` in `note` contains `fragment`.
fn says(note: &str, context: &str, fragment: &str) -> bool {
    line(note, context).is_some_and(|l| l.contains(fragment))
}

fn short(sha: &str) -> &str {
    &sha[..7]
}

/// A run configuration following `remote`, posting with `status`, short intervals.
fn config(h: &Harness, remote: &Remote, status: StatusConfig) -> RunConfig {
    let mut c = h.run_config("r1");
    c.git.url = remote.url();
    c.status = StatusConfig {
        progress_interval: Duration::from_millis(20),
        redeliver_interval: Duration::from_millis(200),
        ..status
    };
    c
}

/// A reconciler following `remote` that posts statuses as git notes (`review`: on pull
/// requests too).
async fn start_with_notes(h: &Harness, remote: &Remote, review: bool) -> RunningController {
    let status = StatusConfig {
        backend: StatusBackendConfig::Notes,
        review,
        ..StatusConfig::default()
    };
    h.reconciler(config(h, remote, status)).await
}

/// Two pools of three nodes each, `a` with `a_kubelet`.
fn two_pools(h: &Harness, a_kubelet: &str) {
    h.repo.settings_and_pools(&[
        ("a", "maxUnavailable: 2", a_kubelet),
        ("b", "maxUnavailable: 2", "    maxPods: 70\n"),
    ]);
}

/// A sim of two pools of three nodes each, with the agent double, and a remote.
async fn two_pool_cluster() -> (Harness, Remote) {
    let h = Harness::with_agent(Inventory::generate(6, &["a", "b"]), AgentOptions::default()).await;
    let remote = Remote::init(h.dir.path());
    (h, remote)
}

/// [`two_pool_cluster`] with a valid commit on the remote's `main`, rolled out by a
/// reconciler posting git notes (`review`: on pull requests too) until the summary note on
/// the commit says success: the harness, the remote, the reconciler and the commit.
async fn rolled_out_with_notes(review: bool) -> (Harness, Remote, RunningController, String) {
    let (h, remote) = two_pool_cluster().await;
    two_pools(&h, "    maxPods: 60\n");
    let commit = h.repo.commit("valid");
    remote.push_main(&h);
    let r = start_with_notes(&h, &remote, review).await;
    let mut sync = r.sync_state();
    wait_state(&mut sync, "the valid commit complete", LONG, |s| {
        all_complete(s, 2)
    })
    .await;
    remote
        .wait_note("the valid commit succeeds", &commit, |n| {
            says(n, "kubelet-gitops", ": success: ")
        })
        .await;
    (h, remote, r, commit)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_notes_follow_each_pool_on_the_commit_that_produced_its_config() {
    let (h, remote) = two_pool_cluster().await;
    two_pools(&h, "    maxPods: 60\n");
    let first = h.repo.commit("two pools");
    remote.push_main(&h);

    let r = start_with_notes(&h, &remote, false).await;
    let note = remote
        .wait_note("every pool and the summary succeed", &first, |n| {
            says(n, "kubelet-gitops", ": success: ")
                && says(n, "kubelet-gitops/a", ": success: ")
                && says(n, "kubelet-gitops/b", ": success: ")
        })
        .await;
    let state = r.sync_state().borrow().clone();
    let cms = state.applied.expect("applied").configmaps;
    assert_eq!(
        line(&note, "kubelet-gitops/a"),
        Some(format!("kubelet-gitops/a: success: 3/3 nodes on {}", cms["a"]).as_str()),
        "{note}"
    );
    assert_eq!(
        line(&note, "kubelet-gitops/b"),
        Some(format!("kubelet-gitops/b: success: 3/3 nodes on {}", cms["b"]).as_str())
    );
    assert_eq!(
        line(&note, "kubelet-gitops"),
        Some("kubelet-gitops: success: 2 pools: 2 done")
    );
    assert_eq!(note.lines().count(), 3, "{note}");
    // `git log --notes` shows them under the commit.
    let log = remote.log(&first);
    assert!(
        log.contains("Notes (kubelet-gitops):")
            && log.contains("    kubelet-gitops: success: 2 pools: 2 done"),
        "{log}"
    );

    // A commit that changes pool a only: a's status goes on it, b's stays on the first
    // commit (its ConfigMap is still the first commit's), and the summary says so.
    h.repo.pool("a", "maxUnavailable: 2", "    maxPods: 61\n");
    let second = h.repo.commit("pool a: maxPods 61");
    remote.push_main(&h);
    let note = remote
        .wait_note("the second commit succeeds", &second, |n| {
            says(n, "kubelet-gitops", ": success: ") && says(n, "kubelet-gitops/a", ": success: ")
        })
        .await;
    let cms = r.sync_state().borrow().applied.clone().unwrap().configmaps;
    assert_eq!(
        line(&note, "kubelet-gitops/a"),
        Some(format!("kubelet-gitops/a: success: 3/3 nodes on {}", cms["a"]).as_str())
    );
    assert_eq!(line(&note, "kubelet-gitops/b"), None, "{note}");
    assert_eq!(
        line(&note, "kubelet-gitops"),
        Some(
            format!(
                "kubelet-gitops: success: 2 pools: 2 done; unchanged: b (from {})",
                short(&first)
            )
            .as_str()
        )
    );
    let note = remote.note(&first).unwrap();
    assert!(
        says(&note, "kubelet-gitops/b", ": success: 3/3 nodes on "),
        "{note}"
    );
    let (_, metrics) = http_get(r.admin_addr().unwrap(), "/metrics").await;
    assert!(
        sample(&metrics, "kubelet_gitops_status_posts_total{result=\"ok\"}")
            .is_some_and(|n| n >= 5.0),
        "{metrics}"
    );
    assert_eq!(sample(&metrics, "kubelet_gitops_status_outbox"), Some(0.0));

    h.finish(r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_node_fails_its_pool_naming_the_node_and_the_reason() {
    let h = Harness::with_agent(
        Inventory::generate(6, &["good", "bad"]),
        AgentOptions::rolling_back("maxPods: 13"),
    )
    .await;
    let remote = Remote::init(h.dir.path());
    h.repo.settings_and_pools(&[
        ("good", "maxUnavailable: 3", "    maxPods: 60\n"),
        ("bad", "maxUnavailable: 3, canary: 1", "    maxPods: 13\n"),
    ]);
    let commit = h.repo.commit("a config the kubelet rejects");
    remote.push_main(&h);
    let r = start_with_notes(&h, &remote, false).await;
    let note = remote
        .wait_note("the bad pool fails", &commit, |n| {
            says(n, "kubelet-gitops/bad", ": failure: ")
                && says(n, "kubelet-gitops/good", ": success: ")
                // The summary is written after the pools' lines of its round.
                && says(n, "kubelet-gitops", ": failure: 2 pools: 1 failed, 1 done")
        })
        .await;
    let state = r.sync_state().borrow().clone();
    let bad = state.pools.iter().find(|p| p.pool == "bad").unwrap();
    assert_eq!(bad.phase, PoolPhase::Halted);
    let node = &bad.failed[0].node;
    let cm = &state.applied.as_ref().unwrap().configmaps["bad"];
    let expected = format!(
        "{node} rolled back: kubelet did not become healthy: healthz failed (1 failed; 0/3 nodes on {cm})"
    );
    assert_eq!(
        line(&note, "kubelet-gitops/bad"),
        Some(format!("kubelet-gitops/bad: failure: {expected}").as_str()),
        "{note}"
    );
    assert_eq!(
        line(&note, "kubelet-gitops"),
        Some(
            format!("kubelet-gitops: failure: 2 pools: 1 failed, 1 done; bad: {expected}").as_str()
        )
    );
    h.finish(r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_commit_gets_an_error_naming_file_and_line_and_applies_nothing() {
    let (h, remote, r, good) = rolled_out_with_notes(false).await;
    let before = h.snapshot();

    // Line 10 of the pool file: `    maxPod: 61` (a typo).
    two_pools(&h, "    maxPod: 61\n");
    let bad = h.repo.commit("typo");
    remote.push_main(&h);
    let note = remote
        .wait_note("the invalid commit errors", &bad, |n| {
            says(n, "kubelet-gitops", ": error: ")
        })
        .await;
    let error = line(&note, "kubelet-gitops").unwrap();
    assert!(
        error.starts_with("kubelet-gitops: error: pools/a.yaml:10:") && error.contains("maxPod"),
        "{note}"
    );
    assert_eq!(note.lines().count(), 1, "no pool context on it: {note}");

    h.assert_nothing_applied(&r, &before, "nothing written")
        .await;
    // The valid commit keeps its statuses.
    let note = remote.note(&good).unwrap();
    assert_eq!(
        line(&note, "kubelet-gitops"),
        Some("kubelet-gitops: success: 2 pools: 2 done")
    );
    h.finish(r).await;
}

/// Writes `setup` as the kubelet-gitops.io/node-setup report of `node`, as its agent
/// would (`None` removes it).
async fn report_setup(h: &Harness, node: &str, setup: Option<&str>) {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Api, Patch, PatchParams};
    let patch = serde_json::json!({"metadata": {"annotations": {
        kubelet_gitops_core::protocol::NODE_SETUP: setup,
    }}});
    Api::<Node>::all(client(&h.sim, "test/agent").await)
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("node patched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_a_node_would_refuse_gets_an_error_naming_node_flag_and_message_and_applies_nothing()
 {
    let (h, remote, r, good) = rolled_out_with_notes(false).await;
    // a-0's kubelet runs with --cgroups-per-qos=false (its agent's report says so); the
    // other nodes report a plain set-up, or none (an agent that predates the report).
    let refusing = r#"{"version":1,"mode":"replace","flags":["--cgroups-per-qos=false"],"runtimeCgroupDriver":"systemd"}"#;
    report_setup(&h, "a-0", Some(refusing)).await;
    report_setup(
        &h,
        "a-2",
        Some(r#"{"version":1,"runtimeCgroupDriver":"systemd"}"#),
    )
    .await;
    let before = h.snapshot();

    // Only maxPods changes: enforceNodeAllocatable stays at its default, [pods].
    two_pools(&h, "    maxPods: 62\n    cgroupDriver: systemd\n");
    let bad = h.repo.commit("a: maxPods 62");
    remote.push_main(&h);
    let note = remote
        .wait_note("the refused commit errors", &bad, |n| {
            says(n, "kubelet-gitops", ": error: ")
        })
        .await;
    let error = line(&note, "kubelet-gitops").unwrap();
    assert!(
        error.starts_with("kubelet-gitops: error: pools/a.yaml: node a-0 would refuse the config of pool a: failed to validate config: invalid configuration: cgroupsPerQOS (--cgroups-per-qos) must be set to true")
            && error.contains("(value set by the kubelet flag --cgroups-per-qos)"),
        "{note}"
    );
    assert_eq!(note.lines().count(), 1, "no pool context on it: {note}");
    let state = r.sync_state().borrow().clone();
    assert_eq!(
        state.rejected.as_ref().map(|x| x.commit.as_str()),
        Some(bad.as_str())
    );
    h.assert_nothing_applied(&r, &before, "no ConfigMap published, no node assigned")
        .await;
    let note = remote.note(&good).unwrap();
    assert_eq!(
        line(&note, "kubelet-gitops"),
        Some("kubelet-gitops: success: 2 pools: 2 done")
    );

    // The node's kubelet no longer has the flag: the held commit goes out, no new commit
    // needed.
    report_setup(
        &h,
        "a-0",
        Some(r#"{"version":1,"runtimeCgroupDriver":"systemd"}"#),
    )
    .await;
    remote
        .wait_note("the commit goes out once no node refuses it", &bad, |n| {
            says(n, "kubelet-gitops", ": success: ")
        })
        .await;
    h.finish(r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_request_head_gets_a_plan_and_changes_no_node() {
    let (h, remote, r, base) = rolled_out_with_notes(true).await;
    let before = h.snapshot();

    // Pull request 7 changes pool a; pull request 8 does not validate. Neither is on
    // the branch.
    h.repo.pool("a", "maxUnavailable: 2", "    maxPods: 90\n");
    let pr7 = h.repo.commit("pool a: maxPods 90");
    remote.push(&h.repo.path, &pr7, "refs/pull/7/head");
    h.repo.pool("b", "maxUnavailable: 2", "    maxPod: 91\n");
    let pr8 = h.repo.commit("typo");
    remote.push(&h.repo.path, &pr8, "refs/pull/8/head");

    let note = remote
        .wait_note("pull request 7 is planned", &pr7, |n| {
            line(n, "kubelet-gitops/plan").is_some()
        })
        .await;
    assert_eq!(
        note.trim_end(),
        "kubelet-gitops/plan: success: 1 pool changes, 3 nodes",
        "{note}"
    );
    let note = remote
        .wait_note("pull request 8 is an error", &pr8, |n| {
            line(n, "kubelet-gitops/plan").is_some()
        })
        .await;
    let plan = line(&note, "kubelet-gitops/plan").unwrap();
    assert!(
        plan.starts_with(
            "kubelet-gitops/plan: error: error: 1 error in the repository; pools/b.yaml:10:"
        ) && plan.contains("maxPod"),
        "{note}"
    );

    // Nothing of either pull request reached the cluster: no write by the reconciler
    // since they were pushed (the request log), no new ConfigMap, no node moved.
    h.assert_nothing_applied(&r, &before, "a review wrote to the cluster")
        .await;
    assert_eq!(
        r.sync_state().borrow().applied.as_ref().unwrap().commit,
        base,
        "the branch is what runs"
    );
    let (_, metrics) = http_get(r.admin_addr().unwrap(), "/metrics").await;
    assert_eq!(
        sample(&metrics, "kubelet_gitops_reviews_total{result=\"planned\"}"),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, "kubelet_gitops_reviews_total{result=\"invalid\"}"),
        Some(1.0)
    );
    h.finish(r).await;
}

/// The newest status of `sha` under `context`.
fn latest(forge: &ForgeServer, sha: &str, context: &str) -> Option<RecordedStatus> {
    forge
        .statuses()
        .into_iter()
        .rfind(|s| s.sha == sha && s.context == context)
}

/// Waits until the newest status of `sha` under `context` is `state`; returns it.
async fn wait_status(
    forge: &ForgeServer,
    what: &str,
    sha: &str,
    context: &str,
    state: &str,
) -> RecordedStatus {
    eventually(what, LONG, || {
        latest(forge, sha, context)
            .filter(|s| s.state == state)
            .ok_or_else(|| format!("statuses: {:#?}", forge.statuses()))
    })
    .await
}

/// Waits until a comment on pull request `pr` contains `contains`; returns them all.
async fn wait_comment(forge: &ForgeServer, pr: u64, contains: &str) -> Vec<(u64, String)> {
    eventually(&format!("comment with {contains}"), LONG, || {
        let comments = forge.comments(pr);
        if comments.iter().any(|(_, body)| body.contains(contains)) {
            Ok(comments)
        } else {
            Err(format!("{comments:#?}"))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_statuses_and_a_plan_comment_updated_in_place() {
    let forge = ForgeServer::start(Kind::GitHub, TOKEN).await;
    let (h, remote) = two_pool_cluster().await;
    let token_file = h.dir.path().join("forge-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    two_pools(&h, "    maxPods: 60\n");
    let base = h.repo.commit("valid");
    remote.push_main(&h);
    let status = StatusConfig {
        backend: StatusBackendConfig::GitHub(
            GitHubConfig::new(OWNER, REPO, &token_file).with_api_url(forge.base_url()),
        ),
        review: true,
        comment: true,
        target_url: Some("https://dashboard.example.com/kubelet".into()),
        ..StatusConfig::default()
    };
    let r = h.reconciler(config(&h, &remote, status)).await;

    let summary = wait_status(
        &forge,
        "summary success",
        &base,
        "kubelet-gitops",
        "success",
    )
    .await;
    assert_eq!(summary.description, "2 pools: 2 done");
    assert_eq!(
        summary.target_url.as_deref(),
        Some("https://dashboard.example.com/kubelet")
    );
    for pool in ["a", "b"] {
        let s = latest(&forge, &base, &format!("kubelet-gitops/{pool}")).unwrap();
        assert_eq!(s.state, "success", "{s:?}");
        assert!(s.description.starts_with("3/3 nodes on kubelet-"), "{s:?}");
    }
    // Posted only on change: one final status per context, no repeats of it.
    let successes = forge
        .statuses()
        .iter()
        .filter(|s| s.sha == base && s.state == "success")
        .count();
    assert_eq!(successes, 3, "{:#?}", forge.statuses());

    // A pull request: a plan status and one comment ...
    h.repo.pool("a", "maxUnavailable: 2", "    maxPods: 90\n");
    let head1 = h.repo.commit("pool a: maxPods 90");
    remote.push(&h.repo.path, &head1, "refs/pull/7/head");
    let plan = wait_status(
        &forge,
        "plan of the first push",
        &head1,
        "kubelet-gitops/plan",
        "success",
    )
    .await;
    assert_eq!(plan.description, "1 pool changes, 3 nodes");
    let comments = wait_comment(&forge, 7, short(&head1)).await;
    assert_eq!(comments.len(), 1, "{comments:#?}");
    let (id, body) = &comments[0];
    assert!(body.starts_with(PLAN_MARKER), "{body}");
    assert!(body.contains("maxPods"), "{body}");

    // ... updated in place by the second push.
    h.repo.pool("b", "maxUnavailable: 2", "    maxPods: 75\n");
    let head2 = h.repo.commit("pool b: maxPods 75");
    remote.push(&h.repo.path, &head2, "refs/pull/7/head");
    let plan = wait_status(
        &forge,
        "plan of the second push",
        &head2,
        "kubelet-gitops/plan",
        "success",
    )
    .await;
    assert_eq!(plan.description, "2 pools change, 6 nodes");
    let comments = wait_comment(&forge, 7, short(&head2)).await;
    assert_eq!(comments.len(), 1, "updated in place, not a second comment");
    assert_eq!(comments[0].0, *id);
    assert!(!comments[0].1.contains(short(&head1)), "{}", comments[0].1);

    assert!(forge.violations().is_empty(), "{:#?}", forge.violations());
    assert_eq!(
        r.sync_state().borrow().applied.as_ref().unwrap().commit,
        base
    );
    h.finish(r).await;
}

/// Bitbucket Cloud publishes no pull-request refs: the reconciler fetches the branches,
/// lists the open pull requests through the API (which names the source commit by a
/// 12-digit short hash) and reviews each one into the followed branch from a branch of
/// the same repository: the plan as a build status on the branch's commit and as a
/// comment, edited in place when the branch moves. A pull request into another branch
/// and one from a fork get nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bitbucket_cloud_pull_requests_are_reviewed_from_the_api_listing() {
    let forge = ForgeServer::start(Kind::BitbucketCloud, TOKEN).await;
    let (h, remote) = two_pool_cluster().await;
    let token_file = h.dir.path().join("forge-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    two_pools(&h, "    maxPods: 60\n");
    let base = h.repo.commit("valid");
    remote.push_main(&h);
    // A feature branch with one pull request into main and one into staging, and a pull
    // request from a fork whose commit this remote does not have.
    h.repo.pool("a", "maxUnavailable: 2", "    maxPods: 90\n");
    let head1 = h.repo.commit("pool a: maxPods 90");
    remote.push(&h.repo.path, &head1, "refs/heads/feature/gpu");
    let fork_commit = "89abcdef0123456789abcdef0123456789abcdef";
    let listing = |head: &str| {
        [
            OpenPullRequest::new(7, "feature/gpu", head, "main"),
            OpenPullRequest::new(8, "feature/gpu", head, "staging"),
            OpenPullRequest::new(9, "main", fork_commit, "main").in_fork("someone/cluster-config"),
        ]
    };
    forge.set_pull_requests(listing(&head1));
    let status = StatusConfig {
        backend: StatusBackendConfig::BitbucketCloud(BitbucketConfig {
            api_url: forge.base_url(),
            ..BitbucketConfig::new(OWNER, REPO, &token_file)
        }),
        review: true,
        comment: true,
        ..StatusConfig::default()
    };
    let r = h.reconciler(config(&h, &remote, status)).await;

    wait_status(
        &forge,
        "summary success",
        &base,
        "kubelet-gitops",
        "SUCCESSFUL",
    )
    .await;
    let plan = wait_status(
        &forge,
        "plan of the first push",
        &head1,
        "kubelet-gitops/plan",
        "SUCCESSFUL",
    )
    .await;
    assert_eq!(plan.description, "1 pool changes, 3 nodes");
    assert_eq!(plan.name.as_deref(), Some("kubelet-gitops/plan"));
    let comments = wait_comment(&forge, 7, short(&head1)).await;
    assert_eq!(comments.len(), 1, "{comments:#?}");
    let (id, body) = comments[0].clone();
    assert!(body.starts_with(PLAN_MARKER), "{body}");
    assert!(body.contains("maxPods"), "{body}");

    // The second push: the API names the new head (as Bitbucket would right after the
    // push, before the reconciler's poll fetches it), the status goes on the new commit
    // and the comment is edited in place.
    h.repo.pool("b", "maxUnavailable: 2", "    maxPods: 75\n");
    let head2 = h.repo.commit("pool b: maxPods 75");
    forge.set_pull_requests(listing(&head2));
    remote.push(&h.repo.path, &head2, "refs/heads/feature/gpu");
    let plan = wait_status(
        &forge,
        "plan of the second push",
        &head2,
        "kubelet-gitops/plan",
        "SUCCESSFUL",
    )
    .await;
    assert_eq!(plan.description, "2 pools change, 6 nodes");
    let comments = wait_comment(&forge, 7, short(&head2)).await;
    assert_eq!(comments.len(), 1, "updated in place, not a second comment");
    assert_eq!(comments[0].0, id);
    assert!(!comments[0].1.contains(short(&head1)), "{}", comments[0].1);

    // Neither the pull request into staging nor the fork's got anything.
    assert!(forge.comments(8).is_empty(), "{:#?}", forge.comments(8));
    assert!(forge.comments(9).is_empty(), "{:#?}", forge.comments(9));
    let planned: Vec<String> = forge
        .statuses()
        .into_iter()
        .filter(|s| s.context == "kubelet-gitops/plan")
        .map(|s| s.sha)
        .collect();
    assert!(
        planned.iter().all(|sha| *sha == head1 || *sha == head2),
        "{planned:?}"
    );
    let listings = forge
        .requests()
        .iter()
        .filter(|r| r.path.contains("/pullrequests?state=OPEN"))
        .count();
    // Listed when ready, then when the branch moved: not at each state of the rollout.
    assert!((2..=4).contains(&listings), "{listings} listings");
    assert!(forge.violations().is_empty(), "{:#?}", forge.violations());
    assert_eq!(
        r.sync_state().borrow().applied.as_ref().unwrap().commit,
        base,
        "nothing of a pull request is applied"
    );
    h.finish(r).await;
}

/// The path of issue 12: a file whose name holds newlines that would read as a `valid`
/// line and a forged status line.
const FORGING_PATH: &str = "pools/x.yaml: valid\nkubelet-gitops: success: all good\npools/y.yaml";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_with_a_control_character_is_an_error_of_the_commit_and_forges_no_note_line() {
    let (h, remote, r, good) = rolled_out_with_notes(false).await;
    let before = h.snapshot();

    h.repo.write(
        FORGING_PATH,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
    );
    let bad = h.repo.commit("a file named to forge lines");
    remote.push_main(&h);
    let note = remote
        .wait_note("the commit is refused", &bad, |n| {
            says(n, "kubelet-gitops", ": error: ")
        })
        .await;
    assert_eq!(
        note.lines().collect::<Vec<_>>(),
        vec![
            "kubelet-gitops: error: pools/x.yaml: valid\\nkubelet-gitops: success: all good\\npools/y.yaml: \
             the path holds a control character (a newline, an escape, a bidirectional control; \
             shown escaped here): such a name could forge lines of output, notes and statuses, so \
             the commit is refused; rename the file or directory"
        ],
        "one line, the path escaped, no forged success: {note}"
    );
    h.assert_nothing_applied(&r, &before, "nothing published or assigned")
        .await;
    assert_eq!(
        line(&remote.note(&good).unwrap(), "kubelet-gitops"),
        Some("kubelet-gitops: success: 2 pools: 2 done")
    );
    h.finish(r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_message_with_newlines_and_terminal_escapes_reaches_the_status_escaped() {
    let h = Harness::with_agent(
        Inventory::generate(6, &["good", "bad"]),
        AgentOptions {
            fail_message: Some(
                "kubelet exited: bad config\nkubelet-gitops/bad: success: all good\r\u{1b}[2J\u{1b}[32mok\u{1b}[0m"
                    .to_string(),
            ),
            ..AgentOptions::rolling_back("maxPods: 13")
        },
    )
    .await;
    let remote = Remote::init(h.dir.path());
    h.repo.settings_and_pools(&[
        ("good", "maxUnavailable: 3", "    maxPods: 60\n"),
        ("bad", "maxUnavailable: 3, canary: 1", "    maxPods: 13\n"),
    ]);
    let commit = h.repo.commit("a config the kubelet rejects");
    remote.push_main(&h);
    let r = start_with_notes(&h, &remote, false).await;
    let note = remote
        .wait_note("the bad pool fails", &commit, |n| {
            says(n, "kubelet-gitops/bad", ": failure: ")
                && says(n, "kubelet-gitops/good", ": success: ")
                && says(n, "kubelet-gitops", ": failure: 2 pools: 1 failed, 1 done")
        })
        .await;
    assert_eq!(note.lines().count(), 3, "no forged line: {note}");
    let bad = line(&note, "kubelet-gitops/bad").unwrap();
    assert!(
        bad.contains(
            " rolled back: kubelet exited: bad config\\nkubelet-gitops/bad: success: all good\\r\\u{1b}[2J\\u{1b}[32mok\\u{1b}[0m (1 failed; "
        ),
        "{note}"
    );
    assert!(!note.contains('\u{1b}') && !note.contains('\r'), "{note:?}");
    h.finish(r).await;
}

/// The forge backend for `kind`, posting to `forge` with the token in `token_file`.
fn forge_backend(kind: Kind, forge: &ForgeServer, token_file: &Path) -> StatusBackendConfig {
    match kind {
        Kind::Gitea => StatusBackendConfig::Gitea(GiteaConfig {
            url: forge.base_url(),
            owner: OWNER.into(),
            repo: REPO.into(),
            token_file: token_file.to_path_buf(),
        }),
        _ => StatusBackendConfig::GitHub(
            GitHubConfig::new(OWNER, REPO, token_file).with_api_url(forge.base_url()),
        ),
    }
}

/// A reconciler restarted while the branch head does not validate reviews no pull
/// request before it has resumed the commit the cluster is on: the plans it posts after
/// the restart are those posted before it (not "every pool compared with nothing"), and
/// the plan comments, whose text did not change, are not edited.
async fn a_restart_on_an_invalid_head_reviews_against_the_commit_the_cluster_is_on(kind: Kind) {
    let forge = ForgeServer::start(kind, TOKEN).await;
    let (h, remote) = two_pool_cluster().await;
    let token_file = h.dir.path().join("forge-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let status = || StatusConfig {
        backend: forge_backend(kind, &forge, &token_file),
        review: true,
        comment: true,
        ..StatusConfig::default()
    };
    two_pools(&h, "    maxPods: 60\n");
    let base = h.repo.commit("valid");
    remote.push_main(&h);
    // Two pull requests branched off the applied commit, each changing one pool.
    h.repo.pool("a", "maxUnavailable: 2", "    maxPods: 90\n");
    let pr7 = h.repo.commit("pool a: maxPods 90");
    remote.push(&h.repo.path, &pr7, "refs/pull/7/head");
    git(&h.repo.path, &["reset", "--quiet", "--hard", &base]);
    h.repo.pool("b", "maxUnavailable: 2", "    maxPods: 91\n");
    let pr8 = h.repo.commit("pool b: maxPods 91");
    remote.push(&h.repo.path, &pr8, "refs/pull/8/head");
    git(&h.repo.path, &["reset", "--quiet", "--hard", &base]);

    let plans = |sha: &str| -> Vec<String> {
        forge
            .statuses()
            .into_iter()
            .filter(|s| s.sha == sha && s.context == "kubelet-gitops/plan")
            .map(|s| format!("{}: {}", s.state, s.description))
            .collect()
    };
    let wait_plans = async |what: &str, sha: &str, n: usize| {
        eventually(what, LONG, || {
            let seen = plans(sha);
            if seen.len() >= n {
                Ok(seen)
            } else {
                Err(format!("{seen:?}; statuses: {:#?}", forge.statuses()))
            }
        })
        .await
    };
    let wait_comment = async |pr: u64| {
        eventually(&format!("the plan comment on {pr}"), LONG, || {
            match forge.comments(pr).as_slice() {
                [one] => Ok(one.clone()),
                other => Err(format!("{other:#?}")),
            }
        })
        .await
    };

    let first = h.reconciler(config(&h, &remote, status())).await;
    let mut sync = first.sync_state();
    wait_state(&mut sync, "the valid commit complete", LONG, |s| {
        s.applied.as_ref().is_some_and(|a| a.commit == base) && all_complete(s, 2)
    })
    .await;
    assert_eq!(
        wait_plans("pull request 7 planned", &pr7, 1).await,
        ["success: 1 pool changes, 3 nodes"]
    );
    assert_eq!(
        wait_plans("pull request 8 planned", &pr8, 1).await,
        ["success: 1 pool changes, 3 nodes"]
    );
    let comment7 = wait_comment(7).await;
    wait_comment(8).await;
    first.stop().await.unwrap();

    // While no reconciler runs, the branch gets a commit that does not validate.
    two_pools(&h, "    maxPod: 61\n");
    let bad = h.repo.commit("typo");
    remote.push_main(&h);
    let restarted_at = forge.requests().len();

    let second = h.reconciler(config(&h, &remote, status())).await;
    let mut sync = second.sync_state();
    // The reviewer of the restarted reconciler reviews both heads once more, 7 then 8:
    // once 8 has its plan status again, 7's comment was handled.
    let after7 = wait_plans("pull request 7 planned again", &pr7, 2).await;
    let after8 = wait_plans("pull request 8 planned again", &pr8, 2).await;
    assert_eq!(
        after7, ["success: 1 pool changes, 3 nodes"; 2],
        "the plan of 7 after the restart is the one before it"
    );
    assert_eq!(after8[1], after8[0], "the plan of 8 after the restart");
    let state = wait_state(&mut sync, "resumed on the valid commit", LONG, |s| {
        s.applied.as_ref().is_some_and(|a| a.commit == base)
    })
    .await;
    assert_eq!(state.rejected.map(|r| r.commit), Some(bad));
    assert_eq!(wait_comment(7).await, comment7, "comment 7 unchanged");
    let edits: Vec<String> = forge.requests()[restarted_at..]
        .iter()
        .filter(|r| r.method != "GET" && r.path.contains("/comments"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(
        !edits
            .iter()
            .any(|e| e.ends_with(&format!("/comments/{}", comment7.0))),
        "comment 7 edited after the restart: {edits:?}"
    );
    assert!(forge.violations().is_empty(), "{:#?}", forge.violations());
    h.finish(second).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_a_restart_on_an_invalid_head_reviews_against_the_commit_the_cluster_is_on() {
    a_restart_on_an_invalid_head_reviews_against_the_commit_the_cluster_is_on(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitea_a_restart_on_an_invalid_head_reviews_against_the_commit_the_cluster_is_on() {
    a_restart_on_an_invalid_head_reviews_against_the_commit_the_cluster_is_on(Kind::Gitea).await;
}
