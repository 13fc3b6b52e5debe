//! The kubelet's configuration, known as well as the kubelet knows it.
//!
//! `kubelet-gitops-core` is the shared contract of kubelet-gitops: the typed model of
//! `kubelet.config.k8s.io/v1beta1` `KubeletConfiguration` ([`types`]), strict decoding
//! with file/line/field errors ([`decode`]), the kubelet's defaulting ([`defaults`]) and
//! validation ([`validation`]), its command-line flags and their precedence ([`flags`],
//! [`effective`]), node-allocatable arithmetic and cgroup layout ([`allocatable`]), and
//! the content-addressed ConfigMap names that `kubectl --append-hash` computes ([`hash`]),
//! and the node protocol both binaries speak ([`protocol`]), and how a node's paths are
//! reached from under a root ([`hostpath`]).
//!
//! Nothing in this crate talks to a Kubernetes API server.

pub mod allocatable;
pub mod configz;
pub mod decode;
pub mod defaults;
pub mod duration;
pub mod effective;
pub mod features;
pub mod flags;
pub mod hash;
pub mod hostpath;
pub mod protocol;
pub mod quantity;
pub mod state_files;
pub mod types;
pub mod validation;
