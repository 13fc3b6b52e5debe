//! The agent's figures, against the sim and a stand-in kubelet, with the built binary:
//!
//! - idle RSS as deployed: the agent started as deploy/base/agent.yaml starts it (its
//!   environment, read from the manifest; no command-line options), reaching the API
//!   server over TLS with a service-account token and the cluster's CA, as a pod's
//!   in-cluster config does; measured after its first sync and again after
//!   `AGENT_BENCH_IDLE` (default 6m: six resyncs; the watches are re-opened every 30
//!   minutes, `--watch-timeout`), with the peak in between, where the
//!   memory is (`/proc/PID/smaps`: the agent's code, the shared libraries', anonymous
//!   memory), the CPU it used and every API request it made meanwhile, from the sim's
//!   request log;
//! - reaction: from the desired-config annotation change to the kubelet restart command
//!   being run (download, checkpoint, validate, write, all fsyncs and API round trips
//!   included; the kubelet's own restart excluded), p50 / p99 / max over N applies, with a
//!   second agent that restarts the stand-in kubelet with a command.
//!
//! `cargo bench -p node-agent --bench agent` (N from `AGENT_BENCH_APPLIES`, default 50;
//! `AGENT_BENCH_IDLE=10s` for a quick run). The agent measured is the image's build,
//! `cargo build --profile agent`, which the bench runs first; `AGENT_BENCH_BIN` measures
//! another.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_core::protocol::{self, DESIRED_CONFIG, HEALTH_TIMEOUT, LKG_GRACE};
use kubelet_gitops_sim::cluster::{Sim, SimConfig};
use kubelet_gitops_sim::kubelet::{KubeletOptions, KubeletPaths};
use kubelet_gitops_sim::resources::kinds;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

const INVENTORY: &str = "\
nodes:
  - name: w1
    capacity: {cpu: \"8\", memory: 32Gi, ephemeral-storage: 100Gi, pods: \"110\"}
    kubeletFlags: \"--max-pods=50\"
";

const BASE: &str = "\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
authorization:
  mode: Webhook
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
rotateCertificates: true
";

fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// A process's resident memory, in KiB, from `/proc/PID/smaps`: all of it, the pages
/// mapped from its own binary (code and read-only data, shared with the page cache), from
/// other files (the shared libraries), and anonymous (heap, stacks); and its threads.
#[derive(Debug, Default, Clone, Copy)]
struct Memory {
    rss: u64,
    binary: u64,
    libraries: u64,
    anonymous: u64,
    threads: u64,
}

/// The agent's binary: `AGENT_BENCH_BIN`, or the image's, built here as the Dockerfile
/// builds it (`cargo build --profile agent`; the bench's own profile is not the one that
/// ships, and an idle agent's RSS is mostly its code).
fn agent_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("AGENT_BENCH_BIN") {
        return PathBuf::from(bin);
    }
    eprintln!("building the agent as the image does: cargo build --profile agent");
    let out = std::process::Command::new(env!("CARGO"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "--profile=agent",
            "-p=node-agent",
            "--bin=kubelet-gitops-agent",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(Stdio::inherit())
        .output()
        .expect("cargo build");
    assert!(out.status.success(), "cargo build --profile agent failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["target"]["name"] == "kubelet-gitops-agent")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo built no kubelet-gitops-agent")
}

fn memory(pid: u32) -> Option<Memory> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let mut m = Memory::default();
    // A mapping's header is `start-end perms offset dev inode [path]`; then `Key: value kB`.
    let mut path: Option<&str> = None;
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or_default();
        if first.contains('-') && !first.ends_with(':') {
            path = words.nth(4);
        } else if first == "Rss:" {
            let kib: u64 = words.next()?.parse().ok()?;
            m.rss += kib;
            match path {
                Some(p) if Path::new(p) == exe => m.binary += kib,
                Some(p) if p.starts_with('/') => m.libraries += kib,
                _ => m.anonymous += kib,
            }
        }
    }
    m.threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))?
        .trim()
        .parse()
        .ok()?;
    Some(m)
}

/// The CPU time a process has used (user and system, all its threads), from
/// `/proc/PID/stat` (in USER_HZ ticks, 100 a second on Linux).
fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

