//! [`GitRemote`]: the config repository as a real remote. A bare repository served by
//! `git daemon` on 127.0.0.1 (the reconciler fetches it over `git://`), and a work
//! tree where the scenario edits files, commits and pushes with the git CLI.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::E2eError;
use crate::process::{Proc, free_port, run};

/// The repository's name under the daemon's base path.
const REPO: &str = "config.git";

/// A config repository served by `git daemon`, with a work tree to change it from.
#[derive(Debug)]
pub struct GitRemote {
    work: PathBuf,
    port: u16,
    daemon: Proc,
}

impl GitRemote {
    /// Creates the bare repository and the work tree under `dir` and starts
    /// `git daemon` on a free port; returns once the daemon answers.
    pub async fn start(dir: &Path, log: PathBuf) -> Result<GitRemote, E2eError> {
        let base = dir.join("git");
        let bare = base.join(REPO);
        let work = dir.join("work");
        for d in [&base, &work] {
            std::fs::create_dir_all(d)
                .map_err(E2eError::io(format!("creating {}", d.display())))?;
        }
        let bare_s = bare.display().to_string();
        run(
            "git",
            &["init", "-q", "--bare", "-b", "main", &bare_s],
            None,
        )
        .await?;
        run("git", &["init", "-q", "-b", "main", "."], Some(&work)).await?;
        run("git", &["remote", "add", "origin", &bare_s], Some(&work)).await?;

        let port = free_port()?;
        // `git daemon` would run git-daemon as a child of its own, which SIGKILLing the
        // `git` process would leave running: start git-daemon itself.
        let exec_path = run("git", &["--exec-path"], None).await?;
        let program = Path::new(exec_path.trim()).join("git-daemon");
        let args: Vec<OsString> = [
            "--reuseaddr".to_string(),
            "--listen=127.0.0.1".into(),
            format!("--port={port}"),
            format!("--base-path={}", base.display()),
            "--export-all".into(),
            // The reconciler may push git notes (its commit statuses) back.
            "--enable=receive-pack".into(),
            "--informative-errors".into(),
            base.display().to_string(),
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        let daemon = Proc::spawn("git-daemon", &program, args, log)?;
        let mut remote = GitRemote { work, port, daemon };
        remote.wait_serving().await?;
        Ok(remote)
    }

    /// Waits until `git ls-remote` reaches the daemon.
    async fn wait_serving(&mut self) -> Result<(), E2eError> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let url = self.url();
        loop {
            self.daemon.check_running()?;
            match run("git", &["ls-remote", &url], None).await {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() > deadline => {
                    return Err(E2eError::Timeout {
                        what: format!("git daemon serving {url}"),
                        waited: Duration::from_secs(20),
                        state: e.to_string(),
                    });
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// `git://127.0.0.1:<port>/config.git`.
    pub fn url(&self) -> String {
        format!("git://127.0.0.1:{}/{REPO}", self.port)
    }

    /// The daemon's process (for its log, and to check it still runs).
    pub fn daemon(&mut self) -> &mut Proc {
        &mut self.daemon
    }

    /// The bare repository the daemon serves (a push to it is what a push to the
    /// remote would be).
    pub fn bare(&self) -> PathBuf {
        self.work
            .parent()
            .unwrap_or(Path::new("/"))
            .join("git")
            .join(REPO)
    }

    /// The work tree.
    pub fn work_tree(&self) -> &Path {
        &self.work
    }

    /// Writes `content` to `rel` in the work tree.
    pub fn write(&self, rel: &str, content: &str) -> Result<(), E2eError> {
        let path = self.work.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(E2eError::io(format!("creating {}", parent.display())))?;
        }
        std::fs::write(&path, content).map_err(E2eError::io(format!("writing {}", path.display())))
    }

    /// Commits everything in the work tree and pushes it to `main`; returns the commit id.
    pub async fn commit_and_push(&self, message: &str) -> Result<String, E2eError> {
        run("git", &["add", "-A"], Some(&self.work)).await?;
        self.git_as_author(&["commit", "-q", "-m", message]).await?;
        self.push().await
    }

    /// `git revert --no-edit HEAD` and a push; returns the new commit id.
    pub async fn revert_head(&self) -> Result<String, E2eError> {
        self.git_as_author(&["revert", "--no-edit", "HEAD"]).await?;
        self.push().await
    }

    /// The work tree's HEAD commit id.
    pub async fn head(&self) -> Result<String, E2eError> {
        Ok(run("git", &["rev-parse", "HEAD"], Some(&self.work))
            .await?
            .trim()
            .to_string())
    }

    async fn git_as_author(&self, args: &[&str]) -> Result<String, E2eError> {
        let mut all = vec![
            "-c",
            "user.name=kubelet-gitops e2e",
            "-c",
            "user.email=e2e@kubelet-gitops.invalid",
        ];
        all.extend_from_slice(args);
        run("git", &all, Some(&self.work)).await
    }

    async fn push(&self) -> Result<String, E2eError> {
        run(
            "git",
            &["push", "-q", "origin", "HEAD:main"],
            Some(&self.work),
        )
        .await?;
        self.head().await
    }
}
