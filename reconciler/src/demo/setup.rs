//! Setting the stage: the cluster (simulated or real), the config repository, one agent
//! per node and the reconciler.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_sim::cluster::{Sim, SimConfig};
use kubelet_gitops_sim::kubelet::KubeletOptions;
use kubelet_gitops_sim::resources::kinds;
use kubelet_gitops_sim::store::WriteOptions;
use serde_json::json;

use super::cluster::{ClusterKind, DemoCluster};
use super::error::DemoError;
use super::nodes::{self, AgentArgs, NodePaths};
use super::real::RealDemo;
use super::repo::{self, DemoRepo, RealNodePaths};
use super::{DEMO_NAMESPACE, Demo, POLL, Workdir};
use crate::controller::{self, KubeSource, RunConfig};
use crate::git::{Backoff, GitAuth, GitConfig};

/// How the stand-in kubelets behave: fast restarts, and systemd's `Restart=always` after
/// 2 s, so a kubelet that cannot start crash-loops as on a real node.
fn kubelet_options() -> KubeletOptions {
    KubeletOptions {
        start_delay: Duration::from_millis(100),
        not_ready_delay: Duration::from_secs(1),
        lease_renew_interval: Duration::from_secs(1),
        restart_after_exit: Some(Duration::from_secs(2)),
        ..KubeletOptions::default()
    }
}

impl Demo {
    /// Step 1: the cluster with the example inventory's nodes.
    pub(super) async fn start_cluster(&mut self) -> Result<(), DemoError> {
        let t = Instant::now();
        let inventory =
            Inventory::parse("examples-repo/inventory.yaml", repo::INVENTORY.as_bytes())
                .map_err(|e| DemoError::Inventory(Box::new(e)))?;
        let mut pools: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for node in &inventory.nodes {
            let pool = node
                .labels
                .get("node.kubernetes.io/pool")
                .cloned()
                .unwrap_or_default();
            pools.entry(pool).or_default().push(node.name.clone());
        }
        let (cluster, kubelets) = match self.options.cluster {
            ClusterKind::Sim => {
                println!("==> Starting a simulated cluster (examples-repo/inventory.yaml)");
                (self.start_sim(inventory).await?, "stand-in kubelets")
            }
            ClusterKind::Real => {
                println!(
                    "==> Starting Kubernetes v1.36 on loopback: etcd, kube-apiserver, controller-manager, scheduler, and a real kubelet per node of examples-repo/inventory.yaml"
                );
                (self.start_real(inventory).await?, "real kubelets Ready")
            }
        };
        for (pool, names) in &pools {
            println!("    {pool:<12} {}", names.join(" "));
        }
        println!(
            "    API server {}, {} {kubelets} ({:.1}s)",
            cluster.server(),
            cluster.node_names().len(),
            t.elapsed().as_secs_f64()
        );
        if matches!(self.workdir, Workdir::Kept(_)) {
            println!(
                "    watch it: kubectl --kubeconfig {} get nodes -L node.kubernetes.io/pool -L kubelet-gitops.io/canary",
                cluster.admin_kubeconfig().display()
            );
        }
        self.cluster = Some(cluster);
        Ok(())
    }

