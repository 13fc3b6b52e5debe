//! The kubelet's configuration, known as well as the kubelet knows it, and the rules
//! kubelet-gitops shares between its binaries.
//!
//! The kubelet: the typed model of `kubelet.config.k8s.io/v1beta1` `KubeletConfiguration`
//! ([`types`]), strict decoding with file/line/field errors ([`decode`]), defaulting
//! ([`defaults`]) and validation ([`validation`]), the command-line flags and their
//! precedence ([`flags`], [`effective`]), node allocatable and the cgroup layout
//! ([`allocatable`]), what `/configz` shows compared with what was applied ([`configz`]),
//! the state files a policy change makes stale ([`state_files`]), what a change of each
//! field takes on a node ([`disruption`]: restart, restart and clear state, drain), Kubernetes names and
//! labels ([`names`]).
//!
//! kubelet-gitops: the content-addressed ConfigMap names `kubectl --append-hash` computes
//! ([`hash`]), the node protocol ([`protocol`]), the node inventory of offline plans and
//! the simulator ([`inventory`]), a node's kubelet set-up and the check of a config
//! against it that the agent and the plans share ([`node_setup`]), a node's paths under a root ([`hostpath`]), files
//! replaced atomically ([`atomic`]), messages for people ([`message`]) and, with the
//! `logging` feature, the binaries' log set-up (`logging`).
//!
//! Nothing in this crate talks to a Kubernetes API server.

pub mod allocatable;
pub mod atomic;
pub mod configz;
mod cpuset;
pub mod decode;
pub mod defaults;
pub mod disruption;
pub mod duration;
pub mod effective;
mod eviction;
pub mod features;
pub mod flags;
pub mod go;
pub mod hash;
pub mod hostpath;
pub mod inventory;
#[cfg(feature = "logging")]
pub mod logging;
pub mod message;
pub mod names;
pub mod node_setup;
pub mod protocol;
pub mod quantity;
#[cfg(feature = "kube")]
pub mod retry;
pub mod state_files;
pub mod types;
pub mod validation;
