//! `kubelet-gitops run`: logging, the async runtime, signals, and exit codes around
//! [`crate::controller`].

use std::process::ExitCode;

use kubelet_gitops_core::logging::{self, LogOutput};
use kubelet_gitops_core::message::error_chain;

use super::inputs;
use crate::args::RunArgs;
use crate::controller;

/// Waits for SIGTERM (what Kubernetes sends) or Ctrl-C.
async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Runs the controller until a signal (or, with `--once`, one reconcile). Exit codes: 0
/// success; 1 the commit does not validate (`--once`); 2 usage, configuration, git or API
/// failures.
pub fn run(args: RunArgs) -> ExitCode {
    if let Err(e) = logging::init(args.log_format, &args.log, LogOutput::Stderr) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let config = match args.into_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {}", error_chain(&e));
            return ExitCode::from(2);
        }
    };
    // The git cache is created (or reopened) now, so that a --cache-dir that cannot be
    // used stops the process at once instead of failing every poll.
    if let Err(e) = crate::git::GitRepo::open(config.git.clone()) {
        eprintln!("error: --cache-dir: {}", error_chain(&e));
        return ExitCode::from(2);
    }
    let runtime = match inputs::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let once = config.once;
    let result = runtime.block_on(async move {
        tracing::info!(
            version = env!("CARGO_PKG_VERSION"),
            identity = %config.identity,
            repo = %crate::publish::redact_url(&config.git.url),
            branch = %config.git.branch,
            interval = %humantime::format_duration(config.interval),
            leader_elect = config.leader.is_some(),
            statuses = config.status.backend.name(),
            review = config.status.review,
            once,
            "starting"
        );
        let running = controller::start(config).await?;
        if once {
            return running.wait().await;
        }
        let token = running.shutdown_token();
        tokio::select! {
            () = terminated() => {
                tracing::info!("shutting down");
                running.stop().await
            }
            // The controller stops by itself only on a fatal error.
            () = token.cancelled() => running.wait().await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %error_chain(&e), "stopped");
            if e.is_invalid_repo() {
                ExitCode::from(1)
            } else {
                ExitCode::from(2)
            }
        }
    }
}
