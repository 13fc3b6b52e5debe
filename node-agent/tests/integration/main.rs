//! The node agent's integration tests, one binary: the agent in-process against the sim's
//! API server and a stand-in kubelet (`agent_*`), each host concern against temp dirs, the
//! sim's nodes or a private D-Bus (`host_*`), and the host-side rescue (`rescue`).
//!
//! The tests run as threads of one process: a test that starts child processes or a sim,
//! or one that must run alone, says so through [`support`] (see [`support::children`]).

mod support;

mod agent_apply;
mod agent_crash;
mod agent_escape;
mod agent_failures;
mod agent_idle;
mod agent_json_logs;
mod agent_lifecycle;
mod agent_modes;
mod agent_setup;
mod host_cgroups;
mod host_checkpoint;
mod host_flags;
mod host_kubelet;
mod host_systemd;
mod host_validate;
mod rescue;
