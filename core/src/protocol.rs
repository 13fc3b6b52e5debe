//! The node protocol: how the reconciler assigns a config to a Node and how the node
//! agent reports what the kubelet runs.
//!
//! The kubelet no longer honours `Node.spec.configSource`, so assignment and report are
//! annotations on the Node (plus the `KubeletConfigReady` condition and Events, for
//! people). This module is the one place their names, values and parsing live; both
//! binaries use it and neither spells a key by hand.
//!
//! | written by | key | value |
//! | --- | --- | --- |
//! | reconciler | [`DESIRED_CONFIG`] | `<namespace>/<configmap>`; absent = the node's local config |
//! | reconciler | [`HEALTH_TIMEOUT`] | humantime; how long the kubelet has to come back healthy |
//! | reconciler | [`LKG_GRACE`] | humantime; healthy this long, the config becomes last-known-good |
//! | reconciler | [`DRAIN`] | `<namespace>/<configmap>` the node is being drained for (a `drain`-class change) |
//! | reconciler | [`DRAIN_SINCE`] | RFC 3339; when the drain began (cordon) |
//! | reconciler | [`CORDONED`] | `true` when the reconciler set `spec.unschedulable` (and so lifts it) |
//! | reconciler | [`DRAIN_BLOCKED`] | why the drain gave up after the pool's `drainTimeout` (the pool halts) |
//! | agent | [`CURRENT_CONFIG`] | what the kubelet runs now (`local` for the node's own file) |
//! | agent | [`LAST_KNOWN_GOOD`] | what the agent falls back to (`local` until a config is promoted) |
//! | agent | [`STATE`] | a [`State`] |
//! | agent | [`OBSERVED_CONFIG`] | the desired-config value that `state` and `message` are about |
//! | agent | [`MESSAGE`] | the error, in the kubelet's own words where one exists |
//! | agent | [`NODE_SETUP`] | the node's kubelet set-up as JSON ([`crate::node_setup::NodeSetup`]) |
//!
//! [`OBSERVED_CONFIG`] is what makes the report unambiguous: a `RolledBack` state is about
//! the config named there, not about whatever desired-config says now. The reconciler
//! treats a state whose observed config differs from the desired one as "not reported
//! yet".

use std::fmt;
use std::str::FromStr;

/// The prefix of every annotation and label kubelet-gitops owns.
pub const DOMAIN: &str = "kubelet-gitops.io";

/// Reconciler: the config the node should run, `<namespace>/<configmap>`.
pub const DESIRED_CONFIG: &str = "kubelet-gitops.io/desired-config";
/// Reconciler: the pool's `rollout.healthTimeout` (humantime, e.g. `2m`).
pub const HEALTH_TIMEOUT: &str = "kubelet-gitops.io/health-timeout";
/// Reconciler: the pool's `rollout.lkgGrace` (humantime, e.g. `10m`).
pub const LKG_GRACE: &str = "kubelet-gitops.io/lkg-grace";
/// Reconciler: the pool the node is assigned to (informational; the selector decides).
pub const POOL: &str = "kubelet-gitops.io/pool";
/// Reconciler: the config (`<namespace>/<configmap>`) the node is being drained for. Set
/// with the cordon, in the same write; cleared with the uncordon.
pub const DRAIN: &str = "kubelet-gitops.io/drain";
/// Reconciler: when the drain began (RFC 3339), what the pool's `drainTimeout` counts from.
pub const DRAIN_SINCE: &str = "kubelet-gitops.io/drain-since";
/// Reconciler: `true` when the reconciler cordoned the node (set `spec.unschedulable`); a
/// node a person had cordoned before is never uncordoned by the reconciler.
pub const CORDONED: &str = "kubelet-gitops.io/cordoned";
/// Reconciler: why the drain for [`DRAIN`] gave up (the pod or PodDisruptionBudget that
/// blocked it past `drainTimeout`); the pool halts on it until a new commit.
pub const DRAIN_BLOCKED: &str = "kubelet-gitops.io/drain-blocked";

/// Agent: the config the kubelet runs now, `<namespace>/<configmap>` or [`LOCAL`].
pub const CURRENT_CONFIG: &str = "kubelet-gitops.io/current-config";
/// Agent: the config the agent falls back to, `<namespace>/<configmap>` or [`LOCAL`].
pub const LAST_KNOWN_GOOD: &str = "kubelet-gitops.io/last-known-good";
/// Agent: the [`State`] of the work on [`OBSERVED_CONFIG`].
pub const STATE: &str = "kubelet-gitops.io/state";
/// Agent: the desired-config value the state and message refer to (`local` when the
/// agent returned the node to its local config).
pub const OBSERVED_CONFIG: &str = "kubelet-gitops.io/observed-config";
/// Agent: the error or progress message.
pub const MESSAGE: &str = "kubelet-gitops.io/message";
/// Agent: the node's kubelet set-up (its config flags, drop-ins, mode, the runtime's
/// cgroup driver), JSON ([`crate::node_setup::NodeSetup`]), so that the reconciler
/// checks a commit against the node before it publishes it.
pub const NODE_SETUP: &str = "kubelet-gitops.io/node-setup";

