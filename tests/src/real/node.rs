//! [`RealNode`]: one real v1.36 kubelet on this machine, as kubeadm sets a node up, run by
//! a [`Supervisor`] as systemd runs `kubelet.service`.
//!
//! The node's root directory stands for its `/`:
//!
//! | path under the root | what |
//! | --- | --- |
//! | `var/lib/kubelet/config.yaml` | the kubelet's `--config` (kubeadm writes it from the cluster's base; the agent replaces it) |
//! | `var/lib/kubelet/kubeadm-flags.env` | `KUBELET_KUBEADM_ARGS`: `--config` and every node-specific setting, as flags (ports, root dir, runtime socket, cgroup root, certificates) |
//! | `var/lib/kubelet/pki/` | the kubelet's serving certificate and its client certificate (`system:node:<name>`) |
//! | `etc/kubernetes/kubelet.conf` | its kubeconfig |
//! | `etc/kubernetes/pki/ca.crt` | the cluster CA (its `--client-ca-file`) |
//! | `run/fake-cri.sock` | the fake CRI runtime's socket |
//! | `run/kubelet.pid` | the running kubelet's pid (what the agent's restart command signals) |
//! | `var/log/kubelet.log` | the kubelet's output, with a line per (re)start from the supervisor |
//!
//! The kubelet's `--root-dir` is the root's `var/lib/kubelet`, its cgroup root
//! `/kubelet-gitops-e2e/<cluster>/<node>` (created in every v1 hierarchy the kubelet checks,
//! removed at teardown) and its ports are free loopback ports. It is started as systemd
//! starts `kubelet.service` under kubeadm's drop-in: `kubelet --kubeconfig=...
//! $KUBELET_KUBEADM_ARGS`, the flags file read again at every start. (kubeadm's drop-in
//! passes `--config` itself; here it is in the flags file, where the agent, reading flags
//! from files, finds it.)

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::process::Command;
use tokio::sync::watch;

use crate::E2eError;
use crate::process::{self, Proc};
use crate::real::kubeconfig::{Credentials, write_kubeconfig};
use crate::real::pki::{Pki, Usage, write_file};
use crate::real::{UpstreamBinaries, cgroup};

/// systemd's `RestartSec` for the kubelet here (kubeadm's unit says 10 s; a test cluster
/// has no reason to wait that long).
pub const RESTART_SEC: Duration = Duration::from_secs(1);

/// Paths on a node, as the node sees them (the agent's `--host-root` maps them).
pub struct NodePaths;

impl NodePaths {
    /// The kubelet's `--config`.
    pub const CONFIG: &str = "/var/lib/kubelet/config.yaml";
    /// kubeadm's flags file.
    pub const FLAGS_ENV: &str = "/var/lib/kubelet/kubeadm-flags.env";
    /// The running kubelet's pid.
    pub const PID_FILE: &str = "/run/kubelet.pid";
}

/// The kubelet's working directory under the node's root (`var/log/kubelet-cwd`, beside
/// its log), and the file in it the kubelet must leave alone.
const KUBELET_CWD: &str = "var/log/kubelet-cwd";
const CWD_SENTINEL: &str = "left-alone";
const CWD_SENTINEL_TEXT: &str =
    "The kubelet must leave the files of its working directory alone.\n";

/// An error unless the node root `root` leaves room for the kubelet's longest unix socket,
/// `var/lib/kubelet/pod-resources/<10 digits>`, in the 107 bytes of a socket path (a
/// longer one makes the kubelet exit with `bind: invalid argument`).
pub fn check_root_length(root: &Path) -> Result<(), E2eError> {
    let longest = root.join("var/lib/kubelet/pod-resources/0123456789");
    if longest.as_os_str().len() > 107 {
        return Err(E2eError::Unexpected {
            what: format!("the node root {}", root.display()),
            message: format!(
                "too long: the kubelet's socket {} would exceed the 107 bytes of a unix socket path (use a shorter directory)",
                longest.display()
            ),
        });
    }
    Ok(())
}

/// What a node looks like before its kubelet starts.
#[derive(Debug, Clone)]
pub struct NodeSetup {
    /// The Node's name.
    pub name: String,
    /// Labels the kubelet registers its Node with (`--node-labels`).
    pub labels: Vec<(String, String)>,
    /// The kubelet's config file, as kubeadm writes it.
    pub config: String,
    /// More kubelet flags of this node (e.g. `--max-pods=110`), after the harness's own in
    /// `kubeadm-flags.env`.
    pub flags: Vec<String>,
}

