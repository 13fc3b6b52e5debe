//! How a stand-in kubelet reaches the API server: the in-process [`Store`] when it runs
//! inside the sim, or plain HTTP when it runs as its own process (a minimal HTTP/1.1
//! client, so the sim does not depend on a Kubernetes client).

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::resources::{ResourceType, kinds};
use crate::store::{PatchType, Store, WriteOptions};

use super::node::LEASE_NAMESPACE;

/// A failed API call: the HTTP code (0 when the server could not be reached) and the
/// message (the `metav1.Status` message when there is one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (HTTP {code})")]
pub struct ApiFailure {
    /// HTTP status code; 0 for a transport error.
    pub code: u16,
    /// What went wrong.
    pub message: String,
}

impl ApiFailure {
    fn transport(message: impl Into<String>) -> Self {
        ApiFailure {
            code: 0,
            message: message.into(),
        }
    }
}

/// The objects a kubelet writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// core/v1 Node.
    Node,
    /// coordination.k8s.io/v1 Lease in `kube-node-lease`.
    Lease,
    /// core/v1 Event in `default`.
    Event,
}

impl Kind {
    fn rt(self) -> &'static ResourceType {
        match self {
            Kind::Node => kinds::nodes(),
            Kind::Lease => kinds::leases(),
            Kind::Event => kinds::core_events(),
        }
    }

    fn namespace(self) -> Option<&'static str> {
        match self {
            Kind::Node => None,
            Kind::Lease => Some(LEASE_NAMESPACE),
            Kind::Event => Some("default"),
        }
    }

    fn collection_path(self) -> &'static str {
        match self {
            Kind::Node => "/api/v1/nodes",
            Kind::Lease => "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
            Kind::Event => "/api/v1/namespaces/default/events",
        }
    }
}

/// The API server, as a kubelet sees it.
#[derive(Clone)]
pub enum NodeApi {
    /// The sim's own store, called directly.
    InProcess(Store),
    /// An API server over HTTP.
    Http(HttpTarget),
}

const FIELD_MANAGER: &str = "kubelet";

fn write_opts() -> WriteOptions {
    WriteOptions {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.to_string()),
        force: false,
    }
}

fn from_api_error(e: crate::error::ApiError) -> ApiFailure {
    ApiFailure {
        code: e.code,
        message: e.message,
    }
}

impl NodeApi {
    /// GET one object.
    pub async fn get(&self, kind: Kind, name: &str) -> Result<Value, ApiFailure> {
        match self {
            NodeApi::InProcess(store) => store
                .get(kind.rt(), kind.namespace(), name)
                .map_err(from_api_error),
            NodeApi::Http(t) => {
                let path = format!("{}/{}", kind.collection_path(), name);
                t.json("GET", &path, None, None).await
            }
        }
    }

    /// POST a new object.
    pub async fn create(&self, kind: Kind, obj: Value) -> Result<Value, ApiFailure> {
        match self {
            NodeApi::InProcess(store) => store
                .create(kind.rt(), kind.namespace(), obj, &write_opts())
                .map_err(from_api_error),
            NodeApi::Http(t) => {
                let body = serde_json::to_vec(&obj).unwrap_or_default();
                let path = format!("{}?fieldManager={FIELD_MANAGER}", kind.collection_path());
                t.json("POST", &path, Some("application/json"), Some(&body))
                    .await
            }
        }
    }

    /// PUT an object (with its resourceVersion: a stale one is a 409).
    pub async fn update(&self, kind: Kind, name: &str, obj: Value) -> Result<Value, ApiFailure> {
        match self {
            NodeApi::InProcess(store) => store
                .update(kind.rt(), kind.namespace(), name, None, obj, &write_opts())
                .map_err(from_api_error),
            NodeApi::Http(t) => {
                let body = serde_json::to_vec(&obj).unwrap_or_default();
                let path = format!(
                    "{}/{}?fieldManager={FIELD_MANAGER}",
                    kind.collection_path(),
                    name
                );
                t.json("PUT", &path, Some("application/json"), Some(&body))
                    .await
            }
        }
    }

