//! The reconciler's integration tests, one binary: a module per area, the shared support
//! once. They run as threads of one process: [`support::serial`] keeps the demo (built
//! with the `demo` feature, the default) apart from the tests that start a simulated
//! cluster.

mod forge_support;
mod support;

mod cli;
#[cfg(feature = "demo")]
mod demo;
mod deploy_manifests;
mod drain_sim;
mod escape;
mod examples_repo;
mod git;
mod git_ssh;
mod json_logs;
mod many_errors;
mod monitoring;
mod plan;
mod readme;
mod resume_sim;
mod run_args;
mod run_real;
mod run_sim;
mod signatures;
mod status_cmd_sim;
mod status_forges;
mod status_notes;
mod statuses_sim;
mod webhook;
mod windows_waves_sim;
