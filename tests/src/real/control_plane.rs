//! [`ControlPlane`]: etcd, kube-apiserver, kube-controller-manager and kube-scheduler of
//! Kubernetes v1.36, built by `upstream/build.sh`, each a process on loopback ports, set
//! up as kubeadm sets up a control plane: its own CA, client certificates for every
//! component, service-account signing keys, `--authorization-mode=Node,RBAC` and the
//! NodeRestriction admission plugin.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::process::{self, Proc};
use crate::real::kubeconfig::{Credentials, write_kubeconfig};
use crate::real::pki::{CertFiles, Pki, Usage};
use crate::real::{UpstreamBinaries, run_kubectl};
use crate::{E2eError, PATIENCE};

/// The service network; the API server's `kubernetes` Service takes its first address.
pub const SERVICE_CIDR: &str = "10.96.0.0/16";
/// The service-account token issuer.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The running control plane.
pub struct ControlPlane {
    /// The API server's URL, `https://127.0.0.1:<port>`.
    pub server: String,
    /// The cluster CA.
    pub pki: Pki,
    /// A kubeconfig of `kubernetes-admin` (group `system:masters`), for the harness and
    /// the person at the keyboard, never for the product.
    pub admin_kubeconfig: PathBuf,
    /// The admin's client certificate (also what the tests show a kubelet's API).
    pub admin: CertFiles,
    pub(crate) procs: Vec<Proc>,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("server", &self.server)
            .finish()
    }
}

fn args(list: &[String]) -> Vec<OsString> {
    list.iter().map(OsString::from).collect()
}

