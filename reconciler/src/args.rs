//! The `run` command's arguments ([`RunArgs`], every option a flag and a
//! `KUBELET_GITOPS_*` environment variable) and their validation into a
//! [`RunConfig`](crate::controller::RunConfig), once, at start.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};
use kubelet_gitops_core::names;

use crate::controller::{KubeSource, RunConfig};
use crate::git::signature::{
    ALLOWED_SIGNERS_FLAG, SignaturePolicy, SignaturePolicyError, TRUSTED_KEYS_FLAG,
};
use crate::git::{GitAuth, GitConfig};
use crate::leader::LeaseConfig;
use crate::render::RenderOptions;
use crate::status::{
    AzureDevOpsConfig, BitbucketConfig, BitbucketDataCenterConfig, GitHubConfig, GitLabConfig,
    GitLabProject, GiteaConfig, StatusBackendConfig, StatusConfig,
};

/// GitLab's SaaS instance, the default `--forge-url` for GitLab.
pub const GITLAB_URL: &str = "https://gitlab.com";

/// Where commit statuses go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum StatusBackendKind {
    /// git notes on refs/notes/kubelet-gitops in the config repository, pushed to it with
    /// the git credentials (`git log --notes=kubelet-gitops` shows them). No forge needed.
    #[default]
    Notes,
    /// GitHub or GitHub Enterprise Server commit statuses.
    #[value(name = "github")]
    GitHub,
    /// GitLab commit statuses.
    #[value(name = "gitlab")]
    GitLab,
    /// Gitea or Forgejo commit statuses.
    Gitea,
    /// Bitbucket Cloud build statuses (bitbucket.org). With --review, the open pull
    /// requests come from its API (it publishes no pull-request refs).
    #[value(name = "bitbucket-cloud")]
    BitbucketCloud,
    /// Bitbucket Data Center (or Server) build statuses.
    #[value(name = "bitbucket-datacenter", alias = "bitbucket-server")]
    BitbucketDataCenter,
    /// Azure DevOps (Services or Server) commit statuses.
    #[value(name = "azure-devops")]
    AzureDevOps,
    /// No commit statuses.
    None,
}

impl StatusBackendKind {
    fn flag_value(self) -> &'static str {
        match self {
            StatusBackendKind::Notes => "notes",
            StatusBackendKind::GitHub => "github",
            StatusBackendKind::GitLab => "gitlab",
            StatusBackendKind::Gitea => "gitea",
            StatusBackendKind::BitbucketCloud => "bitbucket-cloud",
            StatusBackendKind::BitbucketDataCenter => "bitbucket-datacenter",
            StatusBackendKind::AzureDevOps => "azure-devops",
            StatusBackendKind::None => "none",
        }
    }
}

pub use kubelet_gitops_core::logging::LogFormat;

/// `kubelet-gitops run`: follow a branch and roll its kubelet configs out to the nodes.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Git source")]
pub struct RunArgs {
    /// The config repository: https://..., ssh://..., git@host:path, file:///path or a
    /// local path. No credentials in it (`https://user:token@...` is refused): the token
    /// goes in --token-file.
    #[arg(long, value_name = "URL", env = "KUBELET_GITOPS_REPO_URL")]
    pub repo_url: String,

