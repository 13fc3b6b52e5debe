//! [`GitRepo`]: a bare cache of one branch of a remote, fetched on demand.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use git2::{
    AutotagOption, CertificateCheckStatus, Cred, CredentialType, ErrorClass, ErrorCode,
    FetchOptions, FetchPrune, RemoteCallbacks, Repository,
};
use tracing::{debug, instrument};

use super::known_hosts::{HostKeyCheck, KnownHosts, PresentedKey, key_type_name};
use super::url::{RemoteUrl, is_plain_http};
use super::{CommitSource, GitError};

/// Where the config repository lives and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitConfig {
    /// `https://...`, `ssh://...`, `user@host:path`, `git://...`, `file://...` or a path.
    pub url: String,
    /// The branch to follow, without `refs/heads/`.
    pub branch: String,
    /// How to authenticate.
    pub auth: GitAuth,
    /// Where the bare cache repository is kept; created if absent, reused on restart.
    pub cache_dir: PathBuf,
    /// More refspecs to fetch alongside the branch, such as
    /// `+refs/pull/*/head:refs/pull/*/head` for review.
    pub extra_refspecs: Vec<String>,
}

/// How to authenticate to the remote. Holds file paths only: secrets are read from their
/// files at each fetch (so a rotated Secret is picked up without a restart) and never kept,
/// printed or logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitAuth {
    /// No credentials (public https, `git://`, `file://`).
    None,
    /// HTTP(S) basic authentication with a token as the password.
    Token {
        /// GitHub accepts any; GitLab wants `oauth2` or the token's name; Gitea the user.
        username: String,
        /// A file holding the token (trailing whitespace is ignored).
        token_file: PathBuf,
        /// Whether the token may be sent over plain `http://`, unencrypted
        /// (`--allow-insecure-http`). Without it an `http://` URL is refused before any
        /// fetch, and so is any `http://` URL libgit2 asks credentials for.
        allow_insecure_http: bool,
    },
    /// SSH with a private key; the server's host key must be in `known_hosts_file`.
    Ssh {
        /// Usually `git`; a user in the URL wins.
        username: String,
        /// An unencrypted private key (OpenSSH or PEM format).
        key_file: PathBuf,
        /// OpenSSH known_hosts: plain, `[host]:port` and hashed entries.
        known_hosts_file: PathBuf,
    },
}

/// What one fetch found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchOutcome {
    /// The branch head now (full hex id).
    pub head: String,
    /// The branch head before this fetch, as the cache had it (`None` on a fresh cache).
    pub previous: Option<String>,
    /// Whether the head differs from `previous`.
    pub changed: bool,
    /// Whether the head moved to a commit that does not descend from `previous`
    /// (a force-push rewrote history). It is followed all the same.
    pub forced: bool,
    /// Every ref under the extra refspecs' destinations, name to commit id.
    pub extra_refs: BTreeMap<String, String>,
    /// Bytes of pack data received (0 when nothing was new).
    pub received_bytes: usize,
    /// Objects received.
    pub received_objects: usize,
    /// Whether a fetch ran: `false` when listing the remote's refs showed the cache holds
    /// them all already (an idle poll).
    pub fetched: bool,
}

/// A bare cache of one remote branch (plus any extra refspecs), fetched incrementally.
pub struct GitRepo {
    config: GitConfig,
    url: RemoteUrl,
    repo: Repository,
    tracking_ref: String,
    /// The branch head this process last fetched into `tracking_ref` (only it writes
    /// there): an idle poll compares the remote's refs with it instead of reading the ref
    /// from disk. `None` until the first fetch and after a failed one.
    fetched_head: Option<git2::Oid>,
}

impl std::fmt::Debug for GitRepo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitRepo")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The cache remembers which URL its refs came from; a different URL starts afresh.
const URL_CONFIG_KEY: &str = "kubelet-gitops.url";

/// The branch head a previous process left in the cache at `config.cache_dir`, without
/// touching the network or creating anything: `None` when there is no cache, it follows
/// another URL, or it never fetched the branch. A reconciler that restarts while the
/// remote is unreachable resumes from it: it is the last commit the previous process saw.
pub fn cached_head(config: &GitConfig) -> Option<String> {
    let repo = Repository::open_bare(&config.cache_dir).ok()?;
    let cached_url = repo.config().ok()?.get_string(URL_CONFIG_KEY).ok()?;
    if cached_url != config.url {
        return None;
    }
    repo.refname_to_id(&format!("refs/remotes/origin/{}", config.branch))
        .ok()
        .map(|oid| oid.to_string())
}