    /// PATCH a Node's status subresource with a strategic merge patch, as the kubelet
    /// does (`PatchNodeStatus`): its lists merge by key, so the conditions of other
    /// writers (node-problem-detector's, the agent's `KubeletConfigReady`) are kept, where
    /// a JSON merge patch would replace the whole `conditions` list with the kubelet's.
    pub async fn patch_node_status(&self, name: &str, patch: &Value) -> Result<Value, ApiFailure> {
        let body = serde_json::to_vec(patch).unwrap_or_default();
        match self {
            NodeApi::InProcess(store) => store
                .patch(
                    kinds::nodes(),
                    None,
                    name,
                    Some("status"),
                    PatchType::StrategicMerge,
                    &body,
                    &write_opts(),
                )
                .map_err(from_api_error),
            NodeApi::Http(t) => {
                let path = format!("/api/v1/nodes/{name}/status?fieldManager={FIELD_MANAGER}");
                t.json(
                    "PATCH",
                    &path,
                    Some("application/strategic-merge-patch+json"),
                    Some(&body),
                )
                .await
            }
        }
    }
}

/// An `http://host:port` API server, with an optional bearer token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpTarget {
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: u16,
    /// Bearer token sent as `Authorization`.
    pub token: Option<String>,
    /// Per-request timeout.
    pub timeout: Duration,
}

/// Why a server URL or kubeconfig cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// Not an `http://host[:port]` URL.
    #[error("unsupported server URL {url:?}: {reason}")]
    Url { url: String, reason: String },
    /// The kubeconfig cannot be read.
    #[error("failed to read kubeconfig {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The kubeconfig does not decode.
    #[error(transparent)]
    Decode(Box<kubelet_gitops_core::decode::DecodeError>),
    /// The kubeconfig lacks what is needed.
    #[error("kubeconfig {path}: {reason}")]
    Kubeconfig { path: String, reason: String },
}

impl HttpTarget {
    /// Parses `http://host[:port][/]`. Only plain http: the sim serves nothing else.
    pub fn parse(url: &str) -> Result<HttpTarget, TargetError> {
        let bad = |reason: &str| TargetError::Url {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("only http:// URLs are supported"))?;
        let authority = rest.split('/').next().unwrap_or_default();
        if rest.len() > authority.len() + 1 {
            return Err(bad("a path after the host is not supported"));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                let port = p.parse::<u16>().map_err(|_| bad("invalid port"))?;
                (h.to_string(), port)
            }
            _ => (authority.to_string(), 80),
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(HttpTarget {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port,
            token: None,
            timeout: Duration::from_secs(10),
        })
    }

