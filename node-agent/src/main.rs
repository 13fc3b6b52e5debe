use clap::Parser;

/// The agent runs on one thread. It serves one node (two watches, one apply at a time,
/// the admin port) and spends its time waiting on the API server, the kubelet and the
/// disk, not on the CPU; each worker thread more costs a stack and a malloc arena of its
/// own. tokio's blocking pool still starts threads for file I/O when needed, and lets them
/// go after 10 s idle.
fn main() -> anyhow::Result<()> {
    let args = node_agent::Args::parse();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(args.run())?;
    Ok(())
}