impl GitConfig {
    /// Checks the configuration alone, without touching the disk or the network: the URL
    /// (scheme, host, no credentials in it), the authentication it allows (a token only
    /// over https unless allowed over http, an SSH key only for SSH), the branch name and
    /// the extra refspecs. `run` calls it at start; [`GitRepo::open`] calls it too.
    pub fn check(&self) -> Result<(), GitError> {
        let url = RemoteUrl::parse(&self.url)?;
        check_auth_fits(self, &url)?;
        let branch_ref = format!("refs/heads/{}", self.branch);
        if self.branch.is_empty() || !git2::Reference::is_valid_name(&branch_ref) {
            return Err(GitError::BadBranch {
                branch: self.branch.clone(),
            });
        }
        for spec in &self.extra_refspecs {
            check_refspec(spec)?;
        }
        Ok(())
    }
}

impl GitRepo {
    /// Checks the configuration ([`GitConfig::check`]) and opens (or creates) the bare
    /// cache repository. Does not touch the network.
    pub fn open(config: GitConfig) -> Result<GitRepo, GitError> {
        config.check()?;
        let url = RemoteUrl::parse(&config.url)?;
        let cache = &config.cache_dir;
        let cache_error = |source| GitError::Cache {
            path: cache.clone(),
            source,
        };
        let repo = match Repository::open_bare(cache) {
            Ok(repo) => repo,
            Err(e) if e.code() == ErrorCode::NotFound => {
                std::fs::create_dir_all(cache).map_err(|e| {
                    cache_error(git2::Error::from_str(&format!("cannot create it: {e}")))
                })?;
                Repository::init_bare(cache).map_err(cache_error)?
            }
            Err(e) => return Err(cache_error(e)),
        };
        let tracking_ref = format!("refs/remotes/origin/{}", config.branch);
        let mut repo_config = repo.config().map_err(cache_error)?;
        let cached_url = repo_config.get_string(URL_CONFIG_KEY).ok();
        if cached_url.as_deref() != Some(config.url.as_str()) {
            if cached_url.is_some() {
                debug!(cache = %cache.display(), "remote URL changed: forgetting cached refs");
                let names: Vec<String> = repo
                    .references()
                    .map_err(cache_error)?
                    .filter_map(|r| r.ok().and_then(|r| r.name().ok().map(str::to_string)))
                    .filter(|n| n.starts_with("refs/") && !n.starts_with("refs/heads/"))
                    .collect();
                for name in names {
                    if let Ok(mut r) = repo.find_reference(&name) {
                        r.delete().map_err(cache_error)?;
                    }
                }
            }
            repo_config
                .set_str(URL_CONFIG_KEY, &config.url)
                .map_err(cache_error)?;
        }
        drop(repo_config);
        Ok(GitRepo {
            config,
            url,
            repo,
            tracking_ref,
            fetched_head: None,
        })
    }

    /// The configuration this cache follows.
    pub fn config(&self) -> &GitConfig {
        &self.config
    }

    /// The bare cache repository's directory.
    pub fn cache_path(&self) -> &Path {
        self.repo.path()
    }

    /// The branch head the cache holds now, if it has fetched it.
    pub fn head(&self) -> Option<String> {
        self.repo
            .refname_to_id(&self.tracking_ref)
            .ok()
            .map(|oid| oid.to_string())
    }

    /// The files of commit `id`, which must be in the cache.
    pub fn commit_source(&self, id: &str) -> Result<CommitSource, GitError> {
        CommitSource::open(self.repo.path(), id, &self.config.url)
    }