/// Every annotation the agent writes (and may write: the admission policy allows these).
pub const AGENT_ANNOTATIONS: &[&str] = &[
    CURRENT_CONFIG,
    LAST_KNOWN_GOOD,
    STATE,
    OBSERVED_CONFIG,
    MESSAGE,
    NODE_SETUP,
];
/// Every annotation the reconciler writes on Nodes.
pub const RECONCILER_ANNOTATIONS: &[&str] = &[
    DESIRED_CONFIG,
    HEALTH_TIMEOUT,
    LKG_GRACE,
    POOL,
    DRAIN,
    DRAIN_SINCE,
    CORDONED,
    DRAIN_BLOCKED,
];

/// The Node condition the agent maintains.
pub const CONDITION_TYPE: &str = "KubeletConfigReady";

/// The value of current-config and last-known-good for the node's own config file.
pub const LOCAL: &str = "local";

/// Labels on every ConfigMap the reconciler publishes.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "kubelet-gitops";
/// The pool a ConfigMap belongs to.
pub const POOL_LABEL: &str = "kubelet-gitops.io/pool";
/// ConfigMap annotation: the commit that produced it.
pub const SOURCE_COMMIT: &str = "kubelet-gitops.io/source-commit";
/// ConfigMap annotation: the pool file it was rendered from.
pub const SOURCE_PATH: &str = "kubelet-gitops.io/source-path";
/// ConfigMap annotation: the repository URL.
pub const SOURCE_REPO: &str = "kubelet-gitops.io/source-repo";
/// ConfigMap annotation: the fingerprint of the key that signed the source commit
/// (`SHA256:...` for ssh, the OpenPGP fingerprint in hex), when the reconciler requires
/// signed commits; absent otherwise.
pub const SOURCE_SIGNING_KEY: &str = "kubelet-gitops.io/source-signing-key";
/// ConfigMap annotation: the disruption classes the repository gives fields for the
/// pool, over the built-in ones ([`crate::disruption`]), as a JSON object
/// `{"cpuManagerPolicy":"restart-clear-state"}`; absent when the repository sets none.
/// With the two configs, [`crate::disruption::classify`] gives a change's class on a node.
pub const DISRUPTION_CLASSES: &str = "kubelet-gitops.io/disruption-classes";

/// ConfigMap annotation: the disruption class (`restart`, `restart-clear-state`, `drain`)
/// of the change from the pool's previous config to this one, as the reconciler that
/// published it saw the commits go by; absent when it did not know (the first commit it
/// saw). A restarted reconciler reads it back, so that a rollout it resumes drains (or
/// waits for its window) as the one it took over would have.
pub const CHANGE_CLASS: &str = "kubelet-gitops.io/change-class";

/// The key of the rendered config in the ConfigMap.
pub const CONFIGMAP_KEY: &str = crate::hash::CONFIGMAP_KEY;

/// The kubelet's own words for each failure (from the removed dynamic-config code,
/// `pkg/kubelet/kubeletconfig/status`), so operators can search for them.
pub mod reason {
    /// The payload did not decode.
    pub const LOAD_ERROR: &str = "failed to load config";
    /// The payload decoded but the effective config fails validation.
    pub const VALIDATE_ERROR: &str = "failed to validate config";
    /// The ConfigMap could not be fetched or checkpointed.
    pub const DOWNLOAD_ERROR: &str = "failed to sync: failed to download config";
    /// Anything else on the agent's side.
    pub const INTERNAL_ERROR: &str = "internal failure";
    /// The kubelet did not come back healthy with the new config.
    pub const UNHEALTHY: &str = "kubelet did not become healthy";
}

/// The name of the ConfigMap for `pool` holding `rendered`: `kubelet-<pool>-<suffix>`,
/// the suffix being what `kubectl create configmap kubelet-<pool>
/// --from-file=kubelet=FILE --append-hash` appends.
pub fn configmap_name(pool: &str, rendered: &[u8]) -> String {
    crate::hash::kubelet_configmap_name(&format!("kubelet-{pool}"), rendered)
}