impl ControlPlane {
    /// Starts etcd and the API server in `dir` (logs in `logs`), waits for `/readyz`,
    /// then starts the controller-manager and the scheduler (`with_controllers`).
    pub async fn start(
        dir: &Path,
        logs: &Path,
        bins: &UpstreamBinaries,
        with_controllers: bool,
    ) -> Result<ControlPlane, E2eError> {
        let started = Instant::now();
        let pki_dir = dir.join("pki");
        let pki = Pki::create(&pki_dir)?;
        let sa = pki.service_account_keys()?;
        let serving = pki.issue(
            None,
            "apiserver",
            Usage::Server {
                name: "kube-apiserver",
                sans: &[
                    "127.0.0.1",
                    "localhost",
                    "10.96.0.1",
                    "kubernetes",
                    "kubernetes.default",
                    "kubernetes.default.svc",
                    "kubernetes.default.svc.cluster.local",
                ],
            },
        )?;
        let kubelet_client = pki.issue(
            None,
            "apiserver-kubelet-client",
            Usage::Client {
                user: "kube-apiserver-kubelet-client",
                groups: &["kubeadm:cluster-admins"],
            },
        )?;

        let etcd_port = process::free_port()?;
        let peer_port = process::free_port()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let mut etcd = Proc::spawn(
            "etcd",
            &bins.etcd,
            args(&[
                "--name=e2e".into(),
                format!("--data-dir={}", dir.join("etcd").display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=e2e={peer_url}"),
                // A test cluster's data need not survive a power cut; fsync on a busy
                // CI disk costs seconds per write burst.
                "--unsafe-no-fsync".into(),
                "--log-level=warn".into(),
            ]),
            logs.join("etcd.log"),
        )?;

        let port = process::free_port()?;
        let server = format!("https://127.0.0.1:{port}");
        let mut apiserver = Proc::spawn(
            "kube-apiserver",
            &bins.kube_apiserver,
            args(&[
                format!("--etcd-servers={etcd_url}"),
                format!("--secure-port={port}"),
                "--bind-address=127.0.0.1".into(),
                "--advertise-address=127.0.0.1".into(),
                // The `kubernetes` Endpoints may not hold a loopback address.
                "--endpoint-reconciler-type=none".into(),
                format!("--tls-cert-file={}", serving.cert.display()),
                format!("--tls-private-key-file={}", serving.key.display()),
                format!("--client-ca-file={}", pki.ca.display()),
                format!(
                    "--kubelet-client-certificate={}",
                    kubelet_client.cert.display()
                ),
                format!("--kubelet-client-key={}", kubelet_client.key.display()),
                format!("--kubelet-certificate-authority={}", pki.ca.display()),
                "--kubelet-preferred-address-types=InternalIP,Hostname".into(),
                format!("--service-account-issuer={ISSUER}"),
                format!("--service-account-key-file={}", sa.cert.display()),
                format!("--service-account-signing-key-file={}", sa.key.display()),
                format!("--service-cluster-ip-range={SERVICE_CIDR}"),
                "--authorization-mode=Node,RBAC".into(),
                "--enable-admission-plugins=NodeRestriction".into(),
                "--allow-privileged=true".into(),
                "--profiling=false".into(),
                "--v=1".into(),
            ]),
            logs.join("kube-apiserver.log"),
        )?;

        let admin_kubeconfig = dir.join("admin.conf");
        let admin = pki.issue(
            None,
            "admin",
            Usage::Client {
                user: "kubernetes-admin",
                groups: &["system:masters"],
            },
        )?;
        write_kubeconfig(
            &admin_kubeconfig,
            &server,
            &pki.ca,
            "kubernetes-admin",
            &Credentials::Cert(admin.clone()),
        )?;
        wait_ready(&admin_kubeconfig, &mut [&mut etcd, &mut apiserver]).await?;
        // kubeadm binds the API server's kubelet client identity to the kubelet API.
        run_kubectl(
            &admin_kubeconfig,
            &[
                "create",
                "clusterrolebinding",
                "kube-apiserver-kubelet-client",
                "--clusterrole=system:kubelet-api-admin",
                "--user=kube-apiserver-kubelet-client",
            ],
        )
        .await?;
        let mut procs = vec![etcd, apiserver];

        if with_controllers {
            let kcm_conf = dir.join("controller-manager.conf");
            let kcm = pki.issue(
                None,
                "controller-manager",
                Usage::Client {
                    user: "system:kube-controller-manager",
                    groups: &[],
                },
            )?;
            write_kubeconfig(
                &kcm_conf,
                &server,
                &pki.ca,
                "system:kube-controller-manager",
                &Credentials::Cert(kcm),
            )?;
            let ca_key = pki_dir.join("ca.key");
            procs.push(Proc::spawn(
                "kube-controller-manager",
                &bins.kube_controller_manager,
                args(&[
                    format!("--kubeconfig={}", kcm_conf.display()),
                    format!("--authentication-kubeconfig={}", kcm_conf.display()),
                    format!("--authorization-kubeconfig={}", kcm_conf.display()),
                    "--bind-address=127.0.0.1".into(),
                    format!("--secure-port={}", process::free_port()?),
                    "--leader-elect=false".into(),
                    "--use-service-account-credentials=true".into(),
                    format!("--service-account-private-key-file={}", sa.key.display()),
                    format!("--root-ca-file={}", pki.ca.display()),
                    format!("--cluster-signing-cert-file={}", pki.ca.display()),
                    format!("--cluster-signing-key-file={}", ca_key.display()),
                    format!("--service-cluster-ip-range={SERVICE_CIDR}"),
                    "--profiling=false".into(),
                    "--v=1".into(),
                ]),
                logs.join("kube-controller-manager.log"),
            )?);
            let sched_conf = dir.join("scheduler.conf");
            let sched = pki.issue(
                None,
                "scheduler",
                Usage::Client {
                    user: "system:kube-scheduler",
                    groups: &[],
                },
            )?;
            write_kubeconfig(
                &sched_conf,
                &server,
                &pki.ca,
                "system:kube-scheduler",
                &Credentials::Cert(sched),
            )?;
            procs.push(Proc::spawn(
                "kube-scheduler",
                &bins.kube_scheduler,
                args(&[
                    format!("--kubeconfig={}", sched_conf.display()),
                    format!("--authentication-kubeconfig={}", sched_conf.display()),
                    format!("--authorization-kubeconfig={}", sched_conf.display()),
                    "--bind-address=127.0.0.1".into(),
                    format!("--secure-port={}", process::free_port()?),
                    "--leader-elect=false".into(),
                    "--profiling=false".into(),
                    "--v=1".into(),
                ]),
                logs.join("kube-scheduler.log"),
            )?);
        }
        eprintln!(
            "real cluster: control plane at {server} ready in {:.1?}",
            started.elapsed()
        );
        Ok(ControlPlane {
            server,
            pki,
            admin_kubeconfig,
            admin,
            procs,
        })
    }

    /// An error naming the first control-plane process that exited.
    pub fn check(&mut self) -> Result<(), E2eError> {
        self.procs.iter_mut().try_for_each(Proc::check_running)
    }

    /// SIGKILLs every process.
    pub async fn kill(&mut self) -> Result<(), E2eError> {
        for p in self.procs.iter_mut().rev() {
            p.kill().await?;
        }
        Ok(())
    }
}

/// Waits until the API server answers `/readyz` with `ok` (through kubectl).
async fn wait_ready(kubeconfig: &Path, procs: &mut [&mut Proc]) -> Result<(), E2eError> {
    let deadline = Instant::now() + PATIENCE;
    let mut last;
    loop {
        for p in procs.iter_mut() {
            p.check_running()?;
        }
        match run_kubectl(kubeconfig, &["get", "--raw=/readyz"]).await {
            Ok(out) if out.trim() == "ok" => return Ok(()),
            Ok(out) => last = out,
            Err(e) => last = e.to_string(),
        }
        if Instant::now() >= deadline {
            return Err(E2eError::Timeout {
                what: "kube-apiserver /readyz".into(),
                waited: PATIENCE,
                state: last,
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
