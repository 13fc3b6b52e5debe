//! The end-to-end scenarios, one binary: each starts its own git daemon, sim, reconciler
//! and one agent per node as processes (see the harness, `kubelet_gitops_e2e`), in a
//! directory of its own.

mod canary;
mod configz;
mod drain;
mod kill;
mod membership;
mod pause;
mod push;
mod revert;
mod rollback;
