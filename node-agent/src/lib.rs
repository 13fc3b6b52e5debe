//! kubelet-gitops-agent: the only part of kubelet-gitops that touches a kubelet.
//!
//! One agent runs on every node (a DaemonSet). It watches its own Node for the
//! `kubelet-gitops.io/desired-config` annotation, downloads and checkpoints the ConfigMap it
//! names, validates it against the kubelet's flags and the node, writes it, restarts the
//! kubelet, verifies it, rolls back to last-known-good when the kubelet does not come back
//! healthy, and reports on the Node. See docs/node-agent.md.

pub mod agent;
pub mod args;
pub mod cgroups;
pub mod checkpoint;
pub mod config_file;
pub mod error;
pub mod hostflags;
pub mod kubelet;
pub mod lock;
pub mod report;
pub mod rescue;
pub mod validate;
pub mod watch;

pub use agent::{AgentError, run};
pub use args::{Args, Config};
