//! Restarting and probing the kubelet.
//!
//! - Restart: systemd's `org.freedesktop.systemd1.Manager.RestartUnit(unit, "replace")`
//!   over the system bus ([`SystemdRestarter`], zbus), waiting for the job's `JobRemoved`
//!   signal so that the old kubelet is gone when the restart returns; or a command run
//!   to completion ([`CommandRestarter`]). Both sit behind the [`Restarter`] trait, with a
//!   [`RecordingRestarter`] for tests that count restarts.
//! - Probe: `GET healthz` (the kubelet's `http://127.0.0.1:10248/healthz`) and
//!   `GET configz` (`https://<node>:10250/configz`, which needs `nodes/configz`, or
//!   `nodes/proxy` before KubeletFineGrainedAuthz, for the bearer token), with rustls
//!   (ring). [`Kubelet::wait_ready`] polls until healthz answers and configz shows the
//!   expected config, compared semantically ([`configz_diff`]): both sides go through the
//!   typed model, so `60s` and `1m0s` are equal, and zero values (`false`, `0`, `""`,
//!   `[]`, `{}`) count as absent as Go's `omitempty` renders them, except in
//!   `featureGates` where `false` is a choice. Fields the agent's model does not know
//!   (a newer kubelet) are ignored. The kubelet registers configz with the effective
//!   config before it changes anything at run time, so no field needs special casing.
//! - [`state_files_for_change`] and [`remove_state_files`]: the checkpoint files a policy
//!   change requires removing before the kubelet starts (it refuses a `cpu_manager_state`
//!   or `memory_manager_state` of another policy). When the agent removes them is
//!   explained in `agent/drive.rs` (`Driver::write`).
//!
//! ```text
//! pub enum RestartMethod { Systemd { unit: String }, Command(Vec<String>) }
//! pub trait Restarter: Send + Sync + Debug { fn restart(&self) -> BoxFuture<'_, Result<(), KubeletError>>; fn describe(&self) -> String; }
//! pub struct SystemdRestarter; pub struct CommandRestarter; pub struct RecordingRestarter;
//! pub struct KubeletSettings { pub restart, pub healthz_url, pub configz_url, pub token_file, pub ca_file,
//!                              pub insecure_skip_tls_verify, pub restart_timeout, pub poll_interval, pub request_timeout }
//! impl KubeletSettings { pub fn new(restart: RestartMethod, healthz_url: impl Into<String>) -> Self }
//! impl Kubelet {
//!     pub fn new(settings: KubeletSettings) -> Result<Kubelet, KubeletError>
//!     pub fn with_restarter(settings: KubeletSettings, restarter: Arc<dyn Restarter>) -> Result<Kubelet, KubeletError>
//!     pub async fn restart(&self) -> Result<(), KubeletError>
//!     pub async fn healthz(&self) -> Result<(), KubeletError>
//!     pub async fn configz(&self) -> Result<serde_json::Value, KubeletError>   // the kubeletconfig object
//!     pub async fn wait_ready(&self, expect: &KubeletConfiguration, timeout: Duration) -> Result<(), KubeletError>
//! }
//! pub fn configz_diff(expect: &KubeletConfiguration, actual: &Value) -> Vec<ConfigzDiff>
//! pub fn install_crypto_provider()
//! pub fn state_files_to_clear(old: &KubeletConfiguration, new: &KubeletConfiguration) -> Vec<&'static str>
//! pub fn recorded_policy(path: &Path) -> Option<String>
//! pub fn state_files_for_change(host_root: &Path, root_dir: &str, old: Option<&KubeletConfiguration>, new: &KubeletConfiguration) -> Vec<String>
//! pub fn remove_state_files(host_root: &Path, root_dir: &str, names: &[String]) -> io::Result<Vec<PathBuf>>
//! ```

use std::fmt;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use kubelet_gitops_core::types::KubeletConfiguration;
use serde_json::{Map, Value};
use tokio::time::Instant;
use tracing::{debug, info, instrument, warn};

use crate::error::{KubeletError, brief, root_cause};
use crate::hostflags::host_path;

