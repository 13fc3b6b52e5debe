//! Helpers for the reconciler's tests against the simulated cluster: a real git config
//! repository in a temp dir, a sim without kubelets, a test double that plays the node
//! agent's side of the protocol, waits with a safety-net limit, and readers of the sim's
//! request log. [`commands`] (the built binary, the git CLI) and [`options`] (the options
//! the binaries declare) need no sim; [`serial`] keeps the heaviest tests apart.
#![allow(dead_code)] // The benchmark includes this module too, and uses part of it.

pub mod apiserver;
pub mod commands;
pub mod options;
pub mod real;
pub mod serial;
pub mod signing;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, PartialObjectMeta, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_core::protocol::{
    CURRENT_CONFIG, ConfigRef, DESIRED_CONFIG, LOCAL, MESSAGE, OBSERVED_CONFIG, STATE,
};
use kubelet_gitops_sim::cluster::{Sim, SimConfig};
use kubelet_gitops_sim::reqlog::LogEntry;
use kubelet_gitops_sim::resources::kinds;
use kubelet_gitops_sim::store::{ListOptions, WriteOptions};
use reconciler::controller::{KubeSource, RunConfig, RunningController, SyncState};
use reconciler::git::{GitAuth, GitConfig};
use reconciler::rollout::PoolPhase;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The namespace the test repositories publish in.
pub const NS: &str = "kubelet-gitops";
/// The label the sim's generated inventory puts pools in.
pub const POOL_LABEL: &str = "node.kubernetes.io/pool";
/// User-Agent prefix of the agent double's writes: `.../applying` and `.../outcome`.
pub const AGENT_UA: &str = "agent-double";
/// The limit of a wait for a rollout: only a stuck one reaches it (no wait is a speed
/// assertion).
pub const LONG: Duration = Duration::from_secs(90);

/// A git repository with a work tree, committed to with libgit2.
pub struct ConfigRepo {
    pub path: PathBuf,
    repo: git2::Repository,
}

impl ConfigRepo {
    /// An empty repository at `path` whose branch is `main`.
    pub fn init(path: &Path) -> ConfigRepo {
        std::fs::create_dir_all(path).unwrap();
        let mut opts = git2::RepositoryInitOptions::new();
        opts.initial_head("main");
        let repo = git2::Repository::init_opts(path, &opts).unwrap();
        ConfigRepo {
            path: path.to_path_buf(),
            repo,
        }
    }

    /// `file://` URL of the repository.
    pub fn url(&self) -> String {
        format!("file://{}", self.path.display())
    }

    /// Writes `content` to `rel` in the work tree.
    pub fn write(&self, rel: &str, content: &str) -> &Self {
        let p = self.path.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
        self
    }

    /// Writes the settings file ([`settings_yaml`]) and, for each `(name, rollout,
    /// kubelet)`, the pool file `pools/<name>.yaml` (see [`ConfigRepo::pool`]).
    pub fn settings_and_pools(&self, pools: &[(&str, &str, &str)]) -> &Self {
        self.write("kubelet-gitops.yaml", &settings_yaml());
        for (name, rollout, kubelet) in pools {
            self.pool(name, rollout, kubelet);
        }
        self
    }

    /// Writes `pools/<name>.yaml`: pool `name` selecting the nodes of the inventory's
    /// pool `name` ([`pool_yaml`]).
    pub fn pool(&self, name: &str, rollout: &str, kubelet: &str) -> &Self {
        self.write(
            &format!("pools/{name}.yaml"),
            &pool_yaml(name, name, rollout, kubelet),
        )
    }

    /// Removes `rel` from the work tree.
    pub fn remove(&self, rel: &str) -> &Self {
        std::fs::remove_file(self.path.join(rel)).unwrap();
        self
    }

    /// Commits the whole work tree on `main`; returns the commit id.
    pub fn commit(&self, message: &str) -> String {
        let mut index = self.repo.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        index.update_all(["*"], None).unwrap();
        index.write().unwrap();
        let tree_id = index.write_tree().unwrap();
        let tree = self.repo.find_tree(tree_id).unwrap();
        let sig = git2::Signature::now("Test", "test@example.com").unwrap();
        let parent = self.repo.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        self.repo
            .commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
            .unwrap()
            .to_string()
    }
}

