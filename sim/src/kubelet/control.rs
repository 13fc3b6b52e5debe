//! Control of the stand-in kubelets over HTTP, mounted on the API server's port (what
//! `systemctl` is on a real node), and its client for `kubelet-gitops-sim restart-kubelet`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::{HttpTarget, KubeletHandle, KubeletState};

/// The stand-in kubelets of a sim, by node name.
pub type Kubelets = Arc<BTreeMap<String, KubeletHandle>>;

/// The control endpoints for `kubelets`, to mount on the API server:
///
/// - `GET /sim/v1/kubelets`: every kubelet's state;
/// - `GET /sim/v1/nodes/{name}/kubelet`: one kubelet's state;
/// - `POST /sim/v1/nodes/{name}/kubelet/restart`: restart it; answers with its state
///   once the new start has an outcome (`phase` `Running` or `Exited`, with `reason`);
/// - `POST /sim/v1/nodes/{name}/kubelet/stop`: stop it.
///
/// An unknown node is a 404 `metav1.Status`.
pub fn control_router(kubelets: Kubelets) -> axum::Router {
    use axum::extract::{Path as UrlPath, State};
    use axum::http::StatusCode;
    use axum::response::{IntoResponse, Response};
    use axum::routing::{get, post};

    fn not_found(name: &str) -> Response {
        let body = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": format!("node {name:?} has no stand-in kubelet"),
            "reason": "NotFound",
            "details": {"name": name, "kind": "nodes"},
            "code": 404,
        });
        (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
    }

    async fn list(State(k): State<Kubelets>) -> Response {
        let items: Vec<KubeletState> = k.values().map(KubeletHandle::state).collect();
        axum::Json(json!({ "items": items })).into_response()
    }
    async fn show(State(k): State<Kubelets>, UrlPath(name): UrlPath<String>) -> Response {
        match k.get(&name) {
            Some(h) => axum::Json(h.state()).into_response(),
            None => not_found(&name),
        }
    }
    async fn restart(State(k): State<Kubelets>, UrlPath(name): UrlPath<String>) -> Response {
        match k.get(&name) {
            Some(h) => axum::Json(h.restart().await).into_response(),
            None => not_found(&name),
        }
    }
    async fn stop(State(k): State<Kubelets>, UrlPath(name): UrlPath<String>) -> Response {
        match k.get(&name) {
            Some(h) => axum::Json(h.stop().await).into_response(),
            None => not_found(&name),
        }
    }

    axum::Router::new()
        .route("/sim/v1/kubelets", get(list))
        .route("/sim/v1/nodes/{name}/kubelet", get(show))
        .route("/sim/v1/nodes/{name}/kubelet/restart", post(restart))
        .route("/sim/v1/nodes/{name}/kubelet/stop", post(stop))
        .with_state(kubelets)
}

/// Asks the sim at `server` (`http://127.0.0.1:port`) to restart node `node`'s kubelet and
/// returns its state after the restart. For `kubelet-gitops-sim restart-kubelet`.
pub async fn request_restart(server: &str, node: &str) -> Result<Value, String> {
    let target = HttpTarget::parse(server).map_err(|e| e.to_string())?;
    let mut target = target;
    target.timeout = Duration::from_secs(120);
    target
        .json(
            "POST",
            &format!("/sim/v1/nodes/{node}/kubelet/restart"),
            Some("application/json"),
            Some(b"{}"),
        )
        .await
        .map_err(|e| e.to_string())
}