/// A real kubelet, its fake CRI runtime and its supervisor.
pub struct RealNode {
    /// The Node's name.
    pub name: String,
    /// The node's root directory (its `/`).
    pub root: PathBuf,
    /// The kubelet's API port (`https://127.0.0.1:<port>`: `/configz`, `/healthz`, ...).
    pub port: u16,
    /// Its healthz port (`http://127.0.0.1:<port>/healthz`).
    pub healthz_port: u16,
    /// Its cgroup root, a path in every cgroup hierarchy.
    pub cgroup_root: String,
    fake_cri: Proc,
    supervisor: Supervisor,
}

impl std::fmt::Debug for RealNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealNode")
            .field("name", &self.name)
            .field("root", &self.root)
            .field("port", &self.port)
            .finish()
    }
}

impl RealNode {
    /// Lays out the node's root in `root`, starts its fake CRI runtime and its kubelet.
    pub async fn start(
        root: &Path,
        setup: &NodeSetup,
        cluster_cgroup: &str,
        server: &str,
        pki: &Pki,
        bins: &UpstreamBinaries,
        logs: &Path,
    ) -> Result<RealNode, E2eError> {
        let name = &setup.name;
        let kubelet_dir = root.join("var/lib/kubelet");
        check_root_length(root)?;
        let pki_dir = kubelet_dir.join("pki");
        let ca = root.join("etc/kubernetes/pki/ca.crt");
        write_file(&ca, pki.ca_pem()?.as_bytes(), false)?;
        let client = pki.issue(
            Some(&pki_dir),
            "kubelet-client",
            Usage::Client {
                user: &format!("system:node:{name}"),
                groups: &["system:nodes"],
            },
        )?;
        let serving = pki.issue(
            Some(&pki_dir),
            "kubelet",
            Usage::Server {
                name,
                sans: &["127.0.0.1", "localhost", name],
            },
        )?;
        let kubeconfig = root.join("etc/kubernetes/kubelet.conf");
        write_kubeconfig(
            &kubeconfig,
            server,
            &ca,
            &format!("system:node:{name}"),
            &Credentials::Cert(client),
        )?;
        write_file(
            &root.join(&NodePaths::CONFIG[1..]),
            setup.config.as_bytes(),
            false,
        )?;

        let cgroup_root = format!("{cluster_cgroup}/{name}");
        cgroup::create(&cgroup_root)?;

        let port = process::free_port()?;
        let healthz_port = process::free_port()?;
        let socket = root.join("run/fake-cri.sock");
        let labels = setup
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut flags = vec![
            // kubeadm passes --config in its systemd drop-in; here the flags file holds it,
            // so the agent (--flags-from=files) reads where the kubelet's config really is.
            format!("--config={}", root.join(&NodePaths::CONFIG[1..]).display()),
            format!("--container-runtime-endpoint=unix://{}", socket.display()),
            format!("--hostname-override={name}"),
            format!("--root-dir={}", kubelet_dir.display()),
            format!("--cert-dir={}", pki_dir.display()),
            format!("--tls-cert-file={}", serving.cert.display()),
            format!("--tls-private-key-file={}", serving.key.display()),
            format!("--client-ca-file={}", ca.display()),
            format!("--cgroup-root={cgroup_root}"),
            "--address=127.0.0.1".into(),
            format!("--port={port}"),
            "--healthz-bind-address=127.0.0.1".into(),
            format!("--healthz-port={healthz_port}"),
            "--read-only-port=0".into(),
            format!(
                "--volume-plugin-dir={}",
                root.join("usr/libexec/kubernetes/kubelet-plugins/volume/exec")
                    .display()
            ),
        ];
        if !labels.is_empty() {
            flags.push(format!("--node-labels={labels}"));
        }
        flags.extend(setup.flags.iter().cloned());
        write_file(
            &root.join(&NodePaths::FLAGS_ENV[1..]),
            format!("KUBELET_KUBEADM_ARGS=\"{}\"\n", flags.join(" ")).as_bytes(),
            false,
        )?;

        std::fs::create_dir_all(root.join("run")).map_err(E2eError::io("creating run/"))?;
        let fake_cri = Proc::spawn(
            format!("fake-cri-{name}"),
            &bins.fake_cri,
            vec![
                OsString::from("--socket"),
                socket.clone().into_os_string(),
                OsString::from("--cgroup-driver="),
            ],
            logs.join(format!("fake-cri-{name}.log")),
        )?;
        // The kubelet's working directory, with a file it must leave alone (checked by
        // `check`): a container log path the runtime left empty made the kubelet remove
        // every file of its working directory when a container went.
        let cwd = root.join(KUBELET_CWD);
        std::fs::create_dir_all(&cwd)
            .and_then(|()| std::fs::write(cwd.join(CWD_SENTINEL), CWD_SENTINEL_TEXT))
            .map_err(E2eError::io(format!("writing {}", cwd.display())))?;
        let unit = Unit {
            kubelet: bins.kubelet.clone(),
            fixed: vec![format!("--kubeconfig={}", kubeconfig.display())],
            flags_env: root.join(&NodePaths::FLAGS_ENV[1..]),
            pid_file: root.join(&NodePaths::PID_FILE[1..]),
            log: root.join("var/log/kubelet.log"),
        };
        wait_socket(&socket).await?;
        let supervisor = Supervisor::start(name.clone(), unit)?;
        Ok(RealNode {
            name: name.clone(),
            root: root.to_path_buf(),
            port,
            healthz_port,
            cgroup_root,
            fake_cri,
            supervisor,
        })
    }