/// A pool file selecting `node.kubernetes.io/pool=<selects>`.
pub fn pool_yaml(name: &str, selects: &str, rollout: &str, kubelet: &str) -> String {
    format!(
        "apiVersion: kubelet-gitops.io/v1alpha1\nkind: NodePool\nmetadata:\n  name: {name}\nspec:\n  nodeSelector:\n    matchLabels: {{{POOL_LABEL}: {selects}}}\n  rollout: {{{rollout}}}\n  kubelet:\n{kubelet}"
    )
}

/// The settings file: ConfigMaps in [`NS`].
pub fn settings_yaml() -> String {
    format!(
        "apiVersion: kubelet-gitops.io/v1alpha1\nkind: RepoSettings\nspec:\n  namespace: {NS}\n  keepConfigMaps: 3\n"
    )
}

/// A simulated cluster without kubelets, a config repository, and the agent double.
pub struct Harness {
    pub dir: tempfile::TempDir,
    pub sim: Sim,
    pub repo: ConfigRepo,
    agent: Option<AgentDouble>,
    /// Released last, when everything above has stopped.
    _turn: serial::Turn,
}

impl Harness {
    /// Starts a sim of `inventory` (no kubelets) with namespace [`NS`], the test's
    /// logging first ([`init_tracing`]). Waits while a test runs alone ([`serial`]).
    pub async fn start(inventory: Inventory) -> Harness {
        let turn = serial::shared();
        init_tracing();
        let dir = tempfile::tempdir().unwrap();
        let mut config = SimConfig::new(inventory, dir.path().join("sim"));
        config.kubelets = false;
        let sim = Sim::start(config).await.expect("sim starts");
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}});
        sim.store()
            .create(kinds::namespaces(), None, ns, &WriteOptions::default())
            .expect("namespace");
        let repo = ConfigRepo::init(&dir.path().join("repo"));
        Harness {
            dir,
            sim,
            repo,
            agent: None,
            _turn: turn,
        }
    }

    /// [`Harness::start`], then the agent double with `options`.
    pub async fn with_agent(inventory: Inventory, options: AgentOptions) -> Harness {
        let mut h = Harness::start(inventory).await;
        h.start_agent(options).await;
        h
    }

    /// Starts the agent double (see [`AgentDouble`]).
    pub async fn start_agent(&mut self, options: AgentOptions) {
        self.agent = Some(AgentDouble::start(self.sim.kubeconfig_path(), options).await);
    }

    /// A run configuration for replica `identity` against this sim and repository.
    pub fn run_config(&self, identity: &str) -> RunConfig {
        run_config(
            &self.repo,
            self.sim.kubeconfig_path(),
            &self.dir.path().join(format!("cache-{identity}")),
            identity,
        )
    }

    /// Starts a reconciler.
    pub async fn reconciler(&self, config: RunConfig) -> RunningController {
        reconciler::controller::start(config)
            .await
            .expect("reconciler starts")
    }

    /// Every Node, as stored (no request is logged).
    pub fn nodes(&self) -> Vec<Value> {
        self.sim
            .store()
            .list(kinds::nodes(), None, &ListOptions::default())
            .unwrap()
            .items
    }

    /// Every published ConfigMap in [`NS`] (the managed-by label's), as stored: the
    /// rollout record aside.
    pub fn configmaps(&self) -> Vec<Value> {
        self.sim
            .store()
            .list(
                kinds::configmaps(),
                Some(NS),
                &ListOptions {
                    label_selector: Some(reconciler::publish::managed_selector()),
                    ..ListOptions::default()
                },
            )
            .unwrap()
            .items
    }

    /// Waits until `done` holds for the Nodes (a safety net of `limit`; not a speed
    /// assertion: it fails only when the rollout is stuck).
    pub async fn wait_nodes(&self, what: &str, limit: Duration, done: impl Fn(&[Value]) -> bool) {
        eventually(what, limit, || {
            let nodes = self.nodes();
            if done(&nodes) {
                Ok(())
            } else {
                Err(format!("nodes: {}", summary(&nodes)))
            }
        })
        .await;
    }

    /// What the cluster holds now, to compare with after a commit that must not apply;
    /// clears the request log, so that [`Harness::assert_nothing_applied`] sees only the
    /// requests sent from now on.
    pub fn snapshot(&self) -> Snapshot {
        let snapshot = Snapshot {
            nodes: self.nodes(),
            configmaps: self.configmaps(),
        };
        self.sim.request_log().reset();
        snapshot
    }

    /// After three more successful reconciles of `r`: no reconciler wrote anything since
    /// `before` was taken (`what` says why it must not have), the ConfigMaps are as they
    /// were, and every node is told to run what it was told to run.
    pub async fn assert_nothing_applied(
        &self,
        r: &RunningController,
        before: &Snapshot,
        what: &str,
    ) {
        let since = ok_reconciles(r);
        wait_reconciles(r, since, 3).await;
        let entries = self.sim.request_log().entries();
        assert!(
            reconciler_writes(&entries).is_empty(),
            "{what}: {:?}",
            reconciler_writes(&entries)
        );
        assert_eq!(self.configmaps(), before.configmaps);
        let nodes = self.nodes();
        assert_eq!(nodes.len(), before.nodes.len());
        for (a, b) in before.nodes.iter().zip(&nodes) {
            assert_eq!(
                ann(a, DESIRED_CONFIG),
                ann(b, DESIRED_CONFIG),
                "{}",
                name(a)
            );
        }
    }

    /// Stops the agent double and the sim.
    pub async fn shutdown(mut self) {
        if let Some(a) = self.agent.take() {
            a.stop().await;
        }
        self.sim.shutdown().await;
    }

    /// Stops `r`, which must stop cleanly, then [`Harness::shutdown`].
    pub async fn finish(self, r: RunningController) {
        r.stop().await.unwrap();
        self.shutdown().await;
    }
}

