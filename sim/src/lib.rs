//! A simulated Kubernetes API server with simulated nodes and stand-in kubelets.
//!
//! It exists because no real API server can run where kubelet-gitops is tested: it
//! behaves like the real one from the outside (status codes, messages, resourceVersion,
//! watch), so the product talks to it through an ordinary `kube::Client` built from a
//! kubeconfig, and kubectl works against it too.

pub mod cluster;
pub mod discovery;
pub mod disruption;
pub mod error;
pub mod faults;
pub mod fleet;
pub mod kubeconfig;
pub mod kubelet;
pub mod patch;
pub mod reqlog;
pub mod resources;
pub mod rules;
pub mod selector;
pub mod server;
pub mod store;
pub mod time;