    /// The branch to follow. A force-push is followed like any other push.
    #[arg(
        long,
        value_name = "NAME",
        env = "KUBELET_GITOPS_BRANCH",
        default_value = "main"
    )]
    pub branch: String,

    /// How often to poll the branch (humantime: 30s, 5m). A poll that finds no new commit
    /// costs one fetch and nothing else, whatever the fleet's size: nodes are planned
    /// again when their watch shows a change, and all of them every 10 minutes (the
    /// resync that bounds how long a missed event can go unnoticed).
    #[arg(
        long,
        value_name = "DURATION",
        env = "KUBELET_GITOPS_INTERVAL",
        default_value = "30s"
    )]
    pub interval: humantime::Duration,

    /// A file holding an https access token (read at every fetch, so a rotated Secret is
    /// picked up). Sent as the password of --git-username; never over plain http://
    /// unless --allow-insecure-http is given.
    #[arg(long, value_name = "FILE", env = "KUBELET_GITOPS_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,

    /// The user name sent with the token or ssh key. GitHub accepts any name, GitLab wants
    /// `oauth2`, Gitea the token's owner. Default: `git` for ssh, `kubelet-gitops` for
    /// https.
    #[arg(long, value_name = "NAME", env = "KUBELET_GITOPS_GIT_USERNAME")]
    pub git_username: Option<String>,

    /// An unencrypted private ssh key (OpenSSH or PEM) for ssh URLs.
    #[arg(
        long,
        value_name = "FILE",
        env = "KUBELET_GITOPS_SSH_KEY_FILE",
        requires = "known_hosts_file",
        conflicts_with = "token_file"
    )]
    pub ssh_key_file: Option<PathBuf>,

    /// OpenSSH known_hosts holding the server's host key; required with --ssh-key-file
    /// (an unknown host key is refused, never trusted on first use).
    #[arg(long, value_name = "FILE", env = "KUBELET_GITOPS_KNOWN_HOSTS_FILE")]
    pub known_hosts_file: Option<PathBuf>,

    /// Send tokens over plain http:// (unencrypted): the git token (--token-file) to an
    /// http:// --repo-url, the forge token to an http:// --forge-url. Without it either is
    /// refused at start, loopback addresses included: anyone on the path could read the
    /// token. Only for tests and for a TLS-terminating proxy on the same host.
    #[arg(long, env = "KUBELET_GITOPS_ALLOW_INSECURE_HTTP")]
    pub allow_insecure_http: bool,

    /// Where the bare clone of the branch is cached; reused across restarts (only new
    /// objects are fetched). Give it a writable volume.
    #[arg(
        long,
        value_name = "DIR",
        env = "KUBELET_GITOPS_CACHE_DIR",
        default_value = "/var/cache/kubelet-gitops"
    )]
    pub cache_dir: PathBuf,

    /// The directory of the repository that holds the config tree (kubelet-gitops.yaml,
    /// base/, pools/), e.g. clusters/prod. Default: the top of the repository.
    #[arg(
        long,
        value_name = "DIR",
        env = "KUBELET_GITOPS_ROOT",
        default_value = ""
    )]
    pub root: String,

    /// Read only files matching these globs (relative to --root); added to the
    /// repository's own `include`. Repeatable; a comma outside `{}` and `[]` separates
    /// globs, in the flag and in the variable (`a,b` is two globs, `{a,b}` one). At most 256
    /// globs of 256 bytes.
    #[arg(long, value_name = "GLOB", env = "KUBELET_GITOPS_INCLUDE")]
    pub include: Vec<String>,

    /// Ignore files matching these globs (relative to --root); added to the repository's
    /// own `exclude`. Repeatable; a comma outside `{}` and `[]` separates globs, in the
    /// flag and in the variable (`a,b` is two globs, `{a,b}` one). At most 256 globs of 256
    /// bytes.
    #[arg(long, value_name = "GLOB", env = "KUBELET_GITOPS_EXCLUDE")]
    pub exclude: Vec<String>,

    /// Publish ConfigMaps in this namespace instead of the one kubelet-gitops.yaml names.
    /// It must exist.
    #[arg(
        long,
        value_name = "NAMESPACE",
        env = "KUBELET_GITOPS_NAMESPACE",
        help_heading = "Cluster"
    )]
    pub namespace: Option<String>,

    /// The kubeconfig to use. Default: $KUBECONFIG or ~/.kube/config, else the in-cluster
    /// service account.
    #[arg(
        long,
        value_name = "FILE",
        env = "KUBELET_GITOPS_KUBECONFIG",
        help_heading = "Cluster"
    )]
    pub kubeconfig: Option<PathBuf>,

    /// This replica's name in logs, the Lease and the API server's audit log (its
    /// User-Agent). Default: $HOSTNAME (the pod name), else kubelet-gitops-<pid>.
    #[arg(
        long,
        value_name = "NAME",
        env = "KUBELET_GITOPS_IDENTITY",
        help_heading = "Cluster"
    )]
    pub identity: Option<String>,

    /// Elect a leader with a coordination.k8s.io Lease, so that several replicas can run
    /// and only the leader writes; the others serve /healthz and /readyz and wait.
    #[arg(
        long,
        env = "KUBELET_GITOPS_LEADER_ELECT",
        help_heading = "Leader election",
        conflicts_with = "once"
    )]
    pub leader_elect: bool,

    /// The Lease's name.
    #[arg(
        long,
        value_name = "NAME",
        env = "KUBELET_GITOPS_LEASE_NAME",
        default_value = "kubelet-gitops",
        help_heading = "Leader election"
    )]
    pub lease_name: String,

    /// The Lease's namespace (must exist).
    #[arg(
        long,
        value_name = "NAMESPACE",
        env = "KUBELET_GITOPS_LEASE_NAMESPACE",
        default_value = "kubelet-gitops",
        help_heading = "Leader election"
    )]
    pub lease_namespace: String,

    /// How long the lease lasts without renewal before another replica takes over
    /// (whole seconds; the leader renews every seventh of it and steps down after two
    /// thirds without success). A leader that shuts down hands over at once.
    #[arg(
        long,
        value_name = "DURATION",
        env = "KUBELET_GITOPS_LEASE_DURATION",
        default_value = "15s",
        help_heading = "Leader election"
    )]
    pub lease_duration: humantime::Duration,

    /// Where to serve /metrics, /healthz, /readyz (and the webhook). All interfaces by
    /// default, so the kubelet's probes and Prometheus reach it on the pod IP; `off`
    /// serves nothing.
    #[arg(
        long,
        value_name = "ADDR",
        env = "KUBELET_GITOPS_ADMIN_ADDR",
        default_value = "0.0.0.0:9090",
        help_heading = "Serving"
    )]
    pub admin_addr: String,

    /// Serve a push webhook on POST /hooks/git of the admin port; a request whose HMAC
    /// signature (GitHub, Gitea, GitLab token) does not verify with this file's secret is
    /// rejected. A valid push wakes the poll at once.
    #[arg(
        long,
        value_name = "FILE",
        env = "KUBELET_GITOPS_WEBHOOK_SECRET_FILE",
        help_heading = "Serving"
    )]
    pub webhook_secret_file: Option<PathBuf>,

    /// Log format.
    #[arg(
        long,
        value_enum,
        env = "KUBELET_GITOPS_LOG_FORMAT",
        default_value = "text",
        help_heading = "Logging"
    )]
    pub log_format: LogFormat,

    /// Log filter (tracing's EnvFilter syntax: info, debug, reconciler=debug,kube=warn).
    #[arg(
        long,
        value_name = "FILTER",
        env = "KUBELET_GITOPS_LOG",
        default_value = "info",
        help_heading = "Logging"
    )]
    pub log: String,

    /// Apply only commits signed by a trusted key (Flux's verify): the branch head's
    /// signature (`git commit -S`, ssh or gpg) must verify against --allowed-signers or
    /// --trusted-keys. An unsigned commit, one signed by a key not listed there, one whose
    /// signature does not verify, or one made outside the key's valid-after/valid-before
    /// window applies nothing: the last applied commit stays in force and the commit gets
    /// an `error` status saying why. The key's fingerprint is recorded on each ConfigMap
    /// published (annotation kubelet-gitops.io/source-signing-key).
    #[arg(
        long,
        env = "KUBELET_GITOPS_REQUIRE_SIGNED_COMMITS",
        help_heading = "Commit signatures"
    )]
    pub require_signed_commits: bool,

    /// SSH signatures (gpg.format=ssh): git's allowed-signers file, the format of
    /// `gpg.ssh.allowedSignersFile` (ssh-keygen(1) ALLOWED SIGNERS): `PRINCIPALS
    /// [namespaces="git",valid-after="YYYYMMDD",valid-before="YYYYMMDD"] KEYTYPE BASE64KEY`
    /// per line (times without Z are UTC). Read at start: a line that does not parse
    /// stops `run`, naming it; restart to pick up a change.
    #[arg(
        long,
        value_name = "FILE",
        env = "KUBELET_GITOPS_ALLOWED_SIGNERS",
        help_heading = "Commit signatures"
    )]
    pub allowed_signers: Option<PathBuf>,

    /// OpenPGP signatures (git's default gpg.format): the trusted public keys, ASCII-armored
    /// (`gpg --export --armor KEYID... > FILE`; several blocks may be concatenated). A
    /// signing subkey of a listed key is trusted through its binding. Read at start.
    #[arg(
        long,
        value_name = "FILE",
        env = "KUBELET_GITOPS_TRUSTED_KEYS",
        help_heading = "Commit signatures"
    )]
    pub trusted_keys: Option<PathBuf>,

    /// Fetch, render, publish and reconcile once, then exit (for CI and tests): exit 0 if
    /// the commit applied, 1 if it does not validate, 2 on any other failure. Posts the
    /// commit statuses of that one round; reviews nothing.
    #[arg(long, env = "KUBELET_GITOPS_ONCE", help_heading = "Running")]
    pub once: bool,

    /// Where commit statuses go: per pool `kubelet-gitops/<pool>` on the commit that
    /// produced its ConfigMap (pending with progress, success, failure naming the node),
    /// `kubelet-gitops` for the whole commit (error when it does not validate). `notes`
    /// writes git notes in the config repository and pushes them to it when it accepts
    /// pushes; github, gitlab, gitea, bitbucket-cloud, bitbucket-datacenter and
    /// azure-devops post to the forge's commit-status API and need --forge-repo and
    /// --forge-token-file. Each forge's limits are kept: descriptions cut to its maximum
    /// (GitHub 140 characters, the others 255), contexts longer than Bitbucket Cloud's
    /// 40-character key shortened with a hash, states mapped to its names.
    #[arg(
        long,
        value_enum,
        value_name = "BACKEND",
        env = "KUBELET_GITOPS_STATUS_BACKEND",
        default_value = "notes",
        help_heading = "Commit statuses"
    )]
    pub status_backend: StatusBackendKind,

    /// The forge's API base: GitHub's is https://api.github.com (GitHub Enterprise
    /// Server: https://HOST/api/v3), Bitbucket Cloud's https://api.bitbucket.org/2.0
    /// (the defaults); for GitLab (default https://gitlab.com), Gitea and Bitbucket Data
    /// Center (required) the instance's URL with its context path, without /api/... or
    /// /rest/...; for Azure DevOps (required) the organization, https://dev.azure.com/ORG
    /// (Azure DevOps Server: the collection, https://HOST/tfs/COLLECTION). An http:// URL
    /// only with --allow-insecure-http (every request carries the forge token).
    #[arg(
        long,
        value_name = "URL",
        env = "KUBELET_GITOPS_FORGE_URL",
        help_heading = "Commit statuses"
    )]
    pub forge_url: Option<String>,

    /// The repository on the forge: OWNER/REPO on GitHub and Gitea; on GitLab the
    /// project's numeric id or its full path (group/subgroup/project); WORKSPACE/REPO on
    /// Bitbucket Cloud; PROJECTKEY/REPO on Bitbucket Data Center; PROJECT/REPO on Azure
    /// DevOps.
    #[arg(
        long,
        value_name = "REPO",
        env = "KUBELET_GITOPS_FORGE_REPO",
        help_heading = "Commit statuses"
    )]
    pub forge_repo: Option<String>,

    /// A file holding the forge token, read at every request (a rotated Secret is picked
    /// up). GitHub: "Commit statuses: write" (and "Pull requests: write" for --comment);
    /// GitLab: the api scope; Gitea: write:repository (and write:issue for --comment);
    /// Bitbucket Cloud: an access token with repository:write (and pullrequest for
    /// --review, pullrequest:write for --comment), or USER:APP_PASSWORD in the file (sent as Basic); Bitbucket Data Center: an HTTP
    /// access token with Repository write (sent as Bearer), or USER:PASSWORD; Azure
    /// DevOps: a personal access token with Code (status), and Code (read & write) for
    /// --comment (sent as Basic).
    #[arg(
        long,
        value_name = "FILE",
        env = "KUBELET_GITOPS_FORGE_TOKEN_FILE",
        help_heading = "Commit statuses"
    )]
    pub forge_token_file: Option<PathBuf>,

    /// A link shown next to every status, such as a dashboard of the rollout.
    #[arg(
        long,
        value_name = "URL",
        env = "KUBELET_GITOPS_STATUS_TARGET_URL",
        help_heading = "Commit statuses"
    )]
    pub status_target_url: Option<String>,

    /// Also fetch pull-request heads (refs/pull/*/head on GitHub and Gitea,
    /// refs/merge-requests/*/head on GitLab, both with notes,
    /// refs/pull-requests/*/from on Bitbucket Data Center, refs/pull/*/merge on Azure
    /// DevOps, which publishes only the merge; on Bitbucket Cloud, which publishes none,
    /// every branch, and the open pull requests into the followed branch from its API),
    /// plan each new or moved head against the applied commit of the branch (from their
    /// merge base) for the cluster's nodes, and post a kubelet-gitops/plan status on it.
    /// Nothing of a pull request is ever applied.
    #[arg(long, env = "KUBELET_GITOPS_REVIEW", help_heading = "Commit statuses")]
    pub review: bool,

    /// With --review, also post the Markdown plan as a pull-request comment, updated in
    /// place on later pushes (never a second one). Needs a forge backend.
    #[arg(
        long,
        env = "KUBELET_GITOPS_COMMENT",
        requires = "review",
        help_heading = "Commit statuses"
    )]
    pub comment: bool,

    /// With --review, pull-request heads whose commit is older than this are not
    /// reviewed (forges keep the heads of closed pull requests forever).
    #[arg(
        long,
        value_name = "DURATION",
        env = "KUBELET_GITOPS_REVIEW_MAX_AGE",
        default_value = "30days",
        help_heading = "Commit statuses"
    )]
    pub review_max_age: humantime::Duration,
}

