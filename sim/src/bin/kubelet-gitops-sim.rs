//! `kubelet-gitops-sim`: see [`kubelet_gitops_sim::cluster::cli::Args`].

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    kubelet_gitops_sim::cluster::cli::Args::parse().run().await
}
