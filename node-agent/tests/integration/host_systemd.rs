//! The systemd restart over D-Bus, against a stand-in for systemd's Manager object on a
//! private `dbus-daemon` (there is no system bus here). The agent's side is the real code:
//! zbus connecting to a bus address, `Subscribe`, `RestartUnit(unit, "replace")`, and
//! waiting for the job's `JobRemoved`. Skipped, with the reason printed, when `dbus-daemon`
//! is not installed.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use node_agent::error::KubeletError;
use node_agent::kubelet::{Restarter, SystemdRestarter};
use zbus::object_server::SignalEmitter;
use zbus::zvariant::{ObjectPath, OwnedObjectPath};

/// What the fake systemd does with a restart job.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Finishes the job with this result.
    Finish(&'static str),
    /// Never finishes it.
    Hang,
}

struct FakeManager {
    behaviour: Behaviour,
    calls: Arc<Mutex<Vec<String>>>,
    next_job: AtomicU32,
}

#[zbus::interface(name = "org.freedesktop.systemd1.Manager")]
impl FakeManager {
    async fn subscribe(&self) {
        self.calls.lock().unwrap().push("Subscribe".into());
    }

    async fn restart_unit(
        &self,
        name: String,
        mode: String,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) -> zbus::fdo::Result<OwnedObjectPath> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("RestartUnit {name} {mode}"));
        if name == "missing.service" {
            return Err(zbus::fdo::Error::Failed(format!("Unit {name} not found.")));
        }
        let id = self.next_job.fetch_add(2, Ordering::SeqCst);
        let path = OwnedObjectPath::try_from(format!("/org/freedesktop/systemd1/job/{id}"))
            .map_err(|e| zbus::fdo::Error::Failed(e.to_string()))?;
        let emitter = emitter.to_owned();
        let behaviour = self.behaviour;
        let job = path.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            // Another client's job finishing first must not be taken for ours.
            let other =
                ObjectPath::try_from(format!("/org/freedesktop/systemd1/job/{}", id + 1)).unwrap();
            let _ =
                FakeManager::job_removed(&emitter, id + 1, other, "other.service", "failed").await;
            if let Behaviour::Finish(result) = behaviour {
                let _ = FakeManager::job_removed(&emitter, id, job.as_ref(), &name, result).await;
            }
        });
        Ok(path)
    }

    #[zbus(signal)]
    async fn job_removed(
        emitter: &SignalEmitter<'_>,
        id: u32,
        job: ObjectPath<'_>,
        unit: &str,
        result: &str,
    ) -> zbus::Result<()>;
}

/// A private bus: `dbus-daemon` on a socket in a temp dir, killed on drop.
struct Bus {
    _dir: tempfile::TempDir,
    child: std::process::Child,
    address: String,
    _children: tokio::sync::RwLockReadGuard<'static, ()>,
}

impl Drop for Bus {
    fn drop(&mut self) {
        // Kill and reap it, leaving no zombie behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find_dbus_daemon() -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join("dbus-daemon"))
        .find(|p| p.is_file())
}

async fn private_bus() -> Result<Bus, String> {
    let exe = find_dbus_daemon().ok_or("dbus-daemon is not installed")?;
    let children = crate::support::children().await;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let socket = dir.path().join("bus");
    let address = format!("unix:path={}", socket.display());
    let config = dir.path().join("bus.conf");
    std::fs::write(
        &config,
        format!(
            r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>{address}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#
        ),
    )
    .map_err(|e| e.to_string())?;
    let child = std::process::Command::new(exe)
        .arg(format!("--config-file={}", config.display()))
        .arg("--nofork")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start dbus-daemon: {e}"))?;
    let bus = Bus {
        _dir: dir,
        child,
        address,
        _children: children,
    };
    // The socket file appears when dbus-daemon binds it, a moment before it listens:
    // wait until it takes a connection, or a client started now may be refused.
    for _ in 0..200 {
        if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            return Ok(bus);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err("dbus-daemon did not listen on its socket".into())
}

/// Registers a fake `org.freedesktop.systemd1` on `bus`; returns its connection (keep it)
/// and the log of calls it received.
async fn fake_systemd(
    bus: &Bus,
    behaviour: Behaviour,
) -> (zbus::Connection, Arc<Mutex<Vec<String>>>) {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let manager = FakeManager {
        behaviour,
        calls: calls.clone(),
        next_job: AtomicU32::new(100),
    };
    let conn = zbus::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .name("org.freedesktop.systemd1")
        .unwrap()
        .serve_at("/org/freedesktop/systemd1", manager)
        .unwrap()
        .build()
        .await
        .unwrap();
    (conn, calls)
}

macro_rules! bus_or_skip {
    () => {
        match private_bus().await {
            Ok(b) => b,
            Err(why) => {
                eprintln!("skipped: systemd D-Bus test: {why}");
                return;
            }
        }
    };
}

#[tokio::test]
async fn restart_unit_waits_for_its_job() {
    let bus = bus_or_skip!();
    let (_conn, calls) = fake_systemd(&bus, Behaviour::Finish("done")).await;
    let r = SystemdRestarter::new("kubelet.service", Duration::from_secs(10))
        .unwrap()
        .with_address(&bus.address);
    r.restart().await.unwrap();
    assert_eq!(
        *calls.lock().unwrap(),
        ["Subscribe", "RestartUnit kubelet.service replace"]
    );
    assert!(r.describe().contains("kubelet.service"));
}

#[tokio::test]
async fn a_failed_job_is_reported() {
    let bus = bus_or_skip!();
    let (_conn, _calls) = fake_systemd(&bus, Behaviour::Finish("failed")).await;
    let r = SystemdRestarter::new("kubelet.service", Duration::from_secs(10))
        .unwrap()
        .with_address(&bus.address);
    let err = r.restart().await.unwrap_err();
    match &err {
        KubeletError::SystemdJob { unit, result } => {
            assert_eq!(
                (unit.as_str(), result.as_str()),
                ("kubelet.service", "failed")
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_unknown_unit_is_reported_with_systemds_message() {
    let bus = bus_or_skip!();
    let (_conn, _calls) = fake_systemd(&bus, Behaviour::Finish("done")).await;
    let r = SystemdRestarter::new("missing.service", Duration::from_secs(10))
        .unwrap()
        .with_address(&bus.address);
    let err = r.restart().await.unwrap_err();
    assert!(
        matches!(err, KubeletError::Systemd { op: "restart", .. }),
        "{err:?}"
    );
    let chain = format!(
        "{err}: {}",
        std::error::Error::source(&err)
            .map(|s| s.to_string())
            .unwrap_or_default()
    );
    assert!(chain.contains("Unit missing.service not found."), "{chain}");
}

#[tokio::test]
async fn a_job_that_never_finishes_times_out() {
    let bus = bus_or_skip!();
    let (_conn, _calls) = fake_systemd(&bus, Behaviour::Hang).await;
    let r = SystemdRestarter::new("kubelet.service", Duration::from_millis(500))
        .unwrap()
        .with_address(&bus.address);
    assert!(matches!(
        r.restart().await,
        Err(KubeletError::RestartTimeout { .. })
    ));
}

#[tokio::test]
async fn no_systemd_on_the_bus_is_an_error() {
    let bus = bus_or_skip!();
    let r = SystemdRestarter::new("kubelet.service", Duration::from_secs(5))
        .unwrap()
        .with_address(&bus.address);
    let err = r.restart().await.unwrap_err();
    assert!(matches!(err, KubeletError::Systemd { .. }), "{err:?}");
}
