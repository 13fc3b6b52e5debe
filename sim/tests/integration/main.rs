//! The sim's integration tests, one binary: the API server over HTTP through kube-rs, raw
//! HTTP and kubectl (`api_*`, `kubectl_*`), the stand-in kubelets and their control
//! (`kubelet_*`), and the nodes of an inventory (`nodes_*`).

mod support;

mod api_crud;
mod api_faults;
mod api_watch;
mod kubectl_configmaps;
mod kubectl_drain;
mod kubectl_nodes;
mod kubelet_control;
mod kubelet_lifecycle;
mod nodes_cluster;
mod serve_cli;
