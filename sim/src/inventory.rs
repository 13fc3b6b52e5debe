//! Transitional: the node inventory lives in `kubelet_gitops_core::inventory`.
pub use kubelet_gitops_core::inventory::*;
