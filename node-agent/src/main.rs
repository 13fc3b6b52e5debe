use clap::Parser;

/// Worker threads of the agent's runtime, whatever the node's size. The agent serves one
/// node (two watches, one apply at a time); tokio's default, a worker per core, costs
/// memory on large nodes (the DaemonSet sets no CPU limit): idle RSS 15.4 MiB with 64
/// workers against 14.9 MiB with 2 (`TOKIO_WORKER_THREADS=64 cargo bench -p node-agent
/// --bench agent`, before this setting).
const WORKER_THREADS: usize = 2;

fn main() -> anyhow::Result<()> {
    let args = node_agent::Args::parse();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .enable_all()
        .build()?
        .block_on(args.run())?;
    Ok(())
}
