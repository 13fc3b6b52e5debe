//! For the api_* and kubectl_* tests: a started server with a kubeconfig, a
//! `kube::Client` built from that kubeconfig, and a tiny raw HTTP/1.1 client for exact
//! status codes, headers and streamed watch lines.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use kubelet_gitops_sim::faults::FaultConfig;
use kubelet_gitops_sim::server::ApiServer;
use kubelet_gitops_sim::store::Store;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// A running server, its kubeconfig, and the temp dir holding it.
pub struct Sim {
    pub server: ApiServer,
    pub kubeconfig: PathBuf,
    pub dir: tempfile::TempDir,
}

impl Sim {
    pub async fn start() -> Sim {
        Self::start_with_faults(FaultConfig::default()).await
    }

    pub async fn start_with_faults(faults: FaultConfig) -> Sim {
        Self::start_with_store(Store::new(), faults).await
    }

    pub async fn start_with_store(store: Store, faults: FaultConfig) -> Sim {
        let server = ApiServer::start(store, faults)
            .await
            .expect("server starts");
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        server
            .write_kubeconfig(&kubeconfig)
            .expect("kubeconfig written");
        Sim {
            server,
            kubeconfig,
            dir,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr
    }

    /// A kube client built from the written kubeconfig, as the product builds one.
    pub async fn client(&self) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("kubeconfig parses");
        let config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .expect("kube config");
        kube::Client::try_from(config).expect("kube client")
    }

    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> RawResponse {
        raw(self.addr(), method, path, headers, body).await
    }

    pub async fn get(&self, path: &str) -> RawResponse {
        self.raw("GET", path, &[], None).await
    }

    pub async fn send_json(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: &Value,
    ) -> RawResponse {
        let bytes = serde_json::to_vec(body).expect("json");
        self.raw(
            method,
            path,
            &[("Content-Type", content_type)],
            Some(&bytes),
        )
        .await
    }
}

/// A response read to the end.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

