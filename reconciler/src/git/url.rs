//! Which transport a remote URL uses, and the SSH host and port the host key is checked for.

use std::path::PathBuf;

use super::GitError;

/// A remote URL, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RemoteUrl {
    /// `https://host/path` (`tls`) or `http://host/path` (plain, unencrypted).
    Http { tls: bool },
    /// `ssh://[user@]host[:port]/path` or scp-like `[user@]host:path`.
    Ssh {
        user: Option<String>,
        host: String,
        port: u16,
    },
    /// `git://host/path` (unauthenticated).
    Git,
    /// `file:///path`, or an absolute or `./`-relative path.
    Local { path: PathBuf },
}

const SSH_PORT: u16 = 22;

impl RemoteUrl {
    /// Classifies `url`; an unsupported scheme or a malformed URL is [`GitError::BadUrl`].
    pub(crate) fn parse(url: &str) -> Result<RemoteUrl, GitError> {
        let bad = |reason: &str| GitError::BadUrl {
            url: redact(url),
            reason: reason.to_string(),
        };
        if url.is_empty() {
            return Err(bad("empty"));
        }
        if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("contains whitespace or control characters"));
        }
        if let Some((scheme, rest)) = url.split_once("://") {
            let scheme = scheme.to_ascii_lowercase();
            return match scheme.as_str() {
                "https" | "http" => {
                    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
                    let host = authority.rsplit('@').next().unwrap_or_default();
                    if host.is_empty() {
                        return Err(bad("no host"));
                    }
                    if authority.contains('@') {
                        return Err(bad(
                            "credentials in the URL are not allowed: put the token in \
                             --token-file (and the user in --git-username)",
                        ));
                    }
                    Ok(RemoteUrl::Http {
                        tls: scheme == "https",
                    })
                }
                "ssh" | "git+ssh" | "ssh+git" => {
                    let authority = rest.split('/').next().unwrap_or_default();
                    let (user, hostport) = match authority.rsplit_once('@') {
                        Some((u, h)) => (Some(u.to_string()), h),
                        None => (None, authority),
                    };
                    let (host, port) =
                        split_host_port(hostport).ok_or_else(|| bad("bad host or port"))?;
                    if host.is_empty() {
                        return Err(bad("no host"));
                    }
                    Ok(RemoteUrl::Ssh { user, host, port })
                }
                "git" => Ok(RemoteUrl::Git),
                "file" => {
                    if rest.is_empty() {
                        return Err(bad("no path"));
                    }
                    Ok(RemoteUrl::Local {
                        path: PathBuf::from(rest),
                    })
                }
                other => Err(bad(&format!(
                    "unsupported scheme {other:?} (https, http, ssh, git, file or a local path)"
                ))),
            };
        }
        if url.starts_with('/') || url.starts_with("./") || url.starts_with("../") {
            return Ok(RemoteUrl::Local {
                path: PathBuf::from(url),
            });
        }
        // scp-like `[user@]host:path`: a colon before the first slash.
        if let Some((authority, path)) = url.split_once(':')
            && !authority.contains('/')
            && !path.is_empty()
        {
            let (user, host) = match authority.rsplit_once('@') {
                Some((u, h)) => (Some(u.to_string()), h.to_string()),
                None => (None, authority.to_string()),
            };
            if host.is_empty() {
                return Err(bad("no host"));
            }
            return Ok(RemoteUrl::Ssh {
                user,
                host,
                port: SSH_PORT,
            });
        }
        Err(bad(
            "not a URL (https://, ssh://, git://, file://), an scp-like user@host:path or a path",
        ))
    }
}

/// `url` with any `user:password@` of a `scheme://` URL replaced by `***@`, for messages.
pub fn redact(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        if let Some(at) = rest[..end].rfind('@') {
            return format!("{scheme}://***@{}", &rest[at + 1..]);
        }
    }
    url.to_string()
}

/// Whether `url` is a plain-text `http://` URL (any case), over which a token must not go
/// unless allowed (`--allow-insecure-http`).
pub fn is_plain_http(url: &str) -> bool {
    url.get(..7)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://"))
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`.
fn split_host_port(s: &str) -> Option<(String, u16)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after {
            "" => SSH_PORT,
            p => p.strip_prefix(':')?.parse().ok()?,
        };
        return Some((host.to_string(), port));
    }
    match s.split_once(':') {
        Some((host, port)) => Some((host.to_string(), port.parse().ok()?)),
        None => Some((s.to_string(), SSH_PORT)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ssh(user: Option<&str>, host: &str, port: u16) -> RemoteUrl {
        RemoteUrl::Ssh {
            user: user.map(str::to_string),
            host: host.to_string(),
            port,
        }
    }

    #[test]
    fn classifies_transports() {
        let cases = [
            ("https://github.com/o/r.git", RemoteUrl::Http { tls: true }),
            ("HTTPS://github.com/o/r.git", RemoteUrl::Http { tls: true }),
            (
                "http://127.0.0.1:8080/r.git",
                RemoteUrl::Http { tls: false },
            ),
            (
                "ssh://git@github.com/o/r.git",
                ssh(Some("git"), "github.com", 22),
            ),
            (
                "ssh://git@gitea.local:2222/o/r",
                ssh(Some("git"), "gitea.local", 2222),
            ),
            ("ssh://[::1]:2222/r", ssh(None, "::1", 2222)),
            ("git@github.com:o/r.git", ssh(Some("git"), "github.com", 22)),
            ("github.com:o/r.git", ssh(None, "github.com", 22)),
            ("git://127.0.0.1/r", RemoteUrl::Git),
            (
                "file:///srv/r.git",
                RemoteUrl::Local {
                    path: "/srv/r.git".into(),
                },
            ),
            (
                "/srv/r.git",
                RemoteUrl::Local {
                    path: "/srv/r.git".into(),
                },
            ),
        ];
        for (url, want) in cases {
            assert_eq!(RemoteUrl::parse(url).expect(url), want, "{url}");
        }
    }

    #[test]
    fn rejects_bad_urls_with_a_reason() {
        for (url, reason) in [
            ("", "empty"),
            ("ftp://host/r", "unsupported scheme"),
            ("https:///r", "no host"),
            ("https://user:secret@host/r", "--token-file"),
            ("http://secret@host/r", "--token-file"),
            ("ssh://host:notaport/r", "port"),
            ("relative/path", "not a URL"),
            ("https://host/r with space", "whitespace"),
        ] {
            match RemoteUrl::parse(url) {
                Err(GitError::BadUrl {
                    reason: r,
                    url: shown,
                }) => {
                    assert!(r.contains(reason), "{url}: {r}");
                    assert!(!shown.contains("secret"), "{shown}");
                }
                other => panic!("{url}: {other:?}"),
            }
        }
    }
}
