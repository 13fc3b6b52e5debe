//! The HTTP status backends against a local forge that checks every request against the
//! documented API ([`crate::forge_support`]).

use std::path::PathBuf;
use std::time::{Duration, UNIX_EPOCH};

use crate::forge_support::{
    AZURE_PROJECT, DC_PROJECT, Fault, ForgeServer, GITLAB_PROJECT_ID, GITLAB_PROJECT_PATH, Kind,
    OWNER, OpenPullRequest, REPO,
};
use reconciler::status::{
    AzureDevOps, AzureDevOpsConfig, Backend, Bitbucket, BitbucketConfig, BitbucketDataCenter,
    BitbucketDataCenterConfig, CommentOutcome, CommitStatus, Delivery, GitHub, GitHubConfig,
    GitLab, GitLabConfig, GitLabProject, Gitea, GiteaConfig, PLAN_MARKER, RetryPolicy, StatusState,
    StatusWriter,
};

const TOKEN: &str = "s3cr3t-t0ken-value";
const SHA: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// Short backoff so tests do not sleep for nothing; waits the forge asks for of up to
/// 10 s are slept in place. The holds of a rate limit that names no wait (a minute, then
/// doubling) and of a refused token (five minutes doubling to an hour) are scaled down
/// the same way: 300 ms doubling, 200 ms doubling to 800 ms.
const RATE_LIMIT_WAIT: Duration = Duration::from_millis(300);
const UNAUTHORIZED_WAIT: Duration = Duration::from_millis(200);
const MAX_UNAUTHORIZED_WAIT: Duration = Duration::from_millis(800);

fn policy() -> RetryPolicy {
    RetryPolicy {
        attempts: 3,
        initial: Duration::from_millis(10),
        max_delay: Duration::from_millis(40),
        max_wait: Duration::from_secs(10),
        rate_limit_wait: RATE_LIMIT_WAIT,
        max_rate_limit_wait: Duration::from_secs(5),
        unauthorized_wait: UNAUTHORIZED_WAIT,
        max_unauthorized_wait: MAX_UNAUTHORIZED_WAIT,
    }
}

struct Setup {
    server: ForgeServer,
    writer: StatusWriter,
    token_file: PathBuf,
    _dir: tempfile::TempDir,
}

fn token_file(dir: &tempfile::TempDir, token: &str) -> PathBuf {
    let path = dir.path().join("token");
    std::fs::write(&path, format!("{token}\n")).unwrap();
    path
}

fn backend(kind: Kind, base: &str, token_file: PathBuf) -> Backend {
    match kind {
        Kind::GitHub | Kind::GitHubEnterprise => Backend::GitHub(
            GitHub::new(GitHubConfig::new(OWNER, REPO, token_file).with_api_url(base)).unwrap(),
        ),
        Kind::GitLab => Backend::GitLab(
            GitLab::new(GitLabConfig {
                url: base.to_string(),
                project: GitLabProject::Path(GITLAB_PROJECT_PATH.to_string()),
                token_file,
            })
            .unwrap(),
        ),
        Kind::Gitea => Backend::Gitea(
            Gitea::new(GiteaConfig {
                url: base.to_string(),
                owner: OWNER.to_string(),
                repo: REPO.to_string(),
                token_file,
            })
            .unwrap(),
        ),
        Kind::BitbucketCloud => Backend::BitbucketCloud(
            Bitbucket::new(BitbucketConfig {
                api_url: base.to_string(),
                ..BitbucketConfig::new(OWNER, REPO, token_file)
            })
            .unwrap(),
        ),
        Kind::BitbucketDataCenter => Backend::BitbucketDataCenter(
            BitbucketDataCenter::new(BitbucketDataCenterConfig {
                url: base.to_string(),
                project: DC_PROJECT.to_string(),
                repo: REPO.to_string(),
                token_file,
            })
            .unwrap(),
        ),
        Kind::AzureDevOps => Backend::AzureDevOps(
            AzureDevOps::new(AzureDevOpsConfig {
                url: base.to_string(),
                project: AZURE_PROJECT.to_string(),
                repo: REPO.to_string(),
                token_file,
            })
            .unwrap(),
        ),
    }
}

async fn setup(kind: Kind) -> Setup {
    let server = ForgeServer::start(kind, TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = token_file(&dir, TOKEN);
    let writer = StatusWriter::new(
        backend(kind, &server.base_url(), token_file.clone()),
        policy(),
    );
    Setup {
        server,
        writer,
        token_file,
        _dir: dir,
    }
}

fn status(state: StatusState, description: &str) -> CommitStatus {
    CommitStatus::new(SHA, "kubelet-gitops/gpu", state, description)
}

const ALL: [Kind; 6] = [
    Kind::GitHub,
    Kind::GitLab,
    Kind::Gitea,
    Kind::BitbucketCloud,
    Kind::BitbucketDataCenter,
    Kind::AzureDevOps,
];

fn assert_clean(server: &ForgeServer) {
    let violations = server.violations();
    assert!(violations.is_empty(), "API violations: {violations:#?}");
}

#[tokio::test]
async fn github_pending_then_success() {
    let s = setup(Kind::GitHub).await;
    let pending = status(
        StatusState::Pending,
        "rolling out: 3/10 nodes on kubelet-gpu-9mbkccg2cc",
    )
    .with_target_url("https://grafana.example.com/d/kubelet-gitops");
    let success = status(
        StatusState::Success,
        "10/10 nodes on kubelet-gpu-9mbkccg2cc",
    );
    assert!(matches!(s.writer.post(&pending).await, Delivery::Posted));
    assert!(matches!(s.writer.post(&success).await, Delivery::Posted));
    let got = s.server.statuses();
    assert_eq!(got.len(), 2);
    assert_eq!(
        (
            got[0].state.as_str(),
            got[0].context.as_str(),
            got[0].description.as_str()
        ),
        (
            "pending",
            "kubelet-gitops/gpu",
            "rolling out: 3/10 nodes on kubelet-gpu-9mbkccg2cc"
        )
    );
    assert_eq!(
        got[0].target_url.as_deref(),
        Some("https://grafana.example.com/d/kubelet-gitops")
    );
    assert_eq!(got[1].state, "success");
    assert_eq!(got[1].target_url, None);
    assert!(got.iter().all(|g| g.sha == SHA));
    let paths: Vec<String> = s.server.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        vec![format!("/repos/{OWNER}/{REPO}/statuses/{SHA}"); 2]
    );
    assert_clean(&s.server);
}

