//! Publishing rendered configs as immutable, content-addressed ConfigMaps, and deleting
//! the ones garbage collection gives up.
//!
//! A pool's ConfigMap is named after its content (`kubelet-<pool>-<hash>`, see
//! [`RenderedPool::configmap_name`]), so "publish" is create-if-absent: a ConfigMap of
//! that name already holds exactly these bytes, and `AlreadyExists` is success. That is
//! what makes a restart, a second replica or a retried request harmless. Nothing is ever
//! updated: the ConfigMaps are `immutable: true`.
//!
//! Each ConfigMap carries the labels and annotations of the design:
//! `app.kubernetes.io/managed-by=kubelet-gitops`, `kubelet-gitops.io/pool=<pool>`, and
//! the source commit, path and repository (the URL without credentials), when signed
//! commits are required the fingerprint of the key that signed the commit, and the
//! disruption classes the repository gives fields for the pool, when it gives any.
//!
//! These functions make one request each; the controller retries them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use kubelet_gitops_core::protocol::{
    CHANGE_CLASS, CONFIGMAP_KEY, DISRUPTION_CLASSES, MANAGED_BY, MANAGED_BY_LABEL, POOL_LABEL,
    SOURCE_COMMIT, SOURCE_PATH, SOURCE_REPO, SOURCE_SIGNING_KEY,
};

use crate::render::RenderedPool;

/// The field manager of every write the reconciler makes.
pub const FIELD_MANAGER: &str = "kubelet-gitops";

/// The label selector of every ConfigMap the reconciler publishes.
pub fn managed_selector() -> String {
    format!("{MANAGED_BY_LABEL}={MANAGED_BY}")
}

/// Where a rendered commit came from, for the ConfigMaps' annotations.
#[derive(Debug, Clone, Copy)]
pub struct SourceInfo<'a> {
    /// The repository URL (credentials are stripped before it is written).
    pub repo_url: &'a str,
    /// The full commit id.
    pub commit: &'a str,
    /// The fingerprint of the key that signed the commit, when signatures are required.
    pub signing_key: Option<&'a str>,
    /// The disruption class of the change from the pool's previous config, when known.
    pub change_class: Option<kubelet_gitops_core::disruption::Class>,
}

/// The ConfigMap that publishes `pool` in `namespace`.
pub fn configmap(namespace: &str, pool: &RenderedPool, source: &SourceInfo<'_>) -> ConfigMap {
    let labels = BTreeMap::from([
        (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
        (POOL_LABEL.to_string(), pool.spec.name.clone()),
    ]);
    let mut annotations = BTreeMap::from([
        (SOURCE_COMMIT.to_string(), source.commit.to_string()),
        (SOURCE_PATH.to_string(), pool.spec.source_path.clone()),
        (SOURCE_REPO.to_string(), redact_url(source.repo_url)),
    ]);
    if let Some(key) = source.signing_key {
        annotations.insert(SOURCE_SIGNING_KEY.to_string(), key.to_string());
    }
    if !pool.disruption.is_empty() {
        annotations.insert(DISRUPTION_CLASSES.to_string(), pool.disruption.to_json());
    }
    if let Some(class) = source.change_class {
        annotations.insert(CHANGE_CLASS.to_string(), class.as_str().to_string());
    }
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(pool.configmap_name.clone()),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            CONFIGMAP_KEY.to_string(),
            pool.rendered.clone(),
        )])),
        immutable: Some(true),
        ..ConfigMap::default()
    }
}

/// `url` without a user name or password (`https://user:token@host/x` becomes
/// `https://host/x`); scp-like ssh addresses (`git@host:org/repo`) keep their user, which
/// is not a secret.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://{host}{path}"),
        None => url.to_string(),
    }
}

/// What creating a ConfigMap found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// Created now; its `creationTimestamp` (RFC 3339).
    Created { created: Option<String> },
    /// It was there already (same name, hence same content).
    Existed,
}