    /// The command that restarts the kubelet, as the agent runs it (no shell of its own):
    /// `systemctl restart kubelet` here, a SIGTERM to the running kubelet, which the
    /// supervisor then starts again.
    pub fn restart_command(&self) -> Vec<String> {
        let pid_file = self.root.join(&NodePaths::PID_FILE[1..]);
        vec![
            "sh".into(),
            "-c".into(),
            format!(
                "kill -TERM \"$(cat '{}')\" 2>/dev/null; exit 0",
                pid_file.display()
            ),
        ]
    }

    /// The kubelet's output.
    pub fn kubelet_log(&self) -> PathBuf {
        self.root.join("var/log/kubelet.log")
    }

    /// How many times the kubelet has started.
    pub fn starts(&self) -> u32 {
        *self.supervisor.starts.borrow()
    }

    /// An error if the fake runtime exited.
    pub fn check(&mut self) -> Result<(), E2eError> {
        self.fake_cri.check_running()?;
        let sentinel = self.root.join(KUBELET_CWD).join(CWD_SENTINEL);
        if !sentinel.exists() {
            return Err(E2eError::Unexpected {
                what: format!("the kubelet of {}", self.name),
                message: format!(
                    "it removed {} from its working directory (a container log path the runtime left empty?)",
                    sentinel.display()
                ),
            });
        }
        Ok(())
    }

    /// Stops the kubelet (SIGKILL) and its runtime, unmounts what the kubelet mounted
    /// under the root, and removes the node's cgroups.
    pub async fn stop(&mut self) -> Result<(), E2eError> {
        self.supervisor.stop();
        self.fake_cri.kill().await?;
        self.cleanup();
        Ok(())
    }

    fn cleanup(&self) {
        unmount_under(&self.root);
        cgroup::remove(&self.cgroup_root);
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        self.supervisor.stop();
        self.cleanup();
    }
}

/// How the supervisor starts the kubelet.
struct Unit {
    kubelet: PathBuf,
    fixed: Vec<String>,
    flags_env: PathBuf,
    pid_file: PathBuf,
    log: PathBuf,
}

impl Unit {
    /// The kubelet's arguments: the fixed ones, then `$KUBELET_KUBEADM_ARGS` from the
    /// flags file as it is now.
    fn args(&self) -> Result<Vec<String>, String> {
        let text = std::fs::read_to_string(&self.flags_env)
            .map_err(|e| format!("reading {}: {e}", self.flags_env.display()))?;
        let mut args = self.fixed.clone();
        for (key, value) in kubelet_gitops_core::flags::parse_env_file(&text) {
            if key == "KUBELET_KUBEADM_ARGS" {
                args.extend(
                    kubelet_gitops_core::flags::split_command_line(&value)
                        .map_err(|e| format!("{}: {e}", self.flags_env.display()))?,
                );
            }
        }
        Ok(args)
    }
}

