//! The kubelet's own validation of its effective (defaulted) configuration.
//!
//! [`validate`] reports, in a stable order, every problem that stops a kubelet: first its
//! feature gates, then `ValidateKubeletConfiguration`
//! (`pkg/kubelet/apis/config/validation/`, with the Linux part that needs [`HostInfo`]),
//! then what the kubelet checks while it starts (`cmd/kubelet/app/server.go`,
//! `kubelet.NewMainKubelet`, `cm.NewContainerManager` ...), each of which makes it exit.
//! Messages are the kubelet's own.
//!
//! Upstream validates its internal type after defaulting; our model is v1beta1 with
//! `Option` fields, so every rule reads an unset field as Go's zero value (`0`, `""`,
//! `false`, empty). Run it on a config defaulted by [`crate::defaults`]; on an
//! undefaulted one it reports what the kubelet would report for those zero values.
//!
//! Where upstream stops at the first problem (a map parsed in random order, a helper that
//! returns one error), we report every problem, each with the JSON path of the field.

use std::collections::BTreeMap;
use std::fmt;

use crate::duration::{Duration, MILLISECOND, SECOND};
use crate::features;
use crate::go;
use crate::types::KubeletConfiguration;

mod cgroup_v1;
mod eviction;
mod gates;
mod images;
mod logging;
mod logs;
mod managers;
mod memory;
mod reservations;
mod reserved_memory;
mod scalars;
mod server;
mod shutdown;
mod sysctls;
mod taints;
#[cfg(test)]
mod tests;
mod tracing;

/// One problem the kubelet would refuse to start with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    /// JSON path of the offending field: dots between fields and map keys
    /// (`evictionHard.memory.available`), list indexes in brackets
    /// (`registerWithTaints[0].effect`).
    pub field: String,
    /// The kubelet's message, e.g. `invalid configuration: port (--port) 0 must be
    /// between 1 and 65535, inclusive`.
    pub message: String,
}

impl ValidationError {
    /// The message without its field in front. The kubelet's `field.Error`s start with
    /// their path (`logging.format: Invalid value: ...`); where a message is shown after
    /// its field, this says the field once.
    pub fn detail(&self) -> &str {
        self.message
            .strip_prefix(self.field.as_str())
            .and_then(|rest| rest.strip_prefix(": "))
            .unwrap_or(&self.message)
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.detail())
    }
}

impl std::error::Error for ValidationError {}

/// What validation knows about the node the config is for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostInfo {
    /// Whether the host runs the unified cgroup v2 hierarchy; `None` when unknown, which
    /// skips the checks that depend on it (`failCgroupV1`, `singleProcessOOMKill`,
    /// `LimitedSwap`).
    pub cgroup_v2: Option<bool>,
}

/// The minor version before the one this crate models (v1.36): the only value
/// `showHiddenMetricsForVersion` may take.
const PREVIOUS_MINOR_VERSION: &str = "1.35";

/// Every problem the kubelet would find in `cfg` on a host described by `host`, in a
/// stable order (see the module documentation). Empty when the kubelet would accept it.
pub fn validate(cfg: &KubeletConfiguration, host: &HostInfo) -> Vec<ValidationError> {
    let gates = cfg.feature_gates.as_ref();
    let mut out = Vec::new();
    gates::check(cfg, &mut out);
    check_kubelet_configuration(cfg, gates, host, &mut out);
    check_startup(cfg, gates, host, &mut out);
    out
}