impl std::fmt::Display for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: its binary {}, shared libraries {}, anonymous {}; {} thread(s)",
            mib(self.rss),
            mib(self.binary),
            mib(self.libraries),
            mib(self.anonymous),
            self.threads
        )
    }
}

fn annotation(sim: &Sim, key: &str) -> Option<String> {
    sim.store()
        .get(kinds::nodes(), None, "w1")
        .ok()?
        .pointer(&format!("/metadata/annotations/{}", key.replace('/', "~1")))?
        .as_str()
        .map(str::to_string)
}

async fn wait(what: &str, mut pred: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !pred() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn restarts(path: &Path) -> Vec<u128> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The sim's API server behind TLS, as an agent in a pod reaches kube-apiserver: a
/// certificate for 127.0.0.1 signed by a CA of the bench, and every connection passed on
/// to the sim's plain HTTP port. `ca.crt` and `token` (what kubelet mounts at
/// /var/run/secrets/kubernetes.io/serviceaccount/) and a kubeconfig naming them are
/// written in `dir`.
struct TlsFront {
    kubeconfig: PathBuf,
    _task: JoinHandle<()>,
}

impl TlsFront {
    async fn start(dir: &Path, upstream: SocketAddr) -> TlsFront {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
            KeyPair, SanType,
        };
        use tokio_rustls::rustls;

        std::fs::create_dir_all(dir).expect("tls dir");
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca = CertificateParams::default();
        ca.distinguished_name.push(DnType::CommonName, "kubernetes");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key).expect("CA");
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().expect("server key");
        let mut server = CertificateParams::default();
        server
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        server.subject_alt_names = vec![SanType::IpAddress([127, 0, 0, 1].into())];
        let cert = server.signed_by(&key, &issuer).expect("server cert");

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone(), ca_cert.der().clone()],
                rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
            )
            .expect("TLS config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(mut plain) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });

        let ca_file = dir.join("ca.crt");
        std::fs::write(&ca_file, ca_cert.pem()).expect("ca.crt");
        // A bound service-account token is a JWT of about this size; the sim reads none.
        let token_file = dir.join("token");
        std::fs::write(
            &token_file,
            format!("eyJhbGciOiJSUzI1NiJ9.{}.sig", "x".repeat(900)),
        )
        .expect("token");
        // What kube's in-cluster config builds: the server, the CA file, a token file
        // (re-read as the kubelet rotates it).
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: in-cluster\n  cluster:\n    server: https://{addr}\n    certificate-authority: {}\nusers:\n- name: agent\n  user:\n    tokenFile: {}\ncontexts:\n- name: in-cluster\n  context:\n    cluster: in-cluster\n    user: agent\ncurrent-context: in-cluster\n",
                ca_file.display(),
                token_file.display()
            ),
        )
        .expect("kubeconfig");
        TlsFront {
            kubeconfig,
            _task: task,
        }
    }
}

/// The agent container's command, arguments and environment in deploy/base/agent.yaml
/// (values only: `valueFrom` entries are the bench's to fill in).
fn daemonset_container() -> (Vec<String>, Vec<(String, String)>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/base/agent.yaml");
    let text = std::fs::read_to_string(&path).expect("deploy/base/agent.yaml");
    let manifest: Value = serde_saphyr::from_str(&text).expect("agent.yaml");
    let container = &manifest["spec"]["template"]["spec"]["containers"][0];
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    let mut command = strings(&container["command"]);
    assert_eq!(
        command.first().map(String::as_str),
        Some("/usr/local/bin/kubelet-gitops-agent"),
        "the DaemonSet runs another command"
    );
    command.remove(0);
    command.extend(strings(&container["args"]));
    let env = container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            Some((
                e["name"].as_str()?.to_string(),
                e["value"].as_str()?.to_string(),
            ))
        })
        .collect();
    (command, env)
}