    /// Fetches the branch (forced, so a force-push is followed) and the extra refspecs;
    /// only objects the cache lacks are transferred.
    #[instrument(skip(self), fields(url = %self.config.url, branch = %self.config.branch))]
    pub fn fetch(&mut self) -> Result<FetchOutcome, GitError> {
        let previous = self
            .fetched_head
            .take()
            .or_else(|| self.repo.refname_to_id(&self.tracking_ref).ok());
        let mut refspecs = vec![format!(
            "+refs/heads/{}:{}",
            self.config.branch, self.tracking_ref
        )];
        refspecs.extend(self.config.extra_refspecs.iter().cloned());

        // An idle poll asks the remote for its refs only (what `git ls-remote` does) and
        // stops there when they are the ones the cache holds: no negotiation, no ref
        // updates, no pruning. Anything else, or a failed listing, falls through to the
        // fetch, which reports errors as before.
        if let Some(held) = previous
            && let Some(advertised) = self.list_remote()?
            && let Some(extra_refs) = self.up_to_date(&advertised, held)
        {
            debug!(head = %held, "remote unchanged");
            self.fetched_head = Some(held);
            return Ok(FetchOutcome {
                head: held.to_string(),
                previous: Some(held.to_string()),
                changed: false,
                forced: false,
                extra_refs,
                received_bytes: 0,
                received_objects: 0,
                fetched: false,
            });
        }

        let failure: RefCell<Option<GitError>> = RefCell::new(None);
        let mut remote = self.anonymous_remote()?;
        let result = {
            let mut options = FetchOptions::new();
            options
                .remote_callbacks(self.callbacks(&failure))
                .download_tags(AutotagOption::None)
                .prune(FetchPrune::On)
                .update_fetchhead(false);
            remote.fetch(&refspecs, Some(&mut options), None)
        };
        if let Err(e) = result {
            return Err(match failure.into_inner() {
                Some(recorded) => recorded,
                None => self.classify(e),
            });
        }
        let stats = remote.stats();
        let (received_bytes, received_objects) = (stats.received_bytes(), stats.received_objects());
        let wanted = format!("refs/heads/{}", self.config.branch);
        let advertised: Option<Vec<String>> = remote
            .list()
            .ok()
            .map(|heads| heads.iter().map(|h| h.name().to_string()).collect());
        let head = match self.repo.refname_to_id(&self.tracking_ref) {
            Ok(head) if advertised.as_ref().is_none_or(|a| a.contains(&wanted)) => head,
            _ => {
                return Err(GitError::NoSuchBranch {
                    url: self.config.url.clone(),
                    branch: self.config.branch.clone(),
                    available: advertised
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|n| n.strip_prefix("refs/heads/"))
                        .map(str::to_string)
                        .collect(),
                });
            }
        };
        let forced = match previous {
            Some(prev) if prev != head => {
                !self.repo.graph_descendant_of(head, prev).unwrap_or(false)
            }
            _ => false,
        };
        drop(remote);
        let extra_refs = self.extra_refs()?;
        self.fetched_head = Some(head);
        debug!(
            head = %head,
            previous = ?previous.map(|p| p.to_string()),
            forced,
            received_bytes,
            extra_refs = extra_refs.len(),
            "fetched"
        );
        Ok(FetchOutcome {
            head: head.to_string(),
            previous: previous.map(|p| p.to_string()),
            changed: previous != Some(head),
            forced,
            extra_refs,
            received_bytes,
            received_objects,
            fetched: true,
        })
    }

    fn anonymous_remote(&self) -> Result<git2::Remote<'_>, GitError> {
        self.repo
            .remote_anonymous(&self.config.url)
            .map_err(|e| GitError::BadUrl {
                url: self.config.url.clone(),
                reason: e.message().to_string(),
            })
    }

    /// Credentials (read from their files at each use) and the SSH host key check; the
    /// first error either finds is kept in `failure`, with its own message.
    fn callbacks<'a>(&'a self, failure: &'a RefCell<Option<GitError>>) -> RemoteCallbacks<'a> {
        let mut callbacks = RemoteCallbacks::new();
        let mut asked = 0u32;
        let (config, url) = (&self.config, &self.url);
        callbacks.credentials(move |asking_url, url_user, allowed| {
            credentials(config, asking_url, url_user, allowed, &mut asked).map_err(|e| {
                let message = e.to_string();
                failure.borrow_mut().get_or_insert(e);
                git2::Error::from_str(&message)
            })
        });
        callbacks.certificate_check(move |cert, _host| match cert.as_hostkey() {
            None => Ok(CertificateCheckStatus::CertificatePassthrough),
            Some(hostkey) => check_host_key(config, url, hostkey).map_err(|e| {
                let message = e.to_string();
                failure.borrow_mut().get_or_insert(e);
                git2::Error::from_str(&message)
            }),
        });
        callbacks
    }

    /// The remote's refs, name to target, as `git ls-remote` lists them; `None` when the
    /// listing failed (the fetch that follows reports why). Errors only for a URL libgit2
    /// cannot use at all.
    fn list_remote(&self) -> Result<Option<BTreeMap<String, git2::Oid>>, GitError> {
        let failure = RefCell::new(None);
        // Anonymous in the cache, as the fetch's (a detached remote reads the user's and
        // the system's git configuration at each poll: more costly, measured).
        let mut remote = self.anonymous_remote()?;
        let connection =
            match remote.connect_auth(git2::Direction::Fetch, Some(self.callbacks(&failure)), None)
            {
                Ok(connection) => connection,
                Err(e) => {
                    debug!(error = %e, "listing the remote's refs failed; fetching instead");
                    return Ok(None);
                }
            };
        Ok(connection.list().ok().map(|heads| {
            heads
                .iter()
                .map(|h| (h.name().to_string(), h.oid()))
                .collect()
        }))
    }

    /// When the cache already holds every ref the remote advertises under our refspecs
    /// (the branch at `held`, the extra refspecs' refs exactly, none more, none
    /// fewer), the extra refs as [`FetchOutcome::extra_refs`] has them; else `None`.
    fn up_to_date(
        &self,
        advertised: &BTreeMap<String, git2::Oid>,
        held: git2::Oid,
    ) -> Option<BTreeMap<String, String>> {
        let branch = format!("refs/heads/{}", self.config.branch);
        if advertised.get(&branch) != Some(&held) {
            return None;
        }
        let mut extra_refs = BTreeMap::new();
        for spec in &self.config.extra_refspecs {
            let (src, dst) = spec.trim_start_matches('+').split_once(':')?;
            let wanted: BTreeMap<String, git2::Oid> = advertised
                .iter()
                .filter_map(|(name, oid)| Some((map_refspec(src, dst, name)?, *oid)))
                .collect();
            let held: BTreeMap<String, git2::Oid> = self
                .repo
                .references_glob(dst)
                .ok()?
                .flatten()
                .filter_map(|r| Some((r.name().ok()?.to_string(), r.target()?)))
                .collect();
            if wanted != held {
                return None;
            }
            // The fetch records commits; a ref to anything else (an annotated tag) is
            // left to it.
            for (name, oid) in held {
                let commit = self.repo.find_commit(oid).ok()?;
                extra_refs.insert(name, commit.id().to_string());
            }
        }
        Some(extra_refs)
    }

    /// The refs the extra refspecs' destinations hold now.
    fn extra_refs(&self) -> Result<BTreeMap<String, String>, GitError> {
        let mut out = BTreeMap::new();
        for spec in &self.config.extra_refspecs {
            let Some((_, dst)) = spec.trim_start_matches('+').split_once(':') else {
                continue;
            };
            let refs = self
                .repo
                .references_glob(dst)
                .map_err(|source| GitError::Git {
                    what: format!("listing {dst} in {}", self.config.cache_dir.display()),
                    source,
                })?;
            for r in refs.flatten() {
                if let (Ok(name), Ok(commit)) = (r.name(), r.peel_to_commit()) {
                    out.insert(name.to_string(), commit.id().to_string());
                }
            }
        }
        Ok(out)
    }

    fn classify(&self, e: git2::Error) -> GitError {
        let url = self.config.url.clone();
        if e.code() == ErrorCode::Auth {
            return GitError::Auth {
                url,
                username: configured_username(&self.config.auth).to_string(),
                message: e.message().to_string(),
            };
        }
        if e.class() == ErrorClass::Invalid && e.message().contains("unsupported URL protocol") {
            return GitError::BadUrl {
                url,
                reason: e.message().to_string(),
            };
        }
        GitError::Unreachable { url, source: e }
    }
}