    /// The simulated cluster, its namespace, the nodes' kubeadm files.
    async fn start_sim(&self, inventory: Inventory) -> Result<DemoCluster, DemoError> {
        let limit = self.timings.start_limit;
        let mut config = SimConfig::new(inventory, self.workdir());
        config.kubelet = kubelet_options();
        config.settle_timeout = limit;
        let sim = tokio::time::timeout(limit, Sim::start(config))
            .await
            .map_err(|_| DemoError::Timeout {
                step: "start the simulated cluster",
                timeout: limit.as_secs(),
                state: String::new(),
            })?
            .map_err(|e| DemoError::Sim(Box::new(e)))?;
        let ns =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DEMO_NAMESPACE}});
        sim.store()
            .create(kinds::namespaces(), None, ns, &WriteOptions::default())
            .map_err(|e| DemoError::SimSetup {
                what: format!("create namespace {DEMO_NAMESPACE}"),
                message: e.message,
            })?;
        Ok(DemoCluster::Sim(sim))
    }

    /// The real cluster, deploy/base applied, the reconciler's identity.
    async fn start_real(&mut self, inventory: Inventory) -> Result<DemoCluster, DemoError> {
        let limit = self.timings.start_limit;
        let bins = match self.upstream.take() {
            Some(bins) => bins,
            None => unreachable!("Demo::new locates the upstream binaries for a real cluster"),
        };
        let real = tokio::time::timeout(limit, RealDemo::start(self.workdir(), &inventory, bins))
            .await
            .map_err(|_| DemoError::Timeout {
                step: "start the real cluster",
                timeout: limit.as_secs(),
                state: format!(
                    "see {} (control plane) and nodes/<node>/var/log/kubelet.log",
                    self.workdir().join("logs").display()
                ),
            })??;
        println!(
            "    deploy/base applied (RBAC, admission policy); the reconciler and each agent use their ServiceAccount's token"
        );
        Ok(DemoCluster::Real(Box::new(real)))
    }

    /// Step 2: the config repository and its first commit.
    pub(super) fn create_repo(&mut self) -> Result<String, DemoError> {
        println!("\n==> Copying examples-repo into a git repository");
        let (health, lkg) = (self.timings.health_timeout, self.timings.lkg_grace);
        let real = match self.cluster() {
            DemoCluster::Sim(_) => None,
            DemoCluster::Real(r) => Some(RealNodePaths {
                ca: r.ca().to_path_buf(),
                workdir: self.workdir().to_path_buf(),
            }),
        };
        let repo = DemoRepo::create(
            &self.workdir().join("repo"),
            &self.workdir().join("remote.git"),
            health,
            lkg,
            real.as_ref(),
        )?;
        let c1 = repo.commit(&format!(
            "Import the example configuration (demo timings: healthTimeout {health}, lkgGrace {lkg})"
        ))?;
        let rendered = repo.render(&c1)?;
        println!(
            "    {}, pushed to {} (the forge), commit {}: base, pools {}",
            repo.path().display(),
            repo.url(),
            &c1[..7],
            rendered
                .pools
                .iter()
                .map(|p| p.spec.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!(
            "    demo timings: healthTimeout {health} and lkgGrace {lkg} instead of the examples' minutes and hours"
        );
        if real.is_some() {
            println!(
                "    base/kubelet.yaml made fit for kubelets on this machine: cgroupfs (no systemd), /etc/resolv.conf, paths in the work directory, swap and cgroup v1 allowed; gpu reserves CPU 0 only"
            );
        }
        self.repo = Some(repo);
        Ok(c1)
    }

    /// Step 3: one agent per node, then the reconciler.
    pub(super) async fn start_loop(&mut self) -> Result<(), DemoError> {
        let t = Instant::now();
        println!("\n==> Starting one agent per node, then the reconciler");
        let mut launches = Vec::new();
        for name in self.cluster().node_names() {
            let mut args = nodes::common_agent_args(&name);
            args.extend(self.node_agent_args(&name).await?);
            let log = self.agent_log(&name);
            launches.push((name, args, log));
        }
        for (name, args, log) in &launches {
            self.agents.spawn(name, &self.agent_bin, args, log)?;
        }
        // Every agent reports the node's local config once it has synced.
        let limit = self.timings.start_limit;
        self.watch("start the agents", limit, None, |_, nodes| {
            nodes
                .iter()
                .all(|n| n.current.is_some() && n.last_known_good.is_some())
                .then_some(())
        })
        .await?;
        println!(
            "    {} agents ({}) report their nodes' local configs ({:.1}s)",
            self.agents.len(),
            self.agent_bin.display(),
            t.elapsed().as_secs_f64()
        );

        let git = GitConfig {
            url: self.repo().url(),
            branch: repo::BRANCH.into(),
            auth: GitAuth::None,
            cache_dir: self.workdir().join("reconciler-cache"),
            extra_refspecs: Vec::new(),
        };
        let kubeconfig = self.cluster().reconciler_kubeconfig();
        let mut config = RunConfig::new(git, KubeSource::Kubeconfig(kubeconfig), "demo");
        config.interval = POLL;
        config.poll_backoff = Backoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(5),
        };
        config.min_reconcile_interval = Duration::from_millis(100);
        config.failure_backoff = (Duration::from_millis(500), Duration::from_secs(5));
        // Statuses as git notes (the default), pushed to the remote; progress within
        // `pending` every second rather than every minute.
        config.status.progress_interval = Duration::from_secs(1);
        config.status.redeliver_interval = Duration::from_secs(1);
        let running = controller::start(config)
            .await
            .map_err(DemoError::Reconciler)?;
        self.controller = Some(running);
        println!(
            "    reconciler: follows {} of {} every {}ms, statuses as git notes",
            repo::BRANCH,
            self.repo().url(),
            POLL.as_millis()
        );
        Ok(())
    }
}

impl Demo {
    /// The agent arguments of node `name` that depend on its cluster.
    async fn node_agent_args(&self, name: &str) -> Result<Vec<String>, DemoError> {
        match self.cluster() {
            DemoCluster::Sim(sim) => {
                let paths = NodePaths::new(&sim.node_root(name));
                let kubelet_url = sim.kubelet(name).map(|k| k.url()).unwrap_or_default();
                Ok(AgentArgs {
                    node: name,
                    paths: &paths,
                    kubeconfig: sim.kubeconfig_path(),
                    sim_url: &sim.url(),
                    kubelet_url: &kubelet_url,
                }
                .to_args())
            }
            DemoCluster::Real(real) => real.agent_args(name, self.workdir()).await,
        }
    }
}