    /// The server and token of the current context of the kubeconfig at `path`.
    pub fn from_kubeconfig(path: &Path) -> Result<HttpTarget, TargetError> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| TargetError::Read {
            path: name.clone(),
            source,
        })?;
        let (kc, _) = kubelet_gitops_core::decode::decode_value(&name, &bytes)
            .map_err(|e| TargetError::Decode(Box::new(e)))?;
        let bad = |reason: String| TargetError::Kubeconfig {
            path: name.clone(),
            reason,
        };
        let named = |list: &str, wanted: &str| -> Option<Value> {
            kc.get(list)?
                .as_array()?
                .iter()
                .find(|e| e.get("name").and_then(Value::as_str) == Some(wanted))
                .cloned()
        };
        let current = kc
            .get("current-context")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("no current-context".into()))?;
        let ctx = named("contexts", current)
            .ok_or_else(|| bad(format!("context {current:?} not found")))?;
        let cluster_name = ctx
            .pointer("/context/cluster")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("context {current:?} names no cluster")))?;
        let cluster = named("clusters", cluster_name)
            .ok_or_else(|| bad(format!("cluster {cluster_name:?} not found")))?;
        let server = cluster
            .pointer("/cluster/server")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("cluster {cluster_name:?} has no server")))?;
        let mut target = HttpTarget::parse(server)?;
        if let Some(user) = ctx.pointer("/context/user").and_then(Value::as_str) {
            target.token = named("users", user).and_then(|u| {
                u.pointer("/user/token")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
        }
        Ok(target)
    }

    /// `http://host:port`.
    pub fn url(&self) -> String {
        if self.host.contains(':') {
            format!("http://[{}]:{}", self.host, self.port)
        } else {
            format!("http://{}:{}", self.host, self.port)
        }
    }

    /// Sends one request and decodes a JSON answer; a non-2xx answer is an
    /// [`ApiFailure`] with the `metav1.Status` message.
    pub async fn json(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&[u8]>,
    ) -> Result<Value, ApiFailure> {
        let (code, bytes) = self.request(method, path, content_type, body).await?;
        let value: Option<Value> = serde_json::from_slice(&bytes).ok();
        if (200..300).contains(&code) {
            value.ok_or_else(|| ApiFailure {
                code,
                message: "the server's answer is not JSON".into(),
            })
        } else {
            let message = value
                .as_ref()
                .and_then(|v| v.get("message"))
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| String::from_utf8_lossy(&bytes).trim().to_string());
            Err(ApiFailure { code, message })
        }
    }

    /// Sends one request (`Connection: close`) and returns the status code and body.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&[u8]>,
    ) -> Result<(u16, Vec<u8>), ApiFailure> {
        tokio::time::timeout(
            self.timeout,
            self.request_inner(method, path, content_type, body),
        )
        .await
        .map_err(|_| {
            ApiFailure::transport(format!(
                "{method} {}{path}: no answer within {:?}",
                self.url(),
                self.timeout
            ))
        })?
    }

    async fn request_inner(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&[u8]>,
    ) -> Result<(u16, Vec<u8>), ApiFailure> {
        let fail = |e: std::io::Error| {
            ApiFailure::transport(format!("{method} {}{path}: {e}", self.url()))
        };
        let mut stream = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(fail)?;
        let body = body.unwrap_or_default();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}:{}\r\nUser-Agent: kubelet/{} (linux/amd64) kubelet-gitops-sim\r\nAccept: application/json\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.host,
            self.port,
            super::node::KUBELET_VERSION,
            body.len()
        );
        if let Some(ct) = content_type {
            head.push_str(&format!("Content-Type: {ct}\r\n"));
        }
        if let Some(token) = &self.token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await.map_err(fail)?;
        stream.write_all(body).await.map_err(fail)?;
        stream.flush().await.map_err(fail)?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.map_err(fail)?;
        parse_response(&raw).map_err(|reason| {
            ApiFailure::transport(format!("{method} {}{path}: {reason}", self.url()))
        })
    }
}

/// Splits an HTTP/1.1 response read to EOF into status code and (de-chunked) body.
pub(crate) fn parse_response(raw: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("truncated response: no end of headers")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let rest = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let code = status_line
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| format!("malformed status line {status_line:?}"))?;
    let mut chunked = false;
    let mut length = None;
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            let v = v.trim();
            if k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked") {
                chunked = true;
            } else if k.eq_ignore_ascii_case("content-length") {
                length = v.parse::<usize>().ok();
            }
        }
    }
    let body = if chunked {
        dechunk(rest)?
    } else {
        match length {
            Some(n) if n <= rest.len() => rest[..n].to_vec(),
            _ => rest.to_vec(),
        }
    };
    Ok((code, body))
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("truncated chunked body")?;
        let size_text = String::from_utf8_lossy(&data[..eol]);
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size {
            return Err("truncated chunk".into());
        }
        out.extend_from_slice(&data[..size]);
        data = data.get(size + 2..).unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let t = HttpTarget::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("127.0.0.1", 8080));
        assert_eq!(t.url(), "http://127.0.0.1:8080");
        assert_eq!(HttpTarget::parse("http://localhost/").unwrap().port, 80);
        assert!(HttpTarget::parse("https://x:1").is_err());
        assert!(HttpTarget::parse("http://x:1/api").is_err());
        assert!(HttpTarget::parse("http://x:notaport").is_err());
    }

    #[test]
    fn responses() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(parse_response(r).unwrap(), (200, b"ok".to_vec()));
        let r = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_response(r).unwrap(), (404, b"abcde".to_vec()));
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n").is_err());
    }
}