/// An option that does not make sense.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    #[error("--admin-addr {value:?}: expected HOST:PORT (0.0.0.0:9090) or `off`")]
    AdminAddr { value: String },
    #[error("{flag} {path}: {source}")]
    Path {
        flag: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--known-hosts-file is only used with --ssh-key-file")]
    KnownHostsWithoutKey,
    #[error("--lease-duration {0}: must be at least 1s")]
    LeaseDuration(humantime::Duration),
    #[error("--interval {0}: must be at least 100ms")]
    Interval(humantime::Duration),
    #[error("--webhook-secret-file needs the admin port (--admin-addr is off)")]
    WebhookWithoutAdmin,
    #[error("--status-backend {backend} needs {flag}")]
    ForgeOptionMissing {
        backend: &'static str,
        flag: &'static str,
    },
    #[error(
        "{flag} is only used with a forge --status-backend (github, gitlab, gitea, \
         bitbucket-cloud, bitbucket-datacenter, azure-devops; it is {backend})"
    )]
    ForgeOptionUnused {
        backend: &'static str,
        flag: &'static str,
    },
    #[error("--forge-repo {value:?}: {backend} wants {form}")]
    ForgeRepo {
        backend: &'static str,
        value: String,
        form: &'static str,
    },
    #[error("{flag} {value:?}: expected an http:// or https:// URL")]
    Url { flag: &'static str, value: String },
    #[error("{flag} {value:?}: credentials in the URL are not allowed ({hint})")]
    UrlCredentials {
        flag: &'static str,
        /// The URL with its credentials masked.
        value: String,
        hint: &'static str,
    },
    #[error(
        "{flag} {value:?}: the {what} would be sent unencrypted over plain http://: use an \
         https:// URL, or give --allow-insecure-http to send it anyway"
    )]
    InsecureHttp {
        flag: &'static str,
        value: String,
        what: &'static str,
    },
    #[error("--repo-url {url:?}: {reason}")]
    RepoUrl { url: String, reason: String },
    #[error("--branch {0:?}: not a valid git branch name")]
    Branch(String),
    #[error("the git source")]
    Git(#[source] crate::git::GitError),
    #[error("{flag} {value:?}: {reason}")]
    Name {
        flag: &'static str,
        value: String,
        reason: String,
    },
    #[error("{0}")]
    Render(String),
    #[error("{flag} {path}: the file is empty; it must hold the {what}")]
    EmptySecret {
        flag: &'static str,
        path: PathBuf,
        what: &'static str,
    },
    #[error("--review needs a status backend (--status-backend is none)")]
    ReviewWithoutBackend,
    #[error("--comment needs a forge backend: {backend} has no pull requests")]
    CommentWithoutForge { backend: &'static str },
    #[error(
        "--require-signed-commits needs the trusted keys: --allowed-signers FILE (ssh \
         signatures) and/or --trusted-keys FILE (OpenPGP)"
    )]
    SignaturesWithoutKeys,
    #[error("{flag} is only used with --require-signed-commits (give it too, or drop {flag})")]
    KeysWithoutSignatures { flag: &'static str },
    #[error(transparent)]
    Signatures(#[from] SignaturePolicyError),
}

/// An absolute form of `path` (relative to the working directory), checked to exist.
fn existing(flag: &'static str, path: &Path) -> Result<PathBuf, ArgsError> {
    std::path::absolute(path)
        .and_then(|p| std::fs::metadata(&p).map(|_| p))
        .map_err(|source| ArgsError::Path {
            flag,
            path: path.to_path_buf(),
            source,
        })
}

/// [`existing`], and the file must be readable and hold something besides whitespace:
/// a secret file that is empty at start is a mistake, not a rotation in progress.
fn secret_file(flag: &'static str, path: &Path, what: &'static str) -> Result<PathBuf, ArgsError> {
    let path = existing(flag, path)?;
    let text = std::fs::read(&path).map_err(|source| ArgsError::Path {
        flag,
        path: path.clone(),
        source,
    })?;
    if text.iter().all(u8::is_ascii_whitespace) {
        return Err(ArgsError::EmptySecret { flag, path, what });
    }
    Ok(path)
}

/// `value` as a Kubernetes name of the kind `errors` checks (namespace: an RFC 1123
/// label; Lease: a subdomain).
fn kube_name(
    flag: &'static str,
    value: &str,
    errors: fn(&str) -> Vec<String>,
) -> Result<(), ArgsError> {
    match names::joined(errors(value)) {
        None => Ok(()),
        Some(reason) => Err(ArgsError::Name {
            flag,
            value: value.to_string(),
            reason,
        }),
    }
}

/// The globs given to `--include` or `--exclude` (of `run` and `plan`): every value (a
/// flag, or the variable) holds one or more globs separated by commas outside `{...}`
/// and `[...]` (and not escaped as `\,`), so `a,b` is two globs and `pools/{a,b}.yaml`
/// one. Empty pieces are dropped (an empty variable is no glob).
pub fn split_globs<S: AsRef<str>>(values: &[S]) -> Vec<String> {
    let mut globs = Vec::new();
    for value in values {
        let mut current = String::new();
        let (mut braces, mut in_class, mut escaped) = (0usize, false, false);
        for c in value.as_ref().chars() {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '[' if !in_class => in_class = true,
                ']' if in_class => in_class = false,
                '{' if !in_class => braces += 1,
                '}' if !in_class => braces = braces.saturating_sub(1),
                ',' if !in_class && braces == 0 => {
                    globs.push(std::mem::take(&mut current));
                    continue;
                }
                _ => {}
            }
            current.push(c);
        }
        globs.push(current);
    }
    globs.retain(|g| !g.trim().is_empty());
    globs
}