#[tokio::test]
async fn gitlab_pending_then_success_maps_states_and_survives_same_state_updates() {
    let s = setup(Kind::GitLab).await;
    let first = status(
        StatusState::Pending,
        "rolling out: 1/10 nodes on kubelet-gpu-9mbkccg2cc",
    );
    let second = status(
        StatusState::Pending,
        "rolling out: 5/10 nodes on kubelet-gpu-9mbkccg2cc",
    );
    let done = status(
        StatusState::Success,
        "10/10 nodes on kubelet-gpu-9mbkccg2cc",
    );
    assert!(matches!(s.writer.post(&first).await, Delivery::Posted));
    // GitLab refuses running -> running (400 "Cannot transition status"); the writer
    // takes it as delivered rather than failing or retrying.
    assert!(matches!(s.writer.post(&second).await, Delivery::Posted));
    assert!(matches!(s.writer.post(&done).await, Delivery::Posted));
    let got = s.server.statuses();
    let states: Vec<&str> = got.iter().map(|g| g.state.as_str()).collect();
    assert_eq!(states, ["running", "success"]);
    assert_eq!(got[0].context, "kubelet-gitops/gpu");
    let answers: Vec<u16> = s.server.requests().iter().map(|r| r.answer).collect();
    assert_eq!(answers, [201, 400, 201]);
    // Error and failure both become `failed`, the reason in the description.
    let error = CommitStatus::new(
        SHA,
        "kubelet-gitops",
        StatusState::Error,
        "pools/gpu.yaml:12: unknown field `maxPod`",
    );
    assert!(matches!(s.writer.post(&error).await, Delivery::Posted));
    let last = s.server.statuses().pop().unwrap();
    assert_eq!(
        (
            last.state.as_str(),
            last.context.as_str(),
            last.description.as_str()
        ),
        (
            "failed",
            "kubelet-gitops",
            "pools/gpu.yaml:12: unknown field `maxPod`"
        )
    );
    assert_clean(&s.server);
}

#[tokio::test]
async fn gitea_pending_then_success() {
    let s = setup(Kind::Gitea).await;
    assert!(matches!(
        s.writer
            .post(&status(
                StatusState::Pending,
                "canary: 1/10 nodes on kubelet-gpu-x (2 canary)"
            ))
            .await,
        Delivery::Posted
    ));
    assert!(matches!(
        s.writer
            .post(&status(
                StatusState::Failure,
                "node-7 rolled back: kubelet unhealthy"
            ))
            .await,
        Delivery::Posted
    ));
    let states: Vec<String> = s.server.statuses().into_iter().map(|g| g.state).collect();
    assert_eq!(states, ["pending", "failure"]);
    assert_eq!(
        s.server.requests()[0].path,
        format!("/api/v1/repos/{OWNER}/{REPO}/statuses/{SHA}")
    );
    assert_clean(&s.server);
}

#[tokio::test]
async fn identical_statuses_are_posted_once_per_forge() {
    for kind in ALL {
        let s = setup(kind).await;
        let pending = status(
            StatusState::Pending,
            "rolling out: 3/10 nodes on kubelet-gpu-x",
        );
        assert!(
            matches!(s.writer.post(&pending).await, Delivery::Posted),
            "{kind:?}"
        );
        for _ in 0..3 {
            assert!(
                matches!(s.writer.post(&pending).await, Delivery::Unchanged),
                "{kind:?}"
            );
        }
        assert_eq!(s.server.requests().len(), 1, "{kind:?}");
        assert_eq!(s.server.statuses().len(), 1, "{kind:?}");
        assert_clean(&s.server);
    }
}

#[tokio::test]
async fn descriptions_are_cut_to_each_forge_limit() {
    // 300 characters, multi-byte ones included.
    let long = format!("node-7 rolled back: {}", "kubelet → unhealthy; ".repeat(14));
    assert!(long.chars().count() > 255);
    for (kind, limit) in [
        (Kind::GitHub, 140),
        (Kind::GitLab, 255),
        (Kind::Gitea, 255),
        (Kind::BitbucketCloud, 255),
        (Kind::BitbucketDataCenter, 255),
        (Kind::AzureDevOps, 255),
    ] {
        let s = setup(kind).await;
        assert!(
            matches!(
                s.writer.post(&status(StatusState::Failure, &long)).await,
                Delivery::Posted
            ),
            "{kind:?}"
        );
        let got = s.server.statuses();
        let description = &got[0].description;
        assert_eq!(
            description.chars().count(),
            limit,
            "{kind:?}: {description}"
        );
        assert!(description.ends_with('…'), "{kind:?}");
        let kept = description.trim_end_matches('…');
        assert!(long.starts_with(kept), "{kind:?}");
        assert_clean(&s.server);
    }
}

#[tokio::test]
async fn a_wrong_token_holds_the_forge_and_a_fixed_file_is_picked_up_at_once() {
    for kind in ALL {
        let s = setup(kind).await;
        std::fs::write(&s.token_file, "not-the-token\n").unwrap();
        let pending = status(
            StatusState::Pending,
            "rolling out: 1/2 nodes on kubelet-gpu-x",
        );
        let Delivery::Queued { reason } = s.writer.post(&pending).await else {
            panic!("{kind:?}: a refused token keeps the status in the outbox");
        };
        assert!(reason.contains("answered 401"), "{kind:?}: {reason}");
        assert!(
            !reason.contains("not-the-token") && !reason.contains(TOKEN),
            "{reason}"
        );
        // 401 is not retried in place, and holds every request to the forge.
        assert_eq!(s.server.requests().len(), 1, "{kind:?}");
        let success = status(StatusState::Success, "2/2 nodes on kubelet-gpu-x");
        let Delivery::Queued { reason } = s.writer.post(&success).await else {
            panic!("{kind:?}: held");
        };
        assert!(reason.contains("refused the token"), "{kind:?}: {reason}");
        assert_eq!(
            s.server.requests().len(),
            1,
            "{kind:?}: nothing sent while held"
        );
        assert_eq!(
            s.writer.queued(),
            std::slice::from_ref(&success),
            "the newest only"
        );
        // The token is read at each request: a fixed file lifts the hold at once.
        std::fs::write(&s.token_file, format!("{TOKEN}\n")).unwrap();
        let report = s.writer.flush().await;
        assert_eq!((report.delivered, report.still_queued), (1, 0), "{kind:?}");
        let got = s.server.statuses();
        assert_eq!(got.len(), 1, "{kind:?}");
        assert_eq!(got[0].description, success.description);
        assert_clean(&s.server);
        let debug = format!("{:?}", s.writer);
        assert!(!debug.contains(TOKEN), "{debug}");
    }
}

