//! Setting the stage: the simulated cluster, the config repository, one agent per node
//! and the reconciler.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_sim::cluster::{Sim, SimConfig};
use kubelet_gitops_sim::kubelet::KubeletOptions;
use kubelet_gitops_sim::resources::kinds;
use kubelet_gitops_sim::store::WriteOptions;
use serde_json::json;

use super::error::DemoError;
use super::nodes::{AgentArgs, NodePaths};
use super::repo::{self, DemoRepo};
use super::{Demo, HEALTH_TIMEOUT, LKG_GRACE, POLL, START_LIMIT, Workdir};
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
    /// Step 1: the simulated cluster, the namespace, the nodes' kubeadm files.
    pub(super) async fn start_cluster(&mut self) -> Result<(), DemoError> {
        let t = Instant::now();
        println!("==> Starting a simulated cluster (examples-repo/inventory.yaml)");
        let inventory =
            Inventory::parse("examples-repo/inventory.yaml", repo::INVENTORY.as_bytes())
                .map_err(|e| DemoError::Inventory(Box::new(e)))?;
        let mut config = SimConfig::new(inventory, self.workdir());
        config.kubelet = kubelet_options();
        config.settle_timeout = START_LIMIT;
        let sim = tokio::time::timeout(START_LIMIT, Sim::start(config))
            .await
            .map_err(|_| DemoError::Timeout {
                step: "start the simulated cluster",
                timeout: START_LIMIT.as_secs(),
                state: String::new(),
            })?
            .map_err(|e| DemoError::Sim(Box::new(e)))?;
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kubelet-gitops"}});
        sim.store()
            .create(kinds::namespaces(), None, ns, &WriteOptions::default())
            .map_err(|e| DemoError::SimSetup {
                what: "create namespace kubelet-gitops".into(),
                message: e.message,
            })?;
        let mut pools: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for node in &sim.inventory().nodes {
            let pool = node
                .labels
                .get("node.kubernetes.io/pool")
                .cloned()
                .unwrap_or_default();
            pools.entry(pool).or_default().push(node.name.clone());
        }
        for (pool, names) in &pools {
            println!("    {pool:<12} {}", names.join(" "));
        }
        println!(
            "    API server {}, {} stand-in kubelets running ({:.1}s)",
            sim.url(),
            sim.kubelets().len(),
            t.elapsed().as_secs_f64()
        );
        if matches!(self.workdir, Workdir::Kept(_)) {
            println!(
                "    watch it: kubectl --kubeconfig {} get nodes -L node.kubernetes.io/pool -L kubelet-gitops.io/canary",
                self.kubeconfig().display()
            );
        }
        self.sim = Some(sim);
        Ok(())
    }

    /// Step 2: the config repository and its first commit.
    pub(super) fn create_repo(&mut self) -> Result<String, DemoError> {
        println!("\n==> Copying examples-repo into a git repository");
        let repo = DemoRepo::create(
            &self.workdir().join("repo"),
            &self.workdir().join("remote.git"),
            HEALTH_TIMEOUT,
            LKG_GRACE,
        )?;
        let c1 = repo.commit(&format!(
            "Import the example configuration (demo timings: healthTimeout {HEALTH_TIMEOUT}, lkgGrace {LKG_GRACE})"
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
            "    demo timings: healthTimeout {HEALTH_TIMEOUT} and lkgGrace {LKG_GRACE} instead of the examples' minutes and hours"
        );
        self.repo = Some(repo);
        Ok(c1)
    }

    /// Step 3: one agent per node, then the reconciler.
    pub(super) async fn start_loop(&mut self) -> Result<(), DemoError> {
        let t = Instant::now();
        println!("\n==> Starting one agent per node, then the reconciler");
        let sim_url = self.sim().url();
        let kubeconfig = self.kubeconfig();
        let mut launches = Vec::new();
        for (name, kubelet) in self.sim().kubelets() {
            let paths = NodePaths::new(&self.sim().node_root(name));
            let args = AgentArgs {
                node: name,
                paths: &paths,
                kubeconfig: &kubeconfig,
                sim_url: &sim_url,
                kubelet_url: &kubelet.url(),
            }
            .to_args();
            launches.push((name.clone(), args, self.agent_log(name)));
        }
        for (name, args, log) in &launches {
            self.agents.spawn(name, &self.agent_bin, args, log)?;
        }
        // Every agent reports the node's local config once it has synced.
        self.watch("start the agents", START_LIMIT, None, |_, nodes| {
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
        let mut config = RunConfig::new(git, KubeSource::Kubeconfig(self.kubeconfig()), "demo");
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
