//! `kubelet-gitops status`: where each pool's rollout stands, read from the cluster
//! through a kubeconfig (Nodes, our ConfigMaps' metadata, and for `status node` the
//! agent's Events). What it shows is computed by [`model`] and laid out by [`table`],
//! both pure; this file only reads the cluster, watches it and prints.

mod model;
mod table;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Node};
use kube::api::{Api, ListParams, ObjectMeta};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::{WatchStreamExt, watcher};
use kubelet_gitops_core::message::{OneLine, error_chain};
use kubelet_gitops_core::protocol::{
    CONDITION_TYPE, MANAGED_BY, MANAGED_BY_LABEL, POOL_LABEL, SOURCE_COMMIT, SOURCE_PATH,
};

use model::{Condition, ConfigMapObs, EventObs, NodeObs, Report, Verdict};

use crate::record::{RECORD_NAME, RolloutRecord};
use table::Layout;

/// Exit code of `--wait` when a targeted pool halts.
pub const EXIT_HALTED: u8 = 1;
/// Exit code on usage, kubeconfig or API errors.
pub const EXIT_ERROR: u8 = 2;
/// Exit code of `--wait` when `--timeout` passes first.
pub const EXIT_TIMEOUT: u8 = 3;

/// The component name the node agent posts its Events under.
const AGENT_COMPONENT: &str = "kubelet-gitops-agent";

/// Arguments of `kubelet-gitops status`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(super) struct StatusArgs {
    #[command(subcommand)]
    command: Option<StatusCommand>,
    /// Show only this pool (with --wait: wait for this pool only).
    #[arg(value_name = "POOL")]
    pool: Option<String>,
    /// The same as POOL, for a pool whose name is a subcommand's (`--pool node`).
    #[arg(long = "pool", value_name = "POOL", conflicts_with = "pool")]
    pool_flag: Option<String>,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Output format: `table` for people; `json` or `yaml` for scripts, a documented
    /// structure (docs/operations.md, "kubelet-gitops status") that lists every node not
    /// Done.
    #[arg(
        short = 'o',
        long,
        value_enum,
        default_value = "table",
        env = "KUBELET_GITOPS_OUTPUT"
    )]
    output: Output,
    /// Keep watching the Nodes and print the status again whenever it changes (on a
    /// terminal, redraw it in place). Stop with Ctrl-C, or with --wait.
    #[arg(short = 'w', long, env = "KUBELET_GITOPS_WATCH")]
    watch: bool,
    /// Wait until every pool (or POOL) is complete, then exit 0; exit 1 as soon as one
    /// halts, 3 when --timeout passes first. Pools no node carries yet (`pending`) are
    /// waited for only when named. The table is printed as it changes; json and yaml
    /// print the final status only (with --watch, every change).
    #[arg(long, env = "KUBELET_GITOPS_WAIT")]
    wait: bool,
    /// With --wait: wait also until the reconciler applies this commit (a full or
    /// abbreviated id: what a pipeline just merged). Without it, --wait right after a
    /// merge can see the previous rollout complete before the reconciler has fetched the
    /// new commit.
    #[arg(
        long,
        value_name = "SHA",
        requires = "wait",
        env = "KUBELET_GITOPS_COMMIT"
    )]
    commit: Option<String>,
    /// With --wait: give up after this long (humantime: 90s, 10m, 1h), exit 3. Default:
    /// wait as long as it takes.
    #[arg(
        long,
        value_name = "DURATION",
        requires = "wait",
        env = "KUBELET_GITOPS_TIMEOUT"
    )]
    timeout: Option<humantime::Duration>,
}

#[derive(Debug, Subcommand)]
enum StatusCommand {
    /// One node in full: its pool, the agent's state and message, the desired, current
    /// and last-known-good configs with the commit and file each came from, the
    /// KubeletConfigReady condition, and the agent's recent Events about it.
    Node(NodeStatusArgs),
}

#[derive(Debug, Args)]
struct NodeStatusArgs {
    /// The Node's name.
    #[arg(value_name = "NAME")]
    name: String,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Output format: `table` for people, `json` or `yaml` for scripts.
    #[arg(
        short = 'o',
        long,
        value_enum,
        default_value = "table",
        env = "KUBELET_GITOPS_OUTPUT"
    )]
    output: Output,
}