/// Runs the kubelet as systemd runs `kubelet.service` with `Restart=always`: started
/// again [`RESTART_SEC`] after it exits, whatever the reason (the agent's restart command
/// is a SIGTERM). Each start and exit is a line in the kubelet's log.
struct Supervisor {
    pid: Arc<AtomicU32>,
    stop: watch::Sender<bool>,
    starts: watch::Receiver<u32>,
    task: tokio::task::JoinHandle<()>,
}

impl Supervisor {
    fn start(name: String, unit: Unit) -> Result<Supervisor, E2eError> {
        let pid = Arc::new(AtomicU32::new(0));
        let (stop, mut stopped) = watch::channel(false);
        let (count, starts) = watch::channel(0u32);
        if let Some(parent) = unit.log.parent() {
            std::fs::create_dir_all(parent)
                .map_err(E2eError::io(format!("creating {}", parent.display())))?;
        }
        let running = pid.clone();
        let task = tokio::spawn(async move {
            loop {
                let mark = |line: String| {
                    use std::io::Write as _;
                    if let Ok(mut f) = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&unit.log)
                    {
                        let _ = writeln!(f, "===== supervisor: {line} =====");
                    }
                };
                let child = unit.args().and_then(|args| {
                    let out = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&unit.log)
                        .map_err(|e| e.to_string())?;
                    let err = out.try_clone().map_err(|e| e.to_string())?;
                    // A working directory of its own, empty: a v1.36 kubelet removed
                    // the files of the directory it was started in when the drain's
                    // pods went (the test's own: tests/Cargo.toml and README.md).
                    let mut cmd = Command::new(&unit.kubelet);
                    let cwd = unit.log.with_file_name("kubelet-cwd");
                    if cwd.is_dir() {
                        cmd.current_dir(&cwd);
                    }
                    cmd.args(&args)
                        .stdin(Stdio::null())
                        .stdout(Stdio::from(out))
                        .stderr(Stdio::from(err))
                        .kill_on_drop(true)
                        .spawn()
                        .map_err(|e| format!("starting {}: {e}", unit.kubelet.display()))
                });
                match child {
                    Ok(mut child) => {
                        let id = child.id().unwrap_or(0);
                        running.store(id, Ordering::SeqCst);
                        let _ = std::fs::write(&unit.pid_file, format!("{id}\n"));
                        count.send_modify(|n| *n += 1);
                        mark(format!("kubelet of {name} started, pid {id}"));
                        tokio::select! {
                            status = child.wait() => {
                                running.store(0, Ordering::SeqCst);
                                let status = status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                                mark(format!("kubelet exited ({status}); starting it again in {RESTART_SEC:?}"));
                            }
                            _ = stopped.changed() => {
                                let _ = child.start_kill();
                                let _ = child.wait().await;
                                running.store(0, Ordering::SeqCst);
                                return;
                            }
                        }
                    }
                    Err(e) => mark(format!("cannot start the kubelet: {e}")),
                }
                tokio::select! {
                    _ = tokio::time::sleep(RESTART_SEC) => {}
                    _ = stopped.changed() => return,
                }
            }
        });
        Ok(Supervisor {
            pid,
            stop,
            starts,
            task,
        })
    }

    /// Stops supervising and SIGKILLs the kubelet now (also from `Drop`, without a
    /// runtime: the pid is killed directly).
    fn stop(&mut self) {
        let _ = self.stop.send(true);
        self.task.abort();
        let pid = self.pid.swap(0, Ordering::SeqCst);
        if pid != 0 {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Waits (up to 30 s) for the fake runtime's socket.
async fn wait_socket(socket: &Path) -> Result<(), E2eError> {
    for _ in 0..300 {
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(E2eError::Unexpected {
        what: format!("the fake CRI runtime at {}", socket.display()),
        message: "its socket did not accept a connection within 30 s".into(),
    })
}

/// Unmounts every mount point under `root`, deepest first (the kubelet bind-mounts its
/// root dir onto itself, and the mount outlives it).
pub(crate) fn unmount_under(root: &Path) {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let prefix = root.display().to_string();
    let mut points: Vec<String> = text
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|p| p.starts_with(&prefix))
        .map(str::to_string)
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in points {
        let _ = std::process::Command::new("umount")
            .args(["-l", &p])
            .stderr(Stdio::null())
            .status();
    }
}
