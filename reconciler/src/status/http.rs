//! The HTTP plumbing the forge backends share: one client (rustls with ring), JSON
//! requests with a secret auth header, and error answers turned into [`StatusError`]s
//! carrying the forge's own message and the wait it asked for.

use std::time::{Duration, SystemTime};

use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderName, HeaderValue};
use reqwest::{Client, Method};
use serde::de::DeserializeOwned;
use tracing::debug;

use super::commit::{CommitStatus, is_commit_id, truncate_description};
use super::error::StatusError;
use super::retry::{classify, requested_wait};
use super::token::{Secret, TokenFile};

/// Sent with every request; GitHub refuses requests without a User-Agent.
const USER_AGENT: &str = concat!("kubelet-gitops/", env!("CARGO_PKG_VERSION"));

/// A forge answer with a 2xx status.
#[derive(Debug)]
pub(crate) struct Answer {
    /// The HTTP status (Azure DevOps answers a refused token with a 203 sign-in page).
    pub status: u16,
    pub body: Vec<u8>,
}

/// One forge's HTTP client.
#[derive(Debug, Clone)]
pub(crate) struct Http {
    client: Client,
    forge: &'static str,
}

impl Http {
    /// A client with timeouts and our User-Agent. Installs ring as the process's rustls
    /// crypto provider if none is installed yet (reqwest is built without one).
    pub fn new(forge: &'static str) -> Result<Http, StatusError> {
        // Err means a provider is already installed, which is what we want.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = Client::builder()
            .user_agent(USER_AGENT)
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| StatusError::Config {
                forge,
                reason: format!("cannot build the HTTP client: {e}"),
            })?;
        Ok(Http { client, forge })
    }

    /// Sends one request. `auth` is the header that carries the token (marked sensitive,
    /// so it is never printed); `extra` are fixed headers such as GitHub's API version.
    /// A non-2xx answer becomes [`StatusError::Rejected`].
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        auth: (HeaderName, String, &Secret),
        extra: &[(HeaderName, &'static str)],
        body: Option<&serde_json::Value>,
    ) -> Result<Answer, StatusError> {
        let forge = self.forge;
        let method_name = method_name(&method);
        let (auth_name, auth_prefix, secret) = auth;
        let mut auth_value = HeaderValue::from_str(&format!("{auth_prefix}{}", secret.expose()))
            .map_err(|_| StatusError::Config {
                forge,
                reason: "the token contains characters not allowed in an HTTP header".to_string(),
            })?;
        auth_value.set_sensitive(true);
        let mut request = self
            .client
            .request(method, url)
            .header(auth_name, auth_value);
        if !extra.iter().any(|(name, _)| *name == ACCEPT) {
            request = request.header(ACCEPT, "application/json");
        }
        for (name, value) in extra {
            request = request.header(name.clone(), *value);
        }
        if let Some(body) = body {
            request = request
                .header(CONTENT_TYPE, "application/json")
                .body(serde_json::to_vec(body).unwrap_or_default());
        }
        let transport = |source: reqwest::Error| StatusError::Transport {
            forge,
            method: method_name,
            url: url.to_string(),
            source: source.without_url(),
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.bytes().await.map_err(transport)?.to_vec();
        debug!(forge, method = method_name, url, status, "forge answered");
        if (200..300).contains(&status) {
            return Ok(Answer { status, body });
        }
        let message = error_message(status, &body);
        Err(StatusError::Rejected {
            forge,
            method: method_name,
            url: url.to_string(),
            status,
            kind: classify(status, &headers, &message),
            message,
            retry_after: requested_wait(status, &headers, SystemTime::now()),
        })
    }

    /// [`send`](Self::send) with `Authorization: <scheme><credentials>`, which `auth`
    /// derives from the token `token` holds now (Bitbucket's Bearer or Basic, Azure
    /// DevOps' Basic).
    pub async fn send_authorized(
        &self,
        method: Method,
        url: &str,
        token: &TokenFile,
        auth: impl FnOnce(&Secret) -> (String, Secret),
        body: Option<&serde_json::Value>,
    ) -> Result<Answer, StatusError> {
        let (scheme, credentials) = auth(&token.read(self.forge)?);
        self.send(
            method,
            url,
            (AUTHORIZATION, scheme, &credentials),
            &[],
            body,
        )
        .await
    }

    /// Decodes a 2xx answer's JSON body.
    pub fn decode<T: DeserializeOwned>(
        &self,
        method: &'static str,
        url: &str,
        answer: &Answer,
    ) -> Result<T, StatusError> {
        serde_json::from_slice(&answer.body).map_err(|e| StatusError::BadResponse {
            forge: self.forge,
            method,
            url: url.to_string(),
            reason: format!("not the JSON expected: {e}"),
        })
    }
}

pub(crate) fn method_name(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        _ => "request",
    }
}