/// Where the cluster is.
#[derive(Debug, Args)]
struct ClusterArgs {
    /// The kubeconfig to read the cluster with. Default: $KUBECONFIG, ~/.kube/config,
    /// else the in-cluster service account. Needs get, list and watch on nodes, get, list
    /// and watch on configmaps in --namespace, list on events in `default` (status node).
    #[arg(long, value_name = "FILE", env = "KUBELET_GITOPS_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use. Default: its current context.
    #[arg(long, value_name = "NAME", env = "KUBELET_GITOPS_CONTEXT")]
    context: Option<String>,
    /// Where the reconciler publishes its ConfigMaps (the repository's `namespace`).
    #[arg(
        short = 'n',
        long,
        value_name = "NAMESPACE",
        default_value = "kubelet-gitops",
        env = "KUBELET_GITOPS_NAMESPACE"
    )]
    namespace: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Table,
    Json,
    Yaml,
}

/// Runs `status` on a current-thread runtime; the exit code as documented on
/// [`EXIT_HALTED`], [`EXIT_ERROR`] and [`EXIT_TIMEOUT`].
pub(super) fn run(args: StatusArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    match runtime.block_on(dispatch(args)) {
        Ok(code) => ExitCode::from(code),
        Err(msg) => {
            eprintln!("error: {}", OneLine(&msg));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

async fn dispatch(args: StatusArgs) -> Result<u8, String> {
    let StatusArgs {
        command,
        pool,
        pool_flag,
        cluster,
        output,
        watch,
        wait,
        commit,
        timeout,
    } = args;
    let pool = pool.or(pool_flag);
    if let Some(StatusCommand::Node(a)) = command {
        return node(a).await;
    }
    let client = connect(&cluster).await?;
    let ns = cluster.namespace.as_str();
    let only = pool.as_deref();
    let tty = std::io::stdout().is_terminal();
    let layout = Layout {
        width: width(tty),
        unicode: tty,
        ..Layout::default()
    };
    // One list first: a wrong kubeconfig or missing permission fails here, at once.
    let (nodes, cms) = list(&client, ns).await?;
    let record = record(&client, ns).await?;
    let report = model::survey(&nodes, &cms, ns, only, Timestamp::now(), record.as_ref());
    if let Some(p) = only
        && report.pools.is_empty()
        && !wait
    {
        return Err(format!(
            "no pool {p:?}: no Node carries kubelet-gitops.io/pool={p} and no ConfigMap of it is published in {ns}"
        ));
    }
    if !watch && !wait {
        print(&render(&report, output, &layout)?);
        return Ok(0);
    }
    let progress = watch || output == Output::Table;
    let deadline = timeout.map(|t| tokio::time::Instant::now() + Duration::from(t));
    let want = Want {
        wait,
        commit: commit.as_deref(),
        deadline,
    };
    follow(client, ns, only, output, layout, tty, progress, want).await
}

/// What `--wait` waits for.
struct Want<'a> {
    wait: bool,
    /// `--commit`.
    commit: Option<&'a str>,
    deadline: Option<tokio::time::Instant>,
}

/// Watches Nodes and ConfigMaps, printing the status as it changes; with `wait`, returns
/// the exit code once decided.
#[allow(clippy::too_many_arguments)]
async fn follow(
    client: kube::Client,
    ns: &str,
    only: Option<&str>,
    output: Output,
    layout: Layout,
    tty: bool,
    progress: bool,
    want: Want<'_>,
) -> Result<u8, String> {
    let Want {
        wait,
        commit,
        deadline,
    } = want;
    let (node_store, node_writer) = kube::runtime::reflector::store::<Node>();
    let (cm_store, cm_writer) =
        kube::runtime::reflector::store::<kube::core::PartialObjectMeta<ConfigMap>>();
    let nodes = kube::runtime::reflector(
        node_writer,
        watcher(Api::<Node>::all(client.clone()), watcher::Config::default()).default_backoff(),
    )
    .map(|e| (0, e.map(|e| matches!(e, watcher::Event::InitDone))));
    let cms = kube::runtime::reflector(
        cm_writer,
        watcher(
            Api::<kube::core::PartialObjectMeta<ConfigMap>>::namespaced(client.clone(), ns),
            watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}")),
        )
        .default_backoff(),
    )
    .map(|e| (1, e.map(|e| matches!(e, watcher::Event::InitDone))));
    let (record_store, record_writer) = kube::runtime::reflector::store::<ConfigMap>();
    let records = kube::runtime::reflector(
        record_writer,
        watcher(
            Api::<ConfigMap>::namespaced(client, ns),
            watcher::Config::default().fields(&format!("metadata.name={RECORD_NAME}")),
        )
        .default_backoff(),
    )
    .map(|e| (2, e.map(|e| matches!(e, watcher::Event::InitDone))));
    let events = futures::stream::select(futures::stream::select(nodes, cms), records);
    let mut events = std::pin::pin!(events);
    let redraw = tty && output == Output::Table && progress;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut last_shown: Option<String> = None;
    let mut ready = [false; 3];
    // The last watch error shown, to say it once (the watcher retries with back-off).
    let mut failing: Option<String> = None;
    // The rollout record last read, by the resourceVersion it was read at.
    let mut record: Option<(Option<Option<String>>, Option<RolloutRecord>)> = None;
    let mut last = None;
    let sleep_until = |d: Option<tokio::time::Instant>| async move {
        match d {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    loop {
        tokio::select! {
            e = events.next() => match e {
                None => return Err("the watch ended".into()),
                Some((which, Ok(init_done))) => {
                    ready[which] |= init_done;
                    if failing.take().is_some() {
                        eprintln!("the watch works again");
                    }
                }
                Some((which, Err(e))) => {
                    let what = ["nodes", "ConfigMaps", "the rollout record"][which];
                    let msg = format!(
                        "watching {what} failed: {}; retrying, the status shown may be out of date",
                        error_chain(&e)
                    );
                    if failing.as_ref() != Some(&msg) {
                        eprintln!("{msg}");
                        failing = Some(msg);
                    }
                    continue;
                }
            },
            _ = tick.tick(), if redraw => {},
            () = sleep_until(deadline) => {
                if let Some(report) = &last
                    && !progress
                {
                    print(&render(report, output, &layout)?);
                }
                eprintln!("timed out waiting for the rollout (exit {EXIT_TIMEOUT})");
                return Ok(EXIT_TIMEOUT);
            }
        }
        // The stores are read once both watches have listed (the stream must keep being
        // polled for that, so no waiting here).
        if !ready.iter().all(|r| *r) {
            continue;
        }
        let nodes: Vec<NodeObs> = node_store.state().iter().map(|n| node_obs(n)).collect();
        let cms: Vec<ConfigMapObs> = cm_store
            .state()
            .iter()
            .map(|c| configmap_obs(&c.metadata))
            .collect();
        // The record is read again only when it changed (a warning about it is said once).
        let cm =
            record_store.get(&kube::runtime::reflector::ObjectRef::new(RECORD_NAME).within(ns));
        let version = cm.as_ref().map(|c| c.metadata.resource_version.clone());
        if record.as_ref().map(|(v, _)| v) != Some(&version) {
            record = Some((version, cm.and_then(|cm| read_record(&cm))));
        }
        let recorded = record.as_ref().and_then(|(_, r)| r.as_ref());
        let report = model::survey(&nodes, &cms, ns, only, Timestamp::now(), recorded);
        if progress {
            let text = render(&report, output, &layout)?;
            // Off a terminal (and as json/yaml) a status is printed again only when it
            // changed, ages aside.
            let key = if redraw {
                text.clone()
            } else {
                render(
                    &Report {
                        time: Timestamp::UNIX_EPOCH,
                        ..report.clone()
                    },
                    output,
                    &layout,
                )?
            };
            if last_shown.as_ref() != Some(&key) {
                if redraw {
                    print(&format!("\x1b[H\x1b[2J{text}"));
                } else if last_shown.is_some() && output == Output::Table {
                    print(&format!("\n{text}"));
                } else {
                    print(&text);
                }
                last_shown = Some(key);
            }
        }
        if wait {
            let verdict = model::verdict(&report, only, commit);
            if verdict != Verdict::Pending && !progress {
                print(&render(&report, output, &layout)?);
            }
            match verdict {
                Verdict::Complete => return Ok(0),
                Verdict::Halted => return Ok(EXIT_HALTED),
                Verdict::Pending => {}
            }
        }
        last = Some(report);
    }
}

async fn node(args: NodeStatusArgs) -> Result<u8, String> {
    let NodeStatusArgs {
        name,
        cluster,
        output,
    } = args;
    let client = connect(&cluster).await?;
    let node = Api::<Node>::all(client.clone())
        .get_opt(&name)
        .await
        .map_err(|e| format!("cannot read node {name:?}: {}", error_chain(&e)))?
        .ok_or_else(|| format!("node {name:?} not found"))?;
    let cms = configmaps(&client, &cluster.namespace).await?;
    let params = ListParams::default().fields(&format!(
        "involvedObject.kind=Node,involvedObject.name={name}"
    ));
    let events = Api::<Event>::namespaced(client, "default")
        .list(&params)
        .await
        .map_err(|e| {
            format!(
                "cannot list the Events of node {name:?}: {}",
                error_chain(&e)
            )
        })?
        .items
        .into_iter()
        .filter(|e| {
            e.reporting_component.as_deref() == Some(AGENT_COMPONENT)
                || e.source.as_ref().and_then(|s| s.component.as_deref()) == Some(AGENT_COMPONENT)
        })
        .map(|e| EventObs {
            time: e
                .last_timestamp
                .map(|t| t.0)
                .or(e.event_time.map(|t| t.0))
                .or(e.first_timestamp.map(|t| t.0))
                .or(e.metadata.creation_timestamp.map(|t| t.0)),
            type_: e.type_.unwrap_or_default(),
            reason: e.reason.unwrap_or_default(),
            message: e.message.unwrap_or_default(),
            count: e.count.unwrap_or(1),
        })
        .collect();
    let report = model::node_report(&node_obs(&node), &cms, events, Timestamp::now());
    let text = match output {
        Output::Table => table::node(&report, width(std::io::stdout().is_terminal())),
        Output::Json => json(&report)?,
        Output::Yaml => yaml(&report)?,
    };
    print(&text);
    Ok(0)
}

/// What `kubelet-gitops status --kubeconfig KUBECONFIG -n NAMESPACE` prints (once, not
/// watching): every pool, then the nodes that are not Done, laid out for this process's
/// stdout. The demo's last act shows it.
pub async fn pools_table(kubeconfig: &std::path::Path, namespace: &str) -> Result<String, String> {
    let cluster = ClusterArgs {
        kubeconfig: Some(kubeconfig.to_path_buf()),
        context: None,
        namespace: namespace.to_string(),
    };
    let client = connect(&cluster).await?;
    let (nodes, cms) = list(&client, namespace).await?;
    let record = record(&client, namespace).await?;
    let report = model::survey(
        &nodes,
        &cms,
        namespace,
        None,
        Timestamp::now(),
        record.as_ref(),
    );
    let tty = std::io::stdout().is_terminal();
    let layout = Layout {
        width: width(tty),
        unicode: tty,
        ..Layout::default()
    };
    Ok(table::pools(&report, &layout))
}

/// A client for the kubeconfig (or the environment), sending our User-Agent.
async fn connect(cluster: &ClusterArgs) -> Result<kube::Client, String> {
    let options = KubeConfigOptions {
        context: cluster.context.clone(),
        ..KubeConfigOptions::default()
    };
    let mut config = match &cluster.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).map_err(|e| {
                format!(
                    "cannot read the kubeconfig {}: {}",
                    path.display(),
                    error_chain(&e)
                )
            })?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| {
                    format!(
                        "cannot load the kubeconfig {}: {}",
                        path.display(),
                        error_chain(&e)
                    )
                })?
        }
        None if cluster.context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| format!("cannot load the kubeconfig: {}", error_chain(&e)))?,
        None => kube::Config::infer().await.map_err(|e| {
            format!(
                "cannot find a kubeconfig or in-cluster config: {}",
                error_chain(&e)
            )
        })?,
    };
    if let Ok(v) = axum::http::HeaderValue::from_str(&format!(
        "kubelet-gitops/{} (status)",
        env!("CARGO_PKG_VERSION")
    )) {
        config.headers.push((axum::http::header::USER_AGENT, v));
    }
    kube::Client::try_from(config)
        .map_err(|e| format!("cannot build a client: {}", error_chain(&e)))
}