/// A run configuration for replica `identity` following `repo` with the API server of
/// `kubeconfig`, its git cache in `cache_dir`: quick polls and retries, an admin port.
pub fn run_config(
    repo: &ConfigRepo,
    kubeconfig: &Path,
    cache_dir: &Path,
    identity: &str,
) -> RunConfig {
    let git = GitConfig {
        url: repo.url(),
        branch: "main".into(),
        auth: GitAuth::None,
        cache_dir: cache_dir.to_path_buf(),
        extra_refspecs: Vec::new(),
    };
    let mut c = RunConfig::new(
        git,
        KubeSource::Kubeconfig(kubeconfig.to_path_buf()),
        identity,
    );
    c.interval = Duration::from_millis(300);
    c.admin_addr = Some("127.0.0.1:0".parse().unwrap());
    c.min_reconcile_interval = Duration::from_millis(50);
    c.failure_backoff = (Duration::from_millis(100), Duration::from_secs(2));
    c
}

/// The Nodes and ConfigMaps at one moment ([`Harness::snapshot`]).
pub struct Snapshot {
    pub nodes: Vec<Value>,
    pub configmaps: Vec<Value>,
}

/// Polls `probe` until it gives `Ok`, failing the test with `what` and the last `Err`
/// (what the probe saw) once `limit` has passed. `limit` is a safety net that only a
/// stuck system reaches, not a speed assertion.
pub async fn eventually<T>(
    what: &str,
    limit: Duration,
    mut probe: impl FnMut() -> Result<T, String>,
) -> T {
    let start = Instant::now();
    loop {
        match probe() {
            Ok(v) => return v,
            Err(seen) if start.elapsed() > limit => {
                panic!("{what}: not reached in {limit:?}; {seen}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Whether the controller reports `pools` pools, every one Complete.
pub fn all_complete(s: &SyncState, pools: usize) -> bool {
    s.pools.len() == pools && s.pools.iter().all(|p| p.phase == PoolPhase::Complete)
}

/// Waits until the controller's state satisfies `f`.
pub async fn wait_state(
    rx: &mut watch::Receiver<SyncState>,
    what: &str,
    limit: Duration,
    f: impl Fn(&SyncState) -> bool,
) -> SyncState {
    let r = tokio::time::timeout(limit, async {
        loop {
            {
                let s = rx.borrow_and_update();
                if f(&s) {
                    return s.clone();
                }
            }
            if rx.changed().await.is_err() {
                panic!("{what}: controller stopped");
            }
        }
    })
    .await;
    match r {
        Ok(s) => s,
        Err(_) => panic!("{what}: not reached in {limit:?}; state: {:?}", rx.borrow()),
    }
}

/// A node's annotation.
pub fn ann<'a>(node: &'a Value, key: &str) -> Option<&'a str> {
    node["metadata"]["annotations"][key].as_str()
}

/// A node's name.
pub fn name(node: &Value) -> &str {
    node["metadata"]["name"].as_str().unwrap_or_default()
}

/// A node's pool label.
pub fn pool_of(node: &Value) -> Option<&str> {
    node["metadata"]["labels"][POOL_LABEL].as_str()
}

/// Whether the agent reports Done on what the node is told to run.
pub fn settled_done(node: &Value) -> bool {
    let desired = ann(node, DESIRED_CONFIG);
    desired.is_some()
        && ann(node, OBSERVED_CONFIG) == desired
        && ann(node, CURRENT_CONFIG) == desired
        && ann(node, STATE) == Some("Done")
}

/// `node: desired/state` lines, for failure messages.
pub fn summary(nodes: &[Value]) -> String {
    nodes
        .iter()
        .map(|n| {
            format!(
                "{}: desired={} observed={} state={}",
                name(n),
                ann(n, DESIRED_CONFIG).unwrap_or("-"),
                ann(n, OBSERVED_CONFIG).unwrap_or("-"),
                ann(n, STATE).unwrap_or("-")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The ConfigMap name a node is told to run.
pub fn desired_name(node: &Value) -> Option<String> {
    ann(node, DESIRED_CONFIG)
        .and_then(|d| d.parse::<ConfigRef>().ok())
        .and_then(|r| r.configmap_name().map(str::to_string))
}

// ---------------------------------------------------------------------------- agent double

/// How the agent double behaves.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// Time between reporting Applying and the outcome.
    pub apply_delay: Duration,
    /// A config whose rendered text contains this rolls back.
    pub fail_marker: Option<String>,
    /// The message of that rollback (default: a healthz failure).
    pub fail_message: Option<String>,
}

impl AgentOptions {
    /// The default options, but a config whose rendered text contains `marker` rolls back.
    pub fn rolling_back(marker: &str) -> AgentOptions {
        AgentOptions {
            fail_marker: Some(marker.to_string()),
            ..AgentOptions::default()
        }
    }
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            apply_delay: Duration::from_millis(30),
            fail_marker: None,
            fail_message: None,
        }
    }
}

/// Plays the node agents: for every node whose desired-config changes it reports
/// observed-config + Applying, then (after `apply_delay`) Done with current-config, or
/// RolledBack when the ConfigMap holds `fail_marker`; for a node whose desired-config is
/// removed it reports local. Each node is handled by its own worker, one change at a
/// time, as the real agent does. Its writes go over HTTP with User-Agent
/// `agent-double/applying` and `agent-double/outcome`, so the request log tells when
/// each node started and finished. It counts the patches the server accepted
/// ([`AgentDouble::patches`]): on a real API server, whose metrics do not say who wrote,
/// that tells its node patches from the reconciler's.
pub struct AgentDouble {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    patches: Arc<AtomicUsize>,
}

impl AgentDouble {
    /// Starts the double against the API server of `kubeconfig` (the sim's, or a real
    /// server's admin kubeconfig).
    pub async fn start(kubeconfig: &Path, options: AgentOptions) -> AgentDouble {
        let applying = client_for(kubeconfig, &format!("{AGENT_UA}/applying")).await;
        let outcome = client_for(kubeconfig, &format!("{AGENT_UA}/outcome")).await;
        let stop = CancellationToken::new();
        let stop2 = stop.clone();
        let patches = Arc::new(AtomicUsize::new(0));
        let patches2 = patches.clone();
        let task = tokio::spawn(async move {
            let api: Api<PartialObjectMeta<Node>> = Api::all(applying.clone());
            let mut workers: HashMap<String, watch::Sender<Option<String>>> = HashMap::new();
            let stream = watcher::watcher(api, watcher::Config::default())
                .default_backoff()
                .applied_objects();
            let mut stream = std::pin::pin!(stream);
            loop {
                let next = tokio::select! {
                    () = stop2.cancelled() => break,
                    n = stream.next() => n,
                };
                let Some(Ok(node)) = next else {
                    if next.is_none() {
                        break;
                    }
                    continue;
                };
                let name = node.metadata.name.clone().unwrap_or_default();
                let desired = node
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(DESIRED_CONFIG).cloned());
                let tx = workers.entry(name.clone()).or_insert_with(|| {
                    let (tx, rx) = watch::channel(None);
                    let ctx = Worker {
                        node: name.clone(),
                        applying: applying.clone(),
                        outcome: outcome.clone(),
                        options: options.clone(),
                        stop: stop2.clone(),
                        patches: patches2.clone(),
                        observed: node
                            .metadata
                            .annotations
                            .as_ref()
                            .and_then(|a| a.get(OBSERVED_CONFIG).cloned()),
                    };
                    tokio::spawn(ctx.run(rx));
                    tx
                });
                tx.send_if_modified(|v| {
                    let changed = *v != desired;
                    *v = desired.clone();
                    changed
                });
            }
        });
        AgentDouble {
            stop,
            task,
            patches,
        }
    }

    /// Node patches the server accepted so far.
    pub fn patches(&self) -> usize {
        self.patches.load(Ordering::SeqCst)
    }

    /// Stops the double and its workers.
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

struct Worker {
    node: String,
    applying: kube::Client,
    outcome: kube::Client,
    options: AgentOptions,
    stop: CancellationToken,
    patches: Arc<AtomicUsize>,
    /// What the node's observed-config said when the worker started.
    observed: Option<String>,
}

impl Worker {
    async fn run(mut self, mut rx: watch::Receiver<Option<String>>) {
        loop {
            let desired = rx.borrow_and_update().clone();
            let target = desired.clone().unwrap_or_else(|| LOCAL.to_string());
            // Nothing assigned and nothing to return from, or already handled.
            let handled = self.observed.as_deref().unwrap_or(LOCAL) == target;
            if !handled {
                self.handle(desired.as_deref()).await;
                self.observed = Some(target);
            }
            tokio::select! {
                () = self.stop.cancelled() => return,
                r = rx.changed() => if r.is_err() { return },
            }
        }
    }

    async fn handle(&self, desired: Option<&str>) {
        let Some(d) = desired else {
            self.patch(
                &self.outcome,
                json!({CURRENT_CONFIG: LOCAL, OBSERVED_CONFIG: LOCAL, STATE: "Done", MESSAGE: null}),
            )
            .await;
            return;
        };
        self.patch(
            &self.applying,
            json!({OBSERVED_CONFIG: d, STATE: "Applying", MESSAGE: null}),
        )
        .await;
        tokio::time::sleep(self.options.apply_delay).await;
        let bad = match (&self.options.fail_marker, d.parse::<ConfigRef>()) {
            (Some(marker), Ok(ConfigRef::ConfigMap { namespace, name })) => {
                let api: Api<ConfigMap> = Api::namespaced(self.outcome.clone(), &namespace);
                loop {
                    match api.get(&name).await {
                        Ok(cm) => {
                            break cm
                                .data
                                .unwrap_or_default()
                                .get("kubelet")
                                .is_some_and(|k| k.contains(marker.as_str()));
                        }
                        Err(_) if !self.stop.is_cancelled() => {
                            tokio::time::sleep(Duration::from_millis(20)).await
                        }
                        Err(_) => return,
                    }
                }
            }
            _ => false,
        };
        let report = if bad {
            let message = self.options.fail_message.as_deref();
            let message = message.unwrap_or("kubelet did not become healthy: healthz failed");
            json!({STATE: "RolledBack", MESSAGE: message})
        } else {
            json!({STATE: "Done", CURRENT_CONFIG: d, MESSAGE: null})
        };
        self.patch(&self.outcome, report).await;
    }

    /// Merge-patches the node's annotations, retrying until it is accepted.
    async fn patch(&self, client: &kube::Client, annotations: Value) {
        let api: Api<Node> = Api::all(client.clone());
        let patch = json!({"metadata": {"annotations": annotations}});
        while !self.stop.is_cancelled() {
            match api
                .patch_metadata(&self.node, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    self.patches.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }
}

/// A kube client for the sim with User-Agent `ua`.
pub async fn client(sim: &Sim, ua: &str) -> kube::Client {
    client_for(sim.kubeconfig_path(), ua).await
}

/// A kube client for the API server of `kubeconfig` with User-Agent `ua`.
pub async fn client_for(kubeconfig: &Path, ua: &str) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    config.headers.push((
        axum::http::header::USER_AGENT,
        axum::http::HeaderValue::from_str(ua).unwrap(),
    ));
    kube::Client::try_from(config).unwrap()
}

// ------------------------------------------------------------------------ request log

/// Who sent a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Writer {
    /// A reconciler replica (its identity).
    Reconciler(String),
    /// The agent double reporting Applying.
    AgentApplying,
    /// The agent double reporting an outcome (Done, RolledBack, local).
    AgentOutcome,
    Other,
}

/// Who sent `e`.
pub fn writer(e: &LogEntry) -> Writer {
    let ua = e.user_agent.as_deref().unwrap_or_default();
    if let Some(rest) = ua.strip_prefix("kubelet-gitops/") {
        let id = rest
            .split_once(" (")
            .map(|(_, id)| id.trim_end_matches(')'))
            .unwrap_or_default();
        Writer::Reconciler(id.to_string())
    } else if ua == format!("{AGENT_UA}/applying") {
        Writer::AgentApplying
    } else if ua == format!("{AGENT_UA}/outcome") {
        Writer::AgentOutcome
    } else {
        Writer::Other
    }
}

/// Whether `e` is an accepted write.
pub fn accepted_write(e: &LogEntry) -> bool {
    matches!(e.verb.as_str(), "create" | "update" | "patch" | "delete")
        && (200..300).contains(&e.status)
}

/// Whether `e` is about the reconciler's rollout record (reconciler/src/record.rs), not a
/// published config.
pub fn is_record(e: &LogEntry) -> bool {
    e.resource == "configmaps" && e.name.as_deref() == Some(reconciler::record::RECORD_NAME)
}

/// Accepted writes by reconcilers: (verb, resource) to count; the rollout record's aside
/// ([`record_writes`]).
pub fn reconciler_writes(entries: &[LogEntry]) -> BTreeMap<(String, String), usize> {
    let mut out = BTreeMap::new();
    for e in entries
        .iter()
        .filter(|e| accepted_write(e) && !is_record(e))
    {
        if matches!(writer(e), Writer::Reconciler(_)) {
            *out.entry((e.verb.clone(), e.resource.clone())).or_default() += 1;
        }
    }
    out
}

/// Accepted node patches by reconcilers, per node.
pub fn assignments_per_node(entries: &[LogEntry]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for e in entries
        .iter()
        .filter(|e| accepted_write(e) && e.resource == "nodes")
    {
        if matches!(writer(e), Writer::Reconciler(_)) {
            *out.entry(e.name.clone().unwrap_or_default()).or_default() += 1;
        }
    }
    out
}

/// What [`replay`] found, per pool.
#[derive(Debug, Default)]
pub struct Replay {
    /// The largest number of the pool's nodes in flight at once.
    pub max_in_flight: BTreeMap<String, usize>,
    /// The order in which the pool's nodes were assigned (`(node, true)`) and finished
    /// (`(node, false)`).
    pub order: BTreeMap<String, Vec<(String, bool)>>,
}

/// Replays the request log: a node is in flight from a reconciler's accepted patch on it
/// until the agent double's accepted outcome patch.
pub fn replay(entries: &[LogEntry], pool_of: &dyn Fn(&str) -> Option<String>) -> Replay {
    let mut in_flight: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    let mut out = Replay::default();
    for e in entries
        .iter()
        .filter(|e| accepted_write(e) && e.resource == "nodes")
    {
        let node = e.name.clone().unwrap_or_default();
        let Some(pool) = pool_of(&node) else { continue };
        let set = in_flight.entry(pool.clone()).or_default();
        match writer(e) {
            Writer::Reconciler(_) => {
                set.insert(node.clone());
                out.order
                    .entry(pool.clone())
                    .or_default()
                    .push((node, true));
            }
            Writer::AgentOutcome if set.remove(&node) => {
                out.order
                    .entry(pool.clone())
                    .or_default()
                    .push((node, false));
            }
            _ => {}
        }
        let m = out.max_in_flight.entry(pool).or_default();
        *m = (*m).max(set.len());
    }
    out
}

/// Logs to the test's output, filtered by `RUST_LOG` (default: warnings).
pub fn init_tracing() {
    kubelet_gitops_core::logging::init_for_tests();
}

/// `GET path` on the admin port: (status, body).
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let code = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// The value of one sample line (`name{labels} value`) in a metrics text.
pub fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Rounds of the loop so far, from the controller's metrics: reconciles that succeeded,
/// and polls that found nothing to do (no new commit, nothing unsettled: no reconcile
/// runs, `result="idle"`).
pub fn ok_reconciles(r: &RunningController) -> u64 {
    let m = r.metrics().encode();
    let count = |series: &str| sample(&m, series).unwrap_or(0.0) as u64;
    count("kubelet_gitops_reconciles_total{result=\"ok\"}")
        + count("kubelet_gitops_reconciles_total{result=\"idle\"}")
}

/// Waits until `r` has completed `n` more rounds ([`ok_reconciles`]) than `since`.
pub async fn wait_reconciles(r: &RunningController, since: u64, n: u64) {
    eventually("reconciles stopped", Duration::from_secs(30), || {
        let done = ok_reconciles(r);
        if done >= since + n {
            Ok(())
        } else {
            Err(format!(
                "{} of {n} more reconciles",
                done.saturating_sub(since)
            ))
        }
    })
    .await;
}
