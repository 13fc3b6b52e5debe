//! The Kubernetes client: from a kubeconfig or the cluster, sending our User-Agent.

use kube::config::{KubeConfigOptions, Kubeconfig};

use super::config::KubeSource;
use super::error::RunError;

/// The User-Agent of every request: `kubelet-gitops/<version> (<identity>)`, so the API
/// server's audit log says which replica wrote.
pub fn user_agent(identity: &str) -> String {
    format!("kubelet-gitops/{} ({identity})", env!("CARGO_PKG_VERSION"))
}

/// A Kubernetes client for `source`, sending [`user_agent`].
pub async fn client(source: &KubeSource, identity: &str) -> Result<kube::Client, RunError> {
    build(source, identity, true).await
}

/// The client of a drain's evictions: as [`client`], without kube's own retries. An
/// eviction a PodDisruptionBudget refuses is a 429 with `Retry-After: 10`, which kube
/// would wait out up to 15 times (minutes) inside one request; the drain retries it
/// itself, a round later, and reports the budget meanwhile.
pub async fn drain_client(source: &KubeSource, identity: &str) -> Result<kube::Client, RunError> {
    build(source, identity, false).await
}

async fn build(source: &KubeSource, identity: &str, retry: bool) -> Result<kube::Client, RunError> {
    let mut config = match source {
        KubeSource::Kubeconfig(path) => {
            let kc = Kubeconfig::read_from(path).map_err(|source| RunError::Kubeconfig {
                path: path.clone(),
                source,
            })?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|source| RunError::Kubeconfig {
                    path: path.clone(),
                    source,
                })?
        }
        KubeSource::Infer => kube::Config::infer().await.map_err(RunError::InferConfig)?,
    };
    // An identity that is not a valid header value (it comes from flags) is left out.
    if let Ok(v) = axum::http::HeaderValue::from_str(&user_agent(identity)) {
        config.headers.push((axum::http::header::USER_AGENT, v));
    }
    config.default_retry = retry;
    kube::Client::try_from(config).map_err(RunError::Client)
}