/// The forge's explanation of an error answer: the JSON `message` (GitHub, Gitea,
/// GitLab, Azure DevOps; GitLab's may be an object of field errors) or `error` (GitLab's
/// OAuth errors; Bitbucket Cloud's `{"error": {"message"}}`), with `errors[].message`
/// (GitHub, Bitbucket Data Center) or GitHub's `errors[].field`/`code` appended;
/// otherwise the start of the body; otherwise the status's reason phrase.
pub(crate) fn error_message(status: u16, body: &[u8]) -> String {
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) {
        let mut parts = Vec::new();
        match json.get("message") {
            Some(serde_json::Value::String(m)) => parts.push(m.clone()),
            Some(other @ serde_json::Value::Object(_)) => parts.push(other.to_string()),
            _ => {}
        }
        match json.get("error") {
            Some(serde_json::Value::String(e)) => parts.push(e.clone()),
            Some(serde_json::Value::Object(e)) => {
                if let Some(m) = e.get("message").and_then(|m| m.as_str()) {
                    parts.push(m.to_string());
                }
            }
            _ => {}
        }
        if let Some(serde_json::Value::Array(errors)) = json.get("errors") {
            for e in errors {
                let text = e
                    .get("message")
                    .and_then(|m| m.as_str())
                    .map(str::to_string)
                    .or_else(|| {
                        let field = e.get("field").and_then(|f| f.as_str())?;
                        let code = e.get("code").and_then(|c| c.as_str())?;
                        Some(format!("{field} {code}"))
                    });
                if let Some(text) = text {
                    parts.push(text);
                }
            }
        }
        if !parts.is_empty() {
            return parts.join("; ");
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if !text.is_empty() {
        return truncate_description(text, 200);
    }
    reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("no message")
        .to_string()
}

/// The `Authorization` header of the Atlassian forges for a token file: `Basic` when the
/// file holds `user:password` (a Bitbucket app password or API token with its user),
/// otherwise `Bearer` (a repository, project or workspace access token; a Data Center
/// HTTP access token). Returns the scheme and the credentials.
pub(crate) fn bearer_or_basic(secret: &Secret) -> (String, Secret) {
    if secret.expose().contains(':') {
        ("Basic ".to_string(), secret.basic(""))
    } else {
        ("Bearer ".to_string(), secret.clone())
    }
}

/// Percent-encodes one URL path segment: everything but RFC 3986 unreserved characters
/// (so GitLab's `group/project` becomes `group%2Fproject`).
pub(crate) fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A base URL with an http(s) scheme and no trailing slash.
pub(crate) fn base_url(forge: &'static str, raw: &str) -> Result<String, StatusError> {
    let trimmed = raw.trim().trim_end_matches('/');
    let rest = trimmed
        .strip_prefix("https://")
        .or_else(|| trimmed.strip_prefix("http://"));
    match rest {
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') => Ok(trimmed.to_string()),
        _ => Err(StatusError::Config {
            forge,
            reason: format!("base URL {raw:?} must start with https:// (or http://) and a host"),
        }),
    }
}

/// Checks that a name used in a URL path (owner, repository) is not empty.
pub(crate) fn non_empty(forge: &'static str, what: &str, value: &str) -> Result<(), StatusError> {
    if value.trim().is_empty() {
        return Err(StatusError::Config {
            forge,
            reason: format!("the {what} is empty"),
        });
    }
    Ok(())
}

/// Rejects a commit id that is not 40 or 64 hex digits before any request is made.
pub(crate) fn check_sha(forge: &'static str, sha: &str) -> Result<(), StatusError> {
    if is_commit_id(sha) {
        Ok(())
    } else {
        Err(StatusError::Config {
            forge,
            reason: format!("{sha:?} is not a full commit id"),
        })
    }
}

/// The JSON body of a commit-status post, the same shape on every forge: `state`,
/// `description`, the context under `context_key` (`context`; GitLab calls it `name`),
/// and `target_url` when there is one.
pub(crate) fn status_body(
    state: &str,
    context_key: &str,
    status: &CommitStatus,
) -> serde_json::Value {
    let mut body = serde_json::json!({
        "state": state,
        "description": status.description,
    });
    body[context_key] = serde_json::json!(status.context);
    if let Some(target) = &status.target_url {
        body["target_url"] = serde_json::json!(target);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_come_from_the_forge() {
        let github = br#"{"message":"Validation Failed","errors":[{"resource":"Status","field":"description","code":"custom","message":"description is too long (maximum is 140 characters)"}]}"#;
        assert_eq!(
            error_message(422, github),
            "Validation Failed; description is too long (maximum is 140 characters)"
        );
        let gitlab = br#"{"message":{"name":["is too long"]}}"#;
        assert_eq!(error_message(400, gitlab), r#"{"name":["is too long"]}"#);
        assert_eq!(
            error_message(401, br#"{"error":"invalid_token"}"#),
            "invalid_token"
        );
        let bitbucket = br#"{"type":"error","error":{"message":"key: Ensure this value has at most 40 characters (it has 48).","fields":{"key":["Ensure this value has at most 40 characters (it has 48)."]}}}"#;
        assert_eq!(
            error_message(400, bitbucket),
            "key: Ensure this value has at most 40 characters (it has 48)."
        );
        let data_center = br#"{"errors":[{"context":null,"message":"Authentication failed. Please check your credentials and try again.","exceptionName":"com.atlassian.bitbucket.auth.IncorrectPasswordAuthenticationException"}]}"#;
        assert_eq!(
            error_message(401, data_center),
            "Authentication failed. Please check your credentials and try again."
        );
        assert_eq!(
            error_message(502, b"<html>bad gateway</html>"),
            "<html>bad gateway</html>"
        );
        assert_eq!(error_message(503, b""), "Service Unavailable");
    }

    #[test]
    fn segments_are_encoded() {
        assert_eq!(encode_segment("group/sub/project"), "group%2Fsub%2Fproject");
        assert_eq!(encode_segment("my.repo_name-1~"), "my.repo_name-1~");
        assert_eq!(encode_segment("a b"), "a%20b");
    }

    #[test]
    fn base_urls_are_checked() {
        assert_eq!(
            base_url("GitHub", "https://ghe.example.com/api/v3/").unwrap(),
            "https://ghe.example.com/api/v3"
        );
        assert!(base_url("GitHub", "ghe.example.com").is_err());
        assert!(base_url("GitHub", "https://").is_err());
    }
}
