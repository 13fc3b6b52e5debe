//! The kubelet, as the agent restarts and probes it ([`Kubelet`]), and its state files.
//!
//! - [`restart`]: systemd's `RestartUnit` over D-Bus, or a command, behind a trait.
//! - [`probe`]: healthz and configz over HTTP(S), and waiting for the kubelet to run a
//!   config.
//! - [`state_files`]: the CPU and memory manager checkpoints a policy change makes stale,
//!   found and removed on the node.

pub mod probe;
pub mod restart;
pub mod state_files;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kubelet_gitops_core::types::KubeletConfiguration;
use serde_json::Value;
use tokio::time::Instant;
use tracing::{info, instrument};

pub use probe::{Probe, install_crypto_provider};
pub use restart::{
    BoxFuture, CommandRestarter, RecordingRestarter, RestartMethod, Restarter, SystemdRestarter,
    check_unit_name,
};
pub use state_files::{recorded_policy, remove_state_files, state_files_for_change};

use crate::error::KubeletError;

/// How to reach and restart the kubelet.
#[derive(Debug, Clone)]
pub struct KubeletSettings {
    /// How to restart it.
    pub restart: RestartMethod,
    /// `http://127.0.0.1:10248/healthz` on a real node.
    pub healthz_url: String,
    /// `https://<node>:10250/configz`; `None` verifies by healthz alone.
    pub configz_url: Option<String>,
    /// A file holding the bearer token sent with every request (re-read each time, as
    /// projected tokens rotate).
    pub token_file: Option<PathBuf>,
    /// PEM bundle of the CAs to trust instead of the platform's (the kubelet's serving
    /// certificate is often self-signed: its `kubelet.crt`).
    pub ca_file: Option<PathBuf>,
    /// Accept any certificate (for self-signed serving certificates without a CA file).
    pub insecure_skip_tls_verify: bool,
    /// Bound on one restart. Default 2 minutes.
    pub restart_timeout: Duration,
    /// Pause between readiness polls. Default 500 ms.
    pub poll_interval: Duration,
    /// Bound on one HTTP request. Default 5 s.
    pub request_timeout: Duration,
    /// The container runtime's cgroup driver (`--cgroup-driver`): configz showing it is
    /// what a kubelet whose runtime reports its driver runs, whatever the config says
    /// ([`kubelet_gitops_core::configz::configz_diff_on`]). `None`: compared as is.
    pub runtime_cgroup_driver: Option<String>,
}

impl KubeletSettings {
    /// Settings with the defaults: no configz, no token, platform CAs.
    pub fn new(restart: RestartMethod, healthz_url: impl Into<String>) -> Self {
        KubeletSettings {
            restart,
            healthz_url: healthz_url.into(),
            configz_url: None,
            token_file: None,
            ca_file: None,
            insecure_skip_tls_verify: false,
            restart_timeout: Duration::from_secs(120),
            poll_interval: Duration::from_millis(500),
            request_timeout: Duration::from_secs(5),
            runtime_cgroup_driver: None,
        }
    }
}

/// The kubelet, as the agent restarts and probes it.
#[derive(Debug, Clone)]
pub struct Kubelet {
    restarter: Arc<dyn Restarter>,
    probe: Probe,
}

impl Kubelet {
    /// A kubelet client from `settings`, restarting with [`RestartMethod::restarter`].
    pub fn new(settings: KubeletSettings) -> Result<Kubelet, KubeletError> {
        let restarter = settings.restart.restarter(settings.restart_timeout)?;
        Kubelet::with_restarter(settings, restarter)
    }

    /// A kubelet client from `settings` that restarts through `restarter` (its
    /// `settings.restart` is not used).
    pub fn with_restarter(
        settings: KubeletSettings,
        restarter: Arc<dyn Restarter>,
    ) -> Result<Kubelet, KubeletError> {
        let probe = Probe::new(settings)?;
        Ok(Kubelet { restarter, probe })
    }

    /// Restarts the kubelet.
    #[instrument(skip(self), fields(method = %self.restarter.describe()))]
    pub async fn restart(&self) -> Result<(), KubeletError> {
        let started = Instant::now();
        self.restarter.restart().await?;
        info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "kubelet restarted"
        );
        Ok(())
    }

    /// `GET healthz`: Ok when it answers 200.
    pub async fn healthz(&self) -> Result<(), KubeletError> {
        self.probe.healthz().await
    }

    /// `GET configz`: the `kubeletconfig` object.
    pub async fn configz(&self) -> Result<Value, KubeletError> {
        self.probe.configz().await
    }

    /// Waits until healthz answers and (with a configz URL) configz shows `expect`, at
    /// most `timeout` ([`Probe::wait_ready`]).
    pub async fn wait_ready(
        &self,
        expect: &KubeletConfiguration,
        timeout: Duration,
    ) -> Result<(), KubeletError> {
        self.probe.wait_ready(expect, timeout).await
    }
}