/// libgit2 callbacks that authenticate and check the SSH host key exactly as
/// [`GitRepo::fetch`] does (token or key read from their files at each use, host keys
/// only from the known_hosts file), for other operations on the same remote: pushing the
/// commit-status notes ([`crate::status::NotesRemote::with_callbacks`]). A failure reaches
/// libgit2 as an error carrying the message [`GitError`] would print; the credentials are
/// never part of it.
pub fn remote_callbacks(config: &GitConfig) -> RemoteCallbacks<'static> {
    let config = config.clone();
    // An unparseable URL cannot reach a host key check (libgit2 cannot connect either);
    // keep the reason to refuse with it.
    let url = RemoteUrl::parse(&config.url).map_err(|e| e.to_string());
    let credential_config = config.clone();
    let mut asked = 0u32;
    let mut callbacks = RemoteCallbacks::new();
    callbacks.credentials(move |asking_url, url_user, allowed| {
        credentials(
            &credential_config,
            asking_url,
            url_user,
            allowed,
            &mut asked,
        )
        .map_err(|e| git2::Error::from_str(&e.to_string()))
    });
    callbacks.certificate_check(move |cert, _host| match cert.as_hostkey() {
        None => Ok(CertificateCheckStatus::CertificatePassthrough),
        Some(hostkey) => match &url {
            Ok(url) => check_host_key(&config, url, hostkey)
                .map_err(|e| git2::Error::from_str(&e.to_string())),
            Err(reason) => Err(git2::Error::from_str(reason)),
        },
    });
    callbacks
}

