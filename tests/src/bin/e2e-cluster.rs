//! `e2e-cluster`: the end-to-end suite's real cluster, by hand. Starts etcd,
//! kube-apiserver, kube-controller-manager, kube-scheduler and N real kubelets of
//! Kubernetes v1.36 on loopback (from `upstream/build.sh`'s binaries), applies deploy/'s
//! RBAC and admission policy, prints how to reach it, and runs until Ctrl-C; then stops
//! everything and cleans up (mounts, cgroups).

use std::path::PathBuf;

use clap::Parser;
use kubelet_gitops_e2e::real::{NodeSetup, RealCluster, UpstreamBinaries, kubelet_base};
use kubelet_gitops_e2e::{E2eError, POOL_LABEL};

/// Runs a real Kubernetes v1.36 cluster on loopback, as the e2e suite does.
#[derive(Parser)]
#[command(name = "e2e-cluster", version)]
struct Args {
    /// How many kubelets (each takes about 70 MB; on 2 cores, 8 is comfortable).
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// The pool label value of every node (`node.kubernetes.io/pool`).
    #[arg(long, default_value = "general")]
    pool: String,
    /// The cluster's directory (default: a new one under the temp dir). Kept afterwards.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Do not apply deploy/'s RBAC and admission policy.
    #[arg(long)]
    no_deploy: bool,
}

#[tokio::main]
async fn main() {
    if let Err(e) = run(Args::parse()).await {
        eprintln!("e2e-cluster: {e}");
        std::process::exit(1);
    }
}

async fn run(args: Args) -> Result<(), E2eError> {
    let bins = UpstreamBinaries::locate()?;
    let dir = match args.dir {
        Some(d) => {
            std::fs::create_dir_all(&d)
                .map_err(E2eError::io(format!("creating {}", d.display())))?;
            std::fs::canonicalize(&d).map_err(E2eError::io(format!("resolving {}", d.display())))?
        }
        None => tempfile::Builder::new()
            .prefix("kubelet-gitops-cluster-")
            .tempdir()
            .map_err(E2eError::io("creating the cluster directory"))?
            .keep(),
    };
    let nodes: Vec<NodeSetup> = (1..=args.nodes)
        .map(|i| NodeSetup {
            name: format!("node-{i}"),
            labels: vec![(POOL_LABEL.to_string(), args.pool.clone())],
            config: kubelet_base(&dir),
            flags: Vec::new(),
        })
        .collect();
    let mut cluster = RealCluster::start(&dir, &dir.join("logs"), bins, &nodes, true).await?;
    if !args.no_deploy {
        cluster.apply_deploy_base().await?;
        println!("deploy/base applied (RBAC, admission policy; no Deployment or DaemonSet)");
    }
    println!(
        "\nexport KUBECONFIG={}",
        cluster.admin_kubeconfig().display()
    );
    println!("API server: {}", cluster.server());
    for n in cluster.nodes().values() {
        println!(
            "node {}: kubelet https://127.0.0.1:{} healthz http://127.0.0.1:{}  root {}  log {}",
            n.name,
            n.port,
            n.healthz_port,
            n.root.display(),
            n.kubelet_log().display()
        );
    }
    println!(
        "logs: {}\nCtrl-C stops everything.",
        dir.join("logs").display()
    );
    tokio::signal::ctrl_c()
        .await
        .map_err(E2eError::io("waiting for Ctrl-C"))?;
    cluster.stop().await?;
    println!("stopped; the directory stays: {}", dir.display());
    Ok(())
}