/// A boxed future, for the object-safe [`Restarter`] trait.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How the kubelet is restarted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestartMethod {
    /// `RestartUnit` over the system bus (`DBUS_SYSTEM_BUS_ADDRESS`, default
    /// `unix:path=/run/dbus/system_bus_socket`; in a container, mount the host's
    /// `/run/dbus` and point the variable at it).
    Systemd { unit: String },
    /// A command and its arguments, run to completion; a non-zero exit is a failure.
    Command(Vec<String>),
}

/// Restarts the kubelet. Implementations: [`SystemdRestarter`], [`CommandRestarter`],
/// [`RecordingRestarter`].
pub trait Restarter: Send + Sync + fmt::Debug {
    /// Restarts the kubelet; returns once the old process is gone and the new one started
    /// (not necessarily healthy).
    fn restart(&self) -> BoxFuture<'_, Result<(), KubeletError>>;
    /// What it does, for logs and messages.
    fn describe(&self) -> String;
}

impl RestartMethod {
    /// The [`Restarter`] for this method; `timeout` bounds one restart.
    pub fn restarter(&self, timeout: Duration) -> Result<Arc<dyn Restarter>, KubeletError> {
        Ok(match self {
            RestartMethod::Systemd { unit } => Arc::new(SystemdRestarter::new(unit, timeout)?),
            RestartMethod::Command(argv) => Arc::new(CommandRestarter::new(argv.clone(), timeout)?),
        })
    }
}

// ---------------------------------------------------------------------------------------
// systemd

/// The part of `org.freedesktop.systemd1.Manager` the agent uses.
#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Manager",
    default_service = "org.freedesktop.systemd1",
    default_path = "/org/freedesktop/systemd1",
    gen_blocking = false
)]
trait SystemdManager {
    /// Asks systemd to send job and unit signals to this client.
    fn subscribe(&self) -> zbus::Result<()>;

    /// Queues a restart job for `name`; returns the job's object path.
    fn restart_unit(&self, name: &str, mode: &str)
    -> zbus::Result<zbus::zvariant::OwnedObjectPath>;

    /// A job finished: `result` is `done`, `canceled`, `timeout`, `failed`, `dependency`
    /// or `skipped`.
    #[zbus(signal)]
    fn job_removed(
        &self,
        id: u32,
        job: zbus::zvariant::ObjectPath<'_>,
        unit: &str,
        result: &str,
    ) -> zbus::Result<()>;
}

/// Checks a unit name as systemd would accept it for `RestartUnit`: `name.type`, at most
/// 255 bytes, of ASCII letters, digits and `:-_.\@`.
pub fn check_unit_name(unit: &str) -> Result<(), KubeletError> {
    let invalid = |reason: &str| KubeletError::InvalidUnit {
        unit: unit.to_string(),
        reason: reason.to_string(),
    };
    if unit.is_empty() || unit.len() > 255 {
        return Err(invalid("must be 1 to 255 characters"));
    }
    if let Some(c) = unit
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || ":-_.\\@".contains(*c)))
    {
        return Err(invalid(&format!("character {c:?} is not allowed")));
    }
    let Some((name, kind)) = unit.rsplit_once('.') else {
        return Err(invalid("missing a unit type suffix such as .service"));
    };
    if name.is_empty() {
        return Err(invalid("empty name before the type suffix"));
    }
    const TYPES: &[&str] = &[
        "service",
        "socket",
        "target",
        "device",
        "mount",
        "automount",
        "swap",
        "timer",
        "path",
        "slice",
        "scope",
    ];
    if !TYPES.contains(&kind) {
        return Err(invalid(&format!("unknown unit type {kind:?}")));
    }
    Ok(())
}

/// The result of a systemd job as the agent reads it.
fn job_result(unit: &str, result: &str) -> Result<(), KubeletError> {
    if result == "done" {
        Ok(())
    } else {
        Err(KubeletError::SystemdJob {
            unit: unit.to_string(),
            result: result.to_string(),
        })
    }
}

/// Restarts a systemd unit over D-Bus and waits for the restart job to finish.
#[derive(Debug, Clone)]
pub struct SystemdRestarter {
    unit: String,
    address: Option<String>,
    timeout: Duration,
}

