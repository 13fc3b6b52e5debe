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
    kube::Client::try_from(config).map_err(RunError::Client)
}
