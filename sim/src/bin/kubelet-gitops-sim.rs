//! `kubelet-gitops-sim`: see [`kubelet_gitops_sim::cluster::cli::Args`].

use clap::Parser;

/// mimalloc (without transparent huge pages), not glibc's malloc: a write decodes the
/// object it changes and frees the decoded value between stored encodings that outlive
/// it, and glibc kept that heap: at 100,000 Nodes its RSS was twice the live heap after
/// a rollout. The figures are in docs/sim.md ("At 100,000 Nodes").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    kubelet_gitops_sim::cluster::cli::Args::parse().run().await
}
