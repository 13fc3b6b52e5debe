//! The reconciler's integration tests, one binary: a module per area, the shared support
//! once. Tests that start a simulated cluster, the demo or sshd share the machine with
//! the rest of this process: [`support::serial`] keeps the demo apart from them.

mod forge_support;
mod support;

mod cli;
mod demo;
mod deploy_manifests;
mod examples_repo;
mod git;
mod git_ssh;
mod plan;
mod readme;
mod resume_sim;
mod run_sim;
mod status_forges;
mod status_notes;
mod statuses_sim;
mod webhook;
