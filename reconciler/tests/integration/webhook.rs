//! The push webhook: signatures of each forge, good, bad and missing, and the wake-up.

use std::future::Future;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use hmac::{Hmac, KeyInit, Mac};
use reconciler::webhook::{self, Forge, SignatureError, WebhookConfig, verify_signature};
use sha2::Sha256;
use tokio::sync::Notify;
use tower::ServiceExt;

const SECRET: &str = "s3cret-shared-with-the-forge";
const BODY: &str =
    r#"{"ref":"refs/heads/main","after":"0123456789abcdef0123456789abcdef01234567"}"#;

fn hmac_hex(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(body);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

struct Hook {
    _dir: tempfile::TempDir,
    secret_file: std::path::PathBuf,
    wake: Arc<Notify>,
    router: axum::Router,
}

fn hook_with_limit(limit: usize) -> Hook {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret_file = dir.path().join("secret");
    // A trailing newline, as `echo` writes it, is not part of the secret.
    std::fs::write(&secret_file, format!("{SECRET}\n")).expect("write secret");
    let wake = Arc::new(Notify::new());
    let router = webhook::router(
        WebhookConfig {
            secret_file: secret_file.clone(),
            body_limit: limit,
        },
        wake.clone(),
    );
    Hook {
        _dir: dir,
        secret_file,
        wake,
        router,
    }
}

fn hook() -> Hook {
    hook_with_limit(webhook::DEFAULT_BODY_LIMIT)
}

impl Hook {
    async fn post(&self, headers: &[(&str, &str)], body: impl Into<Body>) -> StatusCode {
        let mut req = Request::post(webhook::PATH);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(body.into()).expect("request");
        self.router
            .clone()
            .oneshot(req)
            .await
            .expect("infallible")
            .status()
    }

    /// Each value of `proofs` in `header`, after `event`, is refused and wakes nothing;
    /// so is the event without the header.
    async fn assert_refused(&self, event: (&str, &str), header: &str, proofs: &[&str]) {
        for bad in proofs {
            assert_eq!(
                self.post(&[event, (header, bad)], BODY).await,
                StatusCode::UNAUTHORIZED,
                "{bad:?}"
            );
            assert!(!self.woken().await, "{bad:?}: nothing woken");
        }
        assert_eq!(self.post(&[event], BODY).await, StatusCode::UNAUTHORIZED);
        assert!(!self.woken().await);
    }

    /// Whether a wake-up is pending: `Notify` keeps one permit for the next waiter, which
    /// then completes on its first poll. Consumes the permit.
    async fn woken(&self) -> bool {
        let notified = self.wake.notified();
        let mut notified = std::pin::pin!(notified);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        notified.as_mut().poll(&mut cx).is_ready()
    }
}

#[tokio::test]
async fn github_signatures() {
    let good = format!("sha256={}", hmac_hex(SECRET, BODY.as_bytes()));
    let wrong_secret = format!("sha256={}", hmac_hex("other", BODY.as_bytes()));
    let other_body = format!("sha256={}", hmac_hex(SECRET, b"{}"));
    let h = hook();
    let event = ("X-GitHub-Event", "push");

    assert_eq!(
        h.post(&[event, ("X-Hub-Signature-256", &good)], BODY).await,
        StatusCode::ACCEPTED
    );
    assert!(h.woken().await, "a good signature wakes the poller");

    h.assert_refused(
        event,
        "X-Hub-Signature-256",
        &[
            wrong_secret.as_str(),
            other_body.as_str(),
            good.trim_start_matches("sha256="), // no scheme prefix
            "sha256=zz",
            "sha1=0123",
        ],
    )
    .await;
}

#[tokio::test]
async fn gitea_and_forgejo_signatures() {
    let good = hmac_hex(SECRET, BODY.as_bytes());
    let bad = hmac_hex("other", BODY.as_bytes());
    for header in ["X-Gitea-Signature", "X-Forgejo-Signature"] {
        let h = hook();
        assert_eq!(
            h.post(&[(header, &good)], BODY).await,
            StatusCode::ACCEPTED,
            "{header}"
        );
        assert!(h.woken().await, "{header}");
        assert_eq!(
            h.post(&[(header, &bad)], BODY).await,
            StatusCode::UNAUTHORIZED,
            "{header}"
        );
        assert!(!h.woken().await, "{header}");
        assert_eq!(
            h.post(&[(header, "")], BODY).await,
            StatusCode::UNAUTHORIZED,
            "{header}: empty"
        );
        assert!(!h.woken().await, "{header}");
    }
    // Gitea sends its own header and GitHub's; both verify.
    let h = hook();
    let github = format!("sha256={good}");
    assert_eq!(
        h.post(
            &[
                ("X-Gitea-Signature", &good),
                ("X-Hub-Signature-256", &github)
            ],
            BODY
        )
        .await,
        StatusCode::ACCEPTED
    );
    assert!(h.woken().await);
    // One good and one bad proof is refused.
    assert_eq!(
        h.post(
            &[
                ("X-Gitea-Signature", &bad),
                ("X-Hub-Signature-256", &github)
            ],
            BODY
        )
        .await,
        StatusCode::UNAUTHORIZED
    );
    assert!(!h.woken().await);
}

#[tokio::test]
async fn gitlab_tokens() {
    let h = hook();
    let event = ("X-Gitlab-Event", "Push Hook");
    assert_eq!(
        h.post(&[event, ("X-Gitlab-Token", SECRET)], BODY).await,
        StatusCode::ACCEPTED
    );
    assert!(h.woken().await);
    h.assert_refused(
        event,
        "X-Gitlab-Token",
        &[
            "wrong",
            "s3cret-shared-with-the-forg",
            "s3cret-shared-with-the-forgeX",
            "",
        ],
    )
    .await;
}

#[tokio::test]
async fn the_secret_is_reread_so_rotation_needs_no_restart() {
    let h = hook();
    std::fs::write(&h.secret_file, "rotated").expect("rotate");
    assert_eq!(
        h.post(&[("X-Gitlab-Token", SECRET)], BODY).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        h.post(&[("X-Gitlab-Token", "rotated")], BODY).await,
        StatusCode::ACCEPTED
    );
    assert!(h.woken().await);

    // A missing or empty secret refuses everything rather than accepting anything.
    std::fs::write(&h.secret_file, "\n").expect("empty");
    let empty_sig = format!("sha256={}", hmac_hex("", BODY.as_bytes()));
    assert_eq!(
        h.post(&[("X-Hub-Signature-256", &empty_sig)], BODY).await,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    std::fs::remove_file(&h.secret_file).expect("rm");
    assert_eq!(
        h.post(&[("X-Gitlab-Token", "rotated")], BODY).await,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    assert!(!h.woken().await);
}

#[tokio::test]
async fn oversized_bodies_and_other_methods_are_refused() {
    let h = hook_with_limit(1024);
    let big = vec![b'x'; 2048];
    let sig = format!("sha256={}", hmac_hex(SECRET, &big));
    assert_eq!(
        h.post(&[("X-Hub-Signature-256", &sig)], big).await,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    assert!(!h.woken().await);

    let get = Request::get(webhook::PATH)
        .body(Body::empty())
        .expect("request");
    let status = h
        .router
        .clone()
        .oneshot(get)
        .await
        .expect("infallible")
        .status();
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(!h.woken().await);
}

#[test]
fn verify_signature_names_the_forge_and_the_failing_header() {
    let body = BODY.as_bytes();
    let sig = hmac_hex(SECRET, body);
    let mut headers = axum::http::HeaderMap::new();
    assert_eq!(
        verify_signature(&headers, body, SECRET.as_bytes()),
        Err(SignatureError::Missing)
    );
    headers.insert("x-forgejo-signature", sig.parse().expect("header"));
    assert_eq!(
        verify_signature(&headers, body, SECRET.as_bytes()),
        Ok(Forge::Forgejo)
    );
    headers.insert("x-gitea-signature", sig.parse().expect("header"));
    assert_eq!(
        verify_signature(&headers, body, SECRET.as_bytes()),
        Ok(Forge::Forgejo)
    );
    headers.insert("x-hub-signature-256", "sha256=00".parse().expect("header"));
    assert_eq!(
        verify_signature(&headers, body, SECRET.as_bytes()),
        Err(SignatureError::Mismatch {
            header: "X-Hub-Signature-256"
        })
    );
    let mut gitlab = axum::http::HeaderMap::new();
    gitlab.insert("x-gitlab-token", SECRET.parse().expect("header"));
    assert_eq!(
        verify_signature(&gitlab, body, SECRET.as_bytes()),
        Ok(Forge::GitLab)
    );
}
