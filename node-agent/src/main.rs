use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    node_agent::Args::parse().run().await?;
    Ok(())
}
