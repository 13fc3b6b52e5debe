//! kubelet-gitops-rescue: run by systemd before every start of the kubelet (an
//! `ExecStartPre=-` of kubelet.service), it rolls the node back when the kubelet keeps
//! failing with a config in flight and no agent running. See `node_agent::rescue`.
//! Exit codes: 0 done (whatever it did), 1 failed, 2 invalid options; systemd ignores all
//! of them (the `-`), so the kubelet always starts.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Parser as _;
use kubelet_gitops_core::message::error_chain;
use node_agent::args::LogFormat;
use node_agent::rescue::{self, RescueArgs};

fn main() -> ExitCode {
    let args = RescueArgs::parse();
    node_agent::agent::init_logging(LogFormat::Text, &args.shared.log);
    let settings = match args.into_settings() {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "invalid options; the kubelet starts as it is");
            return ExitCode::from(2);
        }
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    match rescue::run(&settings, now) {
        Ok(outcome) => {
            tracing::debug!(?outcome, "done");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!(error = %error_chain(&e), "kubelet-gitops-rescue failed; the kubelet starts as it is");
            ExitCode::FAILURE
        }
    }
}