/// Every Node (paged) and our ConfigMaps.
async fn list(
    client: &kube::Client,
    ns: &str,
) -> Result<(Vec<NodeObs>, Vec<ConfigMapObs>), String> {
    let api: Api<Node> = Api::all(client.clone());
    let mut nodes = Vec::new();
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api
            .list(&params)
            .await
            .map_err(|e| format!("cannot list nodes: {}", error_chain(&e)))?;
        nodes.extend(page.items.iter().map(node_obs));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    Ok((nodes, configmaps(client, ns).await?))
}

/// The reconciler's rollout record ([`crate::record`]), if it wrote one that this
/// version reads. Without read access to it (an older RBAC) the status is inferred from
/// the Nodes, as before the record existed.
async fn record(client: &kube::Client, ns: &str) -> Result<Option<RolloutRecord>, String> {
    match Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(RECORD_NAME)
        .await
    {
        Ok(cm) => Ok(cm.and_then(|cm| read_record(&cm))),
        Err(kube::Error::Api(s)) if s.code == 403 => Ok(None),
        Err(e) => Err(format!(
            "cannot read the rollout record {ns}/{RECORD_NAME}: {}",
            error_chain(&e)
        )),
    }
}

fn read_record(cm: &ConfigMap) -> Option<RolloutRecord> {
    RolloutRecord::from_configmap(cm)
        .map_err(|e| eprintln!("warning: {e}; the status is inferred from the Nodes"))
        .ok()
}