/// Starts the agent as the DaemonSet does, for node w1 of `sim`, with the API server at
/// `kubeconfig`. What differs, and why it changes nothing the agent holds: the host's
/// paths are under the node's root (`--host-root`; the pod mounts each at its own path),
/// the host's cgroup filesystem is the node's (the pod's /host/sys/fs/cgroup), the
/// kubelet's healthz is the stand-in's, and the admin port is any free one.
fn spawn_deployed(bin: &Path, sim: &Sim, kubeconfig: &Path, log: &Path) -> tokio::process::Child {
    let (args, env) = daemonset_container();
    let root = sim.node_root("w1");
    let kubelet_url = sim.kubelet("w1").expect("kubelet").url();
    let mut env: BTreeMap<String, String> = env.into_iter().collect();
    for (k, v) in [
        ("NODE_NAME", "w1".to_string()),
        (
            "KUBELET_GITOPS_KUBECONFIG",
            kubeconfig.display().to_string(),
        ),
        ("KUBELET_GITOPS_HOST_ROOT", root.display().to_string()),
        (
            "KUBELET_GITOPS_CGROUP_ROOT",
            KubeletPaths::CGROUP_ROOT.to_string(),
        ),
        (
            "KUBELET_GITOPS_HEALTHZ_URL",
            format!("{kubelet_url}/healthz"),
        ),
        ("KUBELET_GITOPS_ADMIN_ADDR", "127.0.0.1:0".to_string()),
    ] {
        env.insert(k.to_string(), v);
    }
    tokio::process::Command::new(bin)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env)
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(log).expect("log")))
        .kill_on_drop(true)
        .spawn()
        .expect("agent")
}