impl SystemdRestarter {
    /// Restarts `unit` over the system bus; `timeout` bounds the whole restart.
    pub fn new(unit: &str, timeout: Duration) -> Result<Self, KubeletError> {
        check_unit_name(unit)?;
        Ok(SystemdRestarter {
            unit: unit.to_string(),
            address: None,
            timeout,
        })
    }

    /// Talks to the bus at `address` (`unix:path=/host/run/dbus/system_bus_socket`)
    /// instead of the system bus.
    pub fn with_address(mut self, address: impl Into<String>) -> Self {
        self.address = Some(address.into());
        self
    }

    fn bus(&self) -> String {
        self.address
            .clone()
            .unwrap_or_else(|| "system bus".to_string())
    }

    async fn restart_inner(&self) -> Result<(), KubeletError> {
        let err = |op: &'static str| {
            let unit = self.unit.clone();
            let bus = self.bus();
            move |source: zbus::Error| KubeletError::Systemd {
                op,
                unit,
                bus,
                source: Box::new(source),
            }
        };
        let conn = match &self.address {
            Some(address) => {
                zbus::connection::Builder::address(address.as_str())
                    .map_err(err("connect to the bus to restart"))?
                    .build()
                    .await
            }
            None => zbus::Connection::system().await,
        }
        .map_err(err("connect to the bus to restart"))?;
        let manager = SystemdManagerProxy::new(&conn)
            .await
            .map_err(err("reach systemd to restart"))?;
        manager
            .subscribe()
            .await
            .map_err(err("subscribe to job signals for"))?;
        // Listen before queuing the job, or its JobRemoved could be missed.
        let mut removed = manager
            .receive_job_removed()
            .await
            .map_err(err("listen for the restart job of"))?;
        let job = manager
            .restart_unit(&self.unit, "replace")
            .await
            .map_err(err("restart"))?;
        debug!(unit = %self.unit, job = %job.as_str(), "restart job queued");
        while let Some(signal) = removed.next().await {
            let args = signal
                .args()
                .map_err(err("read the restart job signal of"))?;
            if args.job().as_str() == job.as_str() {
                info!(unit = %self.unit, result = %args.result(), "restart job finished");
                return job_result(&self.unit, args.result());
            }
        }
        Err(KubeletError::SystemdJob {
            unit: self.unit.clone(),
            result: "bus connection closed before the job finished".into(),
        })
    }
}

impl Restarter for SystemdRestarter {
    fn restart(&self) -> BoxFuture<'_, Result<(), KubeletError>> {
        Box::pin(async move {
            tokio::time::timeout(self.timeout, self.restart_inner())
                .await
                .map_err(|_| KubeletError::RestartTimeout {
                    timeout: self.timeout,
                })?
        })
    }

    fn describe(&self) -> String {
        format!("systemd RestartUnit {} ({})", self.unit, self.bus())
    }
}

// ---------------------------------------------------------------------------------------
// command

/// Restarts the kubelet by running a command.
#[derive(Debug, Clone)]
pub struct CommandRestarter {
    argv: Vec<String>,
    timeout: Duration,
}

impl CommandRestarter {
    /// Runs `argv` (program first); `timeout` bounds it (the process is killed then).
    pub fn new(argv: Vec<String>, timeout: Duration) -> Result<Self, KubeletError> {
        if argv.first().is_none_or(|p| p.is_empty()) {
            return Err(KubeletError::EmptyCommand);
        }
        Ok(CommandRestarter { argv, timeout })
    }
}

impl Restarter for CommandRestarter {
    fn restart(&self) -> BoxFuture<'_, Result<(), KubeletError>> {
        Box::pin(async move {
            let mut cmd = tokio::process::Command::new(&self.argv[0]);
            cmd.args(&self.argv[1..])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .kill_on_drop(true);
            let child = cmd.spawn().map_err(|source| KubeletError::CommandSpawn {
                command: self.argv.clone(),
                source,
            })?;
            let out = tokio::time::timeout(self.timeout, child.wait_with_output())
                .await
                .map_err(|_| KubeletError::RestartTimeout {
                    timeout: self.timeout,
                })?
                .map_err(|source| KubeletError::CommandSpawn {
                    command: self.argv.clone(),
                    source,
                })?;
            if out.status.success() {
                return Ok(());
            }
            let stderr = String::from_utf8_lossy(&out.stderr);
            Err(KubeletError::CommandFailed {
                command: self.argv.clone(),
                status: out.status.to_string(),
                stderr: truncate(stderr.trim(), 1024),
            })
        })
    }

    fn describe(&self) -> String {
        format!("command {:?}", self.argv)
    }
}