impl RunArgs {
    /// Validates the arguments into the controller's configuration: paths made absolute
    /// and checked, durations bounded, the webhook secret read.
    pub fn into_config(self) -> Result<RunConfig, ArgsError> {
        let RunArgs {
            repo_url,
            branch,
            interval,
            token_file,
            git_username,
            ssh_key_file,
            known_hosts_file,
            allow_insecure_http,
            cache_dir,
            root,
            include,
            exclude,
            namespace,
            kubeconfig,
            identity,
            leader_elect,
            lease_name,
            lease_namespace,
            lease_duration,
            admin_addr,
            webhook_secret_file,
            log_format: _,
            log: _,
            require_signed_commits,
            allowed_signers,
            trusted_keys,
            once,
            status_backend,
            forge_url,
            forge_repo,
            forge_token_file,
            status_target_url,
            review,
            comment,
            review_max_age,
        } = self;
        let status = status_config(
            status_backend,
            ForgeArgs {
                url: forge_url,
                repo: forge_repo,
                token_file: forge_token_file,
            },
            status_target_url,
            review,
            comment,
            review_max_age.into(),
            allow_insecure_http,
        )?;

        if let Some(ns) = &namespace {
            kube_name("--namespace", ns, names::dns1123_label_errors)?;
        }
        kube_name("--lease-name", &lease_name, names::dns1123_subdomain_errors)?;
        kube_name(
            "--lease-namespace",
            &lease_namespace,
            names::dns1123_label_errors,
        )?;
        let auth = match (token_file, ssh_key_file, known_hosts_file) {
            (Some(token), None, None) => GitAuth::Token {
                username: git_username.unwrap_or_else(|| "kubelet-gitops".to_string()),
                token_file: secret_file("--token-file", &token, "git token")?,
                allow_insecure_http,
            },
            (None, Some(key), Some(hosts)) => GitAuth::Ssh {
                username: git_username.unwrap_or_else(|| "git".to_string()),
                key_file: existing("--ssh-key-file", &key)?,
                known_hosts_file: existing("--known-hosts-file", &hosts)?,
            },
            (None, None, None) => GitAuth::None,
            (_, None, Some(_)) => return Err(ArgsError::KnownHostsWithoutKey),
            // clap rejects the other combinations (ssh key without known_hosts, both auths).
            _ => return Err(ArgsError::KnownHostsWithoutKey),
        };
        let cache_dir = std::path::absolute(&cache_dir).map_err(|source| ArgsError::Path {
            flag: "--cache-dir",
            path: cache_dir.clone(),
            source,
        })?;
        let interval: Duration = interval.into();
        if interval < Duration::from_millis(100) {
            return Err(ArgsError::Interval(interval.into()));
        }
        let kube = match kubeconfig {
            Some(path) => KubeSource::Kubeconfig(existing("--kubeconfig", &path)?),
            None => KubeSource::Infer,
        };
        let identity = identity
            .filter(|s| !s.is_empty())
            .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
            .unwrap_or_else(|| format!("kubelet-gitops-{}", std::process::id()));
        let lease_duration: Duration = lease_duration.into();
        if lease_duration < Duration::from_secs(1) {
            return Err(ArgsError::LeaseDuration(lease_duration.into()));
        }
        let leader = leader_elect.then(|| {
            LeaseConfig::new(
                lease_name,
                lease_namespace,
                identity.clone(),
                lease_duration,
            )
        });
        let admin_addr = match admin_addr.as_str() {
            "off" | "" => None,
            s => Some(s.parse::<SocketAddr>().map_err(|_| ArgsError::AdminAddr {
                value: s.to_string(),
            })?),
        };
        let webhook_secret = match webhook_secret_file {
            Some(_) if admin_addr.is_none() => return Err(ArgsError::WebhookWithoutAdmin),
            Some(path) => Some(secret_file(
                "--webhook-secret-file",
                &path,
                "webhook secret",
            )?),
            None => None,
        };
        let git = GitConfig {
            url: repo_url,
            branch,
            auth,
            cache_dir,
            extra_refspecs: Vec::new(),
        };
        git.check().map_err(|e| match e {
            crate::git::GitError::BadUrl { url, reason } => ArgsError::RepoUrl { url, reason },
            crate::git::GitError::BadBranch { branch } => ArgsError::Branch(branch),
            other => ArgsError::Git(other),
        })?;
        let render = RenderOptions {
            root,
            include: split_globs(&include),
            exclude: split_globs(&exclude),
        };
        if let Err(errors) = render.check() {
            let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
            return Err(ArgsError::Render(lines.join("\n")));
        }
        let signatures = signature_policy(
            require_signed_commits,
            allowed_signers.as_deref(),
            trusted_keys.as_deref(),
        )?;
        let mut config = RunConfig::new(git, kube, identity);
        config.signatures = signatures.map(std::sync::Arc::new);
        config.interval = interval;
        config.render = render;
        config.namespace = namespace;
        config.leader = leader;
        config.admin_addr = admin_addr;
        config.webhook_secret_file = webhook_secret;
        config.once = once;
        config.status = status;
        Ok(config)
    }
}

