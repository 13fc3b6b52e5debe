use clap::Parser;

fn main() -> anyhow::Result<()> {
    node_agent::Args::parse().run()
}