/// Counts restarts, and passes them on to another [`Restarter`] when given one.
#[derive(Debug, Default)]
pub struct RecordingRestarter {
    count: AtomicUsize,
    inner: Option<Arc<dyn Restarter>>,
}

impl RecordingRestarter {
    /// Records restarts and does nothing else.
    pub fn new() -> Self {
        RecordingRestarter::default()
    }

    /// Records restarts and performs them with `inner`.
    pub fn wrapping(inner: Arc<dyn Restarter>) -> Self {
        RecordingRestarter {
            count: AtomicUsize::new(0),
            inner: Some(inner),
        }
    }

    /// How many restarts were asked for.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

impl Restarter for RecordingRestarter {
    fn restart(&self) -> BoxFuture<'_, Result<(), KubeletError>> {
        self.count.fetch_add(1, Ordering::SeqCst);
        match &self.inner {
            Some(inner) => inner.restart(),
            None => Box::pin(async { Ok(()) }),
        }
    }

    fn describe(&self) -> String {
        match &self.inner {
            Some(inner) => format!("recorded {}", inner.describe()),
            None => "recorded restart".to_string(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// probing

/// Installs rustls's ring crypto provider as the process default (reqwest is built
/// without one). Idempotent.
pub fn install_crypto_provider() {
    // An error only says a provider is already installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

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
        }
    }
}

/// The kubelet, as the agent restarts and probes it.
#[derive(Debug, Clone)]
pub struct Kubelet {
    restarter: Arc<dyn Restarter>,
    client: reqwest::Client,
    healthz_url: String,
    configz_url: Option<String>,
    token_file: Option<PathBuf>,
    poll_interval: Duration,
    request_timeout: Duration,
}

/// One field where configz differs from the expected config.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigzDiff {
    /// Dotted JSON path (`evictionHard.memory.available`).
    pub field: String,
    /// The expected value (`None`: unset).
    pub expected: Option<Value>,
    /// What the kubelet shows (`None`: unset).
    pub actual: Option<Value>,
}

impl fmt::Display for ConfigzDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: &Option<Value>| match v {
            Some(v) => v.to_string(),
            None => "unset".to_string(),
        };
        write!(
            f,
            "{}: expected {}, kubelet has {}",
            self.field,
            show(&self.expected),
            show(&self.actual)
        )
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
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
        Ok(Kubelet {
            restarter,
            client,
            healthz_url,
            configz_url,
            token_file,
            poll_interval,
            request_timeout,
        })
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
                body: truncate(&text, 256),
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
        let diffs = configz_diff(expect, &actual);
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

// ---------------------------------------------------------------------------------------
// configz comparison

/// Every field where `actual` (configz's `kubeletconfig` object) differs from `expect`,
/// compared as described in the module documentation. Empty when they agree.
pub fn configz_diff(expect: &KubeletConfiguration, actual: &Value) -> Vec<ConfigzDiff> {
    let want = match serde_json::to_value(expect) {
        Ok(v) => normalize(strip_type_meta(v), false),
        Err(e) => {
            return vec![ConfigzDiff {
                field: String::new(),
                expected: Some(Value::String(format!("<unrenderable: {e}>"))),
                actual: None,
            }];
        }
    };
    let got = normalize(canonical_actual(actual), false);
    let mut out = Vec::new();
    diff_values("", want.as_ref(), got.as_ref(), &mut out);
    out
}

fn strip_type_meta(mut v: Value) -> Value {
    if let Value::Object(m) = &mut v {
        m.remove("apiVersion");
        m.remove("kind");
    }
    v
}

/// configz's object with each field the model knows re-rendered through the model
/// (canonical durations and the like), fields it does not know dropped, and fields
/// whose value the model rejects kept as they are (so they show as differences).
fn canonical_actual(actual: &Value) -> Value {
    let Value::Object(fields) = actual else {
        return actual.clone();
    };
    let mut out = Map::new();
    for (key, value) in fields {
        if key == "apiVersion" || key == "kind" {
            continue;
        }
        let probe = |v: Value| {
            let mut m = Map::new();
            m.insert(key.clone(), v);
            serde_json::from_value::<KubeletConfiguration>(Value::Object(m))
        };
        if probe(Value::Null).is_err() {
            debug!(field = %key, "configz field unknown to this agent; not compared");
            continue;
        }
        let canonical = probe(value.clone())
            .ok()
            .and_then(|cfg| serde_json::to_value(cfg).ok())
            .and_then(|mut v| v.get_mut(key.as_str()).map(Value::take));
        out.insert(key.clone(), canonical.unwrap_or_else(|| value.clone()));
    }
    Value::Object(out)
}

/// Drops null and zero values (`false`, `0`, `""`, `"0s"`, `[]`, `{}`), recursively;
/// `None` when nothing is left. Under `featureGates` a `false` stays.
fn normalize(v: Value, keep_false: bool) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::Bool(false) if !keep_false => None,
        Value::Number(n) if n.as_f64() == Some(0.0) => None,
        Value::String(s) if s.is_empty() || s == "0s" => None,
        Value::Array(items) => {
            let items: Vec<Value> = items
                .into_iter()
                .map(|i| normalize(i, keep_false).unwrap_or(Value::Null))
                .collect();
            (!items.is_empty()).then_some(Value::Array(items))
        }
        Value::Object(m) => {
            let m: Map<String, Value> = m
                .into_iter()
                .filter_map(|(k, v)| {
                    let keep = keep_false || k == "featureGates";
                    normalize(v, keep).map(|v| (k, v))
                })
                .collect();
            (!m.is_empty()).then_some(Value::Object(m))
        }
        other => Some(other),
    }
}