async fn stop(mut agent: tokio::process::Child) {
    if let Some(pid) = agent.id() {
        // SIGTERM, as the kubelet stops a pod.
        let _ = std::process::Command::new("kill")
            .arg(pid.to_string())
            .status();
    }
    if tokio::time::timeout(Duration::from_secs(10), agent.wait())
        .await
        .is_err()
    {
        agent.start_kill().ok();
        let _ = agent.wait().await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let applies: usize = std::env::var("AGENT_BENCH_APPLIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let idle: Duration = std::env::var("AGENT_BENCH_IDLE")
        .ok()
        .map(|v| humantime::parse_duration(&v).expect("AGENT_BENCH_IDLE: a duration such as 6m"))
        .unwrap_or(Duration::from_secs(360));
    let bin = agent_bin();
    let dir = tempfile::tempdir().expect("tempdir");
    let inventory = Inventory::parse("inventory.yaml", INVENTORY.as_bytes()).expect("inventory");
    let mut config = SimConfig::new(inventory, dir.path().join("sim"));
    config.kubelet = KubeletOptions {
        start_delay: Duration::from_millis(20),
        not_ready_delay: Duration::from_millis(500),
        restart_after_exit: None,
        events: false,
        ..KubeletOptions::default()
    };
    let sim = Sim::start(config).await.expect("sim");
    let kc = kube::config::Kubeconfig::read_from(sim.kubeconfig_path()).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .expect("kube config");
    let client = Client::try_from(cfg).expect("client");
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some("kubelet-gitops".into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
    let upstream: SocketAddr = sim
        .url()
        .trim_start_matches("http://")
        .parse()
        .expect("sim address");
    let front = TlsFront::start(&dir.path().join("tls"), upstream).await;

    // Idle, as deployed.
    let agent = spawn_deployed(
        &bin,
        &sim,
        &front.kubeconfig,
        &dir.path().join("deployed.log"),
    );
    let pid = agent.id().expect("pid");
    wait("the first sync", || {
        annotation(&sim, protocol::CURRENT_CONFIG).is_some()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let synced = memory(pid).expect("memory");
    let cpu_before = cpu_time(pid).expect("cpu");
    let log = sim.request_log().clone();
    log.reset();
    let started = Instant::now();
    let mut peak = synced.rss;
    while started.elapsed() < idle {
        tokio::time::sleep(Duration::from_secs(1).min(idle)).await;
        peak = peak.max(memory(pid).expect("memory").rss);
    }
    let idled = memory(pid).expect("memory");
    let idle_cpu = cpu_time(pid).expect("cpu").saturating_sub(cpu_before);
    let mut requests: BTreeMap<String, u64> = BTreeMap::new();
    for e in log.entries() {
        if e.user_agent
            .as_deref()
            .is_some_and(|ua| ua.starts_with("kubelet/"))
        {
            continue;
        }
        *requests
            .entry(format!("{} {}", e.verb, e.resource))
            .or_default() += 1;
    }
    stop(agent).await;
    println!("agent as deployed (deploy/base/agent.yaml's environment, TLS, token):");
    println!("  idle RSS after the first sync: {synced}");
    println!(
        "  idle RSS after {}: {idled}, peak {}",
        humantime::format_duration(idle),
        mib(peak)
    );
    let per_hour = |n: u64| n as f64 * 3600.0 / idle.as_secs_f64();
    println!(
        "  CPU while idle: {:?} in {} ({:.1} s/hour)",
        idle_cpu,
        humantime::format_duration(idle),
        idle_cpu.as_secs_f64() * 3600.0 / idle.as_secs_f64()
    );
    if requests.is_empty() {
        println!("  API requests while idle: none");
    }
    for (what, n) in &requests {
        println!(
            "  API requests while idle: {what}: {n} ({:.1}/hour)",
            per_hour(*n)
        );
    }

    // Reaction, with a restart the bench can see.
    let root = sim.node_root("w1");
    let kubelet_url = sim.kubelet("w1").expect("kubelet").url();
    let stamps = dir.path().join("restarts");
    let restart = format!(
        "sh -c 'date +%s%N >> {} && exec curl -fsS -X POST {}/sim/v1/nodes/w1/kubelet/restart -o /dev/null'",
        stamps.display(),
        sim.url()
    );
    let agent_log = std::fs::File::create(dir.path().join("agent.log")).expect("log");
    let agent = tokio::process::Command::new(&bin)
        .args([
            "--node-name=w1".to_string(),
            format!("--kubeconfig={}", front.kubeconfig.display()),
            // As a DaemonSet runs it: the node's root is the host root, and every path
            // is a path on the node (the agent reads the node's pid_max there, the one
            // its kubelet reads).
            format!("--host-root={}", root.display()),
            "--checkpoint-dir=/var/lib/kubelet-gitops".into(),
            format!("--kubelet-config={}", KubeletPaths::CONFIG),
            format!("--flags-file={}", KubeletPaths::FLAGS_ENV),
            "--restart-method=command".into(),
            format!("--restart-command={restart}"),
            format!("--healthz-url={kubelet_url}/healthz"),
            format!("--configz-url={kubelet_url}/configz"),
            format!("--cgroup-root={}", KubeletPaths::CGROUP_ROOT),
            "--admin-addr=127.0.0.1:0".into(),
            "--log=warn".into(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::from(agent_log))
        .kill_on_drop(true)
        .spawn()
        .expect("agent");
    let pid = agent.id().expect("pid");
    // Its first pass: nothing to report (the first agent did), nothing to write.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cpu_before = cpu_time(pid).expect("cpu");

    let nodes: Api<Node> = Api::all(client.clone());
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "kubelet-gitops");
    let mut reaction = Vec::with_capacity(applies);
    for i in 0..applies {
        let yaml = format!("{BASE}kubeAPIQPS: {}\n", 100 + i);
        let name = protocol::configmap_name("bench", yaml.as_bytes());
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            immutable: Some(true),
            data: Some([(protocol::CONFIGMAP_KEY.to_string(), yaml)].into()),
            ..ConfigMap::default()
        };
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("configmap");
        let desired = format!("kubelet-gitops/{name}");
        let seen = restarts(&stamps).len();
        let patch = json!({"metadata": {"annotations": {
            DESIRED_CONFIG: desired, HEALTH_TIMEOUT: "30s", LKG_GRACE: "1h",
        }}});
        let t0 = unix_nanos();
        nodes
            .patch("w1", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patch");
        wait("the restart command", || restarts(&stamps).len() > seen).await;
        let t1 = restarts(&stamps)[seen];
        reaction.push(Duration::from_nanos(t1.saturating_sub(t0) as u64));
        wait("Done", || {
            annotation(&sim, protocol::STATE).as_deref() == Some("Done")
                && annotation(&sim, protocol::OBSERVED_CONFIG).as_deref() == Some(desired.as_str())
        })
        .await;
    }
    let busy = memory(pid).expect("memory");
    let cpu = cpu_time(pid).expect("cpu").saturating_sub(cpu_before);
    reaction.sort();
    println!(
        "agent after {applies} applies: RSS {busy}; CPU {:?} per apply",
        cpu / applies.max(1) as u32
    );
    println!(
        "annotation change -> restart command, {applies} applies: p50 {:?}, p99 {:?}, max {:?}",
        percentile(&reaction, 0.5),
        percentile(&reaction, 0.99),
        reaction[reaction.len() - 1]
    );
    stop(agent).await;
    sim.shutdown().await;
}