async fn configmaps(client: &kube::Client, ns: &str) -> Result<Vec<ConfigMapObs>, String> {
    let params = ListParams::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
    let list = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .list_metadata(&params)
        .await
        .map_err(|e| format!("cannot list the ConfigMaps in {ns}: {}", error_chain(&e)))?;
    Ok(list
        .items
        .iter()
        .map(|c| configmap_obs(&c.metadata))
        .collect())
}

fn node_obs(n: &Node) -> NodeObs {
    let condition = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == CONDITION_TYPE))
        .map(|c| Condition {
            status: c.status.clone(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            last_transition_time: c.last_transition_time.as_ref().map(|t| t.0),
            last_heartbeat_time: c.last_heartbeat_time.as_ref().map(|t| t.0),
        });
    NodeObs {
        name: n.metadata.name.clone().unwrap_or_default(),
        labels: n.metadata.labels.clone().unwrap_or_default(),
        annotations: n.metadata.annotations.clone().unwrap_or_default(),
        condition,
    }
}

fn configmap_obs(m: &ObjectMeta) -> ConfigMapObs {
    let ann = |k: &str| m.annotations.as_ref().and_then(|a| a.get(k)).cloned();
    ConfigMapObs {
        name: m.name.clone().unwrap_or_default(),
        pool: m.labels.as_ref().and_then(|l| l.get(POOL_LABEL)).cloned(),
        commit: ann(SOURCE_COMMIT),
        source_path: ann(SOURCE_PATH),
        created: m.creation_timestamp.as_ref().map(|t| t.0),
    }
}

fn render(report: &Report, output: Output, layout: &Layout) -> Result<String, String> {
    match output {
        Output::Table => Ok(table::pools(report, layout)),
        Output::Json => json(report),
        Output::Yaml => yaml(report),
    }
}

fn json<T: serde::Serialize>(v: &T) -> Result<String, String> {
    serde_json::to_string_pretty(v)
        .map(|s| s + "\n")
        .map_err(|e| format!("cannot write JSON: {e}"))
}

fn yaml<T: serde::Serialize>(v: &T) -> Result<String, String> {
    serde_saphyr::to_string(v).map_err(|e| format!("cannot write YAML: {e}"))
}

/// The width lines are cut to: `COLUMNS` when set, else the terminal's; nothing off a
/// terminal.
fn width(tty: bool) -> Option<usize> {
    if let Some(c) = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()) {
        return Some(c);
    }
    if !tty {
        return None;
    }
    terminal_size::terminal_size().map(|(w, _)| usize::from(w.0))
}

fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}