/// The reason a token must not go over plain http, for messages.
const PLAIN_HTTP_TOKEN: &str = "a token would be sent unencrypted over plain http://: \
     use an https:// URL, or give --allow-insecure-http to send it anyway";

/// A token for an ssh URL (or a key for an https one) is a configuration mistake, and so
/// is a token over plain http unless allowed.
fn check_auth_fits(config: &GitConfig, url: &RemoteUrl) -> Result<(), GitError> {
    let bad = |reason: &str| GitError::BadUrl {
        url: super::url::redact(&config.url),
        reason: reason.to_string(),
    };
    match (url, &config.auth) {
        (RemoteUrl::Ssh { .. }, GitAuth::Ssh { .. }) => Ok(()),
        (RemoteUrl::Ssh { .. }, _) => {
            Err(bad("an SSH URL needs an SSH key and a known_hosts file"))
        }
        (_, GitAuth::Ssh { .. }) => Err(bad("an SSH key is configured but the URL is not SSH")),
        (
            RemoteUrl::Http { tls: false },
            GitAuth::Token {
                allow_insecure_http: false,
                ..
            },
        ) => Err(bad(PLAIN_HTTP_TOKEN)),
        (RemoteUrl::Http { .. }, _) | (_, GitAuth::None) => Ok(()),
        (RemoteUrl::Git | RemoteUrl::Local { .. }, GitAuth::Token { .. }) => {
            Err(bad("a token is configured but the URL is not http(s)"))
        }
    }
}

/// `[+]src:dst` with both sides under `refs/`.
fn check_refspec(spec: &str) -> Result<(), GitError> {
    let bad = |reason: &str| GitError::BadRefspec {
        refspec: spec.to_string(),
        reason: reason.to_string(),
    };
    let (src, dst) = spec
        .trim_start_matches('+')
        .split_once(':')
        .ok_or_else(|| bad("expected [+]<src>:<dst>"))?;
    if !src.starts_with("refs/") || !dst.starts_with("refs/") {
        return Err(bad("both sides must start with refs/"));
    }
    if src.matches('*').count() != dst.matches('*').count() || src.matches('*').count() > 1 {
        return Err(bad("at most one '*', on both sides"));
    }
    if dst.starts_with("refs/remotes/origin/") || dst.starts_with("refs/heads/") {
        return Err(bad("the destination must not overlap the branch cache"));
    }
    Ok(())
}

/// `name` mapped through the refspec `src:dst` (at most one `*` on each side, as
/// [`check_refspec`] ensures), or `None` when `src` does not match it.
fn map_refspec(src: &str, dst: &str, name: &str) -> Option<String> {
    match (src.split_once('*'), dst.split_once('*')) {
        (None, None) => (name == src).then(|| dst.to_string()),
        (Some((prefix, suffix)), Some((dst_prefix, dst_suffix))) => {
            let middle = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
            Some(format!("{dst_prefix}{middle}{dst_suffix}"))
        }
        _ => None,
    }
}

fn configured_username(auth: &GitAuth) -> &str {
    match auth {
        GitAuth::None => "",
        GitAuth::Token { username, .. } | GitAuth::Ssh { username, .. } => username,
    }
}