fn request_bytes(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    close: bool,
) -> Vec<u8> {
    let mut req =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: sim-raw-test\r\n");
    if close {
        req.push_str("Connection: close\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!("Content-Length: {}\r\n", b.len()));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    if let Some(b) = body {
        bytes.extend_from_slice(b);
    }
    bytes
}

/// One HTTP/1.1 request with `Connection: close`, response read to EOF.
pub async fn raw(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> RawResponse {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(&request_bytes(addr, method, path, headers, body, true))
        .await
        .expect("write");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut buf))
        .await
        .expect("response within 30s")
        .expect("read");
    let split = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("header end");
    let head = String::from_utf8_lossy(&buf[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status code");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let raw_body = &buf[split + 4..];
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    let body = if chunked {
        dechunk(raw_body)
    } else {
        raw_body.to_vec()
    };
    RawResponse {
        status,
        headers,
        body,
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = data.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&data[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or(0);
        data = &data[eol + 2..];
        if size == 0 || data.len() < size {
            out.extend_from_slice(&data[..size.min(data.len())]);
            break;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[(size + 2).min(data.len())..];
    }
    out
}

/// A streaming watch response read line by line.
pub struct RawWatch {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    reader: BufReader<TcpStream>,
    pending: Vec<u8>,
    done: bool,
}

impl RawWatch {
    pub async fn open(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> RawWatch {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream
            .write_all(&request_bytes(addr, "GET", path, headers, None, true))
            .await
            .expect("write");
        let mut reader = BufReader::new(stream);
        let mut status = 0;
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            let n = tokio::time::timeout(Duration::from_secs(10), reader.read_line(&mut line))
                .await
                .expect("headers within 10s")
                .expect("read header");
            if n == 0 || line == "\r\n" {
                break;
            }
            if status == 0 {
                status = line
                    .split(' ')
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .expect("status code");
            } else if let Some((k, v)) = line.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        RawWatch {
            status,
            headers,
            reader,
            pending: Vec::new(),
            done: false,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Reads one more chunk into `pending`; false at the end of the stream.
    async fn read_chunk(&mut self) -> bool {
        if self.done {
            return false;
        }
        let mut size_line = String::new();
        if self.reader.read_line(&mut size_line).await.unwrap_or(0) == 0 {
            self.done = true;
            return false;
        }
        let size = usize::from_str_radix(size_line.trim().split(';').next().unwrap_or(""), 16)
            .unwrap_or(0);
        if size == 0 {
            self.done = true;
            return false;
        }
        let mut chunk = vec![0u8; size + 2];
        if self.reader.read_exact(&mut chunk).await.is_err() {
            self.done = true;
            return false;
        }
        chunk.truncate(size);
        self.pending.extend_from_slice(&chunk);
        true
    }

    /// The next event line parsed as JSON; None at the end of the stream or after `wait`.
    pub async fn next_event(&mut self, wait: Duration) -> Option<Value> {
        let fut = async {
            loop {
                if let Some(pos) = self.pending.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = self.pending.drain(..=pos).collect();
                    return Some(
                        serde_json::from_slice(&line[..line.len() - 1])
                            .expect("event line is JSON"),
                    );
                }
                if !self.read_chunk().await {
                    return None;
                }
            }
        };
        tokio::time::timeout(wait, fut).await.ok().flatten()
    }

    /// Whether the server ended the stream within `wait` (no further event).
    pub async fn ended_within(&mut self, wait: Duration) -> bool {
        let fut = async {
            loop {
                if !self.pending.is_empty() {
                    return false;
                }
                if !self.read_chunk().await {
                    return true;
                }
            }
        };
        tokio::time::timeout(wait, fut).await.unwrap_or(false)
    }
}

pub fn node(name: &str) -> Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": name, "labels": { "kubernetes.io/hostname": name } },
        "status": {
            "conditions": [{ "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z" }],
            "nodeInfo": { "kubeletVersion": "v1.36.0", "osImage": "Debian GNU/Linux 13", "kernelVersion": "6.12.0",
                "containerRuntimeVersion": "containerd://2.1.0", "machineID": "m", "systemUUID": "s", "bootID": "b",
                "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64" },
            "addresses": [{ "type": "InternalIP", "address": "10.0.0.1" }, { "type": "Hostname", "address": name }]
        }
    })
}

pub fn configmap(ns: &str, name: &str, data: &[(&str, &str)]) -> Value {
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
        .collect();
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": name, "namespace": ns },
        "data": data,
    })
}

/// The kubectl binary: `$KUBECTL`, else `/usr/bin/kubectl`, else `kubectl` on PATH.
/// None (with a SKIPPED line on stderr) when missing outside CI; a panic in CI.
pub fn kubectl_path(test: &str) -> Option<PathBuf> {
    let candidates: Vec<PathBuf> = std::env::var_os("KUBECTL")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from("/usr/bin/kubectl")])
        .chain(
            std::env::var_os("PATH")
                .map(|p| {
                    std::env::split_paths(&p)
                        .map(|d| d.join("kubectl"))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default(),
        )
        .collect();
    if let Some(found) = candidates.into_iter().find(|p| p.is_file()) {
        return Some(found);
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "kubectl not found ($KUBECTL, /usr/bin/kubectl, PATH): .ci/run must install kubectl"
        );
    }
    eprintln!("SKIPPED {test}: kubectl not found ($KUBECTL, /usr/bin/kubectl, PATH)");
    None
}

/// Output of one kubectl run.
#[derive(Debug)]
pub struct KubectlOutput {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Sim {
    fn kubectl_command(&self, kubectl: &std::path::Path, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(kubectl);
        let cache = self.dir.path().join("kube-cache");
        cmd.arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .arg(format!("--cache-dir={}", cache.display()))
            .args(args)
            .env("HOME", self.dir.path())
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    /// Runs kubectl to completion (at most 60 s).
    pub async fn kubectl(&self, kubectl: &std::path::Path, args: &[&str]) -> KubectlOutput {
        let out = tokio::time::timeout(
            Duration::from_secs(60),
            self.kubectl_command(kubectl, args).output(),
        )
        .await
        .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish in 60s"))
        .expect("kubectl runs");
        KubectlOutput {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs kubectl and asserts it succeeded; returns stdout.
    pub async fn kubectl_ok(&self, kubectl: &std::path::Path, args: &[&str]) -> String {
        let out = self.kubectl(kubectl, args).await;
        assert!(
            out.success,
            "kubectl {args:?} failed:\nstdout: {}\nstderr: {}",
            out.stdout, out.stderr
        );
        out.stdout
    }

    /// Starts a long-running kubectl (a watch) with stdout piped.
    pub fn kubectl_spawn(&self, kubectl: &std::path::Path, args: &[&str]) -> tokio::process::Child {
        self.kubectl_command(kubectl, args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("kubectl starts")
    }
}

/// Reads lines from a running kubectl until one contains `needle` (panics after `wait`).
pub async fn read_until(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    needle: &str,
    wait: Duration,
) -> Vec<String> {
    let mut seen = Vec::new();
    let found = tokio::time::timeout(wait, async {
        while let Ok(Some(line)) = lines.next_line().await {
            let hit = line.contains(needle);
            seen.push(line);
            if hit {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(found, "no line with {needle:?} in {seen:?}");
    seen
}