fn diff_values(path: &str, want: Option<&Value>, got: Option<&Value>, out: &mut Vec<ConfigzDiff>) {
    match (want, got) {
        (Some(Value::Object(w)), Some(Value::Object(g))) => {
            let mut keys: Vec<&String> = w.keys().chain(g.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let sub = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                diff_values(&sub, w.get(k), g.get(k), out);
            }
        }
        (w, g) if w == g => {}
        (w, g) => out.push(ConfigzDiff {
            field: path.to_string(),
            expected: w.cloned(),
            actual: g.cloned(),
        }),
    }
}

// ---------------------------------------------------------------------------------------
// state files

/// The CPU manager's checkpoint under the kubelet's root directory.
pub const CPU_MANAGER_STATE: &str = "cpu_manager_state";
/// The memory manager's checkpoint under the kubelet's root directory.
pub const MEMORY_MANAGER_STATE: &str = "memory_manager_state";

fn policy(v: &Option<String>, default: &str) -> String {
    v.clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| default.to_string())
}

/// The state files (names under the kubelet's root directory) that the change from `old`
/// to `new` requires removing before the kubelet starts:
///
/// - `cpu_manager_state` when `cpuManagerPolicy` changes (the kubelet refuses a checkpoint
///   of another policy), or, under the `static` policy, when the CPUs it may not hand
///   out change (`reservedSystemCPUs`, the cpu of `systemReserved` or `kubeReserved`, or
///   `cpuManagerPolicyOptions`): the checkpoint's default set would no longer match;
/// - `memory_manager_state` when `memoryManagerPolicy` changes, or, under `Static`, when
///   `reservedMemory` changes (its machine state would no longer match).
///
/// The topology manager keeps no checkpoint: a `topologyManagerPolicy` change needs no
/// file removed.
pub fn state_files_to_clear(
    old: &KubeletConfiguration,
    new: &KubeletConfiguration,
) -> Vec<&'static str> {
    let mut out = Vec::new();
    let (old_cpu, new_cpu) = (
        policy(&old.cpu_manager_policy, "none"),
        policy(&new.cpu_manager_policy, "none"),
    );
    let reserved_cpu = |c: &KubeletConfiguration| {
        (
            c.reserved_system_cpus.clone().unwrap_or_default(),
            c.system_reserved
                .as_ref()
                .and_then(|m| m.get("cpu").cloned()),
            c.kube_reserved.as_ref().and_then(|m| m.get("cpu").cloned()),
            c.cpu_manager_policy_options.clone().unwrap_or_default(),
        )
    };
    if old_cpu != new_cpu || (new_cpu == "static" && reserved_cpu(old) != reserved_cpu(new)) {
        out.push(CPU_MANAGER_STATE);
    }
    let (old_mem, new_mem) = (
        policy(&old.memory_manager_policy, "None"),
        policy(&new.memory_manager_policy, "None"),
    );
    if old_mem != new_mem
        || (new_mem == "Static"
            && old.reserved_memory.clone().unwrap_or_default()
                != new.reserved_memory.clone().unwrap_or_default())
    {
        out.push(MEMORY_MANAGER_STATE);
    }
    out
}

