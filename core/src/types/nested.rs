//! The kubelet's own nested objects and list items of `KubeletConfiguration`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::duration::Duration;
use crate::quantity::Quantity;

/// How requests to the kubelet's server are authenticated.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeletAuthentication {
    /// x509 client certificate authentication.
    #[serde(rename = "x509", default, skip_serializing_if = "Option::is_none")]
    pub x509: Option<KubeletX509Authentication>,
    /// Bearer token authentication via TokenReviews.
    #[serde(rename = "webhook", default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<KubeletWebhookAuthentication>,
    /// Anonymous requests.
    #[serde(rename = "anonymous", default, skip_serializing_if = "Option::is_none")]
    pub anonymous: Option<KubeletAnonymousAuthentication>,
}

/// x509 client certificate authentication.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeletX509Authentication {
    /// PEM bundle of CAs whose client certificates are accepted.
    #[serde(
        rename = "clientCAFile",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_ca_file: Option<String>,
}

/// Webhook bearer token authentication.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeletWebhookAuthentication {
    /// Allow bearer token authentication backed by TokenReviews. Default: true.
    #[serde(rename = "enabled", default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// How long authentication results are cached. Default: "2m".
    #[serde(rename = "cacheTTL", default, skip_serializing_if = "Option::is_none")]
    pub cache_ttl: Option<Duration>,
}

/// Anonymous authentication.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeletAnonymousAuthentication {
    /// Allow anonymous requests. Default: false.
    #[serde(rename = "enabled", default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// How requests to the kubelet's server are authorized.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeletAuthorization {
    /// AlwaysAllow or Webhook. Default: "Webhook".
    #[serde(rename = "mode", default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Webhook authorization settings.
    #[serde(rename = "webhook", default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<KubeletWebhookAuthorization>,
}

/// Webhook authorization settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeletWebhookAuthorization {
    /// How long 'authorized' answers are cached. Default: "5m".
    #[serde(
        rename = "cacheAuthorizedTTL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_authorized_ttl: Option<Duration>,
    /// How long 'unauthorized' answers are cached. Default: "30s".
    #[serde(
        rename = "cacheUnauthorizedTTL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_unauthorized_ttl: Option<Duration>,
}

/// Swap memory available to container workloads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySwapConfiguration {
    /// "", NoSwap or LimitedSwap.
    #[serde(
        rename = "swapBehavior",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub swap_behavior: Option<String>,
}

/// Node-level container restart backoff.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrashLoopBackOffConfig {
    /// Maximum backoff for container restarts, 1s to 300s.
    #[serde(
        rename = "maxContainerRestartPeriod",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub max_container_restart_period: Option<Duration>,
}

/// User namespace configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserNamespaces {
    /// Length of the UID/GID mapping per pod, a multiple of 65536. Default: 65536.
    #[serde(rename = "idsPerPod", default, skip_serializing_if = "Option::is_none")]
    pub ids_per_pod: Option<i64>,
}

/// Shutdown grace period for pods of a priority range.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShutdownGracePeriodByPodPriority {
    /// Lower bound of the priority range.
    #[serde(rename = "priority", default)]
    pub priority: i32,
    /// Grace period in seconds.
    #[serde(rename = "shutdownGracePeriodSeconds", default)]
    pub shutdown_grace_period_seconds: i64,
}

/// Memory reserved on one NUMA node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryReservation {
    /// NUMA node id.
    #[serde(rename = "numaNode", default)]
    pub numa_node: i32,
    /// Memory type (memory, hugepages-<size>) -> amount.
    #[serde(rename = "limits", default)]
    pub limits: BTreeMap<String, Quantity>,
}

/// A node taint (core/v1 Taint).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Taint {
    /// Taint key.
    #[serde(rename = "key", default)]
    pub key: String,
    /// Taint value.
    #[serde(rename = "value", default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// NoSchedule, PreferNoSchedule or NoExecute.
    #[serde(rename = "effect", default)]
    pub effect: String,
    /// RFC 3339 time the taint was added (NoExecute only).
    #[serde(rename = "timeAdded", default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<String>,
}
