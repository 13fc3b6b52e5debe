//! [`Cluster`]: what a scenario reads from the cluster and the processes (Nodes,
//! ConfigMaps, the kubelets' `/configz`, the reconciler's `/readyz` and `/metrics`) and
//! the few changes it makes to Nodes and node roots, as a person would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use kubelet_gitops_core::protocol;
use kubelet_gitops_sim::kubelet::HttpTarget;
use serde_json::{Value, json};

use crate::{Backend, E2eError, NAMESPACE, NodeView, Recorder};

/// A node's kubelet (a stand-in on the sim, a real one on the real cluster): where it
/// serves and where its node's files are.
#[derive(Debug, Clone)]
pub struct KubeletInfo {
    /// Its API: `http://127.0.0.1:<port>` (a stand-in: `/healthz`, `/configz`), or
    /// `https://127.0.0.1:<port>` (a real kubelet, with webhook authentication).
    pub url: String,
    /// The node's root directory.
    pub root: PathBuf,
    /// The command that restarts it, as the agent runs it.
    pub restart: Vec<String>,
    /// The node's own config file, as it was before any agent ran.
    pub local_config: String,
    /// How the test (as admin) reaches a real kubelet's API: a client that trusts the
    /// cluster CA and presents the admin's certificate, built once.
    pub(crate) https: Option<reqwest::Client>,
    /// The agent's kubeconfig.
    pub(crate) agent_kubeconfig: PathBuf,
    /// The agent's arguments that depend on the backend (paths, endpoints, credentials).
    pub(crate) agent_args: Vec<String>,
}

impl KubeletInfo {
    /// The agent's checkpoint directory, as a path on the node (the agent's default).
    pub const CHECKPOINT_DIR: &str = "/var/lib/kubelet-gitops";

    /// The agent's checkpoint directory, as a path on this machine.
    pub fn checkpoint_dir(&self) -> PathBuf {
        self.root.join(&Self::CHECKPOINT_DIR[1..])
    }

    /// The kubelet's `--config` file, as a path on this machine.
    pub fn config_file(&self) -> PathBuf {
        self.root.join("var/lib/kubelet/config.yaml")
    }

    /// The config file's content now.
    pub fn config(&self) -> Result<String, E2eError> {
        read_config(&self.root)
    }
}

/// Where every pool's rollout ended.
#[derive(Debug, Clone)]
pub struct Converged {
    /// The commit rolled out.
    pub commit: String,
    /// Pool name to `<namespace>/<configmap>`.
    pub targets: BTreeMap<String, String>,
}

impl Converged {
    /// The target of `pool`.
    pub fn target(&self, pool: &str) -> &str {
        self.targets.get(pool).map(String::as_str).unwrap_or("")
    }
}

/// What the scenario reads from the cluster and the processes (no process control).
pub struct Cluster {
    /// Which cluster this is.
    pub backend: Backend,
    /// A client of the API server, as the person at the keyboard (the sim's kubeconfig;
    /// the real cluster's admin). The product never runs with it on the real cluster.
    pub client: Client,
    /// That client's kubeconfig.
    pub kubeconfig: PathBuf,
    /// The API server's URL.
    pub server: String,
    /// The scenario's directory.
    pub(crate) dir: PathBuf,
    pub(crate) kubelets: BTreeMap<String, KubeletInfo>,
    pub(crate) admin: HttpTarget,
    pub(crate) recorder: Recorder,
}

impl Cluster {
    /// The stand-in kubelet of `node`.
    pub fn kubelet(&self, node: &str) -> Result<&KubeletInfo, E2eError> {
        self.kubelets.get(node).ok_or_else(|| E2eError::Unexpected {
            what: format!("kubelet of {node}"),
            message: "no such node".into(),
        })
    }

    /// Every stand-in kubelet by node.
    pub fn kubelets(&self) -> &BTreeMap<String, KubeletInfo> {
        &self.kubelets
    }