/// A wrong token, rounds of statuses and flushes every 50 ms for 3 s: the forge gets a
/// request when each hold ends (200 ms doubling to 800 ms here; 5 minutes doubling to an
/// hour by default), not every round. Before, every status of every round was sent (120
/// requests for this span).
#[tokio::test]
async fn a_refused_token_costs_a_bounded_number_of_requests() {
    for kind in [Kind::GitHub, Kind::Gitea] {
        let s = setup(kind).await;
        std::fs::write(&s.token_file, "revoked\n").unwrap();
        let span = Duration::from_secs(3);
        let start = std::time::Instant::now();
        let mut round = 0;
        while start.elapsed() < span {
            round += 1;
            let deliveries = s
                .writer
                .post_all(&[
                    status(
                        StatusState::Pending,
                        &format!("rolling out: {round}/90 nodes"),
                    ),
                    CommitStatus::new(SHA, "kubelet-gitops", StatusState::Pending, "1 pool"),
                ])
                .await;
            assert!(
                deliveries
                    .iter()
                    .all(|d| matches!(d, Delivery::Queued { .. } | Delivery::Unchanged)),
                "{kind:?}: {deliveries:?}"
            );
            s.writer.flush().await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let requests = s.server.requests();
        assert!(requests.iter().all(|r| r.answer == 401), "{kind:?}");
        // At 0, 0.2, 0.6, 1.4, 2.2 and 3.0 s at most; one more for the loop's slack.
        assert!(
            (2..=7).contains(&requests.len()),
            "{kind:?}: {} requests in {round} rounds",
            requests.len()
        );
        // Consecutive refusals are at least the growing hold apart.
        let mut hold = UNAUTHORIZED_WAIT;
        for pair in requests.windows(2) {
            let gap = pair[1].at.duration_since(pair[0].at);
            assert!(gap >= hold, "{kind:?}: {gap:?} < {hold:?}");
            hold = (hold * 2).min(MAX_UNAUTHORIZED_WAIT);
        }
        assert_eq!(s.writer.queued().len(), 2, "the newest per context waits");
        assert_clean(&s.server);
    }
}

#[tokio::test]
async fn an_unknown_repository_is_not_retried() {
    let server = ForgeServer::start(Kind::GitHub, TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let github = GitHub::new(
        GitHubConfig::new(OWNER, "no-such-repo", token_file(&dir, TOKEN))
            .with_api_url(server.base_url()),
    )
    .unwrap();
    let writer = StatusWriter::new(Backend::GitHub(github), policy());
    let Delivery::Rejected(error) = writer
        .post(&status(StatusState::Success, "1/1 nodes"))
        .await
    else {
        panic!("expected a rejection");
    };
    assert_eq!(error.http_status(), Some(404));
    assert!(error.to_string().contains("Not Found"), "{error}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn github_enterprise_base_url() {
    let s = setup(Kind::GitHubEnterprise).await;
    assert!(s.server.base_url().ends_with("/api/v3"));
    assert!(matches!(
        s.writer
            .post(&status(
                StatusState::Success,
                "10/10 nodes on kubelet-gpu-x"
            ))
            .await,
        Delivery::Posted
    ));
    assert_eq!(
        s.server.requests()[0].path,
        format!("/api/v3/repos/{OWNER}/{REPO}/statuses/{SHA}")
    );
    assert_eq!(s.server.statuses().len(), 1);
    assert_clean(&s.server);
}

#[tokio::test]
async fn gitlab_project_by_path_is_url_encoded_and_by_id_is_plain() {
    let server = ForgeServer::start(Kind::GitLab, TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let tokens = token_file(&dir, TOKEN);
    for (project, segment) in [
        (
            GitLabProject::parse(GITLAB_PROJECT_PATH),
            "platform%2Fk8s%2Fcluster-config".to_string(),
        ),
        (
            GitLabProject::parse(&GITLAB_PROJECT_ID.to_string()),
            GITLAB_PROJECT_ID.to_string(),
        ),
    ] {
        let gitlab = GitLab::new(GitLabConfig {
            url: server.base_url(),
            project,
            token_file: tokens.clone(),
        })
        .unwrap();
        let writer = StatusWriter::new(Backend::GitLab(gitlab), policy());
        assert!(matches!(
            writer
                .post(&status(StatusState::Success, "2/2 nodes"))
                .await,
            Delivery::Posted
        ));
        let last = server.requests().pop().unwrap();
        assert_eq!(
            last.path,
            format!("/api/v4/projects/{segment}/statuses/{SHA}")
        );
    }
    assert_clean(&server);
}

#[tokio::test]
async fn an_outage_loses_no_final_status() {
    for kind in ALL {
        let s = setup(kind).await;
        s.server.set_down(true);
        let pending = status(
            StatusState::Pending,
            "rolling out: 3/10 nodes on kubelet-gpu-x",
        );
        let success = status(StatusState::Success, "10/10 nodes on kubelet-gpu-x");
        assert!(
            matches!(s.writer.post(&pending).await, Delivery::Queued { .. }),
            "{kind:?}"
        );
        assert!(
            matches!(s.writer.post(&success).await, Delivery::Queued { .. }),
            "{kind:?}"
        );
        // Each post was tried the policy's 3 times.
        assert_eq!(s.server.requests().len(), 6, "{kind:?}");
        assert!(s.requests_all_answered(500));
        // Only the latest wanted status per commit and context waits.
        let queued = s.writer.queued();
        assert_eq!(queued.len(), 1);
        assert_eq!(queued[0].state, StatusState::Success);
        let report = s.writer.flush().await;
        assert_eq!((report.delivered, report.still_queued), (0, 1), "{kind:?}");

        s.server.set_down(false);
        let report = s.writer.flush().await;
        assert_eq!((report.delivered, report.still_queued), (1, 0), "{kind:?}");
        let got = s.server.statuses();
        assert_eq!(got.len(), 1, "{kind:?}: only the final status is delivered");
        assert_eq!(got[0].description, "10/10 nodes on kubelet-gpu-x");
        assert!(s.writer.queued().is_empty());
        // Delivered means remembered: posting it again sends nothing.
        let before = s.server.requests().len();
        assert!(matches!(s.writer.post(&success).await, Delivery::Unchanged));
        assert_eq!(s.server.requests().len(), before);
        assert_clean(&s.server);
    }
}

#[tokio::test]
async fn a_brief_outage_is_retried_within_one_post() {
    let s = setup(Kind::Gitea).await;
    s.server.inject([Fault::ServerError, Fault::ServerError]);
    assert!(matches!(
        s.writer
            .post(&status(StatusState::Success, "1/1 nodes"))
            .await,
        Delivery::Posted
    ));
    let answers: Vec<u16> = s.server.requests().iter().map(|r| r.answer).collect();
    assert_eq!(answers, [500, 500, 201]);
    assert_clean(&s.server);
}

#[tokio::test]
async fn a_round_is_one_request_per_status_that_changed() {
    for kind in ALL {
        let s = setup(kind).await;
        let gpu = status(
            StatusState::Pending,
            "rolling out: 1/2 nodes on kubelet-gpu-x",
        );
        let cpu = CommitStatus::new(
            SHA,
            "kubelet-gitops/cpu",
            StatusState::Success,
            "2/2 nodes on kubelet-cpu-y",
        );
        let summary = CommitStatus::new(
            SHA,
            "kubelet-gitops",
            StatusState::Pending,
            "2 pools: 1 in progress, 1 done",
        );
        // The first request meets a brief outage: that status alone is retried, after
        // the others of the round were sent.
        s.server.inject([Fault::ServerError]);
        let deliveries = s
            .writer
            .post_all(&[gpu.clone(), cpu.clone(), summary.clone()])
            .await;
        assert!(
            deliveries.iter().all(|d| matches!(d, Delivery::Posted)),
            "{kind:?}: {deliveries:?}"
        );
        let answers: Vec<u16> = s.server.requests().iter().map(|r| r.answer).collect();
        assert_eq!(answers.len(), 4, "{kind:?}: {answers:?}");
        assert_eq!(answers[0], 500, "{kind:?}");
        assert!(
            answers[1..].iter().all(|a| (200..300).contains(a)),
            "{kind:?}: {answers:?}"
        );
        let contexts: Vec<String> = s
            .server
            .statuses()
            .iter()
            .map(|g| g.context.clone())
            .collect();
        assert_eq!(
            contexts,
            ["kubelet-gitops/cpu", "kubelet-gitops", "kubelet-gitops/gpu"],
            "{kind:?}: the failed one does not hold back the others"
        );
        // The next round sends only what changed.
        let gpu_done = status(StatusState::Success, "2/2 nodes on kubelet-gpu-x");
        let summary_done = CommitStatus::new(
            SHA,
            "kubelet-gitops",
            StatusState::Success,
            "2 pools: 2 done",
        );
        let deliveries = s
            .writer
            .post_all(&[gpu_done, cpu.clone(), summary_done])
            .await;
        assert!(
            matches!(
                deliveries.as_slice(),
                [Delivery::Posted, Delivery::Unchanged, Delivery::Posted]
            ),
            "{kind:?}: {deliveries:?}"
        );
        assert_eq!(s.server.requests().len(), 6, "{kind:?}");
        assert_clean(&s.server);
    }
}

#[tokio::test]
async fn retry_after_is_honoured() {
    for kind in ALL {
        let s = setup(kind).await;
        s.server.inject([Fault::RetryAfter(1)]);
        assert!(
            matches!(
                s.writer
                    .post(&status(StatusState::Success, "1/1 nodes"))
                    .await,
                Delivery::Posted
            ),
            "{kind:?}"
        );
        let requests = s.server.requests();
        assert_eq!(requests.len(), 2, "{kind:?}");
        assert_eq!(requests[0].answer, 429, "{kind:?}");
        assert!((200..300).contains(&requests[1].answer), "{kind:?}");
        let waited = requests[1].at.duration_since(requests[0].at);
        assert!(
            waited >= Duration::from_secs(1),
            "{kind:?}: retried after {waited:?}"
        );
        assert_clean(&s.server);
    }
}

#[tokio::test]
async fn github_rate_limit_waits_for_the_reset() {
    let s = setup(Kind::GitHub).await;
    s.server.inject([Fault::GitHubRateLimit { reset_in: 0 }]);
    assert!(matches!(
        s.writer
            .post(&status(StatusState::Success, "1/1 nodes"))
            .await,
        Delivery::Posted
    ));
    let requests = s.server.requests();
    assert_eq!((requests[0].answer, requests[1].answer), (403, 201));
    let reset = UNIX_EPOCH + Duration::from_secs(s.server.announced_resets()[0].unix_secs);
    assert!(
        requests[1].wall >= reset,
        "retried at {:?}, before the announced reset {reset:?}",
        requests[1].wall
    );
    assert_clean(&s.server);
}

#[tokio::test]
async fn gitlab_rate_limit_waits_for_the_reset() {
    let s = setup(Kind::GitLab).await;
    s.server.inject([Fault::GitLabRateLimit { reset_in: 0 }]);
    assert!(matches!(
        s.writer
            .post(&status(StatusState::Success, "1/1 nodes"))
            .await,
        Delivery::Posted
    ));
    let requests = s.server.requests();
    assert_eq!((requests[0].answer, requests[1].answer), (429, 201));
    let reset = UNIX_EPOCH + Duration::from_secs(s.server.announced_resets()[0].unix_secs);
    assert!(
        requests[1].wall >= reset,
        "retried before the announced reset"
    );
    assert_clean(&s.server);
}

/// GitHub's secondary rate limit (a 403 saying so, calls left on the primary limit, no
/// `Retry-After`) and a bare 429: the next request waits at least the policy's first
/// hold (a minute by default), the one after that twice as long. Before, a bare 429 was
/// retried after the ordinary backoff (10 ms here, 0.5 s by default) and the secondary
/// 403 was not retried at all.
#[tokio::test]
async fn rate_limits_that_name_no_wait_hold_at_least_a_minute_then_longer() {
    for (kind, fault) in [
        (
            Kind::GitHub,
            Fault::GitHubSecondaryRateLimit { retry_after: None },
        ),
        (Kind::GitHub, Fault::TooManyRequests),
        (Kind::GitLab, Fault::TooManyRequests),
        (Kind::Gitea, Fault::TooManyRequests),
    ] {
        let s = setup(kind).await;
        s.server.inject([fault, fault]);
        let delivery = s
            .writer
            .post(&status(StatusState::Success, "1/1 nodes"))
            .await;
        assert!(
            matches!(delivery, Delivery::Posted),
            "{kind:?} {fault:?}: {delivery:?}"
        );
        let requests = s.server.requests();
        let answers: Vec<u16> = requests.iter().map(|r| r.answer).collect();
        assert_eq!(answers[..2], [answers[0]; 2], "{kind:?} {fault:?}");
        assert!(answers[0] == 403 || answers[0] == 429);
        assert_eq!(answers[2], 201, "{kind:?} {fault:?}");
        let first = requests[1].at.duration_since(requests[0].at);
        let second = requests[2].at.duration_since(requests[1].at);
        assert!(first >= RATE_LIMIT_WAIT, "{kind:?} {fault:?}: {first:?}");
        assert!(
            second >= RATE_LIMIT_WAIT * 2,
            "{kind:?} {fault:?}: {second:?}"
        );
        assert_clean(&s.server);
    }
}

/// A secondary rate limit with `Retry-After`: that wait, as the forge asks.
#[tokio::test]
async fn a_secondary_rate_limit_with_retry_after_is_honoured() {
    let s = setup(Kind::GitHub).await;
    s.server.inject([Fault::GitHubSecondaryRateLimit {
        retry_after: Some(1),
    }]);
    assert!(matches!(
        s.writer
            .post(&status(StatusState::Success, "1/1 nodes"))
            .await,
        Delivery::Posted
    ));
    let requests = s.server.requests();
    assert_eq!((requests[0].answer, requests[1].answer), (403, 201));
    assert!(requests[1].at.duration_since(requests[0].at) >= Duration::from_secs(1));
    assert_clean(&s.server);
}

/// A status waiting out its backoff after a passing failure holds back no other: while
/// it sleeps, another post goes out at once (it used to wait for the sleeping one).
#[tokio::test]
async fn a_status_in_backoff_holds_back_no_other() {
    let server = ForgeServer::start(Kind::GitHub, TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let slow = RetryPolicy {
        initial: Duration::from_secs(60),
        max_delay: Duration::from_secs(60),
        ..policy()
    };
    let writer = std::sync::Arc::new(StatusWriter::new(
        backend(Kind::GitHub, &server.base_url(), token_file(&dir, TOKEN)),
        slow,
    ));
    server.inject([Fault::ServerError]);
    let first = tokio::spawn({
        let writer = writer.clone();
        async move {
            writer
                .post(&status(StatusState::Success, "3/3 nodes"))
                .await
        }
    });
    while server.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let other = CommitStatus::new(SHA, "kubelet-gitops", StatusState::Success, "1 pool");
    assert!(matches!(writer.post(&other).await, Delivery::Posted));
    let answers: Vec<(u16, String)> = server
        .requests()
        .iter()
        .map(|r| (r.answer, r.path.clone()))
        .collect();
    assert_eq!(
        answers.len(),
        2,
        "the first is still in its backoff: {answers:?}"
    );
    assert_eq!((answers[0].0, answers[1].0), (500, 201));
    assert_eq!(server.statuses()[0].context, "kubelet-gitops");
    first.abort();
    assert_clean(&server);
}

#[tokio::test]
async fn a_long_rate_limit_queues_and_sends_nothing_until_it_ends() {
    let s = setup(Kind::GitHub).await;
    s.server.inject([Fault::RetryAfter(3600)]);
    let pending = status(StatusState::Pending, "rolling out: 1/2 nodes");
    let Delivery::Queued { reason } = s.writer.post(&pending).await else {
        panic!("expected the status to be queued");
    };
    assert!(reason.contains("429"), "{reason}");
    let success = status(StatusState::Success, "2/2 nodes");
    assert!(matches!(
        s.writer.post(&success).await,
        Delivery::Queued { .. }
    ));
    assert_eq!(s.writer.flush().await.still_queued, 1);
    // One request: the one that was told to wait an hour.
    assert_eq!(s.server.requests().len(), 1);
    assert_eq!(s.writer.queued(), vec![success]);
}

#[tokio::test]
async fn plan_comments_are_created_then_updated_in_place() {
    for (kind, pr, others) in [
        (Kind::GitHub, 7, 150),
        (Kind::GitLab, 3, 120),
        (Kind::Gitea, 5, 4),
        // Cloud: ours on the third page of `next` links; Data Center: two pages of
        // activities searched before ours is created (then it comes first, newest);
        // Azure DevOps: threads, a system one carrying the marker among them.
        (Kind::BitbucketCloud, 11, 230),
        (Kind::BitbucketDataCenter, 12, 130),
        (Kind::AzureDevOps, 13, 4),
    ] {
        let s = setup(kind).await;
        // Someone else's comments come first; on GitHub and GitLab ours is then on
        // the second page.
        s.server
            .seed_comments(pr, (0..others).map(|i| format!("LGTM #{i}")));
        if matches!(kind, Kind::GitLab | Kind::AzureDevOps) {
            s.server
                .seed_system_note(pr, &format!("added 1 commit {PLAN_MARKER} (system)"));
        }
        let first = s
            .writer
            .comment(pr, "## kubelet-gitops plan\n1 pool changes")
            .await
            .unwrap();
        let CommentOutcome::Created(id) = first else {
            panic!("{kind:?}: {first:?}");
        };
        assert_eq!(
            s.writer
                .comment(pr, "## kubelet-gitops plan\n1 pool changes")
                .await
                .unwrap(),
            CommentOutcome::Unchanged(id),
            "{kind:?}"
        );
        assert_eq!(
            s.writer
                .comment(pr, "## kubelet-gitops plan\n2 pools change")
                .await
                .unwrap(),
            CommentOutcome::Updated(id),
            "{kind:?}"
        );
        let ours: Vec<(u64, String)> = s
            .server
            .comments(pr)
            .into_iter()
            .filter(|(_, body)| body.starts_with(PLAN_MARKER))
            .collect();
        assert_eq!(ours.len(), 1, "{kind:?}: {ours:?}");
        assert_eq!(
            ours[0],
            (
                id,
                format!("{PLAN_MARKER}\n## kubelet-gitops plan\n2 pools change")
            )
        );
        assert_clean(&s.server);
    }
}

#[tokio::test]
async fn a_comment_create_whose_answer_is_lost_is_not_duplicated() {
    for kind in ALL {
        let s = setup(kind).await;
        // The forge creates the comment but the answer never arrives (502): the retry
        // lists again, finds it, and leaves it as it is.
        s.server.inject_on("POST", Fault::LostAnswer);
        let outcome = s.writer.comment(9, "plan").await.unwrap();
        let comments = s.server.comments(9);
        assert_eq!(comments.len(), 1, "{kind:?}: {comments:?}");
        assert_eq!(
            outcome,
            CommentOutcome::Unchanged(comments[0].0),
            "{kind:?}"
        );
        let methods: Vec<String> = s
            .server
            .requests()
            .iter()
            .map(|r| r.method.clone())
            .collect();
        assert_eq!(methods, ["GET", "POST", "GET"], "{kind:?}");
        assert_clean(&s.server);
    }
}

/// The checking server is only worth something if it catches mistakes: requests that
/// break each forge's documented API are recorded as violations and refused.
#[tokio::test]
async fn the_test_forge_catches_api_violations() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().user_agent("t").build().unwrap();
    let github = ForgeServer::start(Kind::GitHub, TOKEN).await;
    let url = format!("{}/repos/{OWNER}/{REPO}/statuses/{SHA}", github.base_url());
    let good_headers = |r: reqwest::RequestBuilder| {
        r.header("authorization", format!("Bearer {TOKEN}"))
            .header("accept", "application/vnd.github+json")
            .header("x-github-api-version", "2022-11-28")
            .header("content-type", "application/json")
    };
    let bad_bodies = [
        r#"{"state":"running","context":"c"}"#.to_string(),
        format!(
            r#"{{"state":"success","description":"{}"}}"#,
            "x".repeat(141)
        ),
        r#"{"state":"success","name":"c"}"#.to_string(),
        r#"{"description":"no state"}"#.to_string(),
        r#"["not","an","object"]"#.to_string(),
    ];
    for body in &bad_bodies {
        let answer = good_headers(client.post(&url))
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let code = answer.status().as_u16();
        assert!(code == 422 || code == 400, "{body}: {code}");
    }
    // Missing API version, and a form body.
    let answer = client
        .post(&url)
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("accept", "application/vnd.github+json")
        .header("content-type", "application/x-www-form-urlencoded")
        .body("state=success")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 400);
    // `token` is Gitea's scheme, not the one we promise for GitHub.
    let answer = client
        .post(&url)
        .header("authorization", format!("token {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 400);
    // A well-formed request with a valid body is accepted.
    let answer = good_headers(client.post(&url))
        .body(r#"{"state":"success","context":"c","description":"ok"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 201);
    assert_eq!(github.violations().len(), bad_bodies.len() + 2);
    assert_eq!(github.statuses().len(), 1);

    let gitlab = ForgeServer::start(Kind::GitLab, TOKEN).await;
    // An unencoded project path does not match the API's path shape.
    let answer = client
        .post(format!(
            "{}/api/v4/projects/{GITLAB_PROJECT_PATH}/statuses/{SHA}",
            gitlab.base_url()
        ))
        .header("private-token", TOKEN)
        .header("content-type", "application/json")
        .body(r#"{"state":"success","name":"c"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 404);
    // GitLab has no `error` state.
    let answer = client
        .post(format!(
            "{}/api/v4/projects/{GITLAB_PROJECT_ID}/statuses/{SHA}",
            gitlab.base_url()
        ))
        .header("private-token", TOKEN)
        .header("content-type", "application/json")
        .body(r#"{"state":"error","name":"c"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 400);
    assert_eq!(gitlab.violations().len(), 2);

    let gitea = ForgeServer::start(Kind::Gitea, TOKEN).await;
    let answer = client
        .post(format!(
            "{}/api/v1/repos/{OWNER}/{REPO}/statuses/{SHA}",
            gitea.base_url()
        ))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .body(r#"{"state":"success","context":"c"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 400);
    assert_eq!(gitea.violations().len(), 1);
}

impl Setup {
    fn requests_all_answered(&self, status: u16) -> bool {
        self.server.requests().iter().all(|r| r.answer == status)
    }
}

/// Bitbucket Cloud: our states as Bitbucket's, the context as `key` and `name`, the
/// commit's page as the required `url`, and a status that replaces its key's.
#[tokio::test]
async fn bitbucket_cloud_maps_states_and_updates_each_key_in_place() {
    let s = setup(Kind::BitbucketCloud).await;
    let summary = CommitStatus::new(
        SHA,
        "kubelet-gitops",
        StatusState::Error,
        "pools/gpu.yaml:3: unknown field",
    );
    let round = [
        status(StatusState::Pending, "rolling out: 1/3 nodes"),
        summary.clone(),
    ];
    for d in s.writer.post_all(&round).await {
        assert!(matches!(d, Delivery::Posted), "{d:?}");
    }
    let linked = status(StatusState::Success, "3/3 nodes")
        .with_target_url("https://grafana.example.com/d/kubelet");
    assert!(matches!(s.writer.post(&linked).await, Delivery::Posted));
    let all = s.server.statuses();
    let states: Vec<&str> = all.iter().map(|g| g.state.as_str()).collect();
    assert_eq!(states, ["INPROGRESS", "FAILED", "SUCCESSFUL"]);
    assert_eq!(all[0].name.as_deref(), Some("kubelet-gitops/gpu"));
    assert_eq!(
        all[0].target_url.as_deref(),
        Some(format!("https://bitbucket.org/{OWNER}/{REPO}/commits/{SHA}").as_str()),
        "no target URL: the commit's page, since Bitbucket requires one"
    );
    assert_eq!(
        all[2].target_url.as_deref(),
        Some("https://grafana.example.com/d/kubelet")
    );
    // What Bitbucket shows: one status per key, the newest.
    let shown: Vec<(String, String)> = s
        .server
        .shown()
        .into_iter()
        .map(|g| (g.context, g.state))
        .collect();
    assert_eq!(
        shown,
        [
            ("kubelet-gitops/gpu".to_string(), "SUCCESSFUL".to_string()),
            ("kubelet-gitops".to_string(), "FAILED".to_string())
        ]
    );
    assert_eq!(
        s.server.requests()[0].path,
        format!("/2.0/repositories/{OWNER}/{REPO}/commit/{SHA}/statuses/build")
    );
    assert_clean(&s.server);
}

/// Bitbucket Cloud publishes no pull-request refs: review lists the open pull requests.
/// Every page is read (50 a page, `next` followed), each with its 12-digit short hash,
/// its source branch and repository (a fork tells) and its destination; a refused token
/// holds the forge, and a listing meanwhile asks nothing.
#[tokio::test]
async fn bitbucket_cloud_lists_open_pull_requests_page_by_page() {
    let s = setup(Kind::BitbucketCloud).await;
    assert!(s.writer.backend().lists_pull_requests());
    assert_eq!(s.writer.open_pull_requests().await.unwrap(), Some(vec![]));
    let mut prs: Vec<OpenPullRequest> = (1..=52)
        .map(|id| OpenPullRequest::new(id, &format!("feature-{id}"), SHA, "main"))
        .collect();
    prs.push(OpenPullRequest::new(53, "main", SHA, "main").in_fork("someone/cluster-config"));
    prs.push(OpenPullRequest::new(54, "hotfix", SHA, "staging"));
    s.server.set_pull_requests(prs);

    let listed = s.writer.open_pull_requests().await.unwrap().unwrap();
    assert_eq!(listed.len(), 54);
    let ids: Vec<u64> = listed.iter().map(|p| p.id).collect();
    assert_eq!(ids, (1..=54).collect::<Vec<_>>());
    assert_eq!(
        listed[0].source_commit,
        &SHA[..12],
        "Bitbucket's short hash"
    );
    assert_eq!(listed[0].source_branch, "feature-1");
    assert!(listed[0].same_repository && listed[0].destination_branch == "main");
    assert!(!listed[52].same_repository, "{:?}", listed[52]);
    assert_eq!(listed[52].source_repository, "someone/cluster-config");
    assert_eq!(listed[53].destination_branch, "staging");
    let paths: Vec<String> = s.server.requests().into_iter().map(|r| r.path).collect();
    let base = format!("/2.0/repositories/{OWNER}/{REPO}/pullrequests?state=OPEN&pagelen=50");
    assert_eq!(paths[1..], [base.clone(), format!("{base}&page=2")]);

    // A refused token holds the forge: the next listing sends nothing.
    std::fs::write(&s.token_file, "wrong-token\n").unwrap();
    let e = s.writer.open_pull_requests().await.unwrap_err();
    assert_eq!(e.http_status(), Some(401), "{e}");
    let sent = s.server.requests().len();
    assert_eq!(s.writer.open_pull_requests().await.unwrap(), None);
    assert_eq!(s.server.requests().len(), sent, "nothing sent while held");
    assert_clean(&s.server);
}

/// Other forges publish pull-request refs: nothing is listed.
#[tokio::test]
async fn only_bitbucket_cloud_lists_pull_requests() {
    for kind in [Kind::GitHub, Kind::BitbucketDataCenter, Kind::AzureDevOps] {
        let s = setup(kind).await;
        assert!(!s.writer.backend().lists_pull_requests(), "{kind:?}");
        assert_eq!(s.writer.open_pull_requests().await.unwrap(), Some(vec![]));
        assert!(s.server.requests().is_empty(), "{kind:?}");
    }
}

/// A context longer than Bitbucket Cloud's 40-character key is shortened with a hash:
/// the forge takes it (it refuses 41 characters, see the violations test), the same
/// context keeps its key, and `name` shows it whole.
#[tokio::test]
async fn bitbucket_cloud_long_contexts_get_a_hashed_key_of_40() {
    let s = setup(Kind::BitbucketCloud).await;
    let pool = "gpu-a100-80gb-nvlink-west-europe-2";
    let context = format!("kubelet-gitops/{pool}");
    assert!(context.len() > 40);
    let pending = CommitStatus::new(SHA, &context, StatusState::Pending, "1/2 nodes");
    let done = CommitStatus::new(SHA, &context, StatusState::Success, "2/2 nodes");
    let other = CommitStatus::new(
        SHA,
        format!("{context}-b"),
        StatusState::Success,
        "1/1 nodes",
    );
    for st in [&pending, &done, &other] {
        assert!(matches!(s.writer.post(st).await, Delivery::Posted));
    }
    let all = s.server.statuses();
    assert_eq!(all[0].context.chars().count(), 40, "{}", all[0].context);
    assert!(all[0].context.starts_with("kubelet-gitops/gpu-a100-80"));
    assert_eq!(
        all[0].context, all[1].context,
        "the same context, the same key"
    );
    assert_ne!(
        all[2].context, all[0].context,
        "another context, another key"
    );
    assert_eq!(all[0].name.as_deref(), Some(context.as_str()));
    let shown = s.server.shown();
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert_eq!(shown[0].state, "SUCCESSFUL");
    assert_clean(&s.server);
}

/// Bitbucket Data Center under a context path, with a `user:password` token file sent
/// as Basic; `error` is `FAILED`.
#[tokio::test]
async fn bitbucket_data_center_under_a_context_path_with_basic_auth() {
    let server = ForgeServer::start(Kind::BitbucketDataCenter, "ci-bot:pa55w0rd").await;
    let dir = tempfile::tempdir().unwrap();
    let writer = StatusWriter::new(
        backend(
            Kind::BitbucketDataCenter,
            &server.base_url(),
            token_file(&dir, "ci-bot:pa55w0rd"),
        ),
        policy(),
    );
    let invalid = CommitStatus::new(
        SHA,
        "kubelet-gitops",
        StatusState::Error,
        "pools/gpu.yaml:12: unknown field maxPod",
    );
    assert!(matches!(writer.post(&invalid).await, Delivery::Posted));
    assert!(matches!(
        writer
            .post(&status(StatusState::Pending, "canary: 1/4 nodes"))
            .await,
        Delivery::Posted
    ));
    let all = server.statuses();
    let got: Vec<(&str, &str)> = all
        .iter()
        .map(|g| (g.context.as_str(), g.state.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("kubelet-gitops", "FAILED"),
            ("kubelet-gitops/gpu", "INPROGRESS")
        ]
    );
    assert_eq!(
        all[0].target_url.as_deref(),
        Some(
            format!(
                "{}/projects/{DC_PROJECT}/repos/{REPO}/commits/{SHA}",
                server.base_url()
            )
            .as_str()
        )
    );
    assert_eq!(
        server.requests()[0].path,
        format!(
            "/bitbucket/rest/api/latest/projects/{DC_PROJECT}/repos/{REPO}/commits/{SHA}/builds"
        )
    );
    assert!(server.requests().iter().all(|r| r.answer == 204));
    assert_clean(&server);
}

/// Azure DevOps: `genre/name` contexts, its state names, `targetUrl`, `api-version`;
/// every status is kept and the newest of a context is shown.
#[tokio::test]
async fn azure_devops_contexts_states_and_api_version() {
    let s = setup(Kind::AzureDevOps).await;
    let posts = [
        status(StatusState::Pending, "rolling out: 1/3 nodes")
            .with_target_url("https://grafana.example.com/d/kubelet"),
        status(StatusState::Failure, "gpu-1 rolled back: kubelet unhealthy"),
        CommitStatus::new(
            SHA,
            "kubelet-gitops",
            StatusState::Error,
            "pools/gpu.yaml:1: bad",
        ),
        CommitStatus::new(SHA, "kubelet-gitops/cpu", StatusState::Success, "2/2 nodes"),
    ];
    for st in &posts {
        assert!(matches!(s.writer.post(st).await, Delivery::Posted));
    }
    let got: Vec<(String, String)> = s
        .server
        .statuses()
        .into_iter()
        .map(|g| (g.context, g.state))
        .collect();
    let want = [
        ("kubelet-gitops/gpu", "pending"),
        ("kubelet-gitops/gpu", "failed"),
        ("kubelet-gitops", "error"),
        ("kubelet-gitops/cpu", "succeeded"),
    ];
    assert_eq!(got, want.map(|(c, st)| (c.to_string(), st.to_string())));
    assert_eq!(
        s.server.statuses()[0].target_url.as_deref(),
        Some("https://grafana.example.com/d/kubelet")
    );
    assert_eq!(s.server.shown().len(), 3);
    assert_eq!(
        s.server.requests()[0].path,
        format!(
            "/acme/{AZURE_PROJECT}/_apis/git/repositories/{REPO}/commits/{SHA}/statuses?api-version=7.1"
        )
    );
    assert_clean(&s.server);
}

/// Azure DevOps may answer a token it does not take with 203 and its sign-in page: that
/// is a refused token (held, queued), never a delivered status.
#[tokio::test]
async fn an_azure_sign_in_page_is_a_refused_token() {
    let s = setup(Kind::AzureDevOps).await;
    s.server.inject([Fault::AzureSignInPage]);
    let st = status(StatusState::Success, "3/3 nodes");
    let Delivery::Queued { reason } = s.writer.post(&st).await else {
        panic!("a 203 sign-in page must not count as delivered");
    };
    assert!(reason.contains("203"), "{reason}");
    assert!(reason.contains("token was not accepted"), "{reason}");
    assert!(s.server.statuses().is_empty());
    assert_eq!(s.writer.queued(), vec![st]);
}

/// The forges' own error answers reach the log and the caller clearly: Bitbucket Cloud's
/// `{"error": {"message"}}`, Data Center's `errors[].message`, Azure's `message`.
#[tokio::test]
async fn bitbucket_and_azure_refusals_carry_the_forges_message() {
    for kind in [
        Kind::BitbucketCloud,
        Kind::BitbucketDataCenter,
        Kind::AzureDevOps,
    ] {
        let server = ForgeServer::start(kind, TOKEN).await;
        let dir = tempfile::tempdir().unwrap();
        let tokens = token_file(&dir, TOKEN);
        // A repository the forge does not have.
        let backend = match backend(kind, &server.base_url(), tokens.clone()) {
            Backend::BitbucketCloud(_) => Backend::BitbucketCloud(
                Bitbucket::new(BitbucketConfig {
                    api_url: server.base_url(),
                    ..BitbucketConfig::new(OWNER, "no-such-repo", tokens)
                })
                .unwrap(),
            ),
            Backend::BitbucketDataCenter(_) => Backend::BitbucketDataCenter(
                BitbucketDataCenter::new(BitbucketDataCenterConfig {
                    url: server.base_url(),
                    project: DC_PROJECT.into(),
                    repo: "no-such-repo".into(),
                    token_file: tokens,
                })
                .unwrap(),
            ),
            _ => Backend::AzureDevOps(
                AzureDevOps::new(AzureDevOpsConfig {
                    url: server.base_url(),
                    project: AZURE_PROJECT.into(),
                    repo: "no-such-repo".into(),
                    token_file: tokens,
                })
                .unwrap(),
            ),
        };
        let writer = StatusWriter::new(backend, policy());
        let Delivery::Rejected(error) = writer.post(&status(StatusState::Success, "1/1")).await
        else {
            panic!("{kind:?}: an unknown repository is refused for good");
        };
        assert_eq!(error.http_status(), Some(404), "{kind:?}");
        assert!(
            error
                .to_string()
                .contains(&format!("no such {kind:?} endpoint")),
            "{kind:?}: {error}"
        );
        assert_eq!(server.requests().len(), 1, "{kind:?}: not retried");
    }
}

/// Bitbucket Data Center refuses an edit at a stale version (409); the backend reads the
/// comment's version before each edit, so edits after edits go through.
#[tokio::test]
async fn bitbucket_data_center_edits_at_the_current_version() {
    let s = setup(Kind::BitbucketDataCenter).await;
    let CommentOutcome::Created(id) = s.writer.comment(4, "plan v1").await.unwrap() else {
        panic!("created first");
    };
    for n in 2..=4 {
        assert_eq!(
            s.writer.comment(4, &format!("plan v{n}")).await.unwrap(),
            CommentOutcome::Updated(id)
        );
    }
    assert_eq!(
        s.server.comments(4),
        [(id, format!("{PLAN_MARKER}\nplan v4"))]
    );
    let methods: Vec<(String, u16)> = s
        .server
        .requests()
        .iter()
        .map(|r| (r.method.clone(), r.answer))
        .collect();
    assert!(methods.iter().all(|(_, a)| *a < 300), "{methods:?}");
    assert_eq!(methods.iter().filter(|(m, _)| m == "PUT").count(), 3);
    assert_clean(&s.server);
}

/// The checking server catches what Bitbucket and Azure DevOps refuse.
#[tokio::test]
async fn the_test_forge_catches_bitbucket_and_azure_violations() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().user_agent("t").build().unwrap();
    let send = |server: &ForgeServer, url: String, auth: String, body: &str| {
        client
            .post(format!("{}{url}", server.base_url()))
            .header("authorization", auth)
            .header("content-type", "application/json")
            .body(body.to_string())
    };
    let cloud = ForgeServer::start(Kind::BitbucketCloud, TOKEN).await;
    let path = format!("/repositories/{OWNER}/{REPO}/commit/{SHA}/statuses/build");
    let bearer = format!("Bearer {TOKEN}");
    let bad = [
        format!(
            r#"{{"key":"{}","state":"SUCCESSFUL","url":"https://x"}}"#,
            "k".repeat(41)
        ),
        r#"{"key":"k","state":"SUCCESS","url":"https://x"}"#.to_string(),
        r#"{"key":"k","state":"SUCCESSFUL"}"#.to_string(),
        r#"{"key":"k","state":"SUCCESSFUL","url":"https://x","context":"c"}"#.to_string(),
        format!(
            r#"{{"key":"k","state":"FAILED","url":"https://x","description":"{}"}}"#,
            "d".repeat(256)
        ),
    ];
    for body in &bad {
        let answer = send(&cloud, path.clone(), bearer.clone(), body)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 400, "{body}");
        let json: serde_json::Value =
            serde_json::from_slice(&answer.bytes().await.unwrap()).unwrap();
        assert!(json["error"]["message"].is_string(), "{json}");
    }
    // `token` is Gitea's scheme.
    let answer = send(
        &cloud,
        path.clone(),
        format!("token {TOKEN}"),
        r#"{"key":"k","state":"FAILED","url":"https://x"}"#,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(answer.status().as_u16(), 400);
    let answer = send(
        &cloud,
        path.clone(),
        bearer.clone(),
        r#"{"key":"k","state":"FAILED","url":"https://x"}"#,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(answer.status().as_u16(), 201);
    assert_eq!(cloud.violations().len(), bad.len() + 1);
    assert!(cloud.violations()[0].contains("at most 40 characters (it has 41)"));
    // The pull-request listing: OPEN only, at most 50 a page, the token checked.
    let pulls = format!(
        "{}/repositories/{OWNER}/{REPO}/pullrequests",
        cloud.base_url()
    );
    let get = |query: &str, auth: &str| {
        client
            .get(format!("{pulls}{query}"))
            .header("authorization", auth.to_string())
            .send()
    };
    for query in ["", "?state=MERGED&pagelen=50", "?state=OPEN&pagelen=51"] {
        let answer = get(query, &bearer).await.unwrap();
        assert_eq!(answer.status().as_u16(), 400, "{query}");
    }
    assert_eq!(cloud.violations().len(), bad.len() + 4);
    let answer = get("?state=OPEN&pagelen=50", "Bearer wrong").await.unwrap();
    assert_eq!(answer.status().as_u16(), 401);
    let answer = get("?state=OPEN&pagelen=50", &bearer).await.unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    assert_eq!(cloud.violations().len(), bad.len() + 4);

    let dc = ForgeServer::start(Kind::BitbucketDataCenter, TOKEN).await;
    let path = format!("/rest/api/latest/projects/{DC_PROJECT}/repos/{REPO}/commits/{SHA}/builds");
    for body in [
        format!(
            r#"{{"key":"k","state":"FAILED","url":"https://x","name":"{}"}}"#,
            "n".repeat(256)
        ),
        format!(
            r#"{{"key":"k","state":"FAILED","url":"https://x/{}"}}"#,
            "u".repeat(450)
        ),
        r#"{"key":"k","state":"STOPPED","url":"https://x"}"#.to_string(),
    ] {
        let answer = send(&dc, path.clone(), bearer.clone(), &body)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 400, "{body}");
    }
    assert_eq!(dc.violations().len(), 3);

    let azure = ForgeServer::start(Kind::AzureDevOps, TOKEN).await;
    let path = format!("/{AZURE_PROJECT}/_apis/git/repositories/{REPO}/commits/{SHA}/statuses");
    let basic = format!("Basic {}", base64_pat(TOKEN));
    let good = r#"{"state":"succeeded","context":{"name":"gpu","genre":"kubelet-gitops"}}"#;
    for (url, auth, body) in [
        (path.clone(), basic.clone(), good),
        (format!("{path}?api-version=7.1"), bearer.clone(), good),
        (
            format!("{path}?api-version=7.1"),
            basic.clone(),
            r#"{"state":"success","context":{"name":"gpu"}}"#,
        ),
        (
            format!("{path}?api-version=7.1"),
            basic.clone(),
            r#"{"state":"failed","context":"kubelet-gitops/gpu"}"#,
        ),
    ] {
        let answer = send(&azure, url.clone(), auth, body).send().await.unwrap();
        assert_eq!(answer.status().as_u16(), 400, "{url} {body}");
    }
    let answer = send(
        &azure,
        format!("{path}?api-version=7.1"),
        basic.clone(),
        good,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(answer.status().as_u16(), 201);
    assert_eq!(azure.violations().len(), 4);
    // A wrong PAT is the forge's 401, not a violation.
    let answer = send(
        &azure,
        format!("{path}?api-version=7.1"),
        format!("Basic {}", base64_pat("nope")),
        good,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(answer.status().as_u16(), 401);
    assert_eq!(azure.violations().len(), 4);
}

/// `:PAT`, base64-encoded, as Azure DevOps takes a personal access token.
fn base64_pat(pat: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(format!(":{pat}"))
}