/// The policy a kubelet state file was written under: its `policyName` (both managers'
/// checkpoints are JSON objects with one). `None` when the file is missing or unreadable.
pub fn recorded_policy(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    value.get("policyName")?.as_str().map(str::to_string)
}

/// The policy `config` sets for the manager whose state file is `name`, as the kubelet
/// compares it with the file's `policyName` (`none` / `None` when unset).
fn configured_policy(name: &str, config: &KubeletConfiguration) -> Option<String> {
    match name {
        CPU_MANAGER_STATE => Some(policy(&config.cpu_manager_policy, "none")),
        MEMORY_MANAGER_STATE => Some(policy(&config.memory_manager_policy, "None")),
        _ => None,
    }
}

/// The state files to remove before the kubelet starts with `new`, under the kubelet's
/// root directory `root_dir` (a host path, `--root-dir`) read under `host_root`: those the
/// change from `old` requires ([`state_files_to_clear`]; `old` is `None` when the node's
/// current config cannot be read), and every file that records a policy other than the
/// one `new` sets, whatever the agent believes ran before (the kubelet refuses such a
/// file at start: `configured policy "static" differs from state checkpoint policy
/// "none"`).
pub fn state_files_for_change(
    host_root: &Path,
    root_dir: &str,
    old: Option<&KubeletConfiguration>,
    new: &KubeletConfiguration,
) -> Vec<String> {
    let dir = host_path(host_root, root_dir);
    let mut out: Vec<String> = old
        .map(|old| state_files_to_clear(old, new))
        .unwrap_or_default()
        .into_iter()
        .map(str::to_string)
        .collect();
    for name in [CPU_MANAGER_STATE, MEMORY_MANAGER_STATE] {
        if out.iter().any(|n| n == name) {
            continue;
        }
        if let Some(recorded) = recorded_policy(&dir.join(name))
            && Some(&recorded) != configured_policy(name, new).as_ref()
        {
            debug!(file = name, %recorded, "state file of another policy");
            out.push(name.to_string());
        }
    }
    out
}

