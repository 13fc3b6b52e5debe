//! The remote the notes are pushed to, and the credentials of each push.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use git2::{Cred, CredentialType, RemoteCallbacks};

use crate::status::token::Secret;

/// Builds the libgit2 callbacks (credentials, host key check) for one fetch or push.
pub type CallbacksFactory = Arc<dyn Fn() -> RemoteCallbacks<'static> + Send + Sync>;

/// The remote the notes are pushed to, and how to authenticate.
#[derive(Clone)]
pub struct NotesRemote {
    pub(super) url: String,
    auth: &'static str,
    pub(super) callbacks: CallbacksFactory,
}

impl fmt::Debug for NotesRemote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NotesRemote")
            .field("url", &redact_url(&self.url))
            .field("auth", &self.auth)
            .finish()
    }
}

impl NotesRemote {
    /// A remote that needs no credentials (`file://`, a path, an open `git://` or https
    /// server).
    pub fn anonymous(url: impl Into<String>) -> NotesRemote {
        NotesRemote {
            url: url.into(),
            auth: "none",
            callbacks: Arc::new(RemoteCallbacks::new),
        }
    }

    /// HTTPS with a token as the password, read from `token_file` at each push.
    pub fn with_token(
        url: impl Into<String>,
        username: impl Into<String>,
        token_file: impl Into<PathBuf>,
    ) -> NotesRemote {
        let username = username.into();
        let token_file = token_file.into();
        NotesRemote {
            url: url.into(),
            auth: "token",
            callbacks: Arc::new(move || {
                let (username, token_file) = (username.clone(), token_file.clone());
                let mut asked = 0u32;
                let mut callbacks = RemoteCallbacks::new();
                callbacks.credentials(move |_url, _user, allowed| {
                    asked += 1;
                    if asked > 1 {
                        return Err(git2::Error::from_str("the remote rejected the token"));
                    }
                    if !allowed.contains(CredentialType::USER_PASS_PLAINTEXT) {
                        return Err(git2::Error::from_str(
                            "the remote does not accept username and password authentication",
                        ));
                    }
                    let token = Secret::from_file(&token_file, "git")
                        .map_err(|e| git2::Error::from_str(&e.to_string()))?;
                    Cred::userpass_plaintext(&username, token.expose())
                });
                callbacks
            }),
        }
    }

    /// Any other authentication (SSH with a checked host key): `factory` builds the
    /// callbacks for each fetch and push, as the git source's fetches do.
    pub fn with_callbacks(
        url: impl Into<String>,
        factory: impl Fn() -> RemoteCallbacks<'static> + Send + Sync + 'static,
    ) -> NotesRemote {
        NotesRemote {
            url: url.into(),
            auth: "callbacks",
            callbacks: Arc::new(factory),
        }
    }

    /// The remote's URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// The URL without a `user:password@` part.
pub(super) fn redact_url(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('/') {
            Some((authority, path)) if authority.contains('@') => {
                let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
                format!("{scheme}://<redacted>@{host}/{path}")
            }
            None if rest.contains('@') => {
                let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
                format!("{scheme}://<redacted>@{host}")
            }
            _ => url.to_string(),
        },
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_credentials() {
        assert_eq!(
            redact_url("https://user:tok@git.example.com/a/b.git"),
            "https://<redacted>@git.example.com/a/b.git"
        );
        assert_eq!(
            redact_url("https://git.example.com/a"),
            "https://git.example.com/a"
        );
        assert_eq!(redact_url("/srv/git/config.git"), "/srv/git/config.git");
        let remote = NotesRemote::with_token("https://x:y@h/r", "git", "/tok");
        let debug = format!("{remote:?}");
        assert!(!debug.contains("x:y"), "{debug}");
    }
}