/// Shorthand for building an error.
fn err(field: impl Into<String>, message: impl Into<String>) -> ValidationError {
    ValidationError {
        field: field.into(),
        message: message.into(),
    }
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `ValidateKubeletConfiguration`, in upstream's order.
fn check_kubelet_configuration(
    c: &KubeletConfiguration,
    gates: Option<&BTreeMap<String, bool>>,
    host: &HostInfo,
    out: &mut Vec<ValidationError>,
) {
    let on = |name: &str| features::enabled(gates, name);
    scalars::check(c, &on, out);
    taints::check(c.register_with_taints.as_deref().unwrap_or(&[]), out);
    managers::check_topology(c, out);
    shutdown::check(c, &on, out);
    memory::check_swap(c, &on, out);
    check_crash_loop_backoff(c, &on, out);
    reservations::check_enforce_node_allocatable(c, out);
    check_hairpin_mode(c, out);
    images::check_pull_credentials(c, &on, out);
    reservations::check_reserved_system_cpus(c, out);
    reserved_memory::validate(c.reserved_memory.as_deref().unwrap_or(&[]), out);
    cgroup_v1::check_os(c, host, out);
    check_hidden_metrics(c, out);
    logging::validate(c.logging.as_ref(), gates, out);
    if let Some(t) = c.tracing.as_ref() {
        tracing::validate(t, out);
    }
    memory::check_qos(c, &on, out);
    check_runtime_endpoint(c, out);
    logs::check(c, &on, out);
}

/// What the kubelet checks while it starts, in its order.
fn check_startup(
    c: &KubeletConfiguration,
    gates: Option<&BTreeMap<String, bool>>,
    host: &HostInfo,
    out: &mut Vec<ValidationError>,
) {
    let on = |name: &str| features::enabled(gates, name);
    check_sync_frequency(c, out);
    server::check(c, out);
    let reserved_cpu_nanos = reservations::check_reserved_resources(c, out);
    eviction::check(c, out);
    reservations::check_qos_reserved(c, out);
    cgroup_v1::check_limited_swap(c, &on, host, out);
    managers::check_topology_options(c, out);
    managers::check_policies(c, reserved_cpu_nanos, out);
    check_change_detection_strategy(c, out);
    logs::check_max_size(c, out);
    sysctls::check(c, out);
}

fn check_crash_loop_backoff(
    c: &KubeletConfiguration,
    on: &dyn Fn(&str) -> bool,
    out: &mut Vec<ValidationError>,
) {
    let max = c
        .crash_loop_backoff
        .as_ref()
        .and_then(|b| b.max_container_restart_period);
    const FIELD: &str = "crashLoopBackOff.maxContainerRestartPeriod";
    if on("KubeletCrashLoopBackOffMax") {
        match max {
            None => out.push(err(
                FIELD,
                "invalid configuration: FeatureGate KubeletCrashLoopBackOffMax is enabled, CrashLoopBackOff.MaxContainerRestartPeriod must be set",
            )),
            Some(m) => {
                let millis = m.as_nanos() / MILLISECOND;
                if !(1000..=300_000).contains(&millis) {
                    let secs = m.as_nanos() as f64 / SECOND as f64;
                    out.push(err(
                        FIELD,
                        format!("invalid configuration: CrashLoopBackOff.MaxContainerRestartPeriod (got: {} seconds) must be set between 1s and 300s", go::float(secs)),
                    ));
                }
            }
        }
    } else if max.is_some() {
        out.push(err(
            FIELD,
            "invalid configuration: FeatureGate KubeletCrashLoopBackOffMax not enabled, CrashLoopBackOff.MaxContainerRestartPeriod must not be set",
        ));
    }
}

fn check_hairpin_mode(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    let hairpin = c.hairpin_mode.as_deref().unwrap_or("");
    if !matches!(hairpin, "none" | "hairpin-veth" | "promiscuous-bridge") {
        out.push(err(
            "hairpinMode",
            format!(
                "invalid configuration: option {} specified for hairpinMode (--hairpin-mode). Valid options are \"none\", \"hairpin-veth\" or \"promiscuous-bridge\"",
                go::quote(hairpin)
            ),
        ));
    }
}

fn check_hidden_metrics(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    let hidden = c.show_hidden_metrics_for_version.as_deref().unwrap_or("");
    if !hidden.is_empty() && hidden != PREVIOUS_MINOR_VERSION {
        out.push(err(
            "showHiddenMetricsForVersion",
            format!("--show-hidden-metrics-for-version must be omitted or have the value '{PREVIOUS_MINOR_VERSION}'. Only the previous minor version is allowed"),
        ));
    }
}

fn check_runtime_endpoint(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    if c.container_runtime_endpoint
        .as_deref()
        .unwrap_or("")
        .is_empty()
    {
        out.push(err(
            "containerRuntimeEndpoint",
            "invalid configuration: the containerRuntimeEndpoint was not specified or empty",
        ));
    }
}

/// `kubelet.NewMainKubelet`.
fn check_sync_frequency(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    let sync = c.sync_frequency.unwrap_or(Duration::ZERO);
    if sync.as_nanos() <= 0 {
        out.push(err(
            "syncFrequency",
            format!("invalid sync frequency {}", sync.as_nanos()),
        ));
    }
}

/// The ConfigMap and Secret managers' mode.
fn check_change_detection_strategy(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    let strategy = c
        .config_map_and_secret_change_detection_strategy
        .as_deref()
        .unwrap_or("");
    if !matches!(strategy, "Get" | "Cache" | "Watch") {
        out.push(err(
            "configMapAndSecretChangeDetectionStrategy",
            format!("unknown configmap and secret manager mode: {strategy}"),
        ));
    }
}
