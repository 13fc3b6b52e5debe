//! kubelet-gitops-agent: the only part of kubelet-gitops that touches a kubelet.
//!
//! The agent itself is issue 5; today the crate only holds its command-line surface.

use clap::Parser;

/// Applies the kubelet configuration assigned to this node, safely: checkpoint, validate
/// against the kubelet's flags, write, restart, verify, roll back to last-known-good.
#[derive(Debug, Parser)]
#[command(name = "kubelet-gitops-agent", version)]
pub struct Args {}

impl Args {
    pub fn run(self) -> anyhow::Result<()> {
        anyhow::bail!("the node agent is not implemented yet (issue 5)")
    }
}