/// The signature policy of `--require-signed-commits`: its trust files made absolute,
/// read and parsed (an error names the file and the line).
fn signature_policy(
    required: bool,
    allowed_signers: Option<&Path>,
    trusted_keys: Option<&Path>,
) -> Result<Option<SignaturePolicy>, ArgsError> {
    if !required {
        return match (allowed_signers, trusted_keys) {
            (None, None) => Ok(None),
            (Some(_), _) => Err(ArgsError::KeysWithoutSignatures {
                flag: ALLOWED_SIGNERS_FLAG,
            }),
            (None, Some(_)) => Err(ArgsError::KeysWithoutSignatures {
                flag: TRUSTED_KEYS_FLAG,
            }),
        };
    }
    if allowed_signers.is_none() && trusted_keys.is_none() {
        return Err(ArgsError::SignaturesWithoutKeys);
    }
    let allowed_signers = allowed_signers
        .map(|p| existing(ALLOWED_SIGNERS_FLAG, p))
        .transpose()?;
    let trusted_keys = trusted_keys
        .map(|p| existing(TRUSTED_KEYS_FLAG, p))
        .transpose()?;
    let policy = SignaturePolicy::load(allowed_signers.as_deref(), trusted_keys.as_deref())?;
    Ok(Some(policy))
}

/// The `--forge-*` options.
struct ForgeArgs {
    url: Option<String>,
    repo: Option<String>,
    token_file: Option<PathBuf>,
}

/// `url`, checked to be an http(s) URL with a host and without credentials (`hint` says
/// where they go instead). Messages show it with any credentials masked.
fn http_url(flag: &'static str, url: &str, hint: &'static str) -> Result<String, ArgsError> {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    let rest = if lower.starts_with("https://") {
        url.get(8..)
    } else if lower.starts_with("http://") {
        url.get(7..)
    } else {
        None
    };
    match rest {
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') => {
            let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
            if authority.contains('@') {
                return Err(ArgsError::UrlCredentials {
                    flag,
                    value: crate::git::redact_url(url),
                    hint,
                });
            }
            Ok(url.to_string())
        }
        _ => Err(ArgsError::Url {
            flag,
            value: crate::git::redact_url(url),
        }),
    }
}