    /// The node history.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// The Nodes, read from the API server now.
    pub async fn nodes(&self) -> Result<BTreeMap<String, NodeView>, E2eError> {
        let list = Api::<Node>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(E2eError::kube("listing nodes"))?;
        Ok(list
            .items
            .iter()
            .map(NodeView::from_node)
            .map(|v| (v.name.clone(), v))
            .collect())
    }

    /// The reconciler's `/readyz` JSON (whatever its status code).
    pub async fn readyz(&self) -> Result<Value, E2eError> {
        let (_, body) = self
            .admin
            .request("GET", "/readyz", None, None)
            .await
            .map_err(|e| http_error("reconciler /readyz", e))?;
        serde_json::from_slice(&body).map_err(|e| E2eError::Unexpected {
            what: "reconciler /readyz".into(),
            message: e.to_string(),
        })
    }

    /// The value of the reconciler metric sample `series` (`name{labels}` exactly as
    /// exposed), if present.
    pub async fn metric(&self, series: &str) -> Result<Option<f64>, E2eError> {
        let text = self.metrics().await?;
        Ok(text.lines().find_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            (name == series).then(|| value.parse().ok()).flatten()
        }))
    }

    /// The reconciler's whole `/metrics` text.
    pub async fn metrics(&self) -> Result<String, E2eError> {
        get_metrics(&self.admin, "reconciler /metrics").await
    }

    /// The effective config `node`'s kubelet serves on `/configz` (`kubeletconfig`).
    pub async fn configz(&self, node: &str) -> Result<Value, E2eError> {
        let k = self.kubelet(node)?;
        let what = format!("configz of {node}");
        let (code, body) = match &k.https {
            None => {
                let target = HttpTarget::parse(&k.url).map_err(|e| E2eError::Http {
                    what: what.clone(),
                    message: e.to_string(),
                })?;
                target
                    .request("GET", "/configz", None, None)
                    .await
                    .map_err(|e| http_error(&what, e))?
            }
            Some(client) => https_get(client, &format!("{}/configz", k.url))
                .await
                .map_err(|e| http_error(&what, e))?,
        };
        if code != 200 {
            return Err(E2eError::Http {
                what,
                message: format!("status {code}: {}", String::from_utf8_lossy(&body)),
            });
        }
        let v: Value = serde_json::from_slice(&body).map_err(|e| E2eError::Unexpected {
            what: what.clone(),
            message: e.to_string(),
        })?;
        Ok(v["kubeletconfig"].clone())
    }

    /// The ConfigMaps the reconciler manages (label `app.kubernetes.io/managed-by`).
    pub async fn configmaps(&self) -> Result<Vec<ConfigMap>, E2eError> {
        let selector = format!("{}={}", protocol::MANAGED_BY_LABEL, protocol::MANAGED_BY);
        Ok(Api::<ConfigMap>::namespaced(self.client.clone(), NAMESPACE)
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(E2eError::kube("listing ConfigMaps"))?
            .items)
    }

    /// One ConfigMap of [`NAMESPACE`] by name.
    pub async fn configmap(&self, name: &str) -> Result<ConfigMap, E2eError> {
        Api::<ConfigMap>::namespaced(self.client.clone(), NAMESPACE)
            .get(name)
            .await
            .map_err(E2eError::kube(format!("reading ConfigMap {name}")))
    }

    /// Sets (or with `None` removes) a label of `node`, as `kubectl label` does.
    pub async fn label_node(
        &self,
        node: &str,
        key: &str,
        value: Option<&str>,
    ) -> Result<(), E2eError> {
        let patch = json!({"metadata": {"labels": {key: value}}});
        Api::<Node>::all(self.client.clone())
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(E2eError::kube(format!("labelling node {node}")))?;
        Ok(())
    }

    /// Makes the pod logs directory `podLogsDir` names impossible to create (a file is
    /// in its place) on every node, and returns that path: a config naming it validates
    /// (the agent's pre-flight included) but a kubelet exits at start with it, a real
    /// v1.36 kubelet as the sim's stand-in: `Failed to initialize internal modules: error
    /// creating pod logs root directory "...": mkdir ...: not a directory`.
    pub fn block_pod_logs_dir(&self) -> Result<String, E2eError> {
        let write = |path: &Path| {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(E2eError::io(format!("creating {}", parent.display())))?;
            }
            std::fs::write(path, b"not a directory\n")
                .map_err(E2eError::io(format!("writing {}", path.display())))
        };
        match self.backend {
            // A path on the node: under each node's root.
            Backend::Sim => {
                const BLOCKED: &str = "/var/log/kubelet-gitops-blocked";
                for k in self.kubelets.values() {
                    write(&k.root.join(&BLOCKED[1..]))?;
                }
                Ok(BLOCKED.to_string())
            }
            // Real kubelets run on this machine: one file in the scenario's directory.
            Backend::Real => {
                let path = self.dir.join("kubelet-gitops-blocked");
                write(&path)?;
                Ok(path.display().to_string())
            }
        }
    }
}