/// Why a ConfigMap could not be created or deleted.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(
        "namespace {namespace} does not exist: create it (deploy/ does) or set `namespace` in kubelet-gitops.yaml"
    )]
    NamespaceMissing {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to create ConfigMap {namespace}/{name}")]
    Create {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to delete ConfigMap {namespace}/{name}")]
    Delete {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl PublishError {
    /// The API error underneath.
    pub fn api_error(&self) -> &kube::Error {
        match self {
            PublishError::NamespaceMissing { source, .. }
            | PublishError::Create { source, .. }
            | PublishError::Delete { source, .. } => source,
        }
    }
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    }
}

/// Creates `cm` unless a ConfigMap of its name exists (one request).
pub async fn create_if_absent(
    api: &Api<ConfigMap>,
    cm: &ConfigMap,
) -> Result<Published, PublishError> {
    let name = cm.metadata.name.clone().unwrap_or_default();
    let namespace = cm.metadata.namespace.clone().unwrap_or_default();
    match api.create(&post_params(), cm).await {
        Ok(created) => Ok(Published::Created {
            created: created.metadata.creation_timestamp.map(|t| t.0.to_string()),
        }),
        Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(Published::Existed),
        // Creating in a namespace that does not exist answers 404 for the namespace.
        Err(source) if matches!(&source, kube::Error::Api(s) if s.code == 404) => {
            Err(PublishError::NamespaceMissing { namespace, source })
        }
        Err(source) => Err(PublishError::Create {
            namespace,
            name,
            source,
        }),
    }
}

/// Deletes ConfigMap `name` (one request); `Ok(false)` when it was already gone.
pub async fn delete_if_present(
    api: &Api<ConfigMap>,
    namespace: &str,
    name: &str,
) -> Result<bool, PublishError> {
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(source) => Err(PublishError::Delete {
            namespace: namespace.to_string(),
            name: name.to_string(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{LabelSelector, PoolSpec, Rollout};
    use kubelet_gitops_core::types::KubeletConfiguration;

    fn pool() -> RenderedPool {
        let rendered =
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 64\n";
        RenderedPool {
            spec: PoolSpec {
                name: "gpu".into(),
                source_path: "pools/gpu.yaml".into(),
                selector: LabelSelector::default(),
                priority: 0,
                rollout: Rollout::default(),
            },
            rendered: rendered.into(),
            config: KubeletConfiguration::default(),
            configmap_name: kubelet_gitops_core::protocol::configmap_name(
                "gpu",
                rendered.as_bytes(),
            ),
            disruption: Default::default(),
        }
    }

    #[test]
    fn configmap_carries_the_design_labels_and_annotations() {
        let p = pool();
        let cm = configmap(
            "kubelet-gitops",
            &p,
            &SourceInfo {
                repo_url: "https://bot:s3cret@git.example.com/org/fleet.git",
                commit: "0123abcd",
                signing_key: None,
                change_class: None,
            },
        );
        assert_eq!(cm.metadata.name.as_deref(), Some(p.configmap_name.as_str()));
        assert_eq!(cm.metadata.namespace.as_deref(), Some("kubelet-gitops"));
        assert_eq!(cm.immutable, Some(true));
        let labels = cm.metadata.labels.unwrap();
        assert_eq!(labels[MANAGED_BY_LABEL], "kubelet-gitops");
        assert_eq!(labels[POOL_LABEL], "gpu");
        let ann = cm.metadata.annotations.unwrap();
        assert_eq!(ann[SOURCE_COMMIT], "0123abcd");
        assert_eq!(ann[SOURCE_PATH], "pools/gpu.yaml");
        assert_eq!(ann[SOURCE_REPO], "https://git.example.com/org/fleet.git");
        assert!(
            !ann.contains_key(SOURCE_SIGNING_KEY),
            "no signature required"
        );
        assert!(
            !ann.contains_key(DISRUPTION_CLASSES),
            "the repository sets no disruption class"
        );
        assert_eq!(cm.data.unwrap()["kubelet"], p.rendered);
        assert_eq!(
            managed_selector(),
            "app.kubernetes.io/managed-by=kubelet-gitops"
        );
    }

    #[test]
    fn a_signed_commits_configmap_names_the_signing_key() {
        let key = "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU";
        let cm = configmap(
            "kubelet-gitops",
            &pool(),
            &SourceInfo {
                repo_url: "https://git.example.com/org/fleet.git",
                commit: "0123abcd",
                signing_key: Some(key),
                change_class: None,
            },
        );
        let ann = cm.metadata.annotations.unwrap();
        assert_eq!(ann[SOURCE_SIGNING_KEY], key);
        assert_eq!(ann[SOURCE_COMMIT], "0123abcd");
    }

    #[test]
    fn a_pool_with_disruption_classes_carries_them_for_the_agent() {
        use kubelet_gitops_core::disruption::Class;
        let mut p = pool();
        p.disruption
            .set("evictionHard", Class::Drain, "kubelet-gitops.yaml");
        p.disruption.set(
            "cpuManagerPolicy",
            Class::RestartClearState,
            "pools/gpu.yaml",
        );
        let cm = configmap(
            "kubelet-gitops",
            &p,
            &SourceInfo {
                repo_url: "https://git.example.com/org/fleet.git",
                commit: "0123abcd",
                signing_key: None,
                change_class: None,
            },
        );
        let ann = cm.metadata.annotations.unwrap();
        assert_eq!(
            ann[DISRUPTION_CLASSES],
            r#"{"cpuManagerPolicy":"restart-clear-state","evictionHard":"drain"}"#
        );
        // The classes are not content: the name is the content's.
        assert_eq!(
            cm.metadata.name.as_deref(),
            Some(pool().configmap_name.as_str())
        );
    }

    #[test]
    fn urls_lose_their_credentials() {
        assert_eq!(redact_url("https://x:y@h/p"), "https://h/p");
        assert_eq!(redact_url("https://token@h:8443/p@q"), "https://h:8443/p@q");
        assert_eq!(redact_url("ssh://git@h/p"), "ssh://h/p");
        assert_eq!(redact_url("file:///srv/repo"), "file:///srv/repo");
        assert_eq!(
            redact_url("git@github.com:org/repo.git"),
            "git@github.com:org/repo.git"
        );
    }
}