/// The commit-status options, checked against each other.
fn status_config(
    kind: StatusBackendKind,
    forge: ForgeArgs,
    target_url: Option<String>,
    review: bool,
    comment: bool,
    review_max_age: Duration,
    allow_insecure_http: bool,
) -> Result<StatusConfig, ArgsError> {
    let name = kind.flag_value();
    let ForgeArgs {
        url,
        repo,
        token_file,
    } = forge;
    let backend = match kind {
        StatusBackendKind::Notes | StatusBackendKind::None => {
            for (flag, given) in [
                ("--forge-url", url.is_some()),
                ("--forge-repo", repo.is_some()),
                ("--forge-token-file", token_file.is_some()),
            ] {
                if given {
                    return Err(ArgsError::ForgeOptionUnused {
                        backend: name,
                        flag,
                    });
                }
            }
            if kind == StatusBackendKind::None {
                StatusBackendConfig::None
            } else {
                StatusBackendConfig::Notes
            }
        }
        StatusBackendKind::GitHub
        | StatusBackendKind::GitLab
        | StatusBackendKind::Gitea
        | StatusBackendKind::BitbucketCloud
        | StatusBackendKind::BitbucketDataCenter
        | StatusBackendKind::AzureDevOps => {
            let missing = |flag| ArgsError::ForgeOptionMissing {
                backend: name,
                flag,
            };
            let repo = repo
                .filter(|r| !r.trim().is_empty())
                .ok_or_else(|| missing("--forge-repo"))?;
            let token_file = token_file.ok_or_else(|| missing("--forge-token-file"))?;
            let token_file = secret_file("--forge-token-file", &token_file, "forge token")?;
            let url = url
                .map(|u| http_url("--forge-url", &u, "the token goes in --forge-token-file"))
                .transpose()?;
            // Every request to the forge carries the token.
            if let Some(u) = url.as_deref().filter(|u| crate::git::is_plain_http(u))
                && !allow_insecure_http
            {
                return Err(ArgsError::InsecureHttp {
                    flag: "--forge-url",
                    value: u.to_string(),
                    what: "forge token",
                });
            }
            let owner_repo = |form| match repo.trim().trim_matches('/').split_once('/') {
                Some((owner, name))
                    if !owner.is_empty() && !name.is_empty() && !name.contains('/') =>
                {
                    Ok((owner.to_string(), name.to_string()))
                }
                _ => Err(ArgsError::ForgeRepo {
                    backend: name,
                    value: repo.clone(),
                    form,
                }),
            };
            match kind {
                StatusBackendKind::GitHub => {
                    let (owner, name) = owner_repo("OWNER/REPO")?;
                    let config = GitHubConfig::new(owner, name, token_file);
                    StatusBackendConfig::GitHub(match url {
                        Some(u) => config.with_api_url(u),
                        None => config,
                    })
                }
                StatusBackendKind::GitLab => StatusBackendConfig::GitLab(GitLabConfig {
                    url: url.unwrap_or_else(|| GITLAB_URL.to_string()),
                    project: GitLabProject::parse(&repo),
                    token_file,
                }),
                StatusBackendKind::BitbucketCloud => {
                    let (workspace, name) = owner_repo("WORKSPACE/REPO")?;
                    let config = BitbucketConfig::new(workspace, name, token_file);
                    StatusBackendConfig::BitbucketCloud(match url {
                        Some(api_url) => BitbucketConfig { api_url, ..config },
                        None => config,
                    })
                }
                StatusBackendKind::BitbucketDataCenter => {
                    let (project, name) = owner_repo("PROJECTKEY/REPO")?;
                    StatusBackendConfig::BitbucketDataCenter(BitbucketDataCenterConfig {
                        url: url.ok_or_else(|| missing("--forge-url"))?,
                        project,
                        repo: name,
                        token_file,
                    })
                }
                StatusBackendKind::AzureDevOps => {
                    let (project, name) = owner_repo("PROJECT/REPO")?;
                    StatusBackendConfig::AzureDevOps(AzureDevOpsConfig {
                        url: url.ok_or_else(|| missing("--forge-url"))?,
                        project,
                        repo: name,
                        token_file,
                    })
                }
                _ => {
                    let (owner, name) = owner_repo("OWNER/REPO")?;
                    StatusBackendConfig::Gitea(GiteaConfig {
                        url: url.ok_or_else(|| missing("--forge-url"))?,
                        owner,
                        repo: name,
                        token_file,
                    })
                }
            }
        }
    };
    if review && kind == StatusBackendKind::None {
        return Err(ArgsError::ReviewWithoutBackend);
    }
    if comment && matches!(kind, StatusBackendKind::Notes | StatusBackendKind::None) {
        return Err(ArgsError::CommentWithoutForge { backend: name });
    }
    let target_url = target_url
        .map(|u| {
            http_url(
                "--status-target-url",
                &u,
                "the link is shown on every status",
            )
        })
        .transpose()?;
    Ok(StatusConfig {
        backend,
        target_url,
        review,
        comment,
        review_max_age,
        ..StatusConfig::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("kubelet-gitops").chain(args.iter().copied()))
            .map(|c| c.run)
    }

    #[test]
    fn defaults_and_validation() {
        let dir = tempfile::tempdir().unwrap();
        let a = parse(&["--repo-url", "file:///srv/repo", "--cache-dir", "cache"]).unwrap();
        assert_eq!(a.branch, "main");
        assert_eq!(Duration::from(a.interval), Duration::from_secs(30));
        assert_eq!(a.admin_addr, "0.0.0.0:9090");
        let c = a.into_config().unwrap();
        assert!(c.git.cache_dir.is_absolute());
        assert_eq!(c.git.auth, GitAuth::None);
        assert!(c.leader.is_none());
        assert_eq!(c.admin_addr, Some("0.0.0.0:9090".parse().unwrap()));

        let token = dir.path().join("token");
        std::fs::write(&token, "t0k3n\n").unwrap();
        let c = parse(&[
            "--repo-url",
            "https://git.example.com/fleet.git",
            "--token-file",
            token.to_str().unwrap(),
            "--leader-elect",
            "--lease-duration",
            "6s",
            "--identity",
            "replica-a",
            "--include",
            "pools/*.yaml,base/**",
            "--admin-addr",
            "off",
        ])
        .unwrap()
        .into_config()
        .unwrap();
        assert!(
            matches!(&c.git.auth, GitAuth::Token { username, .. } if username == "kubelet-gitops")
        );
        let lease = c.leader.unwrap();
        assert_eq!(lease.identity, "replica-a");
        assert_eq!(lease.lease_duration, Duration::from_secs(6));
        assert_eq!(lease.renew_deadline, Duration::from_secs(4));
        assert_eq!(c.render.include, ["pools/*.yaml", "base/**"]);
        assert_eq!(c.admin_addr, None);

        assert!(
            parse(&["--repo-url", "x", "--ssh-key-file", "k"]).is_err(),
            "needs known_hosts"
        );
        assert!(parse(&["--repo-url", "x", "--once", "--leader-elect"]).is_err());
        let missing = parse(&["--repo-url", "x", "--token-file", "/nonexistent/token"])
            .unwrap()
            .into_config();
        assert!(
            matches!(
                missing,
                Err(ArgsError::Path {
                    flag: "--token-file",
                    ..
                })
            ),
            "{missing:?}"
        );
        let bad = parse(&["--repo-url", "x", "--admin-addr", "nine"])
            .unwrap()
            .into_config();
        assert!(matches!(bad, Err(ArgsError::AdminAddr { .. })));
        let fast = parse(&["--repo-url", "x", "--interval", "10ms"])
            .unwrap()
            .into_config();
        assert!(matches!(fast, Err(ArgsError::Interval(_))));
    }

    #[test]
    fn status_options() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("forge-token");
        std::fs::write(&token, "t0k3n\n").unwrap();
        let token = token.to_str().unwrap();
        let config = |args: &[&str]| {
            let mut all = vec!["--repo-url", "file:///srv/repo"];
            all.extend_from_slice(args);
            parse(&all).map(|a| a.into_config())
        };

        let c = config(&[]).unwrap().unwrap();
        assert!(matches!(c.status.backend, StatusBackendConfig::Notes));
        assert!(!c.status.review && !c.status.comment);
        assert!(c.git.extra_refspecs.is_empty());

        let c = config(&[
            "--status-backend",
            "github",
            "--forge-repo",
            "acme/fleet",
            "--forge-token-file",
            token,
            "--review",
            "--comment",
            "--status-target-url",
            "https://grafana.example.com/d/kubelet",
        ])
        .unwrap()
        .unwrap();
        let StatusBackendConfig::GitHub(gh) = &c.status.backend else {
            panic!("{:?}", c.status.backend)
        };
        assert_eq!(
            (gh.api_url.as_str(), gh.owner.as_str(), gh.repo.as_str()),
            ("https://api.github.com", "acme", "fleet")
        );
        assert!(gh.token_file.is_absolute());
        assert!(c.status.review && c.status.comment);
        assert_eq!(
            c.status.target_url.as_deref(),
            Some("https://grafana.example.com/d/kubelet")
        );
        assert_eq!(
            c.status.backend.review_refspecs(),
            ["+refs/pull/*/head:refs/pull/*/head"]
        );
        assert_eq!(c.status.review_max_age, Duration::from_secs(30 * 24 * 3600));

        let c = config(&[
            "--status-backend",
            "gitlab",
            "--forge-repo",
            "platform/k8s/fleet",
            "--forge-token-file",
            token,
        ])
        .unwrap()
        .unwrap();
        let StatusBackendConfig::GitLab(gl) = &c.status.backend else {
            panic!("{:?}", c.status.backend)
        };
        assert_eq!(gl.url, GITLAB_URL);
        assert_eq!(gl.project, GitLabProject::Path("platform/k8s/fleet".into()));
        assert_eq!(
            c.status.backend.review_refspecs(),
            ["+refs/merge-requests/*/head:refs/merge-requests/*/head"]
        );

        let c = config(&[
            "--status-backend",
            "gitea",
            "--forge-url",
            "https://git.example.com",
            "--forge-repo",
            "ops/fleet",
            "--forge-token-file",
            token,
        ])
        .unwrap()
        .unwrap();
        assert!(matches!(c.status.backend, StatusBackendConfig::Gitea(_)));

        let err = |args: &[&str]| config(args).unwrap().unwrap_err().to_string();
        assert_eq!(
            err(&["--status-backend", "github", "--forge-token-file", token]),
            "--status-backend github needs --forge-repo"
        );
        assert_eq!(
            err(&[
                "--status-backend",
                "gitea",
                "--forge-repo",
                "a/b",
                "--forge-token-file",
                token
            ]),
            "--status-backend gitea needs --forge-url"
        );
        assert!(
            err(&[
                "--status-backend",
                "github",
                "--forge-repo",
                "a/b/c",
                "--forge-token-file",
                token
            ])
            .contains("wants OWNER/REPO")
        );
        assert!(err(&["--forge-repo", "a/b"]).contains("only used with"));
        assert!(err(&["--review", "--comment"]).contains("--comment needs a forge"));
        assert!(err(&["--status-backend", "none", "--review"]).contains("--review needs"));
        assert!(err(&["--status-target-url", "dash"]).contains("http"));
        assert!(
            config(&["--comment"]).is_err(),
            "--comment requires --review"
        );
        assert!(config(&["--status-backend", "bitbucket"]).is_err());
    }

    #[test]
    fn bitbucket_and_azure_devops_options() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("forge-token");
        std::fs::write(&token, "t0k3n\n").unwrap();
        let token = token.to_str().unwrap();
        let config = |args: &[&str]| {
            let mut all = vec![
                "--repo-url",
                "file:///srv/repo",
                "--forge-token-file",
                token,
            ];
            all.extend_from_slice(args);
            parse(&all).map(|a| a.into_config())
        };
        let err = |args: &[&str]| config(args).unwrap().unwrap_err().to_string();

        let c = config(&[
            "--status-backend",
            "bitbucket-cloud",
            "--forge-repo",
            "acme/fleet",
        ])
        .unwrap()
        .unwrap();
        let StatusBackendConfig::BitbucketCloud(bb) = &c.status.backend else {
            panic!("{:?}", c.status.backend)
        };
        assert_eq!(
            (bb.api_url.as_str(), bb.workspace.as_str(), bb.repo.as_str()),
            ("https://api.bitbucket.org/2.0", "acme", "fleet")
        );
        let c = config(&[
            "--status-backend",
            "bitbucket-cloud",
            "--forge-repo",
            "acme/fleet",
            "--review",
            "--comment",
        ])
        .unwrap()
        .unwrap();
        assert!(c.status.review && c.status.comment);
        assert_eq!(
            c.status.backend.review_refspecs(),
            ["+refs/heads/*:refs/bitbucket/heads/*"]
        );

        let dc = [
            "--status-backend",
            "bitbucket-server",
            "--forge-repo",
            "OPS/fleet",
            "--review",
            "--comment",
        ];
        assert_eq!(
            err(&dc),
            "--status-backend bitbucket-datacenter needs --forge-url"
        );
        let c = config(
            &[
                &dc[..],
                &["--forge-url", "https://git.example.com/bitbucket"],
            ]
            .concat(),
        )
        .unwrap()
        .unwrap();
        let StatusBackendConfig::BitbucketDataCenter(bb) = &c.status.backend else {
            panic!("{:?}", c.status.backend)
        };
        assert_eq!(
            (bb.url.as_str(), bb.project.as_str(), bb.repo.as_str()),
            ("https://git.example.com/bitbucket", "OPS", "fleet")
        );
        assert_eq!(
            c.status.backend.review_refspecs(),
            ["+refs/pull-requests/*/from:refs/pull-requests/*/from"]
        );

        let c = config(&[
            "--status-backend",
            "azure-devops",
            "--forge-url",
            "https://dev.azure.com/acme",
            "--forge-repo",
            "Platform/fleet",
            "--review",
        ])
        .unwrap()
        .unwrap();
        let StatusBackendConfig::AzureDevOps(az) = &c.status.backend else {
            panic!("{:?}", c.status.backend)
        };
        assert_eq!(
            (az.url.as_str(), az.project.as_str(), az.repo.as_str()),
            ("https://dev.azure.com/acme", "Platform", "fleet")
        );
        assert_eq!(
            c.status.backend.review_refspecs(),
            ["+refs/pull/*/merge:refs/pull/*/merge"]
        );
        assert_eq!(
            err(&[
                "--status-backend",
                "azure-devops",
                "--forge-url",
                "https://dev.azure.com/acme",
                "--forge-repo",
                "acme/Platform/fleet",
            ]),
            "--forge-repo \"acme/Platform/fleet\": azure-devops wants PROJECT/REPO"
        );
    }

    #[test]
    fn configuration_errors_are_caught_at_start_with_credentials_masked() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "t0k3n\n").unwrap();
        let token = token.to_str().unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let empty = empty.to_str().unwrap();
        let err = |args: &[&str]| {
            let e = parse(args).unwrap().into_config().unwrap_err();
            kubelet_gitops_core::message::error_chain(&e)
        };
        let ok = |args: &[&str]| parse(args).unwrap().into_config().unwrap();

        let e = err(&["--repo-url", "http://user:pa55@git.example/r.git"]);
        assert_eq!(
            e,
            "--repo-url \"http://***@git.example/r.git\": credentials in the URL are not \
             allowed: put the token in --token-file (and the user in --git-username)"
        );
        assert!(!err(&["--repo-url", "https://pa55@h/r"]).contains("pa55"));
        assert!(err(&["--repo-url", "ftp://h/r"]).contains("unsupported scheme"));
        assert!(
            err(&["--repo-url", "git@h:r.git", "--token-file", token])
                .contains("an SSH URL needs an SSH key")
        );
        assert_eq!(
            err(&["--repo-url", "file:///r", "--branch", "a..b"]),
            "--branch \"a..b\": not a valid git branch name"
        );

        // A token over plain http only with --allow-insecure-http (or its variable).
        let http = [
            "--repo-url",
            "http://127.0.0.1:3000/r.git",
            "--token-file",
            token,
        ];
        assert_eq!(
            err(&http),
            "--repo-url \"http://127.0.0.1:3000/r.git\": a token would be sent unencrypted \
             over plain http://: use an https:// URL, or give --allow-insecure-http to send it \
             anyway"
        );
        let c = ok(&[&http[..], &["--allow-insecure-http"]].concat());
        assert!(matches!(
            c.git.auth,
            GitAuth::Token {
                allow_insecure_http: true,
                ..
            }
        ));
        ok(&["--repo-url", "http://127.0.0.1:3000/r.git"]);
        let forge = |url: &str| {
            vec![
                "--repo-url".to_string(),
                "file:///r".into(),
                "--status-backend".into(),
                "gitea".into(),
                "--forge-url".into(),
                url.into(),
                "--forge-repo".into(),
                "o/r".into(),
                "--forge-token-file".into(),
                token.into(),
            ]
        };
        let strs = |v: &[String]| v.iter().map(String::as_str).collect::<Vec<_>>().join(" ");
        for url in ["http://gitea.local:3000", "HTTP://127.0.0.1"] {
            let args = forge(url);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            assert_eq!(
                err(&args),
                format!(
                    "--forge-url \"{url}\": the forge token would be sent unencrypted over \
                     plain http://: use an https:// URL, or give --allow-insecure-http to send \
                     it anyway"
                ),
                "{}",
                strs(&forge(url))
            );
            let mut allowed = args.clone();
            allowed.push("--allow-insecure-http");
            assert!(matches!(
                ok(&allowed).status.backend,
                StatusBackendConfig::Gitea(_)
            ));
        }
        let args = forge("https://bot:pa55@gitea.example");
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(
            err(&args),
            "--forge-url \"https://***@gitea.example\": credentials in the URL are not \
             allowed (the token goes in --forge-token-file)"
        );

        assert!(
            err(&["--repo-url", "file:///r", "--namespace", "Kube_System"])
                .starts_with("--namespace \"Kube_System\": a lowercase RFC 1123 label")
        );
        assert!(
            err(&["--repo-url", "file:///r", "--lease-name", "a/b"])
                .starts_with("--lease-name \"a/b\": a lowercase RFC 1123 subdomain")
        );
        assert!(
            err(&["--repo-url", "file:///r", "--include", "pools/[x"])
                .contains("--include: invalid glob")
        );
        assert!(
            err(&["--repo-url", "file:///r", "--root", "../up"]).contains("leaves the repository")
        );
        assert_eq!(
            err(&["--repo-url", "https://h/r", "--token-file", empty]),
            format!("--token-file {empty}: the file is empty; it must hold the git token")
        );
        assert!(
            err(&[
                "--repo-url",
                "file:///r",
                "--webhook-secret-file",
                empty,
                "--admin-addr",
                "127.0.0.1:0"
            ])
            .contains("it must hold the webhook secret")
        );
        assert!(
            err(&[
                "--repo-url",
                "file:///r",
                "--status-target-url",
                "https://u:p@dash.example/d"
            ])
            .contains("credentials in the URL are not allowed")
        );
    }

    #[test]
    fn globs_split_at_commas_outside_braces_and_classes() {
        assert_eq!(split_globs(&["a,b"]), ["a", "b"]);
        assert_eq!(split_globs(&["pools/{a,b}.yaml"]), ["pools/{a,b}.yaml"]);
        assert_eq!(
            split_globs(&["pools/{a,b}.yaml,base/**", "x"]),
            ["pools/{a,b}.yaml", "base/**", "x"]
        );
        assert_eq!(split_globs(&["[,]x,y"]), ["[,]x", "y"]);
        assert_eq!(split_globs(&["a\\,b,c"]), ["a\\,b", "c"]);
        assert_eq!(split_globs(&["", ",a,,"]), ["a"]);
        assert!(split_globs::<&str>(&[]).is_empty());
        // What `run` makes of them (`plan` calls the same function).
        let c = parse(&[
            "--repo-url",
            "file:///r",
            "--exclude",
            "pools/{a,b}.yaml,drafts/**",
            "--exclude",
            "x.yaml",
        ])
        .unwrap()
        .into_config()
        .unwrap();
        assert_eq!(
            c.render.exclude,
            ["pools/{a,b}.yaml", "drafts/**", "x.yaml"]
        );
    }

    #[test]
    fn signed_commits_need_a_trust_file_and_a_trust_file_needs_them() {
        let dir = tempfile::tempdir().unwrap();
        let base = ["--repo-url", "file:///srv/repo", "--cache-dir", "cache"];
        let with = |extra: &[&str]| {
            let args: Vec<&str> = base.iter().chain(extra).copied().collect();
            parse(&args).unwrap().into_config()
        };
        assert!(with(&[]).unwrap().signatures.is_none());
        assert!(matches!(
            with(&["--require-signed-commits"]),
            Err(ArgsError::SignaturesWithoutKeys)
        ));
        let signers = dir.path().join("allowed_signers");
        std::fs::write(
            &signers,
            "alice@example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILM+rvN+ot98qgEN796jTiQfZfG1KaT0PtFDJ/XFSqti\n",
        )
        .unwrap();
        let signers = signers.to_str().unwrap();
        let err = with(&["--allowed-signers", signers]).expect_err("without the flag");
        assert_eq!(
            err.to_string(),
            "--allowed-signers is only used with --require-signed-commits (give it too, or drop \
             --allowed-signers)"
        );
        let c = with(&["--require-signed-commits", "--allowed-signers", signers]).unwrap();
        assert_eq!(c.signatures.expect("a policy").counts(), (1, 0));
        // A line that does not parse names the file and the line.
        std::fs::write(
            dir.path().join("bad"),
            "# x\nalice@example.com ssh-ed25519\n",
        )
        .unwrap();
        let bad = dir.path().join("bad");
        let err = with(&[
            "--require-signed-commits",
            "--allowed-signers",
            bad.to_str().unwrap(),
        ])
        .expect_err("bad line");
        assert!(
            err.to_string()
                .starts_with(&format!("--allowed-signers {}:2: ", bad.display())),
            "{err}"
        );
        let err = with(&[
            "--require-signed-commits",
            "--trusted-keys",
            "/nonexistent/keys.asc",
        ])
        .expect_err("missing");
        assert!(
            err.to_string()
                .starts_with("--trusted-keys /nonexistent/keys.asc"),
            "{err}"
        );
    }

    #[test]
    fn every_option_has_an_environment_variable() {
        use clap::CommandFactory;
        let cmd = Cli::command();
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version") {
                continue;
            }
            let env = arg.get_env().and_then(|e| e.to_str()).unwrap_or_default();
            assert!(
                env.starts_with("KUBELET_GITOPS_"),
                "--{id} has no KUBELET_GITOPS_* variable"
            );
            assert!(arg.get_help().is_some(), "--{id} has no help");
        }
    }
}