/// Each pool's target (`<namespace>/<configmap>`) in a `/readyz` body, if the applied
/// commit is `head`.
pub(crate) fn applied_targets(readyz: &Value, head: &str) -> Option<BTreeMap<String, String>> {
    let applied = &readyz["applied"];
    if applied["commit"].as_str() != Some(head) {
        return None;
    }
    let ns = applied["namespace"].as_str().unwrap_or(NAMESPACE);
    applied["configmaps"].as_object().map(|m| {
        m.iter()
            .filter_map(|(pool, cm)| Some((pool.clone(), format!("{ns}/{}", cm.as_str()?))))
            .collect()
    })
}

/// The pool reports of a `/readyz` body that are about `targets` (the applied commit's
/// ConfigMaps), not left over from a reconcile of an older commit.
pub(crate) fn current_pools(readyz: &Value, targets: &BTreeMap<String, String>) -> Vec<Value> {
    readyz["pools"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .filter(|p| {
                    let pool = p["pool"].as_str().unwrap_or_default();
                    targets.get(pool).map(String::as_str) == p["target"].as_str()
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// `GET url` with `client` (a real kubelet's API, as admin).
async fn https_get(client: &reqwest::Client, url: &str) -> Result<(u16, Vec<u8>), String> {
    let resp = client.get(url).send().await.map_err(|e| e.to_string())?;
    let code = resp.status().as_u16();
    let body = resp.bytes().await.map_err(|e| e.to_string())?;
    Ok((code, body.to_vec()))
}

/// `GET /metrics` of an admin port, which must answer 200.
pub(crate) async fn get_metrics(admin: &HttpTarget, what: &str) -> Result<String, E2eError> {
    let (code, body) = admin
        .request("GET", "/metrics", None, None)
        .await
        .map_err(|e| http_error(what, e))?;
    if code != 200 {
        return Err(E2eError::Http {
            what: what.into(),
            message: format!("status {code}"),
        });
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

fn http_error(what: &str, e: impl std::fmt::Display) -> E2eError {
    E2eError::Http {
        what: what.to_string(),
        message: e.to_string(),
    }
}

/// The kubelet config file under a node's `root`.
pub(crate) fn read_config(root: &Path) -> Result<String, E2eError> {
    let path = root.join("var/lib/kubelet/config.yaml");
    std::fs::read_to_string(&path).map_err(E2eError::io(format!("reading {}", path.display())))
}

/// A kube client for `kubeconfig`.
pub(crate) async fn client(kubeconfig: &Path) -> Result<Client, E2eError> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| E2eError::Unexpected {
        what: format!("reading {}", kubeconfig.display()),
        message: e.to_string(),
    })?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| E2eError::Unexpected {
                what: format!("loading {}", kubeconfig.display()),
                message: e.to_string(),
            })?;
    Client::try_from(config).map_err(E2eError::kube("building a client"))
}