/// Removes the state files `names` ([`CPU_MANAGER_STATE`], [`MEMORY_MANAGER_STATE`]; any
/// other name is refused) from the kubelet's root directory `root_dir` (a host path,
/// `--root-dir`) under `host_root`, then fsyncs the directory. Idempotent: a file that
/// is already gone is not an error. Returns the files that existed and were removed.
pub fn remove_state_files(
    host_root: &Path,
    root_dir: &str,
    names: &[String],
) -> io::Result<Vec<PathBuf>> {
    let dir = host_path(host_root, root_dir);
    let mut removed = Vec::new();
    for name in names {
        if name != CPU_MANAGER_STATE && name != MEMORY_MANAGER_STATE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name:?} is not a kubelet state file the agent removes"),
            ));
        }
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {
                info!(path = %path.display(), "removed kubelet state file for the policy change");
                removed.push(path);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("failed to remove {}: {e}", path.display()),
                ));
            }
        }
    }
    if !removed.is_empty() {
        std::fs::File::open(&dir)?.sync_all()?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg(v: Value) -> KubeletConfiguration {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn unit_names_are_checked() {
        assert!(check_unit_name("kubelet.service").is_ok());
        assert!(check_unit_name("kubelet@x.service").is_ok());
        for bad in [
            "",
            "kubelet",
            ".service",
            "kube let.service",
            "kubelet.srv",
            "a/b.service",
        ] {
            assert!(check_unit_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn job_results_map_to_errors() {
        assert!(job_result("kubelet.service", "done").is_ok());
        let e = job_result("kubelet.service", "failed")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("kubelet.service") && e.contains("\"failed\""),
            "{e}"
        );
    }

    #[test]
    fn configz_comparison_is_semantic() {
        let expect = cfg(json!({
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "maxPods": 12, "syncFrequency": "1m0s", "failSwapOn": false,
            "featureGates": {"A": false}, "enforceNodeAllocatable": [],
            "evictionHard": {"memory.available": "100Mi"}
        }));
        // configz renders durations its way, omits empty values and may carry fields this
        // agent does not know.
        let actual = json!({
            "maxPods": 12, "syncFrequency": "60s", "featureGates": {"A": false},
            "evictionHard": {"memory.available": "100Mi"}, "someNewField": {"x": 1}
        });
        assert_eq!(configz_diff(&expect, &actual), []);

        let old = json!({"maxPods": 30, "syncFrequency": "1m", "featureGates": {},
            "evictionHard": {"memory.available": "200Mi"}});
        let diffs: Vec<String> = configz_diff(&expect, &old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            diffs,
            [
                "evictionHard.memory.available: expected \"100Mi\", kubelet has \"200Mi\"",
                "featureGates: expected {\"A\":false}, kubelet has unset",
                "maxPods: expected 12, kubelet has 30",
            ]
        );
        // A value the model rejects shows as a difference rather than being skipped.
        let d = configz_diff(
            &expect,
            &json!({"maxPods": "twelve", "syncFrequency": "1m",
            "featureGates": {"A": false}, "evictionHard": {"memory.available": "100Mi"}}),
        );
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].field, "maxPods");
    }

    #[test]
    fn policy_changes_name_their_state_files() {
        let none = KubeletConfiguration::default();
        let static_cpu = cfg(json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"}));
        assert_eq!(state_files_to_clear(&none, &none), Vec::<&str>::new());
        assert_eq!(
            state_files_to_clear(&none, &static_cpu),
            [CPU_MANAGER_STATE]
        );
        assert_eq!(
            state_files_to_clear(&static_cpu, &none),
            [CPU_MANAGER_STATE]
        );
        let more_reserved = cfg(json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1"}));
        assert_eq!(
            state_files_to_clear(&static_cpu, &more_reserved),
            [CPU_MANAGER_STATE]
        );
        let explicit_none =
            cfg(json!({"cpuManagerPolicy": "none", "topologyManagerPolicy": "single-numa-node"}));
        assert_eq!(
            state_files_to_clear(&none, &explicit_none),
            Vec::<&str>::new(),
            "none is the default; topology keeps no state"
        );
        let mem = cfg(json!({"memoryManagerPolicy": "Static",
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]}));
        assert_eq!(state_files_to_clear(&none, &mem), [MEMORY_MANAGER_STATE]);
        let mem2 = cfg(json!({"memoryManagerPolicy": "Static",
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "2Gi"}}]}));
        assert_eq!(state_files_to_clear(&mem, &mem2), [MEMORY_MANAGER_STATE]);
        assert_eq!(state_files_to_clear(&mem, &mem), Vec::<&str>::new());
    }

    #[test]
    fn state_files_are_chosen_by_the_change_and_by_what_they_record() {
        let host = tempfile::tempdir().unwrap();
        let root = host.path().join("var/lib/kubelet");
        std::fs::create_dir_all(&root).unwrap();
        let none = KubeletConfiguration::default();
        let static_cpu = cfg(json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"}));
        let for_change = |old: Option<&KubeletConfiguration>, new: &KubeletConfiguration| {
            state_files_for_change(host.path(), "/var/lib/kubelet", old, new)
        };
        assert_eq!(for_change(Some(&none), &static_cpu), [CPU_MANAGER_STATE]);
        assert!(for_change(None, &static_cpu).is_empty(), "no files yet");
        // Files written under the none policies, as a kubelet leaves them.
        std::fs::write(
            root.join(CPU_MANAGER_STATE),
            r#"{"policyName":"none","defaultCpuSet":"","checksum":1353318690}"#,
        )
        .unwrap();
        std::fs::write(
            root.join(MEMORY_MANAGER_STATE),
            r#"{"policyName":"None","machineState":{},"checksum":1}"#,
        )
        .unwrap();
        assert_eq!(
            recorded_policy(&root.join(CPU_MANAGER_STATE)).as_deref(),
            Some("none")
        );
        assert!(for_change(None, &none).is_empty(), "they match the config");
        assert_eq!(
            for_change(None, &static_cpu),
            [CPU_MANAGER_STATE],
            "without the old config, the file itself says it is of another policy"
        );
        let static_mem = cfg(json!({"memoryManagerPolicy": "Static"}));
        assert_eq!(
            for_change(Some(&static_mem), &static_mem),
            [MEMORY_MANAGER_STATE],
            "the config on disk claims Static but the kubelet wrote None"
        );
    }

    #[test]
    fn remove_state_files_removes_only_the_named_known_files() {
        let host = tempfile::tempdir().unwrap();
        let root = host.path().join("var/lib/kubelet");
        std::fs::create_dir_all(&root).unwrap();
        for f in [CPU_MANAGER_STATE, MEMORY_MANAGER_STATE, "kubeconfig"] {
            std::fs::write(root.join(f), "{}").unwrap();
        }
        let names = vec![CPU_MANAGER_STATE.to_string()];
        let removed = remove_state_files(host.path(), "/var/lib/kubelet", &names).unwrap();
        assert_eq!(removed, [root.join(CPU_MANAGER_STATE)]);
        assert!(!root.join(CPU_MANAGER_STATE).exists());
        assert!(root.join(MEMORY_MANAGER_STATE).exists());
        // Already gone: nothing to report, no error.
        let removed = remove_state_files(host.path(), "/var/lib/kubelet", &names).unwrap();
        assert!(removed.is_empty());
        let err = remove_state_files(host.path(), "/var/lib/kubelet", &["kubeconfig".into()])
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(root.join("kubeconfig").exists());
    }

    #[tokio::test]
    async fn command_restarts_report_failures() {
        let ok = CommandRestarter::new(vec!["true".into()], Duration::from_secs(10)).unwrap();
        ok.restart().await.unwrap();
        let fail = CommandRestarter::new(
            vec![
                "sh".into(),
                "-c".into(),
                "echo no such unit >&2; exit 3".into(),
            ],
            Duration::from_secs(10),
        )
        .unwrap();
        let e = fail.restart().await.unwrap_err().to_string();
        assert!(e.contains("no such unit") && e.contains('3'), "{e}");
        let missing =
            CommandRestarter::new(vec!["/nonexistent/restart".into()], Duration::from_secs(10))
                .unwrap();
        assert!(matches!(
            missing.restart().await,
            Err(KubeletError::CommandSpawn { .. })
        ));
        let slow =
            CommandRestarter::new(vec!["sleep".into(), "5".into()], Duration::from_millis(100))
                .unwrap();
        assert!(matches!(
            slow.restart().await,
            Err(KubeletError::RestartTimeout { .. })
        ));
        assert!(matches!(
            CommandRestarter::new(vec![], Duration::from_secs(1)),
            Err(KubeletError::EmptyCommand)
        ));
    }

    #[tokio::test]
    async fn recording_restarter_counts_and_delegates() {
        let inner: Arc<dyn Restarter> =
            Arc::new(CommandRestarter::new(vec!["false".into()], Duration::from_secs(5)).unwrap());
        let rec = RecordingRestarter::wrapping(inner);
        assert!(rec.restart().await.is_err());
        assert_eq!(rec.count(), 1);
        let plain = RecordingRestarter::new();
        plain.restart().await.unwrap();
        plain.restart().await.unwrap();
        assert_eq!(plain.count(), 2);
    }

    #[tokio::test]
    async fn systemd_restart_without_a_bus_names_the_address() {
        let dir = tempfile::tempdir().unwrap();
        let address = format!("unix:path={}", dir.path().join("no-bus").display());
        let r = SystemdRestarter::new("kubelet.service", Duration::from_secs(5))
            .unwrap()
            .with_address(&address);
        let e = r.restart().await.unwrap_err();
        assert!(matches!(e, KubeletError::Systemd { .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.contains("kubelet.service") && text.contains(&address),
            "{text}"
        );
    }
}
