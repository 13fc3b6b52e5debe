//! Asking the kubelet whether it runs: `GET healthz` (the kubelet's
//! `http://127.0.0.1:10248/healthz`) and `GET configz` (`https://<node>:10250/configz`,
//! which needs `nodes/configz`, or `nodes/proxy` before KubeletFineGrainedAuthz, for the
//! bearer token), over rustls (ring). [`Probe::wait_ready`] polls until healthz answers and
//! configz shows the expected config, compared semantically
//! ([`kubelet_gitops_core::configz`]).

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use kubelet_gitops_core::configz::{configz_diff_on, unknown_fields};
use kubelet_gitops_core::types::KubeletConfiguration;
use serde_json::Value;
use tokio::time::Instant;
use tracing::{debug, info, instrument, warn};

use super::KubeletSettings;
use crate::error::cap;
use crate::error::{KubeletError, brief, root_cause};

/// Installs rustls's ring crypto provider as the process default (reqwest is built
/// without one). Idempotent.
pub fn install_crypto_provider() {
    // An error only says a provider is already installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The kubelet's healthz and configz, as the agent asks them.
#[derive(Debug, Clone)]
pub struct Probe {
    client: reqwest::Client,
    healthz_url: String,
    configz_url: Option<String>,
    token_file: Option<PathBuf>,
    poll_interval: Duration,
    request_timeout: Duration,
    runtime_cgroup_driver: Option<String>,
}

impl Probe {
    /// A probe of the endpoints `settings` name, with its HTTP client (the CA file is read
    /// now); `settings.restart` is not used.
    pub fn new(settings: KubeletSettings) -> Result<Probe, KubeletError> {
        install_crypto_provider();
        let KubeletSettings {
            restart: _,
            healthz_url,
            configz_url,
            token_file,
            ca_file,
            insecure_skip_tls_verify,
            restart_timeout: _,
            poll_interval,
            request_timeout,
            runtime_cgroup_driver,
        } = settings;
        let mut builder = reqwest::Client::builder()
            .connect_timeout(request_timeout.min(Duration::from_secs(3)))
            .timeout(request_timeout)
            .pool_max_idle_per_host(0)
            .no_proxy();
        if let Some(path) = &ca_file {
            let pem = std::fs::read(path).map_err(|e| KubeletError::Tls {
                what: format!("CA file {}", path.display()),
                message: e.to_string(),
            })?;
            let certs =
                reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| KubeletError::Tls {
                    what: format!("CA file {}", path.display()),
                    message: e.to_string(),
                })?;
            if certs.is_empty() {
                return Err(KubeletError::Tls {
                    what: format!("CA file {}", path.display()),
                    message: "no PEM certificates in it".into(),
                });
            }
            builder = builder.tls_certs_only(certs);
        }
        if insecure_skip_tls_verify {
            builder = builder.tls_danger_accept_invalid_certs(true);
        }
        let client = builder.build().map_err(|e| KubeletError::Tls {
            what: "HTTP client".into(),
            message: e.to_string(),
        })?;
        Ok(Probe {
            client,
            healthz_url,
            configz_url,
            token_file,
            poll_interval,
            request_timeout,
            runtime_cgroup_driver,
        })
    }

    async fn get(&self, url: &str, timeout: Duration) -> Result<Vec<u8>, KubeletError> {
        let mut req = self.client.get(url).timeout(timeout);
        if let Some(path) = &self.token_file {
            let token = std::fs::read_to_string(path).map_err(|source| KubeletError::Token {
                path: path.clone(),
                source,
            })?;
            let token = token.trim();
            if token.is_empty() {
                return Err(KubeletError::Token {
                    path: path.clone(),
                    source: io::Error::new(io::ErrorKind::InvalidData, "the file is empty"),
                });
            }
            req = req.bearer_auth(token);
        }
        let failed = |e: reqwest::Error| {
            debug!(url, error = ?e, "kubelet request failed");
            KubeletError::Http {
                url: url.to_string(),
                message: if e.is_timeout() {
                    format!("no answer within {}", humantime::format_duration(timeout))
                } else {
                    root_cause(&e)
                },
            }
        };
        let resp = req.send().await.map_err(failed)?;
        let code = resp.status().as_u16();
        let body = resp.bytes().await.map_err(failed)?;
        if code != 200 {
            // Bodies are short in practice (healthz's `[-]syncloop failed`, an
            // authorization denial); a proxy's HTML error page is cut.
            let text = String::from_utf8_lossy(&body);
            let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
            return Err(KubeletError::Status {
                url: url.to_string(),
                code,
                body: cap(&text, 256),
            });
        }
        Ok(body.to_vec())
    }

    /// `GET healthz`: Ok when it answers 200.
    pub async fn healthz(&self) -> Result<(), KubeletError> {
        self.get(&self.healthz_url, self.request_timeout)
            .await
            .map(|_| ())
    }

    /// `GET configz`: the `kubeletconfig` object.
    pub async fn configz(&self) -> Result<Value, KubeletError> {
        self.configz_within(self.request_timeout).await
    }

    async fn configz_within(&self, timeout: Duration) -> Result<Value, KubeletError> {
        let url = self.configz_url.as_deref().ok_or(KubeletError::NoConfigz)?;
        let body = self.get(url, timeout).await?;
        let bad = |message: String| KubeletError::Configz {
            url: url.to_string(),
            message,
        };
        let mut value: Value =
            serde_json::from_slice(&body).map_err(|e| bad(format!("not JSON: {e}")))?;
        match value.get_mut("kubeletconfig").map(Value::take) {
            Some(cfg @ Value::Object(_)) => Ok(cfg),
            Some(_) => Err(bad("kubeletconfig is not an object".into())),
            None => Err(bad("no kubeletconfig key".into())),
        }
    }

    /// One readiness check: `Err` says why not.
    async fn check_ready(
        &self,
        expect: &KubeletConfiguration,
        budget: Duration,
    ) -> Result<(), String> {
        let timeout = budget.min(self.request_timeout);
        // `healthz http://...: connection refused`: the endpoint, then the one cause.
        let say = |what: &str, e: KubeletError| match e {
            KubeletError::Http { .. }
            | KubeletError::Status { .. }
            | KubeletError::Configz { .. } => {
                format!("{what} {e}")
            }
            other => format!("{what}: {}", brief(&other)),
        };
        self.get(&self.healthz_url, timeout)
            .await
            .map_err(|e| say("healthz", e))?;
        if self.configz_url.is_none() {
            return Ok(());
        }
        let actual = self
            .configz_within(timeout)
            .await
            .map_err(|e| say("configz", e))?;
        if tracing::enabled!(tracing::Level::DEBUG) {
            for field in unknown_fields(&actual) {
                debug!(field = %field, "configz field unknown to this agent; not compared");
            }
        }
        let diffs = configz_diff_on(expect, &actual, self.runtime_cgroup_driver.as_deref());
        if diffs.is_empty() {
            return Ok(());
        }
        const SHOWN: usize = 5;
        let mut parts: Vec<String> = diffs.iter().take(SHOWN).map(ToString::to_string).collect();
        if diffs.len() > SHOWN {
            parts.push(format!("and {} more", diffs.len() - SHOWN));
        }
        Err(format!(
            "configz does not show the expected config: {}",
            parts.join("; ")
        ))
    }

    /// Waits until healthz answers and (with a configz URL) configz shows `expect`, at
    /// most `timeout`. On timeout the error says what was seen last.
    #[instrument(skip(self, expect), fields(timeout = %humantime::format_duration(timeout)))]
    pub async fn wait_ready(
        &self,
        expect: &KubeletConfiguration,
        timeout: Duration,
    ) -> Result<(), KubeletError> {
        let deadline = Instant::now() + timeout;
        let mut polls = 0u32;
        let mut last = String::from("not checked before the deadline");
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                warn!(polls, reason = %last, "kubelet not ready in time");
                return Err(KubeletError::NotReady { timeout, last });
            }
            polls += 1;
            match tokio::time::timeout(left, self.check_ready(expect, left)).await {
                Ok(Ok(())) => {
                    info!(polls, "kubelet ready with the expected config");
                    return Ok(());
                }
                Ok(Err(why)) => last = why,
                Err(_) if polls == 1 => last = "no answer before the deadline".into(),
                Err(_) => last = format!("{last} (then no answer before the deadline)"),
            }
            debug!(polls, reason = %last, "kubelet not ready yet");
            let left = deadline.saturating_duration_since(Instant::now());
            tokio::time::sleep(self.poll_interval.min(left)).await;
        }
    }
}
