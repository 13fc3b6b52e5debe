//! The admin port: `/healthz` (the process serves), `/readyz` (ready once the agent has
//! seen its Node and reported once), `/metrics` (Prometheus text).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use super::metrics::Metrics;

/// What the admin endpoints read.
#[derive(Debug, Clone, Default)]
pub struct AdminState {
    ready: Arc<AtomicBool>,
    /// The agent's metrics.
    pub metrics: Metrics,
}

impl AdminState {
    /// Not ready, fresh metrics.
    pub fn new(metrics: Metrics) -> AdminState {
        AdminState {
            ready: Arc::new(AtomicBool::new(false)),
            metrics,
        }
    }

    /// Marks the agent ready (after its first sync).
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }

    /// Whether the agent is ready.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}

/// The admin routes.
pub fn router(state: AdminState) -> Router {
    async fn healthz() -> &'static str {
        "ok"
    }
    async fn readyz(State(s): State<AdminState>) -> impl IntoResponse {
        if s.is_ready() {
            (StatusCode::OK, "ok")
        } else {
            (StatusCode::SERVICE_UNAVAILABLE, "not synced yet")
        }
    }
    async fn metrics(State(s): State<AdminState>) -> impl IntoResponse {
        (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            s.metrics.encode(),
        )
    }
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

/// Binds `addr` and returns the bound address and the serving future.
pub async fn bind(
    addr: SocketAddr,
    state: AdminState,
) -> std::io::Result<(SocketAddr, impl Future<Output = std::io::Result<()>>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = router(state);
    Ok((bound, async move { axum::serve(listener, app).await }))
}
