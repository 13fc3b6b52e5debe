//! The admin port: `/metrics` (Prometheus, OpenMetrics text), `/healthz` (the process
//! serves), `/readyz` (the first sync succeeded: for the leader, a reconcile; for a
//! follower, reading the Lease), and the push webhook when one is configured.
//!
//! `/readyz` answers 200 or 503 with a JSON body saying why: the commit fetched and the
//! one applied, a commit rejected with its errors (`file:line:col: field: message`), an
//! unreachable remote, the last reconcile error, overlapping nodes, and every pool's
//! progress.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::state::SyncState;

/// What the handlers read.
#[derive(Clone)]
struct Admin {
    metrics: Arc<Metrics>,
    sync: watch::Receiver<SyncState>,
}

/// The admin routes, with `webhook` (the push webhook's router) merged in when given.
pub fn router(
    metrics: Arc<Metrics>,
    sync: watch::Receiver<SyncState>,
    webhook: Option<Router>,
) -> Router {
    let admin = Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(Admin { metrics, sync });
    match webhook {
        Some(w) => admin.merge(w),
        None => admin,
    }
}

async fn metrics_handler(State(admin): State<Admin>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        admin.metrics.encode(),
    )
        .into_response()
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(admin): State<Admin>) -> Response {
    let state = admin.sync.borrow().clone();
    let code = if state.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, axum::Json(state.detail())).into_response()
}

/// Binds `addr` (port 0 picks a free port; the bound address is returned with the
/// listener).
pub async fn bind(addr: SocketAddr) -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    Ok((listener, local))
}

/// Serves `router` on `listener` until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::RepoError;
    use crate::state::{RejectedCommit, Role};

    async fn get_path(addr: SocketAddr, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        let code = out[9..12].parse().unwrap();
        let body = out
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (code, body)
    }

    #[tokio::test]
    async fn serves_health_readiness_and_metrics() {
        let metrics = Arc::new(Metrics::new());
        let (tx, rx) = watch::channel(SyncState::default());
        let (listener, addr) = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let shutdown = CancellationToken::new();
        let server = tokio::spawn(serve(
            listener,
            router(metrics.clone(), rx, None),
            shutdown.clone(),
        ));

        assert_eq!(get_path(addr, "/healthz").await.0, 200);
        let (code, body) = get_path(addr, "/readyz").await;
        assert_eq!(code, 503);
        assert!(body.contains("\"ready\":false"), "{body}");

        tx.send_modify(|s| {
            s.role = Role::Leader;
            s.rejected = Some(RejectedCommit {
                commit: "abc".into(),
                errors: vec![RepoError::new(
                    "pools/gpu.yaml",
                    "spec.priority",
                    "not a number",
                )],
            });
        });
        let (_, body) = get_path(addr, "/readyz").await;
        assert!(
            body.contains("pools/gpu.yaml: spec.priority: not a number"),
            "{body}"
        );
        assert!(body.contains("\"role\":\"leader\""), "{body}");
        tx.send_modify(|s| s.ready = true);
        assert_eq!(get_path(addr, "/readyz").await.0, 200);

        metrics.set_leader(true);
        let (code, body) = get_path(addr, "/metrics").await;
        assert_eq!(code, 200);
        assert!(body.contains("kubelet_gitops_leader 1"), "{body}");
        assert!(body.contains("# EOF"));
        shutdown.cancel();
        server.await.unwrap().unwrap();
    }
}
