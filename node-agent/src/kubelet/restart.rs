//! Restarting the kubelet, behind the [`Restarter`] trait: systemd's
//! `org.freedesktop.systemd1.Manager.RestartUnit(unit, "replace")` over the system bus
//! ([`SystemdRestarter`], zbus), waiting for the job's `JobRemoved` signal so that the old
//! kubelet is gone when the restart returns; or a command run to completion
//! ([`CommandRestarter`]); and a [`RecordingRestarter`] for tests that count restarts.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use tracing::{debug, info};

use crate::error::KubeletError;
use crate::error::cap;

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
                stderr: cap(stderr.trim(), 1024),
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

#[cfg(test)]
mod tests {
    use super::*;

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
