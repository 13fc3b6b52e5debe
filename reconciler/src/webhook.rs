//! The push webhook: `POST /hooks/git` wakes the git poller at once, after checking that the
//! forge signed the request with the shared secret.
//!
//! Accepted proofs, each checked in constant time against the secret read from its file at
//! every request (so a rotated Secret applies without a restart):
//! - GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>`
//!   (Gitea and Forgejo send it too);
//! - Gitea and Forgejo: `X-Gitea-Signature` / `X-Forgejo-Signature: <hex HMAC-SHA256>`;
//! - GitLab: `X-Gitlab-Token: <the secret itself>`.
//!
//! Every one of these headers that is present must verify, and at least one must be.
//! A good request gets `202 Accepted` and one wake-up (which only makes the poller fetch now:
//! nothing in the body is trusted or used); a bad or missing proof gets `401` and wakes
//! nothing. Bodies over the limit get `413`.

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use tokio::sync::Notify;
use tracing::{error, info, warn};

/// Where the webhook listens.
pub const PATH: &str = "/hooks/git";

/// The default request body limit: 5 MiB (GitHub caps payloads at 25 MB, but a push
/// event for a config repository is a few KiB; the body is only hashed).
pub const DEFAULT_BODY_LIMIT: usize = 5 * 1024 * 1024;

const GITHUB_HEADER: &str = "x-hub-signature-256";
const GITEA_HEADER: &str = "x-gitea-signature";
const FORGEJO_HEADER: &str = "x-forgejo-signature";
const GITLAB_HEADER: &str = "x-gitlab-token";

/// The webhook's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// A file holding the shared secret (trailing whitespace is ignored).
    pub secret_file: PathBuf,
    /// Larger request bodies are refused with 413.
    pub body_limit: usize,
}

impl WebhookConfig {
    /// Settings with the default body limit.
    pub fn new(secret_file: impl Into<PathBuf>) -> WebhookConfig {
        WebhookConfig {
            secret_file: secret_file.into(),
            body_limit: DEFAULT_BODY_LIMIT,
        }
    }
}

/// The forge whose proof verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forge {
    GitHub,
    Gitea,
    Forgejo,
    GitLab,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error(
        "no signature: expected X-Hub-Signature-256, X-Gitea-Signature, X-Forgejo-Signature \
         or X-Gitlab-Token"
    )]
    Missing,
    #[error("{header} is malformed")]
    Malformed { header: &'static str },
    #[error("{header} does not match the shared secret")]
    Mismatch { header: &'static str },
}

/// Checks the request's proofs against `secret`. Every recognised header that is present
/// must verify; returns the forge that sent it.
pub fn verify_signature(
    headers: &HeaderMap,
    body: &[u8],
    secret: &[u8],
) -> Result<Forge, SignatureError> {
    let mut forge = None;
    if let Some(value) = headers.get(GITHUB_HEADER) {
        let hex = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("sha256="))
            .ok_or(SignatureError::Malformed {
                header: "X-Hub-Signature-256",
            })?;
        check_hmac(hex, body, secret, "X-Hub-Signature-256")?;
        forge = Some(Forge::GitHub);
    }
    for (name, label, which) in [
        (GITEA_HEADER, "X-Gitea-Signature", Forge::Gitea),
        (FORGEJO_HEADER, "X-Forgejo-Signature", Forge::Forgejo),
    ] {
        if let Some(value) = headers.get(name) {
            let hex = value
                .to_str()
                .map_err(|_| SignatureError::Malformed { header: label })?;
            check_hmac(hex, body, secret, label)?;
            forge = Some(match forge {
                Some(Forge::Forgejo) => Forge::Forgejo,
                _ => which,
            });
        }
    }
    if let Some(value) = headers.get(GITLAB_HEADER) {
        let given = value.as_bytes();
        if !bool::from(given.ct_eq(secret)) {
            return Err(SignatureError::Mismatch {
                header: "X-Gitlab-Token",
            });
        }
        forge = Some(Forge::GitLab);
    }
    forge.ok_or(SignatureError::Missing)
}

/// A hex HMAC-SHA256 of `body` under `secret`, compared in constant time.
fn check_hmac(
    hex: &str,
    body: &[u8],
    secret: &[u8],
    header: &'static str,
) -> Result<(), SignatureError> {
    let given = decode_hex(hex.trim()).ok_or(SignatureError::Malformed { header })?;
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret).map_err(|_| SignatureError::Mismatch { header })?;
    mac.update(body);
    mac.verify_slice(&given)
        .map_err(|_| SignatureError::Mismatch { header })
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.as_bytes()
        .chunks_exact(2)
        .map(|pair| {
            let hi = (pair[0] as char).to_digit(16)?;
            let lo = (pair[1] as char).to_digit(16)?;
            u8::try_from(hi * 16 + lo).ok()
        })
        .collect()
}

struct Hook {
    secret_file: PathBuf,
    wake: Arc<Notify>,
}

/// `POST /hooks/git`, wired to `wake` (give the same `Notify` to the [`crate::git::Poller`]).
pub fn router(cfg: WebhookConfig, wake: Arc<Notify>) -> Router {
    let WebhookConfig {
        secret_file,
        body_limit,
    } = cfg;
    Router::new()
        .route(PATH, post(receive))
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(Arc::new(Hook { secret_file, wake }))
}

async fn receive(State(hook): State<Arc<Hook>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let secret = match tokio::fs::read(&hook.secret_file).await {
        Ok(mut secret) => {
            while secret.last().is_some_and(u8::is_ascii_whitespace) {
                secret.pop();
            }
            secret
        }
        Err(e) => {
            error!(file = %hook.secret_file.display(), error = %e, "cannot read the webhook secret");
            return StatusCode::INTERNAL_SERVER_ERROR;
        }
    };
    if secret.is_empty() {
        // An empty key would let anyone compute a valid signature.
        error!(file = %hook.secret_file.display(), "the webhook secret file is empty: refusing every request");
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    let event = [
        "x-github-event",
        "x-gitea-event",
        "x-forgejo-event",
        "x-gitlab-event",
    ]
    .iter()
    .find_map(|h| headers.get(*h).and_then(|v| v.to_str().ok()))
    .unwrap_or("unknown")
    .to_string();
    match verify_signature(&headers, &body, &secret) {
        Ok(forge) => {
            info!(?forge, %event, bytes = body.len(), "webhook verified: polling now");
            hook.wake.notify_one();
            StatusCode::ACCEPTED
        }
        Err(reason) => {
            warn!(%reason, %event, "webhook refused");
            StatusCode::UNAUTHORIZED
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_decoding() {
        assert_eq!(decode_hex("00ffA0"), Some(vec![0, 255, 160]));
        assert_eq!(decode_hex(""), Some(vec![]));
        assert_eq!(decode_hex("abc"), None);
        assert_eq!(decode_hex("zz"), None);
    }
}