/// Where the agent is with the config named in [`OBSERVED_CONFIG`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    /// Fetching and checkpointing the ConfigMap.
    Downloading,
    /// Validated; writing the config and restarting the kubelet.
    Applying,
    /// Waiting for healthz, configz, node Ready and the pods.
    Verifying,
    /// The kubelet runs the config.
    Done,
    /// The config was rejected before the kubelet was touched (it stays on its current
    /// config), or something on the node is wrong (a cgroup mismatch, a checkpoint error).
    Degraded,
    /// The kubelet did not come back healthy and was returned to last-known-good.
    RolledBack,
}

impl State {
    /// All states, in protocol order.
    pub const ALL: [State; 6] = [
        State::Downloading,
        State::Applying,
        State::Verifying,
        State::Done,
        State::Degraded,
        State::RolledBack,
    ];

    /// The annotation value.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Downloading => "Downloading",
            State::Applying => "Applying",
            State::Verifying => "Verifying",
            State::Done => "Done",
            State::Degraded => "Degraded",
            State::RolledBack => "RolledBack",
        }
    }

    /// A failure: the pool halts.
    pub fn is_failure(self) -> bool {
        matches!(self, State::Degraded | State::RolledBack)
    }

    /// Between assignment and an outcome: counts against maxUnavailable.
    pub fn is_in_progress(self) -> bool {
        matches!(
            self,
            State::Downloading | State::Applying | State::Verifying
        )
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An annotation value that is not a [`State`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown state {0:?} (one of Downloading, Applying, Verifying, Done, Degraded, RolledBack)"
)]
pub struct UnknownState(pub String);

impl FromStr for State {
    type Err = UnknownState;

    fn from_str(s: &str) -> Result<State, UnknownState> {
        State::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_string()))
    }
}

/// A config a node runs or should run: the node's own file, or a ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConfigRef {
    /// The node's local config file, as provisioned.
    Local,
    /// A ConfigMap published by the reconciler.
    ConfigMap { namespace: String, name: String },
}

/// A config reference that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid config reference {0:?}: expected `local` or `<namespace>/<configmap>`")]
pub struct InvalidConfigRef(pub String);

impl ConfigRef {
    /// A ConfigMap reference.
    pub fn configmap(namespace: impl Into<String>, name: impl Into<String>) -> ConfigRef {
        ConfigRef::ConfigMap {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The ConfigMap's name, if this names one.
    pub fn configmap_name(&self) -> Option<&str> {
        match self {
            ConfigRef::Local => None,
            ConfigRef::ConfigMap { name, .. } => Some(name),
        }
    }
}

impl fmt::Display for ConfigRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigRef::Local => f.write_str(LOCAL),
            ConfigRef::ConfigMap { namespace, name } => write!(f, "{namespace}/{name}"),
        }
    }
}

impl FromStr for ConfigRef {
    type Err = InvalidConfigRef;

    fn from_str(s: &str) -> Result<ConfigRef, InvalidConfigRef> {
        if s == LOCAL {
            return Ok(ConfigRef::Local);
        }
        let bad = || InvalidConfigRef(s.to_string());
        let (ns, name) = s.split_once('/').ok_or_else(bad)?;
        let ok = |p: &str| {
            !p.is_empty()
                && p.len() <= 253
                && p.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
                && p.as_bytes()[0].is_ascii_alphanumeric()
                && p.as_bytes()[p.len() - 1].is_ascii_alphanumeric()
        };
        if ok(ns) && ok(name) {
            Ok(ConfigRef::configmap(ns, name))
        } else {
            Err(bad())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip() {
        for st in State::ALL {
            assert_eq!(st.as_str().parse::<State>(), Ok(st));
        }
        assert!("done".parse::<State>().is_err());
        assert!(State::RolledBack.is_failure() && State::Degraded.is_failure());
        assert!(!State::Done.is_failure() && !State::Done.is_in_progress());
        assert!(State::Verifying.is_in_progress());
    }

    #[test]
    fn config_refs_parse() {
        assert_eq!("local".parse(), Ok(ConfigRef::Local));
        let r: ConfigRef = "kubelet-gitops/kubelet-gpu-9mbkccg2cc".parse().unwrap();
        assert_eq!(r.configmap_name(), Some("kubelet-gpu-9mbkccg2cc"));
        assert_eq!(r.to_string(), "kubelet-gitops/kubelet-gpu-9mbkccg2cc");
        for bad in ["", "/x", "x/", "a/b/c", "Local", "ns/UPPER", "-a/b"] {
            assert!(bad.parse::<ConfigRef>().is_err(), "{bad}");
        }
    }

    #[test]
    fn names_match_the_hash_module() {
        let name = configmap_name("gpu", b"kind: KubeletConfiguration\n");
        assert!(name.starts_with("kubelet-gpu-"), "{name}");
        assert_eq!(name.len(), "kubelet-gpu-".len() + crate::hash::SUFFIX_LEN);
    }
}