/// libgit2's credential callback. It asks again after a rejection; the second ask for a
/// secret means the remote rejected the first, so it ends there instead of looping.
fn credentials(
    config: &GitConfig,
    asking_url: &str,
    url_user: Option<&str>,
    allowed: CredentialType,
    asked: &mut u32,
) -> Result<Cred, GitError> {
    let auth_error = |message: &str| GitError::Auth {
        url: config.url.clone(),
        username: configured_username(&config.auth).to_string(),
        message: message.to_string(),
    };
    let cred_error = |e: git2::Error| auth_error(e.message());
    match &config.auth {
        GitAuth::None => Err(auth_error(
            "the remote asks for credentials and none are configured",
        )),
        GitAuth::Token {
            username,
            token_file,
            allow_insecure_http,
        } if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) => {
            // The URL asking may not be the configured one (a redirect).
            if !allow_insecure_http && is_plain_http(asking_url) {
                return Err(GitError::BadUrl {
                    url: super::url::redact(asking_url),
                    reason: PLAIN_HTTP_TOKEN.to_string(),
                });
            }
            *asked += 1;
            if *asked > 1 {
                return Err(auth_error("the remote rejected the token"));
            }
            let token = read_secret(token_file, "token file")?;
            Cred::userpass_plaintext(username, &token).map_err(cred_error)
        }
        GitAuth::Ssh {
            username, key_file, ..
        } => {
            let user = url_user.unwrap_or(username);
            if allowed.contains(CredentialType::SSH_KEY) {
                *asked += 1;
                if *asked > 1 {
                    return Err(auth_error("the remote rejected the SSH key"));
                }
                std::fs::metadata(key_file).map_err(|source| GitError::CredentialFile {
                    what: "SSH key",
                    path: key_file.clone(),
                    source,
                })?;
                Cred::ssh_key(user, None, key_file, None).map_err(cred_error)
            } else if allowed.contains(CredentialType::USERNAME) {
                Cred::username(user).map_err(cred_error)
            } else {
                Err(auth_error(
                    "the remote offers no SSH public-key authentication",
                ))
            }
        }
        GitAuth::Token { .. } => Err(auth_error(
            "the remote does not accept username and password authentication",
        )),
    }
}

/// A secret file's content without trailing whitespace (a newline from `echo`).
fn read_secret(path: &Path, what: &'static str) -> Result<String, GitError> {
    let text = std::fs::read_to_string(path).map_err(|source| GitError::CredentialFile {
        what,
        path: path.to_path_buf(),
        source,
    })?;
    Ok(text.trim_end().to_string())
}

/// The SSH host key check against the configured known_hosts file.
fn check_host_key(
    config: &GitConfig,
    url: &RemoteUrl,
    hostkey: &git2::cert::CertHostkey<'_>,
) -> Result<CertificateCheckStatus, GitError> {
    let (
        GitAuth::Ssh {
            known_hosts_file, ..
        },
        RemoteUrl::Ssh { host, port, .. },
    ) = (&config.auth, url)
    else {
        // An SSH connection for a non-SSH configuration cannot happen: `check_auth_fits`
        // pairs them. Refuse rather than trust an unchecked key.
        return Err(GitError::BadUrl {
            url: config.url.clone(),
            reason: "SSH host key presented but SSH is not configured".to_string(),
        });
    };
    let text =
        std::fs::read_to_string(known_hosts_file).map_err(|source| GitError::CredentialFile {
            what: "known_hosts file",
            path: known_hosts_file.clone(),
            source,
        })?;
    let known = KnownHosts::parse(&text);
    let key_type = key_type_name(hostkey.hostkey_type());
    let presented = match (hostkey.hostkey(), hostkey.hash_sha256()) {
        (Some(key), _) => PresentedKey::Raw(key),
        (None, Some(hash)) => PresentedKey::Sha256(hash),
        (None, None) => {
            return Err(GitError::UnknownHostKey {
                host: host_label(host, *port),
                key_type: "no key data from libssh2".to_string(),
                known_hosts: known_hosts_file.clone(),
            });
        }
    };
    host_key_verdict(
        known.check(host, *port, presented),
        host,
        *port,
        key_type,
        known_hosts_file,
    )
}

/// Turns a known_hosts verdict into accept or a named error.
pub(crate) fn host_key_verdict(
    check: HostKeyCheck,
    host: &str,
    port: u16,
    key_type: &str,
    known_hosts: &Path,
) -> Result<CertificateCheckStatus, GitError> {
    let host = host_label(host, port);
    match check {
        HostKeyCheck::Match { line } => {
            debug!(%host, line, known_hosts = %known_hosts.display(), "host key verified");
            Ok(CertificateCheckStatus::CertificateOk)
        }
        HostKeyCheck::Unknown => Err(GitError::UnknownHostKey {
            host,
            key_type: key_type.to_string(),
            known_hosts: known_hosts.to_path_buf(),
        }),
        HostKeyCheck::Mismatch { lines } => Err(GitError::HostKeyMismatch {
            host,
            key_type: key_type.to_string(),
            known_hosts: known_hosts.to_path_buf(),
            lines,
        }),
        HostKeyCheck::Revoked { line } => Err(GitError::RevokedHostKey {
            host,
            known_hosts: known_hosts.to_path_buf(),
            line,
        }),
    }
}

fn host_label(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_string()
    } else {
        format!("[{host}]:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str, auth: GitAuth) -> GitConfig {
        GitConfig {
            url: url.to_string(),
            branch: "main".to_string(),
            auth,
            cache_dir: PathBuf::from("/nonexistent"),
            extra_refspecs: Vec::new(),
        }
    }

    #[test]
    fn the_token_is_read_at_each_fetch_and_a_second_ask_is_a_rejection() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let token_file = tmp.path().join("token");
        std::fs::write(&token_file, "first-token\n").expect("write");
        let cfg = config(
            "https://git.example/r.git",
            GitAuth::Token {
                username: "bot".into(),
                token_file: token_file.clone(),
                allow_insecure_http: false,
            },
        );
        let mut asked = 0;
        let cred = credentials(
            &cfg,
            &cfg.url,
            None,
            CredentialType::USER_PASS_PLAINTEXT,
            &mut asked,
        );
        assert!(cred.is_ok(), "{:?}", cred.err());
        // Within one fetch, being asked again means the token was rejected.
        match credentials(
            &cfg,
            &cfg.url,
            None,
            CredentialType::USER_PASS_PLAINTEXT,
            &mut asked,
        ) {
            Err(GitError::Auth {
                username, message, ..
            }) => {
                assert_eq!(username, "bot");
                assert!(message.contains("rejected"), "{message}");
            }
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("credentials offered"),
        }
        // A missing token file is named, and its content never appears in errors.
        std::fs::remove_file(&token_file).expect("rm");
        let mut asked = 0;
        match credentials(
            &cfg,
            &cfg.url,
            None,
            CredentialType::USER_PASS_PLAINTEXT,
            &mut asked,
        ) {
            Err(e @ GitError::CredentialFile { .. }) => {
                assert!(e.to_string().contains("token file"), "{e}");
                assert!(e.is_retryable());
            }
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("credentials offered"),
        }
    }

    #[test]
    fn no_credentials_configured_is_an_auth_error() {
        let cfg = config("https://git.example/r.git", GitAuth::None);
        let mut asked = 0;
        let Err(err) = credentials(
            &cfg,
            &cfg.url,
            None,
            CredentialType::USER_PASS_PLAINTEXT,
            &mut asked,
        ) else {
            panic!("credentials offered with none configured");
        };
        assert!(matches!(err, GitError::Auth { .. }), "{err:?}");
        assert!(err.is_retryable());
    }

    #[test]
    fn ssh_credentials_use_the_url_user_and_check_the_key_file() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let cfg = config(
            "git@git.example:o/r.git",
            GitAuth::Ssh {
                username: "git".into(),
                key_file: tmp.path().join("missing-key"),
                known_hosts_file: tmp.path().join("known_hosts"),
            },
        );
        let mut asked = 0;
        assert!(
            credentials(
                &cfg,
                &cfg.url,
                Some("deploy"),
                CredentialType::USERNAME,
                &mut asked
            )
            .is_ok()
        );
        assert_eq!(asked, 0, "a username request is not a key attempt");
        match credentials(
            &cfg,
            &cfg.url,
            Some("deploy"),
            CredentialType::SSH_KEY,
            &mut asked,
        ) {
            Err(GitError::CredentialFile { what, path, .. }) => {
                assert_eq!(what, "SSH key");
                assert_eq!(path, tmp.path().join("missing-key"));
            }
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("credentials offered"),
        }
    }

    #[test]
    fn host_key_verdicts_name_the_host_and_the_file() {
        let file = Path::new("/etc/kubelet-gitops/known_hosts");
        assert!(matches!(
            host_key_verdict(
                HostKeyCheck::Match { line: 3 },
                "h",
                22,
                "ssh-ed25519",
                file
            ),
            Ok(CertificateCheckStatus::CertificateOk)
        ));
        let unknown = host_key_verdict(HostKeyCheck::Unknown, "h", 2222, "ssh-ed25519", file)
            .err()
            .expect("unknown host");
        assert_eq!(
            unknown.to_string(),
            "host key of [h]:2222 (ssh-ed25519) is not in /etc/kubelet-gitops/known_hosts"
        );
        assert!(!unknown.is_retryable());
        let mismatch = host_key_verdict(
            HostKeyCheck::Mismatch { lines: vec![1, 4] },
            "h",
            22,
            "ssh-rsa",
            file,
        )
        .err()
        .expect("mismatch");
        let text = mismatch.to_string();
        assert!(
            text.contains("host key of h (ssh-rsa) does not match"),
            "{text}"
        );
        assert!(text.contains("known_hosts (line 1, 4)"), "{text}");
        let revoked = host_key_verdict(HostKeyCheck::Revoked { line: 2 }, "h", 22, "x", file)
            .err()
            .expect("revoked");
        assert!(matches!(revoked, GitError::RevokedHostKey { line: 2, .. }));
    }

    #[test]
    fn configuration_mistakes_are_caught_before_any_fetch() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let token = GitAuth::Token {
            username: "u".into(),
            token_file: tmp.path().join("t"),
            allow_insecure_http: false,
        };
        let ssh = GitAuth::Ssh {
            username: "git".into(),
            key_file: tmp.path().join("k"),
            known_hosts_file: tmp.path().join("kh"),
        };
        let cases = [
            (
                "git@h:r.git",
                GitAuth::None,
                "main",
                vec![],
                "SSH URL needs",
            ),
            ("https://h/r", ssh.clone(), "main", vec![], "not SSH"),
            ("file:///r", token.clone(), "main", vec![], "not http"),
            (
                "http://h/r",
                token.clone(),
                "main",
                vec![],
                "unencrypted over plain http://",
            ),
            (
                "https://h/r",
                GitAuth::None,
                "bad..name",
                vec![],
                "invalid branch",
            ),
            (
                "https://h/r",
                GitAuth::None,
                "main",
                vec!["refs/pull/*"],
                "expected",
            ),
            (
                "https://h/r",
                GitAuth::None,
                "main",
                vec!["+refs/heads/*:refs/remotes/origin/*"],
                "overlap",
            ),
        ];
        for (url, auth, branch, extra, says) in cases {
            let mut cfg = config(url, auth);
            cfg.branch = branch.to_string();
            cfg.cache_dir = tmp.path().join("cache");
            cfg.extra_refspecs = extra.into_iter().map(str::to_string).collect();
            let err = GitRepo::open(cfg).expect_err(url);
            assert!(err.to_string().contains(says), "{url}: {err}");
            assert!(!err.is_retryable(), "{err}");
        }
        assert!(
            !tmp.path().join("cache").exists(),
            "nothing created for a bad config"
        );
    }

    #[test]
    fn a_token_goes_over_plain_http_only_when_allowed() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let token_file = tmp.path().join("token");
        std::fs::write(&token_file, "s3cret\n").expect("write");
        let token = |allow_insecure_http| GitAuth::Token {
            username: "bot".into(),
            token_file: token_file.clone(),
            allow_insecure_http,
        };
        // Refused at the check, before anything is created.
        let err = config("http://git.example/r.git", token(false))
            .check()
            .expect_err("plain http with a token");
        assert_eq!(
            err.to_string(),
            "invalid git URL \"http://git.example/r.git\": a token would be sent unencrypted \
             over plain http://: use an https:// URL, or give --allow-insecure-http to send it \
             anyway"
        );
        assert!(!err.is_retryable());
        config("http://git.example/r.git", token(true))
            .check()
            .expect("allowed explicitly");
        config("https://git.example/r.git", token(false))
            .check()
            .expect("https");
        config("http://git.example/r.git", GitAuth::None)
            .check()
            .expect("no token, nothing to protect");

        // An https remote that redirects to http is refused the token too.
        let https = config("https://git.example/r.git", token(false));
        let mut asked = 0;
        match credentials(
            &https,
            "HTTP://mirror.example/r.git",
            None,
            CredentialType::USER_PASS_PLAINTEXT,
            &mut asked,
        ) {
            Err(e @ GitError::BadUrl { .. }) => {
                assert!(e.to_string().contains("--allow-insecure-http"), "{e}");
                assert!(!e.to_string().contains("s3cret"), "{e}");
            }
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("the token was offered to a plain http URL"),
        }
        let allowed = config("https://git.example/r.git", token(true));
        let mut asked = 0;
        assert!(
            credentials(
                &allowed,
                "http://mirror.example/r.git",
                None,
                CredentialType::USER_PASS_PLAINTEXT,
                &mut asked,
            )
            .is_ok()
        );
    }
}
